package log

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/shoal-mq/shoal/protocol"
)

// Transactions in one partition (see "Transactions" in doc.go).
//
// A transactional batch (attributes bit 4) opens a transaction for its
// producer in this partition if none is open: the producer's txnStart is
// set to the batch's base offset. WriteMarker closes it with a COMMIT or
// ABORT control batch; an abort also records (producer id, first offset,
// marker offset) in the aborted-transactions index. The last stable
// offset (LSO) is the high watermark, or the first offset of the oldest
// open transaction when that is lower.

// AbortedTxn is one entry of the aborted-transactions index: the records
// of ProducerID from FirstOffset up to the abort marker at LastOffset are
// aborted (Kafka's AbortedTxn; Fetch returns ProducerID and FirstOffset).
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// Marker describes a transaction marker for WriteMarker.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool // false: abort
}

// Control record types (Kafka ControlRecordType).
const (
	controlAbort  = 0
	controlCommit = 1
)

// controlBatchSize is the size of the one-record control batches we
// write: the 61-byte header and a 17-byte record (length 16 + 1).
const controlBatchSize = protocol.BatchHeaderSize + 17

// encodeControlBatch builds a transaction marker batch at offset.
//
// The record: length, attributes 0, timestampDelta 0, offsetDelta 0,
// key (version int16 0, type int16), value (version int16 0,
// coordinatorEpoch int32), no headers. Varints are zigzag, as in Kafka.
func encodeControlBatch(offset int64, m Marker, ts int64) []byte {
	b := make([]byte, controlBatchSize)
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(offset))
	be.PutUint32(b[8:], uint32(controlBatchSize-protocol.BatchLengthPrefix))
	be.PutUint32(b[12:], 0) // partition leader epoch
	b[16] = 2               // magic
	be.PutUint16(b[21:], uint16(protocol.AttrControl|protocol.AttrTransactional))
	be.PutUint32(b[23:], 0) // lastOffsetDelta
	be.PutUint64(b[27:], uint64(ts))
	be.PutUint64(b[35:], uint64(ts))
	be.PutUint64(b[43:], uint64(m.ProducerID))
	be.PutUint16(b[51:], uint16(m.ProducerEpoch))
	be.PutUint32(b[53:], math.MaxUint32) // baseSequence -1
	be.PutUint32(b[57:], 1)              // record count
	r := b[protocol.BatchHeaderSize:]
	r[0] = 32 // zigzag(16): the record body length
	r[1] = 0  // attributes
	r[2] = 0  // timestampDelta
	r[3] = 0  // offsetDelta
	r[4] = 8  // zigzag(4): key length
	typ := uint16(controlAbort)
	if m.Commit {
		typ = controlCommit
	}
	be.PutUint16(r[5:], 0)
	be.PutUint16(r[7:], typ)
	r[9] = 12 // zigzag(6): value length
	be.PutUint16(r[10:], 0)
	be.PutUint32(r[12:], uint32(m.CoordinatorEpoch))
	r[16] = 0 // headers
	protocol.SetBatchCRC(b)
	return b
}

// controlType returns the control record type of a control batch
// (controlAbort or controlCommit) from its first record's key; ok is false
// for a batch we cannot parse (compressed, or not a marker).
func controlType(batch []byte) (typ int16, ok bool) {
	typ, _, ok = parseMarker(batch)
	return typ, ok
}

// parseMarker reads a control batch's first record: its type from the
// key, and the coordinator epoch from the value (version int16,
// coordinatorEpoch int32), -1 when the value cannot be read. ok is as
// for controlType.
func parseMarker(batch []byte) (typ int16, coordinatorEpoch int32, ok bool) {
	if len(batch) <= protocol.BatchHeaderSize {
		return 0, -1, false
	}
	h, err := protocol.ParseBatchHeader(batch)
	if err != nil || h.Compression() != protocol.CompressionNone || h.RecordCount < 1 {
		return 0, -1, false
	}
	r := batch[protocol.BatchHeaderSize:]
	// length (varint), attributes (int8), timestampDelta and offsetDelta
	// (varints), then the key.
	for i := range 4 {
		if i == 1 {
			if len(r) == 0 {
				return 0, -1, false
			}
			r = r[1:]
			continue
		}
		_, n := binary.Varint(r)
		if n <= 0 {
			return 0, -1, false
		}
		r = r[n:]
	}
	klen, n := binary.Varint(r)
	if n <= 0 || klen < 4 || int64(len(r)-n) < klen {
		return 0, -1, false
	}
	key := r[n:]
	typ = int16(binary.BigEndian.Uint16(key[2:]))
	r = r[n+int(klen):]
	vlen, n := binary.Varint(r)
	if n <= 0 || vlen < 6 || int64(len(r)-n) < vlen {
		return typ, -1, true
	}
	return typ, int32(binary.BigEndian.Uint32(r[n+2:])), true
}

// WriteMarker appends a transaction marker (a control batch) for
// m.ProducerID and closes its open transaction in this partition, if
// any. Only the broker's transaction coordinator calls it. A marker with
// an epoch older than the producer's is ErrInvalidProducerEpoch; a newer
// one moves the producer's epoch forward (fencing its older batches).
// Writing a marker for a producer without an open transaction is allowed
// (a retried completion after a crash) and only appends the marker.
func (p *Partition) WriteMarker(m Marker, now time.Time) (AppendResult, error) {
	p.appendMu.Lock()
	defer p.unlockAppend()
	if err := p.writableLocked(); err != nil {
		return AppendResult{}, err
	}
	if p.replica {
		return AppendResult{}, ErrReplicated
	}
	e, err := p.markerStateLocked(m)
	if err != nil {
		return AppendResult{}, err
	}
	leo := p.leo.Load()
	ts := now.UnixMilli()
	batch := encodeControlBatch(leo, m, ts)
	off, err := p.writeLocked(batch, leo+1, ts, now)
	if err != nil {
		return AppendResult{}, err
	}
	first := e.txnStart
	e.txnStart = -1
	e.coordinatorEpoch = m.CoordinatorEpoch
	e.lastTs = ts
	p.producers.commit(&e)
	if first >= 0 && !m.Commit {
		p.txnMu.Lock()
		p.aborted = append(p.aborted, AbortedTxn{ProducerID: m.ProducerID, FirstOffset: first, LastOffset: leo})
		p.txnMu.Unlock()
	}
	p.txnEndedLocked(m.ProducerID)
	p.leo.Store(off)
	return AppendResult{BaseOffset: leo, LastOffset: leo, LogAppendTime: -1, LogStartOffset: p.logStart.Load()}, nil
}

// markerStateLocked checks a marker's epoch against its producer's and
// returns the producer's state the marker starts from. appendMu held.
func (p *Partition) markerStateLocked(m Marker) (producerEntry, error) {
	cur, known := p.producers.entries[m.ProducerID]
	if !known {
		return newProducerEntry(m.ProducerID, m.ProducerEpoch), nil
	}
	e := *cur
	if m.ProducerEpoch < e.epoch {
		return e, fmt.Errorf("%w: marker for producer %d epoch %d < %d", ErrInvalidProducerEpoch, m.ProducerID, m.ProducerEpoch, e.epoch)
	}
	if m.ProducerEpoch > e.epoch {
		e.reset(m.ProducerEpoch)
	}
	return e, nil
}

// txnBeganLocked notes that producer id has a transaction open from
// first. appendMu held.
func (p *Partition) txnBeganLocked(id, first int64) {
	if _, ok := p.ongoing[id]; ok {
		return
	}
	if p.ongoing == nil {
		p.ongoing = map[int64]int64{}
	}
	p.ongoing[id] = first
	if first < p.firstUnstable.Load() {
		p.firstUnstable.Store(first)
	}
}

// txnEndedLocked drops producer id's open transaction. appendMu held.
func (p *Partition) txnEndedLocked(id int64) {
	if _, ok := p.ongoing[id]; !ok {
		return
	}
	delete(p.ongoing, id)
	p.resetFirstUnstableLocked()
}

func (p *Partition) resetFirstUnstableLocked() {
	least := int64(math.MaxInt64)
	for _, first := range p.ongoing {
		least = min(least, first)
	}
	p.firstUnstable.Store(least)
}

// LastStableOffset returns the offset below which every transaction is
// decided: the high watermark, or the first offset of the oldest open
// transaction if lower. read_committed consumers read up to it.
func (p *Partition) LastStableOffset() int64 {
	return min(p.hw.Load(), p.firstUnstable.Load())
}

// OpenTransactions returns the producers with an open transaction in
// this partition and the first offset of each.
func (p *Partition) OpenTransactions() map[int64]int64 {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	out := make(map[int64]int64, len(p.ongoing))
	for id, first := range p.ongoing {
		out[id] = first
	}
	return out
}

// AbortedTransactions returns the aborted transactions that overlap
// [from, to): those whose abort marker is at or after from and whose
// first offset is below to, ordered by marker offset. The caller owns the
// slice; nil when there are none.
func (p *Partition) AbortedTransactions(from, to int64) []AbortedTxn {
	p.txnMu.RLock()
	defer p.txnMu.RUnlock()
	a := p.aborted
	i := sort.Search(len(a), func(i int) bool { return a[i].LastOffset >= from })
	var out []AbortedTxn
	for _, t := range a[i:] {
		if t.FirstOffset < to {
			out = append(out, t)
		}
	}
	return out
}

// abortedSinceLocked returns the aborted transactions whose marker is at
// or after logStart (older ones describe deleted records), for a producer
// snapshot; it also drops the older ones from memory. appendMu held.
func (p *Partition) abortedSinceLocked(logStart int64) []AbortedTxn {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	i := sort.Search(len(p.aborted), func(i int) bool { return p.aborted[i].LastOffset >= logStart })
	if i > 0 {
		p.aborted = append([]AbortedTxn(nil), p.aborted[i:]...)
	}
	return append([]AbortedTxn(nil), p.aborted...)
}

// replayTxnLocked applies a batch read back in recovery to the
// transaction state: a transactional data batch opens its producer's
// transaction, a marker closes it (an abort marker adding to the aborted
// index). batch is the whole batch for control batches (nil otherwise).
func (p *Partition) replayTxnLocked(h *protocol.BatchHeader, batch []byte) {
	if h.ProducerID < 0 || !h.IsTransactional() {
		return
	}
	e := p.producers.entries[h.ProducerID]
	if e == nil {
		return // producers.replay created it; cannot happen
	}
	if !h.IsControl() {
		if e.txnStart < 0 {
			e.txnStart = h.BaseOffset
		}
		return
	}
	typ, ce, ok := parseMarker(batch)
	if ok && typ == controlAbort && e.txnStart >= 0 {
		p.aborted = append(p.aborted, AbortedTxn{ProducerID: h.ProducerID, FirstOffset: e.txnStart, LastOffset: h.BaseOffset})
	}
	e.txnStart = -1
	if ce >= 0 {
		e.coordinatorEpoch = ce // as WriteMarker recorded it (DescribeProducers)
	}
}

// rebuildOngoingLocked derives the open transactions from the producer
// state after recovery.
func (p *Partition) rebuildOngoingLocked() {
	p.ongoing = map[int64]int64{}
	for id, e := range p.producers.entries {
		if e.txnStart >= 0 {
			p.ongoing[id] = e.txnStart
		}
	}
	p.resetFirstUnstableLocked()
}
