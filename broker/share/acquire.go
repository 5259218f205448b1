package share

import (
	"errors"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/topics"
	slog "github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/protocol"
	"github.com/shoal-mq/shoal/sharegroup"
	"github.com/shoal-mq/shoal/sharegroup/store"
)

// Acknowledging and acquiring records of a share-partition (share.go has
// the model: one owner per share-partition, persist then answer).

// shareAck is one partition's acknowledgements in a request, and the
// result.
type shareAck struct {
	tp      shareTP
	batches []sharegroup.AckBatch
	code    int16 // set before processing for a refused partition
	msg     string
	sp      *sharePart
	lp      *topics.Partition
}

// acknowledge applies acks for member, group-committing the records of
// every share-partition touched. Entries with a non-zero code are left
// alone; the others get their result code.
//
// The acknowledgements are applied and their records submitted
// (store.Store.Submit) under the share-partitions' locks, which are let
// go while the write syncs: other members' acknowledgements of these
// share-partitions join the same group commit instead of waiting for
// this one's sync and then syncing alone, and their fetches go on. What
// others acquire meanwhile goes out at once, except in ordered mode a
// message group's record following one this write ended, which waits for
// it (sharePart.acquire): after a crash the ended record would come back
// after its successor. A record this write released and another member
// acquired meanwhile would come back after a crash too, or if the write
// fails (once the share-partition reloads): delivered twice, as a crash
// can always make it, never out of order. acknowledge returns once the
// write is durable or failed.
func (c *Coordinator) acknowledge(now time.Time, group string, st shareGroupSettings, member string, acks []*shareAck) {
	finish, _ := c.submitAcks(now, group, st, member, acks)
	finish()
}

// submitAcks is acknowledge in two steps: it applies the
// acknowledgements and submits their write, and returns the rest
// (waiting for the write, setting the results, waking waiting fetches),
// which must be called exactly once. A ShareFetch acquires and reads its
// next records in between, while its acknowledgements sync (as other
// members' fetches may, see above), and answers once they are durable:
// in ordered mode one message-group cycle then costs the sync or the
// reading, not both (measured: ordered 0.72-0.76M records/s against
// 0.55-0.63M waiting first). startsCommit reports that the write started
// a commit, which runs only once the caller blocks or yields
// (store.Pending.StartsCommit).
func (c *Coordinator) submitAcks(now time.Time, group string, st shareGroupSettings, member string, acks []*shareAck) (finish func(), startsCommit bool) {
	var todo []*shareAck
	for _, a := range acks {
		if a.code != 0 {
			continue
		}
		_, lp, code := c.o.Topics.PartitionByID(a.tp.topicID, a.tp.partition)
		if code != 0 {
			a.code = code
			continue
		}
		a.sp, a.lp = c.part(shareKey(group, a.tp)), lp
		todo = append(todo, a)
	}
	if len(todo) == 0 {
		return func() {}, false
	}
	sort.Slice(todo, func(i, j int) bool { return compareKeys(todo[i].sp.key, todo[j].sp.key) < 0 })
	for _, a := range todo {
		a.sp.mu.Lock()
	}
	var batch []store.PartitionRecords
	var wrote []*shareAck
	var from []*sharegroup.Partition // the Partition each of wrote's records came from
	for _, a := range todo {
		sp := a.sp
		if err := sp.prepareLocked(now, st, false); err != nil {
			a.code, a.msg = shareErrorCode(err), err.Error()
			continue
		}
		eff, err := sp.mu.p.Acknowledge(now, member, a.batches)
		sp.m.Observe(eff.Expired, eff.Archived)
		if err != nil {
			a.code, a.msg = shareErrorCode(err), err.Error()
		}
		if len(eff.Records) > 0 {
			batch = append(batch, store.PartitionRecords{Key: sp.key, Records: eff.Records})
			wrote = append(wrote, a)
			from = append(from, sp.mu.p)
		}
	}
	var w *store.Pending
	if len(batch) > 0 {
		w = c.store.Submit(batch)
		for i, a := range wrote {
			a.sp.mu.acking = append(a.sp.mu.acking, ackWrite{from[i].AckSeq(), w})
		}
	}
	for _, a := range todo {
		a.sp.armLocked(now)
		a.sp.mu.Unlock()
	}
	return func() { c.finishAcks(st, todo, w, batch, wrote, from) }, w != nil && w.StartsCommit()
}

// finishAcks is submitAcks' second step: it waits for the write w (nil:
// nothing to write) of batch, the records of wrote made from the
// Partitions from, and sets the results of todo.
func (c *Coordinator) finishAcks(st shareGroupSettings, todo []*shareAck, w *store.Pending, batch []store.PartitionRecords, wrote []*shareAck, from []*sharegroup.Partition) {
	if w != nil {
		err := w.Wait()
		if err != nil {
			c.lg.Error("persisting acknowledgements failed; reloading share-partitions from disk", zap.Error(err))
		}
		for i, a := range wrote {
			if err == nil && !hasArchiving(batch[i].Records) {
				continue
			}
			sp := a.sp
			sp.mu.Lock()
			if sp.mu.p == from[i] { // else discarded (and maybe reloaded) meanwhile
				if err != nil {
					sp.discardLocked()
				} else {
					sp.kickDLQLocked()
				}
			}
			sp.mu.Unlock()
			if err != nil && a.code == 0 {
				a.code, a.msg = kerr.KafkaStorageError.Code, err.Error()
			}
		}
	}
	// Waiting fetches are woken once the write is durable: what it
	// freed goes out no sooner, and a fetch woken earlier would take a
	// few records now instead of more a moment later. Only if there is
	// something to take: in ordered mode a fetch carrying
	// acknowledgements has taken the next record of each group they
	// ended already, and the members waiting for work would otherwise
	// wake at every acknowledgement to find nothing (sharegroup.
	// Partition.Acquirable).
	for _, a := range todo {
		a.sp.notifyIfAcquirable(a.lp, st)
	}
}

// notifyIfAcquirable wakes the waiting fetches unless nothing can be
// acquired from the log lp (sharegroup.Partition.Acquirable). What makes
// records acquirable later wakes them then: an acknowledgement, a release
// or a lock expiry (the lock timer, sharePart.fire), an append or the log
// start moving (partition.notify: produce, DeleteRecords, retention).
func (sp *sharePart) notifyIfAcquirable(lp *topics.Partition, st shareGroupSettings) {
	logStart, readLimit := lp.Log.LogStartOffset(), shareReadLimit(lp, st)
	sp.mu.Lock()
	wake := sp.mu.stopped || sp.mu.p == nil || sp.mu.p.Acquirable(logStart, readLimit)
	sp.mu.Unlock()
	if wake {
		sp.waiters.notify()
	}
}

// acquire hands member up to maxRecords records (mode) from this
// share-partition, reading at most budget bytes of the log lp onto the end
// of *arena, the buffer of the whole response (handleShareFetch). It returns the acquired ranges and the log batches
// covering them, which may lie in *arena.
//
// In ordered mode, records following a record that an acknowledgement's
// write in flight ended are handed out only once it is durable
// (sharegroup.Partition.AcquiredAfter, Coordinator.acknowledge). If
// it fails, the acquisitions, made in a Partition holding states that
// were never stored, are dropped, and the share-partition, reloaded from
// what is, is tried once more. In a message-group mode yield (nil:
// none) is called once the acquisitions are made and the lock let go,
// before the log is read (handleShareFetch).
func (sp *sharePart) acquire(st shareGroupSettings, member string, spread bool, lp *topics.Partition, maxRecords int, mode sharegroup.AcquireMode, budget int, arena *[]byte, yield func()) ([]sharegroup.Acquired, []byte, error) {
	mark := len(*arena)
	for retried := false; ; retried = true {
		acq, data, pending, err := sp.acquireNow(st, member, spread, lp, maxRecords, mode, budget, arena, yield)
		if err != nil || len(acq) == 0 || pending == nil {
			return acq, data, err
		}
		werr := pending.Wait()
		if werr == nil {
			return acq, data, nil
		}
		*arena = (*arena)[:mark]
		if retried {
			return nil, nil, werr
		}
	}
}

// acquireNow is acquire without waiting for the write in flight, which
// it returns (nil: none).
func (sp *sharePart) acquireNow(st shareGroupSettings, member string, spread bool, lp *topics.Partition, maxRecords int, mode sharegroup.AcquireMode, budget int, arena *[]byte, yield func()) ([]sharegroup.Acquired, []byte, *store.Pending, error) {
	sp.mu.Lock()
	now := time.Now()
	if err := sp.prepareLocked(now, st, true); err != nil {
		sp.mu.Unlock()
		return nil, nil, nil, err
	}
	if sp.mu.p.Config().Groups != sharegroup.GroupsNone {
		return sp.acquireGroups(now, st, member, spread, lp, maxRecords, budget, arena, yield) // unlocks
	}
	acq, data, err := sp.acquirePlain(now, st, member, lp, maxRecords, mode, budget, arena)
	return acq, data, nil, err
}

// acquirePlain is acquireNow for a plain share group, entered with sp.mu
// held and the Partition prepared.
func (sp *sharePart) acquirePlain(now time.Time, st shareGroupSettings, member string, lp *topics.Partition, maxRecords int, mode sharegroup.AcquireMode, budget int, arena *[]byte) ([]sharegroup.Acquired, []byte, error) {
	defer sp.mu.Unlock()
	defer sp.armLocked(now)
	p := sp.mu.p
	var (
		out     []sharegroup.Acquired
		start   = len(*arena) // the data is (*arena)[start:]
		pending []sharegroup.Record
		got     int
	)
	data := func() []byte {
		if len(*arena) == start {
			return nil
		}
		return (*arena)[start:len(*arena):len(*arena)]
	}
	flush := func() error {
		err := sp.writeLocked(pending)
		pending = nil
		return err
	}
	if ls := lp.Log.LogStartOffset(); p.SPSO() < ls {
		pending = append(pending, p.AdvanceLogStart(ls).Records...)
	}
	hw := shareReadLimit(lp, st)
	perOffset := sp.mu.offsetBytes // 0 after a round that acquired nothing: read a megabyte
	for round := 0; round < 16 && got < maxRecords && budget > 0 && p.CanAcquire(); round++ {
		off := p.NextFetchOffset()
		if off >= hw {
			break
		}
		base := len(*arena)
		var err error
		*arena, err = lp.Log.ReadAppend(*arena, off, hw, plainReadBytes(budget, maxRecords-got, perOffset), true)
		raw := (*arena)[base:]
		if errors.Is(err, slog.ErrOffsetOutOfRange) {
			if ls := lp.Log.LogStartOffset(); off < ls {
				pending = append(pending, p.AdvanceLogStart(ls).Records...)
				continue
			}
		}
		if err != nil {
			if ferr := flush(); ferr != nil {
				return nil, nil, ferr
			}
			if len(out) > 0 {
				return out, data(), nil // the error shows at the next fetch
			}
			return nil, nil, err
		}
		batches, ends := parseLogBatches(raw, shareAborted(lp, st, off, hw))
		if len(batches) == 0 {
			*arena = (*arena)[:base]
			break
		}
		if span := batches[len(batches)-1].Last - batches[0].First + 1; span > 0 {
			sp.mu.offsetBytes = int(max(int64(ends[len(ends)-1])/span, 1))
		}
		if st.lockSet {
			p.LockNext(st.lock)
		}
		acq, eff := p.Acquire(now, member, batches, maxRecords-got, mode)
		// Records that cannot be delivered (an aborted transaction's,
		// others' in flight) take no part of maxRecords: after a round
		// of nothing but them the next reads a megabyte, as every round
		// did before the estimate, so 16 rounds still pass 16 MiB of
		// them (TestSharePlainFetchPassesAbortedRecords).
		perOffset = sp.mu.offsetBytes
		if len(acq) == 0 {
			perOffset = 0
		}
		sp.m.Observe(eff.Expired, eff.Archived)
		pending = append(pending, eff.Records...)
		if len(acq) > 0 {
			first, last := acq[0].First, acq[len(acq)-1].Last
			lo, hi := -1, 0
			for i, b := range batches {
				if b.Last >= first && b.First <= last {
					if lo < 0 {
						lo = i
					}
					hi = i
				}
			}
			from := 0
			if lo > 0 {
				from = ends[lo-1]
			}
			// Keep the batches covering the acquisitions: moved down
			// over the ones before them, none after.
			n := copy(raw, raw[from:ends[hi]])
			*arena = (*arena)[:base+n]
			budget -= n
			for _, a := range acq {
				got += int(a.Last - a.First + 1)
			}
			out = appendAcquired(out, acq)
		} else {
			*arena = (*arena)[:base]
		}
		if p.NextFetchOffset() <= off && len(acq) == 0 {
			break // no progress
		}
	}
	if err := flush(); err != nil {
		return nil, nil, err
	}
	return out, data(), nil
}

// plainReadBytes is how much of the log a plain fetch reads when it
// wants records more of them: what they took in the batches it read last
// (offsetBytes per offset; 0: unknown) and a quarter more, at least 16
// KiB, at most a megabyte and budget. The read always returns its first
// batch whole, however large. Reading a megabyte for the few batches of
// small records a fetch takes, and the same bytes again for the next
// fetch, was most of a plain fetch's CPU on such a topic
// (BenchmarkShareAcquireSmallBatches).
func plainReadBytes(budget, records, offsetBytes int) int {
	n := min(budget, 1<<20)
	if offsetBytes > 0 && records > 0 && records <= n/offsetBytes {
		n = min(n, max(records*offsetBytes*5/4, 16<<10))
	}
	return n
}

// appendAcquired appends ranges keeping the result sorted and merging
// adjacent ranges with equal delivery counts.
func appendAcquired(out, add []sharegroup.Acquired) []sharegroup.Acquired {
	for _, a := range add {
		if n := len(out); n > 0 && out[n-1].Last+1 == a.First && out[n-1].DeliveryCount == a.DeliveryCount {
			out[n-1].Last = a.Last
			continue
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].First < out[j].First })
	return out
}

// parseLogBatches lists the batches of raw log bytes with the byte offset
// where each ends. Control batches, and under read_committed the batches
// of aborted transactions (aborted, from shareAborted), are marked Skip:
// never delivered, archived as Kafka does. A truncated tail is ignored.
func parseLogBatches(raw []byte, aborted []slog.AbortedTxn) ([]sharegroup.LogBatch, []int) {
	var out []sharegroup.LogBatch
	var ends []int
	for pos := 0; pos < len(raw); {
		h, err := protocol.ParseBatchHeader(raw[pos:])
		if err != nil || h.Validate() != nil {
			break
		}
		size := int(h.Size())
		if size <= 0 || pos+size > len(raw) {
			break
		}
		out = append(out, sharegroup.LogBatch{First: h.BaseOffset, Last: h.LastOffset(), Skip: skipForShare(&h, aborted)})
		pos += size
		ends = append(ends, pos)
	}
	return out, ends
}

// shareReadLimit is where a share group reads up to: the high watermark,
// or the last stable offset under share.isolation.level=read_committed.
func shareReadLimit(lp *topics.Partition, st shareGroupSettings) int64 {
	if st.readCommitted {
		return lp.Log.LastStableOffset()
	}
	return lp.Log.HighWatermark()
}

// shareAborted lists the aborted transactions overlapping [from, to) for
// a read_committed share group (nil otherwise).
func shareAborted(lp *topics.Partition, st shareGroupSettings, from, to int64) []slog.AbortedTxn {
	if !st.readCommitted {
		return nil
	}
	return lp.Log.AbortedTransactions(from, to)
}

// skipForShare reports whether a share group must never deliver the
// batch: a control batch (transaction marker), or a batch of a
// transaction in aborted.
func skipForShare(h *protocol.BatchHeader, aborted []slog.AbortedTxn) bool {
	if h.IsControl() {
		return true
	}
	if !h.IsTransactional() {
		return false
	}
	for _, a := range aborted {
		if a.ProducerID == h.ProducerID && h.BaseOffset >= a.FirstOffset && h.BaseOffset <= a.LastOffset {
			return true
		}
	}
	return false
}
