package log

import (
	"fmt"
	"math"
	"slices"

	"github.com/shoal-mq/shoal/protocol"
)

// maxProducerBatches is how many recent batches are remembered per
// producer for duplicate detection (Kafka ProducerStateEntry.
// NUM_BATCHES_TO_RETAIN; clients keep max.in.flight <= 5).
const maxProducerBatches = 5

type batchMeta struct {
	firstSeq, lastSeq      int32
	baseOffset, lastOffset int64
}

// producerEntry is the idempotence state of one producer id in one
// partition. It is a value type so Append can build tentative copies
// without allocating.
type producerEntry struct {
	id               int64
	epoch            int16
	lastTs           int64 // maxTimestamp of its last batch
	coordinatorEpoch int32 // -1: no transaction marker seen
	txnStart         int64 // first offset of its open transaction here; -1: none
	batches          [maxProducerBatches]batchMeta
	n                int // valid entries in batches, oldest first
}

func newProducerEntry(id int64, epoch int16) producerEntry {
	return producerEntry{id: id, epoch: epoch, coordinatorEpoch: -1, txnStart: -1}
}

func (e *producerEntry) push(m batchMeta) {
	if e.n == maxProducerBatches {
		copy(e.batches[:], e.batches[1:])
		e.n--
	}
	e.batches[e.n] = m
	e.n++
}

func (e *producerEntry) reset(epoch int16) {
	e.epoch = epoch
	e.n = 0
	e.batches = [maxProducerBatches]batchMeta{}
}

// duplicateOf returns the remembered batch with the same sequence range.
func (e *producerEntry) duplicateOf(firstSeq, lastSeq int32) (batchMeta, bool) {
	for i := range e.n {
		if m := e.batches[i]; m.firstSeq == firstSeq && m.lastSeq == lastSeq {
			return m, true
		}
	}
	return batchMeta{}, false
}

func inSequence(lastSeq, nextSeq int32) bool {
	return nextSeq == lastSeq+1 || (lastSeq == math.MaxInt32 && nextSeq == 0)
}

// producerState maps producer ids to their state. Owned by the partition's
// append lock.
type producerState struct {
	entries map[int64]*producerEntry
}

func newProducerState() producerState {
	return producerState{entries: map[int64]*producerEntry{}}
}

// checkBatch validates the idempotence of one batch against the committed
// state plus the tentative updates of earlier batches of the same Append
// (pending). It returns dup=true with the original batch for an exact
// duplicate, or the updated entry to record. It never mutates state.
//
// Rules (Kafka ProducerAppendInfo): an older epoch is fenced; a newer epoch
// must start at sequence 0; within an epoch the first sequence must follow
// the last one (wrapping at MaxInt32). An unknown producer id is accepted
// at any sequence, as Kafka does once a producer's state has expired or
// been removed with the log: refusing would wedge the producer forever.
func (s *producerState) checkBatch(pending []producerEntry, h *protocol.BatchHeader, baseOffset int64) (upd producerEntry, dup batchMeta, isDup bool, err error) {
	var cur producerEntry
	known := false
	for i := len(pending) - 1; i >= 0; i-- {
		if pending[i].id == h.ProducerID {
			cur, known = pending[i], true
			break
		}
	}
	if !known {
		if e, ok := s.entries[h.ProducerID]; ok {
			cur, known = *e, true
		}
	}
	lastSeq := h.LastSequence()
	lastOffset := baseOffset + int64(h.LastOffsetDelta)
	if h.IsControl() {
		// Transaction markers carry no sequence; they may only move the
		// epoch forward.
		if !known {
			cur = newProducerEntry(h.ProducerID, h.ProducerEpoch)
		} else if h.ProducerEpoch < cur.epoch {
			return cur, batchMeta{}, false, fmt.Errorf("%w: producer %d epoch %d < %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, cur.epoch)
		} else if h.ProducerEpoch > cur.epoch {
			cur.reset(h.ProducerEpoch)
		}
		cur.lastTs = h.MaxTimestamp
		return cur, batchMeta{}, false, nil
	}
	if h.BaseSequence < 0 {
		return cur, batchMeta{}, false, fmt.Errorf("%w: producer %d batch without sequence number", ErrInvalidRecord, h.ProducerID)
	}
	switch {
	case !known:
		cur = newProducerEntry(h.ProducerID, h.ProducerEpoch)
	case h.ProducerEpoch < cur.epoch:
		return cur, batchMeta{}, false, fmt.Errorf("%w: producer %d epoch %d < %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, cur.epoch)
	case h.ProducerEpoch > cur.epoch:
		if h.BaseSequence != 0 {
			return cur, batchMeta{}, false, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		cur.reset(h.ProducerEpoch)
	default: // same epoch
		if m, ok := cur.duplicateOf(h.BaseSequence, lastSeq); ok {
			return cur, m, true, nil
		}
		if cur.n > 0 && !inSequence(cur.batches[cur.n-1].lastSeq, h.BaseSequence) {
			return cur, batchMeta{}, false, fmt.Errorf("%w: producer %d epoch %d expected sequence %d, got %d",
				ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, protocol.IncrementSequence(cur.batches[cur.n-1].lastSeq, 1), h.BaseSequence)
		}
	}
	if h.IsTransactional() {
		if cur.txnStart < 0 {
			cur.txnStart = baseOffset // opens a transaction in this partition
		}
	} else if cur.txnStart >= 0 {
		return cur, batchMeta{}, false, fmt.Errorf("%w: producer %d has a transaction open since offset %d", ErrInvalidTxnState, h.ProducerID, cur.txnStart)
	}
	cur.push(batchMeta{firstSeq: h.BaseSequence, lastSeq: lastSeq, baseOffset: baseOffset, lastOffset: lastOffset})
	cur.lastTs = h.MaxTimestamp
	return cur, batchMeta{}, false, nil
}

// commit stores a validated entry.
func (s *producerState) commit(e *producerEntry) {
	if cur, ok := s.entries[e.id]; ok {
		*cur = *e
		return
	}
	c := *e
	s.entries[e.id] = &c
}

// replay applies a batch read back from the log during recovery, without
// validation: the log is the truth.
func (s *producerState) replay(h *protocol.BatchHeader) {
	if h.ProducerID < 0 {
		return
	}
	e, ok := s.entries[h.ProducerID]
	if !ok {
		n := newProducerEntry(h.ProducerID, h.ProducerEpoch)
		e = &n
		s.entries[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.epoch {
		e.reset(h.ProducerEpoch)
	}
	e.lastTs = h.MaxTimestamp
	if h.IsControl() || h.BaseSequence < 0 {
		return
	}
	e.push(batchMeta{firstSeq: h.BaseSequence, lastSeq: h.LastSequence(), baseOffset: h.BaseOffset, lastOffset: h.LastOffset()})
}

// sorted returns a copy of all entries ordered by producer id.
func (s *producerState) sorted() []producerEntry {
	out := make([]producerEntry, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b producerEntry) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return out
}

// expire forgets producers whose last batch is older than cutoff (ms),
// except those with an open transaction (its marker is still to come).
func (s *producerState) expire(cutoff int64) int {
	n := 0
	for id, e := range s.entries {
		if e.lastTs < cutoff && e.txnStart < 0 {
			delete(s.entries, id)
			n++
		}
	}
	return n
}
