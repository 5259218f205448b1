package share

// Direct consumers: an in-process consumer of a share group that is no
// Kafka client (the SQS API, broker/sqs). It acquires and acknowledges
// through the same share-partitions, locks and change log as ShareFetch
// and ShareAcknowledge, under a member id no Kafka client can take (a
// NUL byte: checkShareIDs refuses it), with a lock duration per call and
// acknowledgements checked against the delivery they answer.

import (
	"context"
	"errors"
	"sort"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/broker/topics"
	"github.com/shoal-mq/shoal/protocol"
	"github.com/shoal-mq/shoal/sharegroup"
)

// DirectMember is the share member of direct consumers.
const DirectMember = "\x00direct"

// ErrStale is a settlement of a record that is no longer held in the
// delivery it names: it was acknowledged, released, its lock ran out, or
// it was delivered again since.
var ErrStale = errors.New("share: the record is not held in that delivery")

// DirectReceive asks for up to Max records of Topic's partitions.
type DirectReceive struct {
	Group string
	Topic string
	// Max is at most how many records to take (> 0).
	Max int
	// Lock is how long they stay locked (0 to sharegroup.MaxLock).
	Lock time.Duration
	// Wait is how long to wait for the first record (0: not at all).
	Wait time.Duration
	// NotBefore, if set, is when a record may be delivered (zero: now):
	// a record acquired before then is deferred to then
	// (sharegroup.Partition.Defer), not returned, and not counted as
	// delivered (an SQS message's delay).
	NotBefore func(DirectRecord) time.Time
}

// DirectRecord is one acquired record.
type DirectRecord struct {
	Partition     int32
	Offset        int64
	DeliveryCount int16
	Timestamp     int64 // milliseconds
	Key, Value    []byte
	Headers       []kmsg.Header
}

// DirectSettle is one settlement of an acquired record: ACCEPT, RELEASE
// or REJECT, or RENEW for Lock.
type DirectSettle struct {
	Partition     int32
	Offset        int64
	DeliveryCount int16
	Type          sharegroup.AckType
	Lock          time.Duration
}

// deferGuard is the least lock a receive that may defer records takes:
// longer than their way from the acquisition to Defer.
const deferGuard = 5 * time.Second

// directTurn rotates the partition a receive starts at.
var directTurn atomic.Uint32

// Receive acquires records for a direct consumer, waiting up to r.Wait
// (or until ctx ends) for the first. What it returns is locked for
// r.Lock and must be settled (or left to expire).
func (c *Coordinator) Receive(ctx context.Context, r DirectReceive) ([]DirectRecord, error) {
	t := c.o.Topics.Get(r.Topic)
	if t == nil {
		return nil, kafkaerr.Refuse(kafkaerr.ErrUnknownTopic, "The topic %s does not exist.", r.Topic)
	}
	g, err := c.lockGroup(r.Group, true)
	if err != nil {
		return nil, err
	}
	g.mu.Unlock()
	st := c.shareSettings(r.Group)
	st.lock, st.lockSet = min(max(r.Lock, 0), sharegroup.MaxLock), true
	parts, _ := c.o.Topics.Snapshot(t)
	if len(parts) == 0 {
		return nil, nil
	}
	first := int(directTurn.Add(1)) % len(parts)
	type target struct {
		sp *sharePart
		lp *topics.Partition
	}
	targets := make([]target, len(parts))
	for i := range parts {
		lp := parts[(first+i)%len(parts)]
		targets[i] = target{c.part(shareKey(r.Group, shareTP{t.ID, lp.Index})), lp}
	}
	bp := records.GetBuffer()
	defer func() { records.PutBuffer(bp, *bp) }()
	var out []DirectRecord
	// Records to defer are acquired with a lock that outlasts their way
	// to Defer (an expired lock would count a delivery), and those kept
	// are then released if the caller asked for no lock at all.
	acq := st
	if r.NotBefore != nil && acq.lock < deferGuard {
		acq.lock = deferGuard
	}
	try := func() error {
		limit, _, settle := c.shareDeliveryGrant(r.Group, r.Max-len(out))
		got := 0
		defer func() { settle(got) }()
		for _, tg := range targets {
			// Again while what it took was all deferred: visible records
			// may wait behind delayed ones.
			for round := 0; round < 16 && got < limit; round++ {
				*bp = (*bp)[:0]
				acqd, data, err := tg.sp.acquire(acq, DirectMember, false, tg.lp, limit-got, sharegroup.RecordLimit, 32<<20, bp, nil)
				if err != nil {
					if len(out) > 0 {
						return nil // the error shows at the next receive
					}
					return err
				}
				if len(acqd) == 0 {
					break
				}
				n := len(out)
				if out, err = appendDirect(out, tg.lp.Index, acqd, data); err != nil {
					return err
				}
				read := len(out) - n
				if r.NotBefore != nil {
					if out, err = tg.sp.deferDirect(st, out, n, r.NotBefore); err != nil {
						return err
					}
				}
				kept := len(out) - n
				for _, d := range out[n:] { // the deferred ones were not delivered
					c.o.Metrics.Delivered(d.DeliveryCount, 1)
				}
				tg.lp.M.RecordsOut.Add(float64(kept))
				got += kept
				if kept > 0 || read == 0 {
					break
				}
			}
		}
		return nil
	}
	if err := try(); err != nil || len(out) > 0 || r.Wait <= 0 {
		return c.relock(r, acq, t.ID, out), err
	}
	deadline := time.Now().Add(r.Wait)
	wake := make(chan struct{}, 1)
	for _, tg := range targets {
		tg.lp.Watch(wake)
		tg.sp.waiters.add(wake, DirectMember)
	}
	defer func() {
		for _, tg := range targets {
			tg.lp.Unwatch(wake)
			tg.sp.waiters.remove(wake)
		}
	}()
	for {
		// Registered first, then tried again: no wake-up is missed.
		if err := try(); err != nil || len(out) > 0 {
			return c.relock(r, acq, t.ID, out), err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		tm := time.NewTimer(left)
		select {
		case <-wake:
		case <-tm.C:
		case <-ctx.Done():
		case <-c.o.Ctx.Done():
		}
		tm.Stop()
		if ctx.Err() != nil || c.o.Ctx.Err() != nil {
			return nil, nil
		}
	}
}

// relock gives records acquired with the defer guard's lock the lock the
// caller asked for: none (released: visible at once, their delivery
// counted) or a shorter one. What fails to settle keeps the guard's.
func (c *Coordinator) relock(r DirectReceive, acq shareGroupSettings, topicID [16]byte, out []DirectRecord) []DirectRecord {
	want := min(max(r.Lock, 0), sharegroup.MaxLock)
	if len(out) == 0 || acq.lock == want {
		return out
	}
	entries := make([]DirectSettle, len(out))
	for i, d := range out {
		entries[i] = DirectSettle{Partition: d.Partition, Offset: d.Offset, DeliveryCount: d.DeliveryCount, Type: sharegroup.AckRenew, Lock: want}
		if want == 0 {
			entries[i].Type = sharegroup.AckRelease
		}
	}
	_ = c.Settle(r.Group, topicID, entries)
	return out
}

// deferDirect defers the records of out[from:] whose notBefore is still
// ahead and returns out without them.
func (sp *sharePart) deferDirect(st shareGroupSettings, out []DirectRecord, from int, notBefore func(DirectRecord) time.Time) ([]DirectRecord, error) {
	now := time.Now()
	kept := out[:from]
	type deferral struct {
		d     DirectRecord
		until time.Time
	}
	var later []deferral
	// In ordered mode a group's records after a deferred one wait too
	// (to the same time): a batch of one group must not pass its head.
	var held map[string]time.Time
	for _, d := range out[from:] {
		until := notBefore(d)
		id := st.groupSource.groupOf(d.Key, d.Headers)
		g, grouped := string(id), len(id) > 0
		if t, ok := held[g]; ok && grouped && t.After(until) {
			until = t
		}
		if !until.After(now) {
			kept = append(kept, d)
			continue
		}
		later = append(later, deferral{d, until})
		if grouped && st.groupMode == sharegroup.GroupsOrdered {
			if held == nil {
				held = map[string]time.Time{}
			}
			held[g] = until
		}
	}
	if len(later) == 0 {
		return kept, nil
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.mu.p == nil {
		return kept, nil // discarded meanwhile: the acquisitions are gone with it
	}
	var recs []sharegroup.Record
	for _, l := range later {
		eff := sp.mu.p.Defer(now, DirectMember, l.d.Offset, l.d.Offset, l.d.DeliveryCount, l.until)
		recs = append(recs, eff.Records...)
	}
	err := sp.writeLocked(recs)
	sp.armLocked(now)
	return kept, err
}

// appendDirect appends the records of data (log batches) that acq
// covers.
func appendDirect(out []DirectRecord, partition int32, acq []sharegroup.Acquired, data []byte) ([]DirectRecord, error) {
	if len(acq) == 0 {
		return out, nil
	}
	i := 0
	err := records.EachBatch(data, func(h *protocol.BatchHeader, batch []byte) error {
		return records.EachRecord(batch, func(off, ts int64, r *kmsg.Record, _ []byte) bool {
			for i < len(acq) && acq[i].Last < off {
				i++
			}
			if i == len(acq) {
				return false
			}
			if off < acq[i].First {
				return true
			}
			d := DirectRecord{Partition: partition, Offset: off, DeliveryCount: acq[i].DeliveryCount, Timestamp: ts}
			if r.Key != nil {
				d.Key = append([]byte{}, r.Key...)
			}
			if r.Value != nil {
				d.Value = append([]byte{}, r.Value...)
			}
			for _, hd := range r.Headers {
				d.Headers = append(d.Headers, kmsg.Header{Key: hd.Key, Value: append([]byte(nil), hd.Value...)})
			}
			if h.IsLogAppendTime() {
				d.Timestamp = h.MaxTimestamp
			}
			out = append(out, d)
			return true
		})
	})
	return out, err
}

// Settle applies settlements of records a direct consumer received from
// topicID, durably, and returns one result per entry: nil, ErrStale, or
// another error. The entries of one partition are applied together; if
// one of them is stale, each is tried alone.
func (c *Coordinator) Settle(group string, topicID [16]byte, entries []DirectSettle) []error {
	errs := make([]error, len(entries))
	byPart := map[int32][]int{}
	for i, e := range entries {
		byPart[e.Partition] = append(byPart[e.Partition], i)
	}
	st := c.shareSettings(group)
	var acks []*shareAck
	var idx [][]int
	build := func(p int32, is []int) {
		sort.SliceStable(is, func(a, b int) bool { return entries[is[a]].Offset < entries[is[b]].Offset })
		a := &shareAck{tp: shareTP{topicID, p}}
		var kept []int
		for _, i := range is {
			e := entries[i]
			if n := len(a.batches); n > 0 && a.batches[n-1].Last >= e.Offset {
				errs[i] = ErrStale // the same record twice in one call: the first one settles it
				continue
			}
			a.batches = append(a.batches, sharegroup.AckBatch{First: e.Offset, Last: e.Offset,
				Types: []sharegroup.AckType{e.Type}, DeliveryCount: e.DeliveryCount, Lock: e.Lock})
			kept = append(kept, i)
		}
		acks, idx = append(acks, a), append(idx, kept)
	}
	for p, is := range byPart {
		build(p, is)
	}
	c.acknowledge(time.Now(), group, st, DirectMember, acks)
	var retry [][]int
	for k, a := range acks {
		switch {
		case (a.code == kerr.InvalidRecordState.Code || a.code == kerr.InvalidRequest.Code) && len(idx[k]) > 1:
			retry = append(retry, idx[k])
		default:
			for _, i := range idx[k] {
				errs[i] = directError(a.code, a.msg)
			}
		}
	}
	for _, is := range retry {
		acks, idx = acks[:0], idx[:0]
		for _, i := range is {
			build(entries[i].Partition, []int{i})
		}
		c.acknowledge(time.Now(), group, st, DirectMember, acks)
		for k, a := range acks {
			for _, i := range idx[k] {
				errs[i] = directError(a.code, a.msg)
			}
		}
	}
	return errs
}

func directError(code int16, msg string) error {
	switch code {
	case 0:
		return nil
	case kerr.InvalidRecordState.Code, kerr.InvalidRequest.Code:
		// INVALID_REQUEST: past the window, i.e. an offset never acquired
		// (a forged or foreign handle that passed its signature check).
		return ErrStale
	}
	return &DirectError{Code: code, Message: msg}
}

// DirectError is a settlement that failed for another reason than
// staleness: the Kafka error code and message.
type DirectError struct {
	Code    int16
	Message string
}

func (e *DirectError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return kerr.ErrorForCode(e.Code).Error()
}

// DirectCounts returns how many records of topic's partitions group has
// not finished: visible (available to a receive, including those never
// fetched), in flight (locked) and delayed (deferred, or waiting out a
// redelivery backoff; with ds, also those no receive has reached that
// ds.NotBefore delays). Partitions without state count their whole log
// (an SQS queue's group starts at the earliest offset).
func (c *Coordinator) DirectCounts(group, topic string, ds *DelayScan) (visible, inFlight, delayed int64) {
	t := c.o.Topics.Get(topic)
	if t == nil {
		return 0, 0, 0
	}
	st := c.shareSettings(group)
	parts, _ := c.o.Topics.Snapshot(t)
	for _, lp := range parts {
		hw, ls := lp.Log.HighWatermark(), lp.Log.LogStartOffset()
		sp := c.part(shareKey(group, shareTP{t.ID, lp.Index}))
		sp.mu.Lock()
		err := sp.prepareLocked(time.Now(), st, false)
		if err != nil {
			sp.mu.Unlock()
			if errors.Is(err, errNoShareState) {
				var waiting int64
				if ds != nil {
					waiting = sp.delays.delayedAhead(lp, ls, hw, ds, time.Now())
				}
				visible += max(hw-ls-waiting, 0)
				delayed += waiting
			}
			continue
		}
		lag := sp.mu.p.Lag(hw)
		speo := sp.mu.p.SPEO()
		var held, waiting int64
		for _, r := range sp.mu.p.Ranges() {
			switch n := r.Last - r.First + 1; {
			case r.State == sharegroup.StateAcquired || r.State == sharegroup.StateArchiving:
				held += n
			case r.State == sharegroup.StateAvailable && !r.Deadline.IsZero(): // a backoff's (Ranges)
				waiting += n
			}
		}
		sp.mu.Unlock()
		if ds != nil {
			waiting += sp.delays.delayedAhead(lp, speo, hw, ds, time.Now())
		}
		visible += max(lag-held-waiting, 0)
		inFlight += held
		delayed += waiting
	}
	return visible, inFlight, delayed
}

// DirectPurge restarts every share-partition of topic for group at the
// high watermark: what was sent before is gone for group, in flight or
// not (SQS's PurgeQueue). Durable when it returns.
func (c *Coordinator) DirectPurge(group, topic string) error {
	t := c.o.Topics.Get(topic)
	if t == nil {
		return kafkaerr.Refuse(kafkaerr.ErrUnknownTopic, "The topic %s does not exist.", topic)
	}
	st := c.shareSettings(group)
	parts, _ := c.o.Topics.Snapshot(t)
	for _, lp := range parts {
		if code := c.resetOffset(shareKey(group, shareTP{t.ID, lp.Index}), st, lp, -1); code != 0 {
			return &DirectError{Code: code}
		}
	}
	return nil
}
