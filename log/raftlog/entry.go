package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoal-mq/shoal/protocol"
)

// Control record types of raft's own entries, from 0x7000 up (Kafka's
// own are 0 to 6). They are kept out of Fetch responses
// (docs/CLUSTER.md): some clients hand any control record to the
// application.
const (
	// TypeNoop is raft's empty entry, appended at the start of a term.
	TypeNoop int16 = 0x7000
	// TypeConfChange holds a ConfChangeV2.
	TypeConfChange int16 = 0x7001
	// TypeInternal holds an internal proposal (Internal): a record of a
	// group's own state machine (the metadata group's, say), which any
	// replica may propose, since its offset is assigned where it lands.
	TypeInternal int16 = 0x7002
)

// internalHeader starts an internal proposal's data: "SHIN", 12 zero
// bytes, and a zero where a RecordBatch has its magic (2), so no batch
// is ever taken for one.
const internalHeader = "SHIN\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"

// Internal returns the data of an internal proposal carrying body: a
// raft entry that is stored as a private control batch (TypeInternal)
// and comes back from DecodeEntry as this data.
func Internal(body []byte) []byte { return append([]byte(internalHeader), body...) }

// InternalBody returns the body of an internal proposal's data; ok is
// false for anything else (a data batch).
func InternalBody(data []byte) ([]byte, bool) {
	if len(data) < len(internalHeader) || string(data[:len(internalHeader)]) != internalHeader {
		return nil, false
	}
	return data[len(internalHeader):], true
}

// ErrBadEntry is an entry that cannot be stored as, or read from, a
// batch of the log.
var ErrBadEntry = errors.New("raftlog: bad entry")

// EncodeEntry returns the batch that stores e at Kafka offset offset.
// A data entry is a RecordBatch the leader prepared (producer data or a
// transaction marker): its bytes are the batch itself, which must
// already carry offset and e's term, since raft keeps the proposed bytes
// and nothing may patch them afterwards. Raft's empty entry and
// configuration changes become control batches of the private types.
func EncodeEntry(e *raftpb.Entry, offset int64) ([]byte, error) {
	term := e.GetTerm()
	if term > math.MaxInt32 {
		return nil, fmt.Errorf("%w: term %d does not fit a partition leader epoch", ErrBadEntry, term)
	}
	switch e.GetType() {
	case raftpb.EntryNormal:
		if len(e.Data) == 0 {
			return controlBatch(offset, int32(term), TypeNoop, nil), nil
		}
		if _, ok := InternalBody(e.Data); ok {
			return controlBatch(offset, int32(term), TypeInternal, e.Data), nil
		}
		h, err := protocol.ParseBatchHeader(e.Data)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d: %v", ErrBadEntry, e.GetIndex(), err)
		}
		switch {
		case h.Size() != int64(len(e.Data)):
			return nil, fmt.Errorf("%w: entry %d is %d bytes, its batch %d", ErrBadEntry, e.GetIndex(), len(e.Data), h.Size())
		case h.BaseOffset != offset:
			return nil, fmt.Errorf("%w: entry %d has base offset %d, not %d", ErrBadEntry, e.GetIndex(), h.BaseOffset, offset)
		case int64(h.PartitionLeaderEpoch) != int64(term):
			return nil, fmt.Errorf("%w: entry %d has leader epoch %d, not its term %d", ErrBadEntry, e.GetIndex(), h.PartitionLeaderEpoch, term)
		case h.IsControl() && isPrivate(e.Data):
			return nil, fmt.Errorf("%w: entry %d is data carrying a private control type", ErrBadEntry, e.GetIndex())
		}
		return e.Data, nil
	case raftpb.EntryConfChangeV2:
		return controlBatch(offset, int32(term), TypeConfChange, e.Data), nil
	}
	return nil, fmt.Errorf("%w: entry %d of type %v (only ConfChangeV2 changes are used)", ErrBadEntry, e.GetIndex(), e.GetType())
}

// DecodeEntry is the entry at index stored as batch: EncodeEntry's
// inverse. A data entry's Data is batch itself (not copied).
func DecodeEntry(batch []byte, index uint64) (*raftpb.Entry, error) {
	h, err := protocol.ParseBatchHeader(batch)
	if err != nil {
		return nil, fmt.Errorf("%w: entry %d: %v", ErrBadEntry, index, err)
	}
	if h.Size() != int64(len(batch)) || h.PartitionLeaderEpoch < 0 {
		return nil, fmt.Errorf("%w: entry %d: batch of %d bytes, %d given, leader epoch %d", ErrBadEntry, index, h.Size(), len(batch), h.PartitionLeaderEpoch)
	}
	e := &raftpb.Entry{Term: proto.Uint64(uint64(h.PartitionLeaderEpoch)), Index: proto.Uint64(index),
		Type: raftpb.EntryNormal.Enum(), Data: batch}
	if !h.IsControl() {
		return e, nil
	}
	typ, value, ok := controlRecord(batch)
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: entry %d: unreadable control record", ErrBadEntry, index)
	case typ == TypeNoop:
		e.Data = nil
	case typ == TypeConfChange:
		e.Type, e.Data = raftpb.EntryConfChangeV2.Enum(), value
	case typ == TypeInternal:
		if _, ok := InternalBody(value); !ok {
			return nil, fmt.Errorf("%w: entry %d: internal entry without its header", ErrBadEntry, index)
		}
		e.Data = value
	case typ >= 0x7000:
		return nil, fmt.Errorf("%w: entry %d: unknown private control type %#x", ErrBadEntry, index, typ)
	}
	return e, nil // a transaction marker is data
}

// IsInternal reports whether batch is one of raft's own entries (a
// private control batch), which a fetch must not return.
func IsInternal(batch []byte) bool {
	h, err := protocol.ParseBatchHeader(batch)
	return err == nil && h.IsControl() && isPrivate(batch)
}

func isPrivate(batch []byte) bool {
	typ, _, ok := controlRecord(batch)
	return ok && typ >= 0x7000
}

// controlBatch is a control batch at offset of one record whose key is
// (version 0, typ) and whose value is value, with no producer and
// timestamps -1, as Kafka writes its own control records.
func controlBatch(offset int64, epoch int32, typ int16, value []byte) []byte {
	var rec []byte
	rec = append(rec, 0)              // attributes
	rec = binary.AppendVarint(rec, 0) // timestamp delta
	rec = binary.AppendVarint(rec, 0) // offset delta
	rec = binary.AppendVarint(rec, 4) // key length
	rec = binary.BigEndian.AppendUint16(rec, 0)
	rec = binary.BigEndian.AppendUint16(rec, uint16(typ))
	if value == nil {
		rec = binary.AppendVarint(rec, -1) // a null value
	} else {
		rec = binary.AppendVarint(rec, int64(len(value)))
		rec = append(rec, value...)
	}
	rec = binary.AppendVarint(rec, 0) // headers
	be := binary.BigEndian
	b := make([]byte, protocol.BatchHeaderSize, protocol.BatchHeaderSize+binary.MaxVarintLen32+len(rec))
	be.PutUint64(b[0:], uint64(offset))
	be.PutUint32(b[12:], uint32(epoch))
	b[16] = 2 // magic
	be.PutUint16(b[21:], uint16(protocol.AttrControl))
	be.PutUint32(b[23:], 0)              // lastOffsetDelta
	be.PutUint64(b[27:], math.MaxUint64) // firstTimestamp -1
	be.PutUint64(b[35:], math.MaxUint64) // maxTimestamp -1
	be.PutUint64(b[43:], math.MaxUint64) // producerId -1
	be.PutUint16(b[51:], math.MaxUint16) // producerEpoch -1
	be.PutUint32(b[53:], math.MaxUint32) // baseSequence -1
	be.PutUint32(b[57:], 1)              // record count
	b = binary.AppendVarint(b, int64(len(rec)))
	b = append(b, rec...)
	be.PutUint32(b[8:], uint32(len(b)-protocol.BatchLengthPrefix))
	protocol.SetBatchCRC(b)
	return b
}

// controlRecord reads a control batch's one record: its type (from the
// key: version int16, type int16) and its value (nil when null). ok is
// false for anything else (a compressed batch, more records, a short
// key, trailing bytes).
func controlRecord(batch []byte) (typ int16, value []byte, ok bool) {
	h, err := protocol.ParseBatchHeader(batch)
	if err != nil || h.RecordCount != 1 || h.Attributes&0x07 != 0 || h.Size() > int64(len(batch)) {
		return 0, nil, false
	}
	r := batch[protocol.BatchHeaderSize:h.Size()]
	n, w := binary.Varint(r)
	if w <= 0 || n < 0 || n != int64(len(r)-w) {
		return 0, nil, false
	}
	r = r[w:]
	if len(r) < 1 {
		return 0, nil, false
	}
	r = r[1:]     // attributes
	for range 2 { // timestamp delta, offset delta
		if _, w = binary.Varint(r); w <= 0 {
			return 0, nil, false
		}
		r = r[w:]
	}
	kl, w := binary.Varint(r)
	if w <= 0 || kl < 4 || kl > int64(len(r)-w) {
		return 0, nil, false
	}
	key := r[w : w+int(kl)]
	r = r[w+int(kl):]
	if binary.BigEndian.Uint16(key) != 0 {
		return 0, nil, false // a key version we do not know
	}
	typ = int16(binary.BigEndian.Uint16(key[2:]))
	vl, w := binary.Varint(r)
	switch {
	case w <= 0 || vl < -1 || vl > int64(len(r)-w):
		return 0, nil, false
	case vl >= 0:
		value = r[w : w+int(vl)]
		r = r[w+int(vl):]
	default:
		r = r[w:]
	}
	hc, w := binary.Varint(r)
	if w <= 0 || hc != 0 || len(r) != w {
		return 0, nil, false
	}
	return typ, value, true
}
