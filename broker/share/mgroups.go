package share

// Message groups on share groups (issue 5): where a record's group id comes
// from (share.message.group.source), and the acquisition path of the fair
// and ordered modes. The state machine side is sharegroup/groups.go; its
// doc.go explains the design. Plain share groups never come here.
//
// In a group mode acquiring has three steps, under the share-partition's
// lock like the plain path:
//
//  1. Classify: read the log from ClassifyOffset (up to classifyBudget
//     bytes per fetch, and only while the window's cost allows), decode
//     each batch's records (decompressing if needed) to find their group
//     ids, and hand the batches to Classify.
//  2. AcquireGroups picks records among everything classified.
//  3. Read the log batches covering the picked records, in offset order,
//     each batch once. Records the response budget cannot carry are given
//     back with Unacquire (never sent, so never counted as delivered):
//     a client must never receive an acquired offset without its record,
//     which it would GAP-acknowledge (archive).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/quota"
	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/broker/topics"
	slog "github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/protocol"
	"github.com/shoal-mq/shoal/sharegroup"
	"github.com/shoal-mq/shoal/sharegroup/store"
)

// classifyBudget bounds the log bytes one fetch reads to learn message
// groups; a backlog is classified over several fetches.
const classifyBudget = 16 << 20

// messageGroupSource is a parsed share.message.group.source.
type messageGroupSource struct {
	key    bool
	header string // header name; "" with key false = none
}

func (s messageGroupSource) none() bool { return !s.key && s.header == "" }

func parseMessageGroupSource(v string) messageGroupSource {
	switch {
	case v == "key":
		return messageGroupSource{key: true}
	case strings.HasPrefix(v, "header:"):
		return messageGroupSource{header: strings.TrimPrefix(v, "header:")}
	}
	return messageGroupSource{}
}

func checkMessageGroupSource(v string) error {
	switch {
	case v == "none", v == "key":
		return nil
	case strings.HasPrefix(v, "header:") && len(v) > len("header:"):
		return nil
	}
	return errors.New("must be none, key or header:<name>")
}

// messageGroupMode resolves the delivery mode from the group configs:
// ordered wins over fair; without a source there are no groups.
func messageGroupMode(get func(string) string) sharegroup.GroupMode {
	switch {
	case parseMessageGroupSource(get("share.message.group.source")).none():
		return sharegroup.GroupsNone
	case get("share.message.group.ordered") == "true":
		return sharegroup.GroupsOrdered
	case get("share.message.group.fair") == "true":
		return sharegroup.GroupsFair
	}
	return sharegroup.GroupsNone
}

// groupID returns the message-group id of one record's wire bytes (from
// its length on) under src: the key, or the value of the last header named
// src.header (as for Kafka header lookups). A null or empty key or header
// value, or a record that does not decode, is no group. It walks the
// record's fields with franz-go's decoders (kbin.Varint, kbin.Varlong)
// and failure rules (those of kbin.Reader, as kmsg.Record decodes), so it
// agrees with the client on what decodes, but only slices them: no record
// is built and nothing is copied. (Calling the decoders directly, not
// through a kbin.Reader, halved its cost.)
func (s messageGroupSource) groupID(rec []byte) []byte {
	b := rec
	ok := true
	varint := func() int32 {
		v, n := kbin.Varint(b)
		if n <= 0 {
			ok = false
			return 0
		}
		b = b[n:]
		return v
	}
	// A null (negative length) is nil, as kbin.Reader.VarintBytes.
	varintBytes := func() []byte {
		l := varint()
		if !ok || l < 0 {
			return nil
		}
		if len(b) < int(l) {
			ok = false
			return nil
		}
		r := b[:l:l]
		b = b[l:]
		return r
	}
	varint() // length
	if !ok || len(b) < 1 {
		return nil
	}
	b = b[1:]               // attributes
	_, n := kbin.Varlong(b) // timestampDelta
	if n <= 0 {
		return nil
	}
	b = b[n:]
	varint() // offsetDelta
	id := varintBytes()
	varintBytes() // value
	if !ok {
		return nil
	}
	if !s.key {
		id = nil
	}
	headers := varint()
	if !ok || len(b) < int(headers) { // kbin.Reader.VarintArrayLen
		return nil
	}
	for range max(headers, 0) {
		k, v := varintBytes(), varintBytes()
		if !ok {
			return nil
		}
		if !s.key && string(k) == s.header {
			id = v
		}
	}
	return id
}

// groupOf is groupID for a record already decoded (a DirectRecord): the
// key, or the value of the last header named s.header; empty is no group.
func (s messageGroupSource) groupOf(key []byte, headers []kmsg.Header) []byte {
	if s.key {
		return key
	}
	var id []byte
	for _, h := range headers {
		if s.header != "" && h.Key == s.header {
			id = h.Value
		}
	}
	return id
}

// classifyBatches lists the batches of raw log bytes with their records'
// message groups. A record that does not parse has no group, nor have
// the rest of its batch if its length is bad (they are still delivered;
// the client sees what it sees for any record). The ids point into raw,
// or for a compressed batch, whose records it decompresses into *scratch
// (used again for the next one: a 1 MiB read may hold hundreds of
// well-compressed batches), into copies of their own: Classify copies
// what it keeps. scratch nil: each batch's records get a new buffer.
func classifyBatches(raw []byte, src messageGroupSource, aborted []slog.AbortedTxn, scratch *[]byte) []sharegroup.LogBatch {
	var out []sharegroup.LogBatch
	var ids []byte // the compressed batches' ids, copied
	_ = records.EachBatch(raw, func(h *protocol.BatchHeader, batch []byte) error {
		b := sharegroup.LogBatch{First: h.BaseOffset, Last: h.LastOffset(), Skip: skipForShare(h, aborted)}
		if !b.Skip {
			b.Groups = make([]sharegroup.GroupSpan, 0, min(max(int(h.RecordCount), 0), len(batch)/8)) // a record takes 8 bytes or more
			compressed := protocol.CompressionOf(h.Attributes) != protocol.CompressionNone
			if scratch != nil {
				*scratch = (*scratch)[:0]
			}
			var last []byte
			_, _ = recordOffsets(batch, h, scratch, func(off int64, rec []byte) {
				id := src.groupID(rec)
				if len(id) == 0 {
					last = nil
					return
				}
				if n := len(b.Groups); n > 0 && last != nil && b.Groups[n-1].Last == off-1 && bytes.Equal(last, id) {
					b.Groups[n-1].Last = off
					return
				}
				if compressed {
					// A reallocation leaves the earlier copies where they
					// are: their strings keep the old array.
					at := len(ids)
					ids = append(ids, id...)
					id = ids[at:len(ids):len(ids)]
				}
				b.Groups = append(b.Groups, sharegroup.GroupSpan{First: off, Last: off, ID: unsafe.String(&id[0], len(id))})
				last = id
			})
		}
		out = append(out, b)
		return nil
	})
	return out
}

// acquireGroups is acquire for a group mode, entered with sp.mu held
// (the Partition prepared); it unlocks. The log bytes of the picked
// records are read after unlocking: the records are this member's, and
// other members' fetches and acknowledgements need not wait for the read.
func (sp *sharePart) acquireGroups(now time.Time, st shareGroupSettings, member string, spread bool, lp *topics.Partition, maxRecords, budget int, arena *[]byte, yield func()) ([]sharegroup.Acquired, []byte, *store.Pending, error) {
	p := sp.mu.p
	var pending []sharegroup.Record
	if ls := lp.Log.LogStartOffset(); p.SPSO() < ls {
		pending = append(pending, p.AdvanceLogStart(ls).Records...)
	}
	hw := shareReadLimit(lp, st)
	bp := records.GetBuffer() // Classify copies what it keeps
	raw := (*bp)[:0]
	defer func() { records.PutBuffer(bp, raw) }()
	var scratch *[]byte // decompressed records, Classify's to read
	defer func() {
		if scratch != nil {
			records.PutBuffer(scratch, *scratch)
		}
	}()
	for read := 0; read < classifyBudget && p.CanClassify(); {
		off := p.ClassifyOffset()
		if off >= hw {
			break
		}
		var err error
		raw, err = lp.Log.ReadAppend(raw[:0], off, hw, 1<<20, true)
		if errors.Is(err, slog.ErrOffsetOutOfRange) {
			if ls := lp.Log.LogStartOffset(); off < ls {
				pending = append(pending, p.AdvanceLogStart(ls).Records...)
				continue
			}
		}
		if err != nil {
			break // acquire from what is known; the error shows again at the next read
		}
		read += len(raw)
		if scratch == nil {
			scratch = records.GetBuffer()
		}
		batches := classifyBatches(raw, st.groupSource, shareAborted(lp, st, off, hw), scratch)
		if len(batches) == 0 {
			break
		}
		pending = append(pending, p.Classify(batches).Records...)
		if p.ClassifyOffset() <= off {
			break // no progress (window cost limit)
		}
	}
	// Ordered mode, a member slow to acknowledge: leave the members
	// waiting for heads their share (sharegroup.Partition.HeadShare),
	// once the locks that ran out no longer count as held.
	capped := false
	if spread && p.Config().Groups == sharegroup.GroupsOrdered {
		exp := p.ExpireLocks(now)
		sp.m.Observe(exp.Expired, exp.Archived)
		pending = append(pending, exp.Records...)
		if share := p.HeadShare(member, sp.waiters.members()); share >= 0 && share < maxRecords {
			maxRecords, capped = share, true
		}
	}
	var acq []sharegroup.Acquired
	var eff sharegroup.Effects
	if maxRecords > 0 { // 0: AcquireGroupsLimited would take it as no limit
		if st.lockSet {
			p.LockNext(st.lock)
		}
		acq, eff = p.AcquireGroupsLimited(now, member, maxRecords, sp.messageGroupLimiterLocked(now))
		sp.m.Observe(eff.Expired, eff.Archived)
	}
	var lock int64
	if len(acq) > 0 {
		lock, _ = p.AcquisitionLock(acq[0].First) // one acquisition: one deadline
	}
	after := sp.ackWriteFor(p.AcquiredAfter()) // what they wait for (acquire)
	spso := p.SPSO()
	pending = append(pending, eff.Records...)
	err := sp.writeLocked(pending)
	sp.armLocked(now)
	sp.mu.Unlock()
	if yield != nil {
		yield() // acquired: the commit may take the processor while this reads (handleShareFetch)
	}
	if err != nil {
		return nil, nil, nil, err // the Partition was discarded: the acquisitions are gone with it
	}
	if len(acq) == 0 {
		return nil, nil, nil, nil
	}
	if capped {
		sp.waiters.notify() // what this member left is for the waiting ones
	}
	data, sent, unsent, rerr := readAcquired(lp, acq, hw, budget, &sp.c.trims, sp, arena)
	sp.c.trims.passed(lp, sp, spso)
	if len(unsent) > 0 {
		sp.mu.Lock()
		if sp.mu.p == p { // else reloaded: the acquisitions are gone anyway
			_ = sp.writeLocked(p.Unacquire(member, unsent, lock).Records) // persists nothing
		}
		sp.mu.Unlock()
		sp.waiters.notify()
	}
	if len(sent) == 0 {
		return nil, nil, nil, rerr
	}
	return sent, data, after, nil
}

// readAcquired reads, in offset order and each once, the log batches
// covering the acquired ranges (trimmed to the acquired records:
// parsedBatch.trim), until budget bytes are used (the first range is
// always covered), copying what it must onto the end of *arena (see
// shareData). It returns the bytes, the ranges
// they cover and the ranges (or parts) they do not.
func readAcquired(lp *topics.Partition, acq []sharegroup.Acquired, hw int64, budget int, cache *trimCache, user *sharePart, arena *[]byte) (data []byte, sent, unsent []sharegroup.Acquired, err error) {
	out := shareData{arena: arena, start: len(*arena)}
	covered := int64(-1) // offsets < covered have their batch in data
	split := func(i int) ([]sharegroup.Acquired, []sharegroup.Acquired) {
		a := acq[i]
		if covered <= a.First {
			return acq[:i], acq[i:]
		}
		head := append(acq[:i:i], sharegroup.Acquired{First: a.First, Last: covered - 1, DeliveryCount: a.DeliveryCount})
		rest := append([]sharegroup.Acquired{{First: covered, Last: a.Last, DeliveryCount: a.DeliveryCount}}, acq[i+1:]...)
		return head, rest
	}
	var raw []byte // reused unless a batch in it was kept as it is
	defer func() {
		if raw != nil {
			cache.giveBack(raw) // no batch lies in it
		}
	}()
	for i := 0; i < len(acq); i++ {
		a := acq[i]
		for covered <= a.Last {
			if len(out.data) > 0 && len(out.data) >= budget {
				sent, unsent = split(i)
				return out.data, sent, unsent, nil
			}
			from := max(a.First, covered)
			if pb := cache.get(lp, from, user); pb != nil {
				usable := pb.h.LastOffset() < hw && from >= lp.Log.LogStartOffset()
				if usable {
					out.add(pb, acq[i:])
					covered = pb.h.LastOffset() + 1
				}
				cache.release(pb)
				if usable {
					continue
				}
			}
			if raw == nil {
				raw = cache.readBuf()
			}
			var rerr error
			raw, rerr = lp.Log.ReadAppend(raw[:0], from, hw, shareReadBytes, true)
			if rerr != nil {
				sent, unsent = split(i)
				return out.data, sent, unsent, fmt.Errorf("reading acquired records at %d: %w", from, rerr)
			}
			progressed, adopted := false, false
			var made []*parsedBatch // released once raw is no longer walked
			next := func(h *protocol.BatchHeader) error {
				covered = h.LastOffset() + 1
				progressed = true
				if covered > a.Last && len(out.data) >= budget {
					return errStopRead
				}
				return nil
			}
			_ = records.EachBatch(raw, func(h *protocol.BatchHeader, batch []byte) error {
				if h.LastOffset() < from {
					return nil
				}
				held := -1 // the first range of acq holding an offset of the batch
				for j := i; j < len(acq) && acq[j].First <= h.LastOffset(); j++ {
					if acq[j].Last >= h.BaseOffset {
						held = j
						break
					}
				}
				// A batch this fetch does not need is cached too, if the
				// cache would keep it: the next fetches read on from
				// here, and where batches are small (a read holds many)
				// each would otherwise read the same megabyte again for
				// its one batch (14 times the topic's bytes in an ordered
				// drain of 16-byte records).
				if held < 0 && !cache.wants(lp, h.BaseOffset, len(batch)) {
					return next(h)
				}
				// A batch filling most of the read buffer (the usual 1 MiB
				// batch) is kept without a copy; the next read takes
				// another (one the cache gave back, or a new one).
				var body []byte // a compressed batch's records go into a buffer of the cache's
				if protocol.CompressionOf(h.Attributes) != protocol.CompressionNone {
					body = cache.readBuf()
				}
				var pb *parsedBatch
				if !adopted && 2*len(batch) >= cap(raw) {
					pb, adopted = adoptBatch(h, batch, cap(raw), body), true
					pb.buf = raw[:0]
				} else {
					pb = parseBatch(h, batch, body)
				}
				cache.put(lp, pb, user)
				if held >= 0 {
					out.add(pb, acq[held:])
				}
				made = append(made, pb)
				return next(h)
			})
			for _, pb := range made {
				cache.release(pb)
			}
			if adopted {
				raw = nil
			}
			if !progressed {
				sent, unsent = split(i)
				return out.data, sent, unsent, fmt.Errorf("reading acquired records at %d: no batch", from)
			}
		}
	}
	return out.data, acq, nil, nil
}

// shareData builds one partition's record data in a ShareFetch
// response. A batch sent as it is starts an empty data without a copy
// (cached batches never change); anything else is copied onto the end of
// the response's arena, the buffer every partition of the response
// appends to (handleShareFetch pools it and takes it back once the
// response is encoded), and data is then the arena from start on.
type shareData struct {
	arena *[]byte
	start int
	data  []byte
	owned bool // data is (*arena)[start:]
}

// add appends pb, trimmed to acq, to data.
func (d *shareData) add(pb *parsedBatch, acq []sharegroup.Acquired) {
	var buf [16][2]int
	runs := pb.keptRuns(acq, buf[:0])
	if len(d.data) == 0 && !pb.trimmed(pb.keptSize(runs)) {
		pb.pinned.Store(true) // the response holds it: its buffer is never reused
		d.data = pb.batch[:len(pb.batch):len(pb.batch)]
		return
	}
	if !d.owned {
		*d.arena = append((*d.arena)[:d.start], d.data...)
		d.owned = true
	}
	*d.arena = pb.appendKept(*d.arena, runs)
	d.data = (*d.arena)[d.start:len(*d.arena):len(*d.arena)]
}

// recordOffsets calls fn with the absolute offset and wire bytes of each
// record of batch (decompressed if needed), reading only each record's
// length and offset delta: trimming needs nothing else, and decoding
// whole records was most of its cost. It returns the records' bytes (in
// batch, or decompressed); fn's are consecutive slices of it. A
// compressed batch's records are appended to *buf (buf nil: a buffer of
// their own), which they then end.
func recordOffsets(batch []byte, h *protocol.BatchHeader, buf *[]byte, fn func(offset int64, raw []byte)) ([]byte, error) {
	raw := batch[protocol.BatchHeaderSize:]
	if codec := protocol.CompressionOf(h.Attributes); codec != protocol.CompressionNone {
		var dst []byte
		if buf != nil {
			dst = *buf
		}
		at := len(dst)
		out, err := records.DecompressAppend(dst, raw, codec, records.MaxDecompressed)
		if err != nil {
			return nil, fmt.Errorf("%w: decompress: %v", records.ErrBadBatch, err)
		}
		if buf != nil {
			*buf = out
		}
		raw = out[at:]
	}
	body := raw
	for i := int32(0); i < h.RecordCount; i++ {
		length, n := binary.Varint(raw)
		if n <= 0 || length < 3 || int64(len(raw)-n) < length {
			return nil, fmt.Errorf("%w: record %d truncated", records.ErrBadBatch, i)
		}
		rec := raw[n : n+int(length)]
		// attributes (int8), timestampDelta (varint), offsetDelta (varint)
		_, tn := binary.Varint(rec[1:])
		if tn <= 0 {
			return nil, fmt.Errorf("%w: record %d: bad timestamp delta", records.ErrBadBatch, i)
		}
		delta, dn := binary.Varint(rec[1+tn:])
		if dn <= 0 {
			return nil, fmt.Errorf("%w: record %d: bad offset delta", records.ErrBadBatch, i)
		}
		fn(h.BaseOffset+delta, raw[:n+int(length)])
		raw = raw[n+int(length):]
	}
	return body, nil
}

// errStopRead ends a records.EachBatch walk early.
var errStopRead = errors.New("broker: stop reading")

// blocksOwnGroups reports whether member holds records of this
// share-partition in ordered mode, and the earliest lock deadline among
// them: nothing else may be acquirable until it acknowledges them, so its
// long poll must not wait long, and never to that deadline (the client
// piggybacks those acknowledgements on its next ShareFetch; franz-go does
// not send them while a fetch is outstanding): shareSession.ownGroupsWait.
func (sp *sharePart) blocksOwnGroups(member string) (deadline time.Time, blocked bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	p := sp.mu.p
	if p == nil || p.Config().Groups != sharegroup.GroupsOrdered {
		return time.Time{}, false
	}
	return p.HeldUntil(member)
}

// mgRateState is a share-partition's per-message-group delivery rate
// limits (share.delivery.rate.limit with
// share.delivery.rate.limit.scope=message-group): one token bucket per
// message group (burst: one second of the rate), under sharePart.mu. A
// message group's records live in one partition when it is the key, so
// per share-partition is per message group. Full buckets of idle groups
// are dropped, so the map holds the groups being throttled.
type mgRateState struct {
	buckets map[string]*quota.TokenBucket
	swept   time.Time
	timer   *time.Timer // wakes long polls when a refused group refills
	timerAt time.Time
}

// messageGroupLimiterLocked returns the limiter for this fetch, or nil
// when the group has no per-message-group limit. A refused message group
// arms a timer that wakes the share-partition's long polls when its next
// token is due. sp.mu held.
func (sp *sharePart) messageGroupLimiterLocked(now time.Time) sharegroup.GroupLimiter {
	rate, perMessageGroup := sp.c.shareDeliveryLimit(sp.key.Group)
	rs := &sp.mu.rate
	if rate <= 0 || !perMessageGroup {
		rs.buckets = nil
		return nil
	}
	if rs.buckets == nil {
		rs.buckets = map[string]*quota.TokenBucket{}
	}
	if now.Sub(rs.swept) > 10*time.Second {
		for id, bk := range rs.buckets {
			if bk.IdleFull(now) {
				delete(rs.buckets, id)
			}
		}
		rs.swept = now
	}
	limit := func(id string, want int64) int64 {
		bk := rs.buckets[id]
		if bk == nil {
			bk = quota.NewTokenBucket(float64(rate), 0, now)
			rs.buckets[id] = bk
		} else {
			bk.SetLimit(float64(rate), float64(rate))
		}
		n, wait := bk.Grant(now, int(want))
		if n == 0 {
			sp.wakeAtLocked(now.Add(max(wait, time.Millisecond)))
		}
		return int64(n)
	}
	return limit
}

// wakeAtLocked makes the share-partition's long polls retry at t (a
// rate-limited message group's next token). sp.mu held.
func (sp *sharePart) wakeAtLocked(t time.Time) {
	rs := &sp.mu.rate
	if rs.timer != nil && !rs.timerAt.IsZero() && !t.Before(rs.timerAt) && time.Now().Before(rs.timerAt) {
		return // an earlier wake is already due
	}
	rs.timerAt = t
	d := time.Until(t)
	if rs.timer == nil {
		rs.timer = time.AfterFunc(d, sp.waiters.notify)
	} else {
		rs.timer.Reset(d)
	}
}
