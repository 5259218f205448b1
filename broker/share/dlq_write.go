package share

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/meta"
	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/broker/topics"
	"github.com/shoal-mq/shoal/protocol"
	"github.com/shoal-mq/shoal/sharegroup"
	"github.com/shoal-mq/shoal/sharegroup/store"
)

// Dead-letter writes (dlq.go has the model): the durable intents
// and counts, the copy of the records into the dead-letter topic, resuming
// after a crash, and the per-group counts read by tests and tools.

// dlqRange is a persisted range of an intent.
type dlqRange struct {
	First         int64 `json:"first"`
	Last          int64 `json:"last"`
	DeliveryCount int16 `json:"delivery_count"`
}

// dlqIntent is the persisted record of a dead-letter write in progress
// (see the file comment).
type dlqIntent struct {
	TopicID   [16]byte   `json:"topic_id"`
	Partition int32      `json:"partition"`
	From      int64      `json:"from"`
	Ranges    []dlqRange `json:"ranges"`
	Written   bool       `json:"written"`
	// StateEpoch is the share-partition's state epoch the offsets were
	// rejected in. After a reset (AlterShareGroupOffsets) the same
	// offsets are delivered anew, and their rejections are new
	// dead-letter records: an intent of another epoch is ignored.
	StateEpoch int32 `json:"state_epoch,omitempty"`
}

// loadDLQIntentAt is loadDLQIntent, ignoring an intent of another state
// epoch.
func (c *Coordinator) loadDLQIntentAt(k store.Key, epoch int32) (*dlqIntent, error) {
	in, err := c.loadDLQIntent(k)
	if in != nil && in.StateEpoch != epoch {
		in = nil
	}
	return in, err
}

func dlqKeySuffix(k store.Key) string {
	return url.PathEscape(k.Group) + "/" + hex.EncodeToString(k.TopicID[:]) + "/" + strconv.Itoa(int(k.Partition))
}

func dlqIntentKey(k store.Key) []byte { return []byte(meta.PrefixDLQPending + dlqKeySuffix(k)) }
func dlqCountKey(k store.Key) []byte  { return []byte(meta.PrefixDLQCount + dlqKeySuffix(k)) }

func (c *Coordinator) loadDLQIntent(k store.Key) (*dlqIntent, error) {
	var in *dlqIntent
	err := c.o.Store.DB().View(func(txn *badger.Txn) error {
		item, err := txn.Get(dlqIntentKey(k))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			in = &dlqIntent{}
			return json.Unmarshal(v, in)
		})
	})
	return in, err
}

func (c *Coordinator) putDLQIntent(k store.Key, in *dlqIntent) error {
	v, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.o.Store.DB().Update(func(txn *badger.Txn) error { return txn.Set(dlqIntentKey(k), v) })
}

// markDLQWritten sets the intent Written and adds n to the count, in one
// transaction.
func (c *Coordinator) markDLQWritten(k store.Key, in *dlqIntent, n int64) error {
	in.Written = true
	v, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.o.Store.DB().Update(func(txn *badger.Txn) error {
		var cur uint64
		item, err := txn.Get(dlqCountKey(k))
		switch {
		case err == nil:
			if err := item.Value(func(b []byte) error {
				if len(b) != 8 {
					return fmt.Errorf("broker: dead-letter count %q has %d bytes", dlqCountKey(k), len(b))
				}
				cur = binary.BigEndian.Uint64(b)
				return nil
			}); err != nil {
				return err
			}
		case !errors.Is(err, badger.ErrKeyNotFound):
			return err
		}
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], cur+uint64(n))
		if err := txn.Set(dlqCountKey(k), buf[:]); err != nil {
			return err
		}
		return txn.Set(dlqIntentKey(k), v)
	})
}

func (c *Coordinator) deleteDLQIntent(k store.Key) error {
	return c.o.Store.DB().Update(func(txn *badger.Txn) error { return txn.Delete(dlqIntentKey(k)) })
}

// deleteDLQState deletes a share-partition's intent and count (its state
// is being deleted).
func (c *Coordinator) deleteDLQState(k store.Key) error {
	return c.o.Store.DB().Update(func(txn *badger.Txn) error {
		if err := txn.Delete(dlqIntentKey(k)); err != nil {
			return err
		}
		return txn.Delete(dlqCountKey(k))
	})
}

// writeDLQ performs one attempt for ranges (all Archiving) and returns
// the ranges whose DLQ copies are durable and counted.
func (c *Coordinator) writeDLQ(k store.Key, st shareGroupSettings, ranges []sharegroup.StateRange, gen uint64, epoch int32) ([]sharegroup.StateRange, error) {
	if c.dlq.failAttempt != nil {
		if err := c.dlq.failAttempt(); err != nil {
			return nil, err
		}
	}
	in, err := c.loadDLQIntentAt(k, epoch)
	if err != nil {
		return nil, err
	}
	if in != nil && in.Written {
		return intentRanges(in), nil
	}
	if st.dlqTopic == "" {
		c.lg.Warn("share group no longer has a dead-letter topic; archiving without a copy", zapShareKey(k), zap.Any("offsets", ranges))
		return ranges, nil
	}
	src, srcPart, code := c.o.Topics.PartitionByID(k.TopicID, k.Partition)
	if code != 0 {
		return ranges, nil // the source is gone; its share state goes with it
	}
	var dt *topics.Topic
	if st.dlqOwned {
		if dt = c.o.Topics.Get(st.dlqTopic); dt == nil {
			err = fmt.Errorf("%w: %s does not exist", errDLQUnavailable, st.dlqTopic)
		}
	} else {
		dt, err = c.dlqTarget(st.dlqTopic)
	}
	if err != nil {
		return nil, err
	}
	dparts, _ := c.o.Topics.Snapshot(dt)
	if len(dparts) == 0 {
		return nil, fmt.Errorf("%w: %s has no partitions", errDLQUnavailable, dt.Name)
	}
	dp := dparts[int(k.Partition)%len(dparts)]
	if in != nil && in.TopicID == dt.ID && in.Partition >= 0 && int(in.Partition) < len(dparts) {
		// An earlier attempt's partition, even if partitions were added
		// since: its copies are there, and only that scan finds them.
		dp = dparts[in.Partition]
	}

	// Offsets an earlier attempt may already have appended.
	var found map[int64]bool
	from := dp.Log.LogEndOffset()
	if in != nil && in.TopicID == dt.ID && in.Partition == dp.Index {
		from = in.From
		if found, err = c.scanDLQ(dp, from, k, src.Name, in.Ranges); err != nil {
			return nil, err
		}
	}
	next := &dlqIntent{TopicID: dt.ID, Partition: dp.Index, From: from, StateEpoch: epoch}
	var n int64
	for _, r := range ranges {
		next.Ranges = append(next.Ranges, dlqRange{First: r.First, Last: r.Last, DeliveryCount: r.DeliveryCount})
		n += r.Last - r.First + 1
	}
	// Offsets an earlier attempt appended that this attempt no longer
	// lists (its window of at most dlqMaxRecords moved when a lower offset
	// started archiving) stay in the intent: a later scan must still look
	// for them, and a "written" note completes them, so they are never
	// written twice nor left Archiving.
	if in != nil {
		for _, r := range in.Ranges {
			for off := r.First; off <= r.Last; off++ {
				if !found[off] || coversOffset(ranges, off) {
					continue
				}
				next.Ranges = appendOffset(next.Ranges, off, r.DeliveryCount)
				n++
			}
		}
	}
	if err := c.fencedDLQ(k, gen, func() error { return c.putDLQIntent(k, next) }); err != nil {
		return nil, err
	}
	batches, err := c.buildDLQBatches(k, st, src.Name, srcPart, ranges, found, int(dp.Log.Config().MaxMessageBytes))
	if err != nil {
		return nil, err
	}
	first, end := int64(-1), int64(0)
	now := time.Now()
	for _, batch := range batches {
		res, err := dp.Log.Append(batch, now)
		if err != nil {
			return nil, fmt.Errorf("append to %s-%d: %w", dp.Topic, dp.Index, err)
		}
		if first < 0 {
			first = res.BaseOffset
		}
		end = res.LastOffset + 1
	}
	if end == 0 {
		end = dp.Log.LogEndOffset()
		first = end
	}
	if err := c.waitDurable(dp, first, end); err != nil {
		return nil, fmt.Errorf("fsync %s-%d: %w", dp.Topic, dp.Index, err)
	}
	if c.dlq.crashed("durable") {
		return nil, errDLQCrashed
	}
	if err := c.fencedDLQ(k, gen, func() error { return c.markDLQWritten(k, next, n) }); err != nil {
		return nil, err
	}
	if n > 0 {
		c.o.Metrics.DLQRecords.WithLabelValues(k.Group).Add(float64(n)) // shoal_share_dlq_records_total
	}
	if c.dlq.crashed("written") {
		return nil, errDLQCrashed
	}
	return intentRanges(next), nil // ranges plus what earlier attempts wrote
}

// errDLQFenced: the share-partition's state was deleted while its writer
// worked; the writer stops without writing anything more.
var errDLQFenced = errors.New("share-partition state deleted during the dead-letter write")

// fencedDLQ runs write (an intent or count update) under the
// share-partition's lock unless its state was deleted since the writer
// read gen: deleteState deletes the intent and count under the same lock,
// and a late write would bring them back (a stale Written intent would
// later archive re-rejected records without a dead-letter copy).
func (c *Coordinator) fencedDLQ(k store.Key, gen uint64, write func() error) error {
	sp := c.part(k)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.mu.dlq.gen != gen {
		return errDLQFenced
	}
	return write()
}

// intentWithout returns in without the offsets of ranges (same topic,
// partition and From, still pending).
func intentWithout(in *dlqIntent, ranges []sharegroup.StateRange) *dlqIntent {
	out := &dlqIntent{TopicID: in.TopicID, Partition: in.Partition, From: in.From, StateEpoch: in.StateEpoch}
	for _, r := range in.Ranges {
		for off := r.First; off <= r.Last; off++ {
			if coversOffset(ranges, off) {
				continue
			}
			out.Ranges = appendOffset(out.Ranges, off, r.DeliveryCount)
		}
	}
	return out
}

// appendOffset adds off (delivered count times) to ranges, extending the
// last range when off follows it with the same count.
func appendOffset(ranges []dlqRange, off int64, count int16) []dlqRange {
	if k := len(ranges) - 1; k >= 0 && ranges[k].Last+1 == off && ranges[k].DeliveryCount == count {
		ranges[k].Last = off
		return ranges
	}
	return append(ranges, dlqRange{First: off, Last: off, DeliveryCount: count})
}

// intentRanges lists an intent's offsets as Archiving ranges to complete.
func intentRanges(in *dlqIntent) []sharegroup.StateRange {
	out := make([]sharegroup.StateRange, 0, len(in.Ranges))
	for _, r := range in.Ranges {
		out = append(out, sharegroup.StateRange{First: r.First, Last: r.Last, State: sharegroup.StateArchiving, DeliveryCount: r.DeliveryCount})
	}
	return out
}

func coversOffset(ranges []sharegroup.StateRange, off int64) bool {
	for _, r := range ranges {
		if off >= r.First && off <= r.Last {
			return true
		}
	}
	return false
}

// errDLQCrashed stops a writer at a test's simulated crash point.
var errDLQCrashed = errors.New("broker: simulated crash in dead-letter write")

// waitDurable returns once p is durable up to end (exclusive), new data
// starting at first, and its high watermark covers it.
func (c *Coordinator) waitDurable(p *topics.Partition, first, end int64) error {
	if c.o.FsyncAlways {
		return <-c.o.Syncer.Appended(p, first, end, true)
	}
	c.o.Syncer.Appended(p, first, end, false) // moves the high watermark
	_, err := p.Log.Sync()
	return err
}

// scanDLQ lists the offsets of ranges that dp already holds DLQ records
// for (written for share-partition k from offset from on).
func (c *Coordinator) scanDLQ(dp *topics.Partition, from int64, k store.Key, srcTopic string, ranges []dlqRange) (map[int64]bool, error) {
	in := func(off int64) bool {
		for _, r := range ranges {
			if off >= r.First && off <= r.Last {
				return true
			}
		}
		return false
	}
	found := map[int64]bool{}
	group, part := k.Group, strconv.Itoa(int(k.Partition))
	for off := max(from, dp.Log.LogStartOffset()); off < dp.Log.LogEndOffset(); {
		raw, err := dp.Log.Read(off, dp.Log.LogEndOffset(), dlqReadBytes, true)
		if err != nil {
			return nil, err
		}
		if len(raw) == 0 {
			break
		}
		next := off
		err = records.EachBatch(raw, func(h *protocol.BatchHeader, batch []byte) error {
			next = h.LastOffset() + 1
			return records.EachRecord(batch, func(_, _ int64, r *kmsg.Record, _ []byte) bool {
				var g, t, p, o string
				for _, hd := range r.Headers {
					switch hd.Key {
					case DLQHeaderGroup:
						g = string(hd.Value)
					case DLQHeaderTopic:
						t = string(hd.Value)
					case DLQHeaderPartition:
						p = string(hd.Value)
					case DLQHeaderOffset:
						o = string(hd.Value)
					}
				}
				if g == group && t == srcTopic && p == part {
					if n, err := strconv.ParseInt(o, 10, 64); err == nil && in(n) {
						found[n] = true
					}
				}
				return true
			})
		})
		if err != nil {
			return nil, err
		}
		if next <= off {
			break
		}
		off = next
	}
	return found, nil
}

// buildDLQBatches reads the source records of ranges (skipping found
// offsets) and encodes one DLQ record per offset, in batches of at most
// maxBytes.
func (c *Coordinator) buildDLQBatches(k store.Key, st shareGroupSettings, srcTopic string, src *topics.Partition, ranges []sharegroup.StateRange, found map[int64]bool, maxBytes int) ([][]byte, error) {
	var (
		out           [][]byte
		recs          []byte
		count         int32
		nowMs         = time.Now().UnixMilli()
		group         = []byte(k.Group)
		topicB        = []byte(srcTopic)
		partB         = []byte(strconv.Itoa(int(k.Partition)))
		limit         = st.deliveryLimit
		batchOverhead = 61 // batch header
	)
	flush := func() {
		if count > 0 {
			out = append(out, records.EncodeBatch(recs, count, nowMs, nowMs))
			recs, count = nil, 0
		}
	}
	add := func(off int64, dc int16, orig *kmsg.Record) {
		if found[off] {
			return
		}
		msg := "rejected"
		if int(dc) >= limit {
			msg = "rejected or delivery count limit reached"
		}
		ctx := []kmsg.Header{
			{Key: DLQHeaderTopic, Value: topicB},
			{Key: DLQHeaderPartition, Value: partB},
			{Key: DLQHeaderOffset, Value: []byte(strconv.FormatInt(off, 10))},
			{Key: DLQHeaderGroup, Value: group},
			{Key: DLQHeaderDeliveryCount, Value: []byte(strconv.Itoa(int(dc)))},
			{Key: DLQHeaderMessage, Value: []byte(msg)},
		}
		r := kmsg.Record{OffsetDelta: count, Headers: ctx}
		if st.dlqCopy && orig != nil {
			r.Key, r.Value = orig.Key, orig.Value
			r.Headers = append(append([]kmsg.Header(nil), orig.Headers...), ctx...)
		}
		enc := records.AppendRecord(nil, &r)
		if batchOverhead+len(enc) > maxBytes && st.dlqCopy {
			// Too large for the DLQ topic even alone: a pointer record.
			c.lg.Warn("source record too large for the dead-letter topic; writing headers only", zapShareKey(k), zap.Int64("offset", off))
			r.Key, r.Value, r.Headers = nil, nil, ctx
			enc = records.AppendRecord(nil, &r)
		}
		if count > 0 && batchOverhead+len(recs)+len(enc) > maxBytes {
			flush()
			r.OffsetDelta = 0
			enc = records.AppendRecord(nil, &r)
		}
		recs = append(recs, enc...)
		count++
	}
	for _, rg := range ranges {
		next := rg.First // first offset of rg not yet added
		if st.dlqCopy {
			for next <= rg.Last {
				raw, err := src.Log.Read(next, src.Log.HighWatermark(), dlqReadBytes, true)
				if err != nil || len(raw) == 0 {
					break // gone (retention): pointer records below
				}
				progressed := false
				err = records.EachBatch(raw, func(h *protocol.BatchHeader, batch []byte) error {
					return records.EachRecord(batch, func(off, _ int64, r *kmsg.Record, _ []byte) bool {
						if off < next || off > rg.Last {
							return true
						}
						for ; next < off; next++ {
							add(next, rg.DeliveryCount, nil) // absent from the log
						}
						add(off, rg.DeliveryCount, r)
						next, progressed = off+1, true
						return true
					})
				})
				if err != nil {
					return nil, err
				}
				if !progressed {
					break
				}
			}
		}
		for ; next <= rg.Last; next++ {
			add(next, rg.DeliveryCount, nil)
		}
	}
	flush()
	return out, nil
}

// ResumeDLQ loads, at startup, every share-partition of the groups that
// have a dead-letter topic, so writers pending at a crash resume without
// waiting for a consumer.
func (c *Coordinator) ResumeDLQ() {
	c.configs.mu.RLock()
	var groups []string
	for g, m := range c.configs.m {
		if m[DLQTopicNameConfig] != "" {
			groups = append(groups, g)
		}
	}
	c.configs.mu.RUnlock()
	sort.Strings(groups)
	for _, g := range groups {
		keys, err := c.store.Keys(g)
		if err != nil {
			c.lg.Warn("listing share-partitions for dead-letter recovery failed", zap.String("group", g), zap.Error(err))
			continue
		}
		st := c.shareSettings(g)
		for _, k := range keys {
			if c.o.Ctx.Err() != nil {
				return
			}
			sp := c.part(k)
			sp.mu.Lock()
			if err := sp.prepareLocked(time.Now(), st, false); err == nil {
				sp.kickDLQLocked()
			}
			sp.mu.Unlock()
		}
	}
}

// DLQCount is the number of records a share group's share-partition has
// written to its dead-letter topic.
type DLQCount struct {
	Group     string
	Topic     string // "" if the topic was deleted
	Partition int32
	Records   int64
}

// DLQCounts returns the durable dead-letter counts of group (every
// group if group is ""), sorted.
func (c *Coordinator) DLQCounts(group string) ([]DLQCount, error) {
	prefix := meta.PrefixDLQCount
	if group != "" {
		prefix += url.PathEscape(group) + "/"
	}
	var out []DLQCount
	err := c.o.Store.DB().View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			parts := strings.Split(strings.TrimPrefix(string(it.Item().Key()), meta.PrefixDLQCount), "/")
			if len(parts) != 3 {
				continue
			}
			g, err := url.PathUnescape(parts[0])
			if err != nil {
				continue
			}
			var id [16]byte
			if raw, err := hex.DecodeString(parts[1]); err != nil || len(raw) != 16 {
				continue
			} else {
				copy(id[:], raw)
			}
			p, err := strconv.Atoi(parts[2])
			if err != nil {
				continue
			}
			var n uint64
			if err := it.Item().Value(func(v []byte) error {
				if len(v) == 8 {
					n = binary.BigEndian.Uint64(v)
				}
				return nil
			}); err != nil {
				return err
			}
			dc := DLQCount{Group: g, Partition: int32(p), Records: int64(n)}
			if t := c.o.Topics.GetID(id); t != nil {
				dc.Topic = t.Name
			}
			out = append(out, dc)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		a, c := out[i], out[j]
		if a.Group != c.Group {
			return a.Group < c.Group
		}
		if a.Topic != c.Topic {
			return a.Topic < c.Topic
		}
		return a.Partition < c.Partition
	})
	return out, err
}

// DLQTotals returns the dead-letter records written per share group
// (the metric shoal_share_dlq_records_total{group}).
func (c *Coordinator) DLQTotals() (map[string]int64, error) {
	counts, err := c.DLQCounts("")
	out := map[string]int64{}
	for _, n := range counts {
		out[n.Group] += n.Records
	}
	return out, err
}
