package broker

// The dedup window (issue 5): topic configs that make Produce drop a
// record whose dedup id was already appended to the topic within the
// last dedup.window.ms, while answering the producer with success.
//
//   - dedup.window.ms: 0 (the default) turns it off; SQS FIFO queues use
//     5 minutes (300000). At most 7 days.
//   - dedup.key: header:NAME (default header:dedup-id) takes the id from
//     the record's first header NAME (records without it are never
//     duplicates); content takes a SHA-256 of the record's key and value.
//   - dedup.scope: topic (default): one id space per topic, across its
//     partitions; message-group: ids are compared within the message
//     group named by the header dedup.message.group.header (default
//     message-group-id; records without it share the empty group).
//
// # How
//
// Each topic has one dedup table (dedupWindow, by topic id): id → expiry, plus a FIFO
// of insertions for expiry. A produce to a topic with a window decodes its
// batches (decompressing them), looks every id up and inserts the new
// ones under the table's mutex, so two concurrent produces of one id,
// even to different partitions, keep exactly one. A batch without
// duplicates is appended verbatim. A batch with duplicates is rewritten
// without them: same header (offset span, producer id, epoch, sequence,
// timestamps), uncompressed, fewer records than its span (a batch with
// every record dropped keeps none), appended with log.AppendCompacted.
// The dropped offsets are holes, exactly like offsets removed by Kafka's
// log compaction (KAFKA-5443), which every client already skips; keeping
// the span keeps idempotent producers' sequence numbers intact, so a
// retried batch is still recognised by the producer state. If the
// append fails, the ids it inserted are removed again.
//
// The live window is measured on the broker's clock at append time. The
// table is not persisted: it is rebuilt from the log, lazily at the first
// produce after a start or a config change, by reading every partition
// from the first record whose timestamp is within the window
// (OffsetForTimestamp) to its end and giving each id the expiry
// record timestamp + window. After a restart the window therefore
// follows the records' timestamps (CreateTime, set by producers).
//
// # Cost
//
// Topics without a window pay one config lookup per produce partition;
// their batches stay zero-copy. With a window every batch is decoded
// (compressed ones decompressed) and hashed in content mode; a batch with
// duplicates is re-encoded uncompressed; the table holds every id of the
// window in memory (roughly 80 bytes plus the id per record), and the
// first produce after a restart or config change reads the window back
// from the log.
//
// Transactional batches are neither deduplicated nor remembered: the ids
// of a transaction that later aborts would otherwise drop its committed
// retry, and transactional producers are idempotent already.
//
// A duplicate is answered only once its first copy is durable: the
// table remembers, with each id, the append that inserted it
// (dedupWrite), and a produce that drops a duplicate waits for that
// append and then for its fsync, in whichever partition it went to, on
// top of its own. If the first copy's append failed, its ids were
// removed again and the duplicate gets that append's error, so the
// client's retry stores it; if its fsync failed, the ids are forgotten
// the same way (by whichever produce sees the failure first). A rebuild
// reads the log to its end: ids of records above the high watermark (not
// yet fsynced) point at a write done once the log end is durable.

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/configs"
	"github.com/shoal-mq/shoal/broker/records"
	slog "github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/protocol"
)

const (
	dedupWindowConfig      = "dedup.window.ms"
	dedupKeyConfig         = "dedup.key"
	dedupScopeConfig       = "dedup.scope"
	dedupGroupHeaderConfig = "dedup.message.group.header"

	dedupMaxWindowMs = 7 * 24 * 3600 * 1000
)

// dedupTopicConfigDefs are the topic configs of the dedup window
// (appended to topicConfigDefs).
var dedupTopicConfigDefs = []configs.Def{
	{Name: dedupWindowConfig, Type: kmsg.ConfigTypeLong, Default: "0", Check: configs.IntRange(0, dedupMaxWindowMs),
		Doc: "Drop a produced record whose dedup id was appended within this many milliseconds (0: off)."},
	{Name: dedupKeyConfig, Type: kmsg.ConfigTypeString, Default: "header:dedup-id", Check: checkDedupKey,
		Doc: "Where a record's dedup id comes from: header:NAME (the first header NAME) or content (a hash of key and value)."},
	{Name: dedupScopeConfig, Type: kmsg.ConfigTypeString, Default: "topic", Check: configs.OneOf("topic", "message-group"),
		Doc: "topic: one dedup id space per topic; message-group: per message group (dedup.message.group.header)."},
	{Name: dedupGroupHeaderConfig, Type: kmsg.ConfigTypeString, Default: "message-group-id", Check: nonEmpty,
		Doc: "The header naming a record's message group for dedup.scope=message-group."},
}

func checkDedupKey(v string) error {
	if v == "content" || strings.HasPrefix(v, "header:") && len(v) > len("header:") {
		return nil
	}
	return fmt.Errorf("value %q is not header:<name> or content", v)
}

func nonEmpty(v string) error {
	if v == "" {
		return fmt.Errorf("value must not be empty")
	}
	return nil
}

// dedupSettings are a topic's effective dedup configs; window 0 is off.
type dedupSettings struct {
	windowMs    int64
	header      string // the id header; "" with content
	content     bool
	groupScope  bool
	groupHeader string
}

// dedupSettingsFor resolves the dedup configs of a topic's overrides.
func (b *Broker) dedupSettingsFor(overrides map[string]string) dedupSettings {
	v, _ := b.topicConfigValue(overrides, dedupWindowConfig)
	ms := configs.Int(v, 0)
	if ms <= 0 {
		return dedupSettings{}
	}
	key, _ := b.topicConfigValue(overrides, dedupKeyConfig)
	scope, _ := b.topicConfigValue(overrides, dedupScopeConfig)
	gh, _ := b.topicConfigValue(overrides, dedupGroupHeaderConfig)
	s := dedupSettings{windowMs: ms, groupScope: scope == "message-group", groupHeader: gh}
	if key == "content" {
		s.content = true
	} else {
		s.header = strings.TrimPrefix(key, "header:")
	}
	return s
}

// id returns r's dedup id, "" for none.
func (s *dedupSettings) id(r *kmsg.Record) string {
	var id []byte
	if s.content {
		h := sha256.New()
		var n [8]byte
		klen := uint64(math.MaxUint64) // null key
		if r.Key != nil {
			klen = uint64(len(r.Key))
		}
		binary.BigEndian.PutUint64(n[:], klen)
		h.Write(n[:])
		h.Write(r.Key)
		h.Write(r.Value)
		id = h.Sum(nil)
	} else {
		found := false
		for _, hd := range r.Headers {
			if hd.Key == s.header {
				id, found = hd.Value, true
				break
			}
		}
		if !found {
			return ""
		}
	}
	if !s.groupScope {
		return string(id)
	}
	var group []byte
	for _, hd := range r.Headers {
		if hd.Key == s.groupHeader {
			group = hd.Value
			break
		}
	}
	// Length-prefixed so no (group, id) pair collides with another.
	return strconv.Itoa(len(group)) + ":" + string(group) + string(id)
}

// dedupWindow holds each topic's dedup table, by topic id (an id is
// never used again). mu is a leaf guarding the map only. A table is made
// on a topic's first deduplicated produce and dropped when the topic is
// deleted; a produce racing the deletion may make one again for the dead
// id, which then stays empty (its append fails on the deleted log and
// takes its ids back).
type dedupWindow struct {
	mu     sync.Mutex
	tables map[[16]byte]*dedupTable
}

func newDedupWindow() *dedupWindow {
	return &dedupWindow{tables: map[[16]byte]*dedupTable{}}
}

// table returns topic id's table, making it if needed.
func (w *dedupWindow) table(id [16]byte) *dedupTable {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.tables[id]
	if d == nil {
		d = &dedupTable{}
		w.tables[id] = d
	}
	return d
}

// forget drops a deleted topic's table.
func (w *dedupWindow) forget(id [16]byte) {
	w.mu.Lock()
	delete(w.tables, id)
	w.mu.Unlock()
}

// dedupTable is one topic's ids within the window. mu guards everything;
// it is held during a produce's lookup and insertion and during a
// rebuild (which reads the topic's logs: only that topic's produces
// wait).
type dedupTable struct {
	mu       sync.Mutex
	settings dedupSettings // what the table was built for
	built    bool
	ids      map[string]dedupID
	queue    []dedupEntry // insertions, expiry order
	head     int
}

// dedupID is one id of the window: its expiry (unix ms) and the append
// that inserted it, nil once known durable (rebuilt from the log).
type dedupID struct {
	exp int64
	w   *dedupWrite
}

// dedupWrite is one produce partition's append of records whose ids it
// inserted. done is closed once the append returned; end (the offset
// after its records) or err (it failed) are then set.
type dedupWrite struct {
	p    *tpkg_Partition
	done chan struct{}
	end  int64
	err  error
	// The ids it inserted, forgotten again if its append or fsync
	// fails, so that a retry stores the record.
	d   *dedupTable
	ids []string
}

// forgetIDs removes w's ids that still point at w: its records were not
// stored durably.
func (w *dedupWrite) forgetIDs() {
	if w == nil || w.d == nil {
		return
	}
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	w.forgetIDsLocked()
}

// forgetIDsLocked is forgetIDs with the table's mu held.
func (w *dedupWrite) forgetIDsLocked() {
	for _, id := range w.ids {
		if e, ok := w.d.ids[id]; ok && e.w == w {
			delete(w.d.ids, id)
		}
	}
}

// durable waits until w's records are durable (FsyncAlways) or at least
// appended (otherwise: they were acknowledged the same way).
func (w *dedupWrite) durable(b *Broker) error {
	<-w.done
	if w.err != nil {
		return fmt.Errorf("%w: the first copy of a duplicate failed: %v", slog.ErrStorage, w.err)
	}
	if b.cfg.Fsync != FsyncAlways || w.p.Log.HighWatermark() >= w.end {
		return nil // the high watermark follows the fsynced end
	}
	if ch := b.syncer.Appended(w.p, w.end-1, w.end, true); ch != nil {
		if err := <-ch; err != nil {
			w.forgetIDs()
			return err
		}
	}
	return nil
}

type dedupEntry struct {
	id  string
	exp int64
}

// expireLocked drops ids whose expiry is at or before nowMs.
func (d *dedupTable) expireLocked(nowMs int64) {
	for d.head < len(d.queue) && d.queue[d.head].exp <= nowMs {
		e := d.queue[d.head]
		if d.ids[e.id].exp == e.exp {
			delete(d.ids, e.id)
		}
		d.queue[d.head] = dedupEntry{}
		d.head++
	}
	if d.head > 1024 && d.head > len(d.queue)/2 {
		d.queue = append(d.queue[:0], d.queue[d.head:]...)
		d.head = 0
	}
}

func (d *dedupTable) insertLocked(id string, exp int64, w *dedupWrite) {
	d.ids[id] = dedupID{exp, w}
	d.queue = append(d.queue, dedupEntry{id, exp})
}

// rebuildLocked fills the table from the last window of every partition
// of t.
func (d *dedupTable) rebuildLocked(b *Broker, t *tpkg_Topic, s dedupSettings, now time.Time) error {
	d.settings, d.built = s, false
	d.ids, d.queue, d.head = map[string]dedupID{}, nil, 0
	nowMs := now.UnixMilli()
	parts, _ := b.topics.Snapshot(t)
	for _, p := range parts {
		off, _, found := p.Log.OffsetForTimestamp(nowMs - s.windowMs)
		if !found {
			continue
		}
		// Records at or above the high watermark (the fsynced end under
		// FsyncAlways) may still be lost: their ids point at a write
		// that is done once everything read here is durable.
		hw, leo := p.Log.HighWatermark(), p.Log.LogEndOffset()
		var pending *dedupWrite
		if hw < leo {
			pending = &dedupWrite{p: p, done: make(chan struct{}), end: leo, d: d}
			close(pending.done)
		}
		for end := leo; off < end; {
			raw, err := p.Log.Read(off, end, 1<<20, true)
			if err != nil {
				return fmt.Errorf("broker: dedup rebuild of %s-%d: %w", t.Name, p.Index, err)
			}
			if len(raw) == 0 {
				break
			}
			next := off
			err = records.EachBatch(raw, func(h *protocol.BatchHeader, batch []byte) error {
				next = h.LastOffset() + 1
				if h.IsControl() || h.IsTransactional() { // never deduplicated, see filterLocked
					return nil
				}
				return records.EachRecord(batch, func(o, ts int64, r *kmsg.Record, _ []byte) bool {
					if exp := ts + s.windowMs; exp > nowMs {
						if id := s.id(r); id != "" {
							if cur, ok := d.ids[id]; !ok || cur.exp < exp {
								var w *dedupWrite
								if o >= hw {
									w = pending
									w.ids = append(w.ids, id)
								}
								d.insertLocked(id, exp, w)
							}
						}
					}
					return true
				})
			})
			if err != nil {
				return fmt.Errorf("broker: dedup rebuild of %s-%d: %w", t.Name, p.Index, err)
			}
			if next <= off {
				break
			}
			off = next
		}
	}
	sort.SliceStable(d.queue, func(i, j int) bool { return d.queue[i].exp < d.queue[j].exp })
	d.built = true
	b.lg.Debug("rebuilt dedup table", zap.String("topic", t.Name), zap.Int("ids", len(d.ids)))
	return nil
}

// appendDeduped appends a produce partition's records to p, first
// dropping the records whose dedup id is within t's window (s from
// dedupSettingsFor). Without a window it is p.log.Append. It also
// returns the appends of the first copies of the records it dropped
// (the produce is answered only once they are durable,
// dedupWrite.durable) and its own.
func (b *Broker) appendDeduped(t *tpkg_Topic, p *tpkg_Partition, s dedupSettings, batches []byte, now time.Time) (slog.AppendResult, dedupDeps, error) {
	if s.windowMs <= 0 {
		res, err := p.Log.Append(batches, now)
		return res, dedupDeps{}, err
	}
	// max.message.bytes applies to the batches the client sent, as
	// Append would check them: a batch rewritten without its duplicates
	// is uncompressed and may be larger (AppendCompacted does not check).
	maxBytes := int64(p.Log.Config().MaxMessageBytes)
	for rest := batches; len(rest) > 0; {
		batch, next, err := protocol.NextBatch(rest)
		if err != nil {
			break // filterLocked reports it
		}
		if int64(len(batch)) > maxBytes {
			return slog.AppendResult{}, dedupDeps{}, fmt.Errorf("%w: batch of %d bytes exceeds max.message.bytes %d", slog.ErrMessageTooLarge, len(batch), maxBytes)
		}
		rest = next
	}
	d := b.dedup.table(t.ID)
	nowMs := now.UnixMilli()
	exp := nowMs + s.windowMs
	w := &dedupWrite{p: p, done: make(chan struct{}), d: d}
	d.mu.Lock()
	if !d.built || d.settings != s {
		if err := d.rebuildLocked(b, t, s, now); err != nil {
			d.mu.Unlock()
			return slog.AppendResult{}, dedupDeps{}, err
		}
	}
	d.expireLocked(nowMs)
	out, rewritten, added, deps, err := d.filterLocked(s, batches, exp, w)
	w.ids = added
	if err != nil {
		w.forgetIDsLocked()
		d.mu.Unlock()
		w.err = err
		close(w.done)
		return slog.AppendResult{}, dedupDeps{}, err
	}
	d.mu.Unlock()
	var res slog.AppendResult
	if rewritten {
		res, err = p.Log.AppendCompacted(out, now)
	} else {
		res, err = p.Log.Append(batches, now)
	}
	if err != nil {
		// Removed before done is closed: a duplicate that saw them
		// fails, and its retry finds them gone.
		w.forgetIDs()
		w.err = err
	} else {
		w.end = res.LastOffset + 1
	}
	close(w.done)
	if len(added) == 0 {
		w = nil
	}
	return res, dedupDeps{first: deps, own: w}, err
}

// dedupDeps are what a deduplicated append's answer depends on: the
// appends of the first copies of the records it dropped (first), and its
// own append when it inserted ids (own), whose ids are forgotten if its
// fsync fails.
type dedupDeps struct {
	first []*dedupWrite
	own   *dedupWrite
}

// filterLocked looks up and inserts the ids of the records of batches. It
// returns the records to append (a new buffer only if some batch lost
// records), the ids it inserted (for w, the append to come) and the
// appends of the first copies of the records it dropped that are not
// known durable. mu held.
func (d *dedupTable) filterLocked(s dedupSettings, batches []byte, exp int64, w *dedupWrite) (out []byte, rewritten bool, added []string, deps []*dedupWrite, err error) {
	var keep [][]byte // wire records of the current batch
	for pos := 0; pos < len(batches); {
		batch, _, err := protocol.NextBatch(batches[pos:])
		if err != nil {
			return nil, false, added, deps, fmt.Errorf("%w: %v", slog.ErrCorruptMessage, err)
		}
		start := pos
		pos += len(batch)
		h, _ := protocol.ParseBatchHeader(batch)
		if !protocol.VerifyBatchCRC(batch) {
			return nil, false, added, deps, fmt.Errorf("%w: batch crc mismatch", slog.ErrCorruptMessage)
		}
		// Refused here as the log's Append would: AppendCompacted must
		// only ever see holes this filter made.
		switch {
		case h.IsControl():
			return nil, false, added, deps, fmt.Errorf("%w: control batch", slog.ErrInvalidRecord)
		case h.RecordCount <= 0 || h.LastOffsetDelta < 0 || int64(h.LastOffsetDelta)+1 != int64(h.RecordCount):
			return nil, false, added, deps, fmt.Errorf("%w: batch has %d records and lastOffsetDelta %d", slog.ErrInvalidRecord, h.RecordCount, h.LastOffsetDelta)
		}
		if h.IsTransactional() {
			// Not deduplicated: an aborted transaction's ids must not
			// drop its committed retry, and a transactional producer
			// is already idempotent.
			if rewritten {
				out = append(out, batch...)
			}
			continue
		}
		keep = keep[:0]
		dups, i := 0, int64(0)
		var recErr error
		err = records.EachRecord(batch, func(off, _ int64, r *kmsg.Record, raw []byte) bool {
			if off-h.BaseOffset != i {
				recErr = fmt.Errorf("%w: record %d has offset delta %d", slog.ErrInvalidRecord, i, off-h.BaseOffset)
				return false
			}
			i++
			if id := s.id(r); id != "" {
				if e, seen := d.ids[id]; seen {
					dups++
					if e.w != nil && !slices.Contains(deps, e.w) {
						deps = append(deps, e.w)
					}
					return true
				}
				d.insertLocked(id, exp, w)
				added = append(added, id)
			}
			keep = append(keep, raw)
			return true
		})
		switch {
		case err != nil:
			err = fmt.Errorf("%w: %v", slog.ErrCorruptMessage, err)
		case recErr != nil:
			err = recErr
		case i != int64(h.RecordCount):
			err = fmt.Errorf("%w: %d records, the header declares %d", slog.ErrInvalidRecord, i, h.RecordCount)
		}
		if err != nil {
			return nil, false, added, deps, err
		}
		if dups == 0 {
			if rewritten {
				out = append(out, batch...)
			}
			continue
		}
		if !rewritten {
			rewritten = true
			out = append(make([]byte, 0, len(batches)), batches[:start]...)
		}
		at := len(out)
		out = records.AppendRewritten(out, batch, keep)
		// kmsg decodes leniently; the rewritten batch must pass the
		// log's framing checks, as the client's would have.
		if err := protocol.ValidateCompactedRecords(out[at:]); err != nil {
			return nil, false, added, deps, fmt.Errorf("%w: %v", slog.ErrInvalidRecord, err)
		}
	}
	return out, rewritten, added, deps, nil
}
