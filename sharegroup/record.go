package sharegroup

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// RecordKind says how Apply treats a Record.
type RecordKind uint8

const (
	// KindSnapshot replaces the whole state (Kafka ShareSnapshot).
	KindSnapshot RecordKind = 1
	// KindDelta overwrites the listed ranges, then moves the SPSO (Kafka ShareUpdate).
	KindDelta RecordKind = 2
)

func (k RecordKind) String() string {
	switch k {
	case KindSnapshot:
		return "snapshot"
	case KindDelta:
		return "delta"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Record is one persisted state change of a share-partition. Records are
// produced in Effects, persisted in order by the owner and replayed with
// Apply (or Recover). A Record never mentions ACQUIRED: acquisitions and
// renewals are transient.
type Record struct {
	Kind RecordKind
	// StateEpoch is the share-partition state epoch the change belongs to
	// (bumped by Reset, e.g. on AlterShareGroupOffsets).
	StateEpoch int32
	// StartOffset is the SPSO after the change.
	StartOffset int64
	// DeliveryCompleteCount is the number of terminal records at or above
	// StartOffset after the change (KIP-1226 lag). Informational: Apply
	// recomputes it from the ranges.
	DeliveryCompleteCount int64
	// Batches are sorted, non-overlapping ranges with their new state
	// (never Acquired) and delivery count. In a snapshot, offsets in
	// [StartOffset, last batch] that no batch lists are Available with
	// count 0.
	Batches []StateBatch
}

// StateBatch is a range of offsets sharing one persisted state and count
// (Kafka PersisterStateBatch).
type StateBatch struct {
	First, Last   int64
	State         RecordState
	DeliveryCount int16
}

// validate checks the invariants every encoded, decoded or applied record
// must satisfy.
func (r *Record) validate() error {
	if r.Kind != KindSnapshot && r.Kind != KindDelta {
		return fmt.Errorf("%w: unknown kind %d", ErrCorruptRecord, r.Kind)
	}
	if r.StartOffset < 0 || r.DeliveryCompleteCount < 0 {
		return fmt.Errorf("%w: negative start offset or count", ErrCorruptRecord)
	}
	prev := int64(-1)
	for i, b := range r.Batches {
		switch {
		case b.First < 0 || b.First > b.Last:
			return fmt.Errorf("%w: batch %d range %d-%d", ErrCorruptRecord, i, b.First, b.Last)
		case i > 0 && b.First <= prev:
			return fmt.Errorf("%w: batch %d not ascending", ErrCorruptRecord, i)
		case !b.State.persistable():
			return fmt.Errorf("%w: batch %d state %v", ErrCorruptRecord, i, b.State)
		case b.DeliveryCount < 0:
			return fmt.Errorf("%w: batch %d delivery count %d", ErrCorruptRecord, i, b.DeliveryCount)
		}
		prev = b.Last
	}
	return nil
}

const recordVersion = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendBinary appends the encoding of r to b (encoding.BinaryAppender).
//
//	+---------+------+------------+-------------+----------+----------+-----------+--------+
//	| version | kind | stateEpoch | startOffset | complete | nBatches | batch ... | crc32c |
//	| 1 B = 1 | 1 B  | varint     | varint      | uvarint  | uvarint  |           | 4 B LE |
//	+---------+------+------------+-------------+----------+----------+-----------+--------+
//	batch: first (varint for the first batch, else uvarint gap = first-(prevLast+1)),
//	       span uvarint (last-first), state 1 B, deliveryCount uvarint
//
// The CRC-32C (Castagnoli) covers every preceding byte of the record.
func (r *Record) AppendBinary(b []byte) ([]byte, error) {
	if err := r.validate(); err != nil {
		return b, err
	}
	start := len(b)
	b = append(b, recordVersion, byte(r.Kind))
	b = binary.AppendVarint(b, int64(r.StateEpoch))
	b = binary.AppendVarint(b, r.StartOffset)
	b = binary.AppendUvarint(b, uint64(r.DeliveryCompleteCount))
	b = binary.AppendUvarint(b, uint64(len(r.Batches)))
	prev := int64(-1)
	for i, sb := range r.Batches {
		if i == 0 {
			b = binary.AppendVarint(b, sb.First)
		} else {
			b = binary.AppendUvarint(b, uint64(sb.First-prev-1))
		}
		b = binary.AppendUvarint(b, uint64(sb.Last-sb.First))
		b = append(b, byte(sb.State))
		b = binary.AppendUvarint(b, uint64(sb.DeliveryCount))
		prev = sb.Last
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli)), nil
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (r *Record) MarshalBinary() ([]byte, error) { return r.AppendBinary(nil) }

// recordReader is a sticky-bad reader: after the first failure every read
// returns zero and ok stays false, so callers check once at the end.
type recordReader struct {
	b  []byte
	ok bool
}

func (rd *recordReader) byte1() byte {
	if !rd.ok || len(rd.b) < 1 {
		rd.ok = false
		return 0
	}
	v := rd.b[0]
	rd.b = rd.b[1:]
	return v
}

func (rd *recordReader) uvarint() uint64 {
	if !rd.ok {
		return 0
	}
	v, n := binary.Uvarint(rd.b)
	if n <= 0 {
		rd.ok = false
		return 0
	}
	rd.b = rd.b[n:]
	return v
}

func (rd *recordReader) varint() int64 {
	if !rd.ok {
		return 0
	}
	v, n := binary.Varint(rd.b)
	if n <= 0 {
		rd.ok = false
		return 0
	}
	rd.b = rd.b[n:]
	return v
}

// minBatchBytes is the smallest encoding of one batch; it bounds the batch
// count a hostile length prefix can make us allocate.
const minBatchBytes = 4

// DecodeRecord decodes one record encoded by AppendBinary. It never panics
// and never allocates more than the input justifies; any defect returns an
// error wrapping ErrCorruptRecord. The result does not alias b.
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	if len(b) < 2+4 {
		return r, fmt.Errorf("%w: %d bytes is too short", ErrCorruptRecord, len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return r, fmt.Errorf("%w: checksum mismatch", ErrCorruptRecord)
	}
	if body[0] != recordVersion {
		return r, fmt.Errorf("%w: unknown version %d", ErrCorruptRecord, body[0])
	}
	rd := recordReader{b: body[1:], ok: true}
	r.Kind = RecordKind(rd.byte1())
	epoch := rd.varint()
	r.StartOffset = rd.varint()
	complete := rd.uvarint()
	n := rd.uvarint()
	if !rd.ok || epoch < math.MinInt32 || epoch > math.MaxInt32 || complete > math.MaxInt64 || n > uint64(len(rd.b)/minBatchBytes) {
		return Record{}, fmt.Errorf("%w: bad header", ErrCorruptRecord)
	}
	r.StateEpoch = int32(epoch)
	r.DeliveryCompleteCount = int64(complete)
	if n > 0 {
		r.Batches = make([]StateBatch, 0, n)
	}
	prev := int64(-1)
	for i := uint64(0); i < n; i++ {
		var first int64
		if i == 0 {
			first = rd.varint()
		} else {
			gap := rd.uvarint()
			if gap > uint64(math.MaxInt64-prev-1) {
				return Record{}, fmt.Errorf("%w: batch %d offset overflow", ErrCorruptRecord, i)
			}
			first = prev + 1 + int64(gap)
		}
		span := rd.uvarint()
		state := RecordState(rd.byte1())
		count := rd.uvarint()
		if !rd.ok || first < 0 || span > uint64(math.MaxInt64-first) || count > math.MaxInt16 {
			return Record{}, fmt.Errorf("%w: batch %d", ErrCorruptRecord, i)
		}
		sb := StateBatch{First: first, Last: first + int64(span), State: state, DeliveryCount: int16(count)}
		r.Batches = append(r.Batches, sb)
		prev = sb.Last
	}
	if len(rd.b) != 0 {
		return Record{}, fmt.Errorf("%w: %d trailing bytes", ErrCorruptRecord, len(rd.b))
	}
	if err := r.validate(); err != nil {
		return Record{}, err
	}
	return r, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (r *Record) UnmarshalBinary(b []byte) error {
	d, err := DecodeRecord(b)
	if err != nil {
		return err
	}
	*r = d
	return nil
}
