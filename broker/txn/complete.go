package txn

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/groups"
	"github.com/shoal-mq/shoal/broker/meta"
	"github.com/shoal-mq/shoal/broker/topics"
	slog "github.com/shoal-mq/shoal/log"
)

// A transaction's life after it begins: its pending offsets, the
// producer checks, EndTxn, the completion (markers, offsets, the
// Complete* record) and epoch bumps. doc.go has the model and locks.

// addPendingOffset records a pending transactional offset. t.mu held, and
// the group's lock (handleTxnOffsetCommit), or loading.
func (c *Coordinator) addPendingOffset(t *Txn, group string, tp groups.TP, oc groups.OffsetCommit) {
	offs := t.mu.offsets[group]
	if offs == nil {
		offs = map[groups.TP]groups.OffsetCommit{}
		t.mu.offsets[group] = offs
	}
	old, had := offs[tp]
	oc.PendingSeq = c.o.Groups.Pending.Add(group, tp, had, old.PendingSeq)
	offs[tp] = oc
}

// restorePendingOffsetLocked puts back prev, the pending offset that one
// just added (addPendingOffset) replaced. t.mu held, and the group's
// lock since the addition.
func (c *Coordinator) restorePendingOffsetLocked(t *Txn, group string, tp groups.TP, prev groups.OffsetCommit) {
	c.o.Groups.Pending.Restore(group, tp, prev.PendingSeq)
	t.mu.offsets[group][tp] = prev
}

// stampLocked gives group's pending offsets tps, just written with t's
// record, that write's version as their stamp (groups.OffsetCommit.Stamp): the
// TxnOffsetCommit's place among all offset commits, as its record's
// offset in Kafka's offsets log. t.mu held, since the write.
func (c *Coordinator) stampLocked(t *Txn, group string, tps []groups.TP) {
	v, err := c.recordVersion(t.id)
	if err != nil {
		// No stamp: applied whatever came after it, as before stamps
		// existed; a restart gives it the record's version (load).
		c.lg.Warn("reading back a transactional offset commit failed", zap.String("transactional_id", t.id), zap.Error(err))
		v = 0
	}
	offs := t.mu.offsets[group]
	for _, tp := range tps {
		oc := offs[tp]
		oc.Stamp = v
		offs[tp] = oc
	}
}

// dropPendingOffsetLocked forgets one pending offset. t.mu held.
func (c *Coordinator) dropPendingOffsetLocked(t *Txn, group string, tp groups.TP) {
	offs := t.mu.offsets[group]
	oc, ok := offs[tp]
	if !ok {
		return
	}
	delete(offs, tp)
	if len(offs) == 0 {
		delete(t.mu.offsets, group)
	}
	c.o.Groups.Pending.Forget(group, tp, oc.PendingSeq)
}

// clearPending forgets pending offsets of a transaction that ended.
func (c *Coordinator) clearPending(offsets map[string]map[groups.TP]groups.OffsetCommit) {
	done := c.o.Groups.Pending.ForgetAll(offsets) // nothing pending any more
	for g, tps := range done {
		if h := c.o.BeforeDropMarks; h != nil {
			h(g)
		}
		c.o.Groups.DropDeletionMarks(g, tps)
	}
}

// fencedCode is PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for request
// versions older than fencedSince, as Kafka answers.
func fencedCode(version, fencedSince int16) int16 {
	if version < fencedSince {
		return kerr.InvalidProducerEpoch.Code
	}
	return kerr.ProducerFenced.Code
}

// lockChecked locks id's txn for a request by producer pid and epoch, or
// returns nil and the error code: INVALID_PRODUCER_ID_MAPPING for an
// unknown transactional id, then checkProducerLocked's codes.
func (c *Coordinator) lockChecked(id string, pid int64, epoch, version, fencedSince int16) (*Txn, int16) {
	t := c.lock(id, false)
	if t == nil {
		return nil, kerr.InvalidProducerIDMapping.Code
	}
	if code := t.checkProducerLocked(pid, epoch, version, fencedSince); code != 0 {
		t.mu.Unlock()
		return nil, code
	}
	return t, 0
}

// checkProducerLocked applies Kafka's checks of a request's producer id
// and epoch against the txn: INVALID_PRODUCER_ID_MAPPING for another
// producer id, PRODUCER_FENCED (or INVALID_PRODUCER_EPOCH) for another
// epoch. The producer id an EndTxn answered for an exhausted epoch
// (Next) gets CONCURRENT_TRANSACTIONS while the decision it answered is
// still being completed: the txn moves to it then, and the client
// retries. t.mu held.
func (t *Txn) checkProducerLocked(pid int64, epoch int16, version, fencedSince int16) int16 {
	switch {
	case t.nextPendingLocked(pid, epoch):
		return kerr.ConcurrentTransactions.Code
	case t.mu.ProducerID < 0 || pid != t.mu.ProducerID:
		return kerr.InvalidProducerIDMapping.Code
	case epoch != t.mu.Epoch:
		return fencedCode(version, fencedSince)
	}
	return 0
}

// nextPendingLocked reports whether pid and epoch are the producer an
// EndTxn with an exhausted epoch answered (Next), whose decision is not
// completed yet. t.mu held.
func (t *Txn) nextPendingLocked(pid int64, epoch int16) bool {
	n := t.mu.Next
	return n != nil && pid == n.ProducerID && epoch == n.Epoch
}

// beginLocked moves the txn to Ongoing when it is not already. t.mu held.
func (t *Txn) beginLocked(now time.Time) {
	if t.mu.State != Ongoing {
		t.mu.State = Ongoing
		t.mu.StartMs = now.UnixMilli()
		clear(t.mu.partitions)
		clear(t.mu.groups)
	}
}

// endTxnLocked decides the open transaction (commit or abort), persists
// the decision, and completes it. The decision is taken (and the caller
// may answer success) once the Prepare state is durable: a failure
// after that leaves it for the retry loop and is only logged. t.mu held;
// t is Ongoing (or, for an EndTxn v5 abort with nothing open, Empty or
// Complete*).
//
// With bump (EndTxn v5+, KIP-890 part 2) the epoch moves forward with the
// decision: the markers carry the new epoch, fencing the producer's
// older batches in every partition of the transaction, and the producer
// continues at it. An exhausted epoch keeps the markers at the old one
// and moves the txn to a new producer id (epoch 0) once completed.
func (c *Coordinator) endTxnLocked(t *Txn, commit, bump bool, now time.Time) error {
	snap := t.snapshotLocked()
	t.mu.State = PrepareAbort
	if commit {
		t.mu.State = PrepareCommit
	}
	if bump {
		if t.mu.Epoch < math.MaxInt16-1 {
			t.mu.LastProducerID, t.mu.LastEpoch = t.mu.ProducerID, t.mu.Epoch
			t.mu.LastEnd = true
			t.mu.Epoch++
			t.mu.Bumped = true
		} else {
			id, err := c.o.Store.NextProducerID()
			if err != nil {
				t.restoreLocked(snap)
				return err
			}
			t.mu.Next = &Producer{ProducerID: id}
		}
	}
	if err := c.persistLocked(t, now); err != nil {
		t.restoreLocked(snap)
		return err
	}
	if t.mu.Bumped && c.startCompletionLocked(t, now) {
		return nil
	}
	if err := c.completeLocked(t, now); err != nil {
		c.lg.Warn("transaction decided but not completed; retrying later", zap.String("transactional_id", t.id), zap.Error(err))
	}
	return nil
}

// startCompletionLocked answers for a Bumped decision the way Kafka
// does, once the decision is durable: it appends the markers and
// hands their fsync, the offsets and the Complete* write to finish, in
// the background; the txn shows Complete* at once, and the producer's
// next transaction may start (its batches land after the markers, so
// their fsync covers them). A crash before the completion is durable
// replays the decision at start, skipping partitions already marked. It
// reports false, leaving the txn in Prepare* for completeLocked, if a
// marker could not be appended. t.mu held; t is in Prepare*.
func (c *Coordinator) startCompletionLocked(t *Txn, now time.Time) bool {
	if c.beforeStep(t.id, "markers") != nil {
		return false
	}
	tps := sortedTPs(t.mu.partitions)
	waits, err := c.writeMarkers(t.mu.ProducerID, t.mu.Epoch, t.mu.State == PrepareCommit, true, tps, now, c.markerDelay)
	if err != nil {
		return false
	}
	return c.finalizeLocked(t, now, tps, waits, true) == nil
}

// completeLocked completes a txn in Prepare* before returning: it
// writes the markers, waits for their fsync and applies its offsets
// (commit); the Complete* write then goes on without being waited for
// (finalizeLocked). On failure it stays in Prepare* (retried by the
// timeout loop). t.mu held.
func (c *Coordinator) completeLocked(t *Txn, now time.Time) error {
	if err := c.beforeStep(t.id, "markers"); err != nil {
		return err
	}
	tps := sortedTPs(t.mu.partitions)
	waits, err := c.writeMarkers(t.mu.ProducerID, t.mu.Epoch, t.mu.State == PrepareCommit, t.mu.Bumped, tps, now, 0)
	if err = errors.Join(err, waitMarkers(waits)); err != nil {
		return err
	}
	if t.mu.State == PrepareCommit {
		if err := c.applyOffsets(t.id, t.mu.offsets); err != nil {
			return err
		}
	}
	return c.finalizeLocked(t, now, tps, nil, false)
}

// beforeStep runs the BeforeStep hook (tests), if set.
func (c *Coordinator) beforeStep(id, step string) error {
	if h := c.o.BeforeStep; h != nil {
		return h(id, step)
	}
	return nil
}

// finalizeLocked moves a txn in Prepare* to Complete* in memory and
// starts its completion: in the background, everything after the
// marker appends (waits) runs in finish; otherwise the markers are
// durable and the offsets applied, and only the Complete* write remains,
// made without waiting (a completion found undone at start is simply
// done again). t.mu held.
func (c *Coordinator) finalizeLocked(t *Txn, now time.Time, tps []groups.TP, waits []markerWait, background bool) error {
	commit := t.mu.State == PrepareCommit
	cmp := &completion{done: make(chan struct{}), bumped: t.mu.Bumped, commit: commit, pid: t.mu.ProducerID, epoch: t.mu.Epoch,
		tps: tps, offsets: t.mu.offsets, marked: !background, applied: !background || !commit, cleared: !background}
	snap := t.snapshotLocked()
	t.mu.State = CompleteAbort
	if commit {
		t.mu.State = CompleteCommit
	}
	t.mu.offsets = map[string]map[groups.TP]groups.OffsetCommit{}
	clear(t.mu.partitions)
	clear(t.mu.groups)
	t.mu.StartMs = -1
	t.mu.Bumped = false
	if n := t.mu.Next; n != nil {
		t.mu.LastProducerID, t.mu.LastEpoch = t.mu.ProducerID, t.mu.Epoch
		t.mu.LastEnd = true
		t.mu.ProducerID, t.mu.Epoch = n.ProducerID, n.Epoch
		t.mu.Next = nil
	}
	rec, err := c.encodeLocked(t, now)
	if err != nil {
		t.restoreLocked(snap)
		t.mu.offsets = cmp.offsets
		return err
	}
	cmp.record = rec
	t.mu.completing = cmp
	if background {
		c.finishing.Add(1)
		go c.finish(t.id, cmp, waits)
		return nil
	}
	c.clearPending(cmp.offsets)
	c.writeCompleteAsync(t.id, cmp)
	return nil
}

// finish is a background completion (startCompletionLocked): it waits
// for the markers' fsync, applies the offsets (commit) and writes the
// Complete* record. It takes no txn lock; a failure is left in cmp for
// settleLocked to redo.
func (c *Coordinator) finish(id string, cmp *completion, waits []markerWait) {
	defer c.finishing.Done()
	if err := waitMarkers(waits); err != nil {
		c.lg.Warn("a decided transaction's markers failed; completing it again later", zap.String("transactional_id", id), zap.Error(err))
		cmp.err = err
		close(cmp.done)
		return
	}
	cmp.marked = true
	if h := c.o.BeforeApply; h != nil {
		h(id)
	}
	if cmp.commit {
		if err := c.applyOffsets(id, cmp.offsets); err != nil {
			c.lg.Warn("applying a committed transaction's offsets failed; completing it again later", zap.String("transactional_id", id), zap.Error(err))
			cmp.err = err
			close(cmp.done)
			return
		}
		cmp.applied = true
	}
	c.clearPending(cmp.offsets)
	cmp.cleared = true
	c.writeCompleteAsync(id, cmp)
	<-cmp.done // Close waits for finishing: the write must be over
}

// writeCompleteAsync writes cmp's Complete* record and closes cmp.done
// once it is durable (or failed). The group committer commits writes in
// the order they are queued, so no later write of the txn can be
// overtaken by it.
func (c *Coordinator) writeCompleteAsync(id string, cmp *completion) {
	if err := c.beforeStep(id, "complete"); err != nil {
		cmp.err = err
		close(cmp.done)
		return
	}
	c.finishing.Add(1)
	c.o.Store.Committer().WriteAsync([]meta.Op{{Key: Key(id), Value: cmp.record}}, func(err error) {
		defer c.finishing.Done()
		if err != nil {
			c.lg.Error("persisting a completed transaction failed; it is completed again later", zap.String("transactional_id", id), zap.Error(err))
		}
		cmp.err = err
		close(cmp.done)
	})
}

// markerWait is one marker's pending fsync.
type markerWait struct {
	p  *topics.Partition
	ch <-chan error
}

// markerSyncDelay is how long a background completion's markers
// (startCompletionLocked) wait for an append to start their partition's
// fsync before starting one of their own (syncer.appendedLazy). The
// producer's next transaction usually arrives within it, so its fsync
// covers the markers: with several transactional producers on the same
// partitions, each marker otherwise cost an fsync that the next batches
// queued behind. It bounds how much later a read_committed consumer of
// an idle partition sees the outcome; nobody is answered later.
const markerSyncDelay = 5 * time.Millisecond

// writeMarkers appends a COMMIT or ABORT marker for producer pid at
// epoch to every partition of tps that still exists. With bumped (the
// epoch is above the transaction's batches) a partition whose producer
// already reached epoch is skipped: it holds the marker already. It
// returns the appended markers' fsync waits, and the append errors.
// An appended marker's fsync starts within delay (syncer.appendedLazy).
func (c *Coordinator) writeMarkers(pid int64, epoch int16, commit, bumped bool, tps []groups.TP, now time.Time, delay time.Duration) ([]markerWait, error) {
	var waits []markerWait
	var errs []error
	for _, tp := range tps {
		p := c.o.Topics.Partition(tp.Topic, tp.Partition)
		if p == nil {
			continue // deleted with its topic: nothing to mark
		}
		if e, ok := p.Log.ProducerEpoch(pid); bumped && ok && e >= epoch {
			// Marked already, but maybe not durable yet (its fsync
			// may even have failed): wait for everything appended.
			if leo := p.Log.LogEndOffset(); leo > 0 {
				waits = append(waits, markerWait{p: p, ch: c.o.Syncer.Appended(p, leo-1, leo, true)})
			}
			continue
		}
		res, err := p.Log.WriteMarker(slog.Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit}, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("marker for %s-%d: %w", tp.Topic, tp.Partition, err))
			continue
		}
		waits = append(waits, markerWait{p: p, ch: c.o.Syncer.AppendedLazy(p, res.BaseOffset, res.LastOffset+1, delay)})
	}
	return waits, errors.Join(errs...)
}

// waitMarkers waits for the markers' fsync.
func waitMarkers(waits []markerWait) error {
	var errs []error
	for _, w := range waits {
		var err error
		if w.ch != nil {
			err = <-w.ch
		} else {
			// fsync=interval: a marker is made durable at once all the
			// same, so a crash never leaves a decided transaction open in
			// a partition (its last stable offset would be stuck).
			_, err = w.p.Log.Sync()
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// applyOffsets makes the offsets of id's committed transaction their
// groups' (applyTxnOffsets).
func (c *Coordinator) applyOffsets(id string, offsets map[string]map[groups.TP]groups.OffsetCommit) error {
	groups := make([]string, 0, len(offsets))
	for g := range offsets {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		if err := c.o.Groups.ApplyTxnOffsets(g, offsets[g]); err != nil {
			return err
		}
	}
	return nil
}

// closed reports whether ch is closed, without blocking.
func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func sortedTPs(set map[groups.TP]struct{}) []groups.TP {
	tps := make([]groups.TP, 0, len(set))
	for tp := range set {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		return tps[i].Topic < tps[j].Topic || tps[i].Topic == tps[j].Topic && tps[i].Partition < tps[j].Partition
	})
	return tps
}

// bumpEpochLocked moves the txn to its next epoch, or to a new producer
// id at epoch 0 when the epoch is exhausted. t.mu held.
func (c *Coordinator) bumpEpochLocked(t *Txn) error {
	t.mu.LastProducerID, t.mu.LastEpoch = t.mu.ProducerID, t.mu.Epoch
	t.mu.LastEnd = false
	if t.mu.ProducerID >= 0 && t.mu.Epoch < math.MaxInt16-1 {
		t.mu.Epoch++
		return nil
	}
	id, err := c.o.Store.NextProducerID()
	if err != nil {
		return err
	}
	t.mu.ProducerID, t.mu.Epoch = id, 0
	return nil
}

// abortFencingLocked fences the producer (epoch bump) and aborts its open
// transaction: for a timeout, and for InitProducerId during a
// transaction. t.mu held; t is Ongoing.
func (c *Coordinator) abortFencingLocked(t *Txn, now time.Time) error {
	snap := t.snapshotLocked()
	if t.mu.Epoch < math.MaxInt16-1 {
		// Kafka bumps the epoch in place (the markers then fence the old
		// producer); an exhausted epoch aborts at the current one. As
		// Kafka's prepareFenceProducerEpoch, the fence leaves no epoch a
		// KIP-360 bump may name as its retry: the fenced producer's own
		// bump is PRODUCER_FENCED.
		t.mu.LastProducerID, t.mu.LastEpoch = -1, -1
		t.mu.LastEnd = false
		t.mu.Epoch++
		t.mu.Bumped = true
	}
	t.mu.State = PrepareAbort
	if err := c.persistLocked(t, now); err != nil {
		t.restoreLocked(snap)
		return err
	}
	return c.completeLocked(t, now)
}
