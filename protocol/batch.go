package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// RecordBatch v2 header layout (all integers big-endian):
//
//	offset size field
//	     0    8 baseOffset            (not covered by the CRC: the broker patches it)
//	     8    4 batchLength           (bytes after this field: total size = 12 + batchLength)
//	    12    4 partitionLeaderEpoch  (not covered by the CRC)
//	    16    1 magic                 (2)
//	    17    4 crc                   (CRC-32C, Castagnoli, over bytes 21 .. end of batch)
//	    21    2 attributes
//	    23    4 lastOffsetDelta
//	    27    8 baseTimestamp
//	    35    8 maxTimestamp
//	    43    8 producerId
//	    51    2 producerEpoch
//	    53    4 baseSequence
//	    57    4 recordCount
//	    61      records...
const (
	// BatchHeaderSize is the size of the fixed RecordBatch v2 header.
	BatchHeaderSize = 61
	// BatchLengthPrefix is the number of bytes before and including
	// batchLength (baseOffset + batchLength); a batch occupies
	// BatchLengthPrefix + batchLength bytes.
	BatchLengthPrefix = 12
	// MinBatchLength is the smallest valid batchLength: a header with no
	// records.
	MinBatchLength = BatchHeaderSize - BatchLengthPrefix

	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57
)

// Attribute bits of a RecordBatch v2.
const (
	AttrCompressionMask = 0x07
	AttrTimestampType   = 0x08 // set: LogAppendTime; clear: CreateTime
	AttrTransactional   = 0x10
	AttrControl         = 0x20
	// AttrDeleteHorizon: the batch's base timestamp is the delete
	// horizon the log cleaner set (KIP-534), after which its tombstones
	// may go; record timestamps stay base timestamp + delta.
	AttrDeleteHorizon = 0x40
)

// Compression is the codec in attribute bits 0-2.
type Compression int8

// Compression codecs.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

var (
	// ErrShortBatch is returned when fewer bytes are available than the
	// header or the declared batch length needs.
	ErrShortBatch = errors.New("protocol: record batch truncated")
	// ErrBatchLength is returned for a batchLength below MinBatchLength.
	ErrBatchLength = errors.New("protocol: invalid record batch length")
	// ErrBatchMagic is returned for a magic byte other than 2.
	ErrBatchMagic = errors.New("protocol: unsupported record batch magic")
	// ErrBadRecord is returned by WalkRecords for a record that does not
	// decode.
	ErrBadRecord = errors.New("protocol: malformed record")
	// ErrCompressedBatch is returned by WalkRecords for a compressed batch.
	ErrCompressedBatch = errors.New("protocol: batch is compressed")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader is the decoded fixed header of a RecordBatch v2.
type BatchHeader struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// ParseBatchHeader decodes the first BatchHeaderSize bytes of b. It only
// checks that enough bytes are present (ErrShortBatch); use Validate for
// the semantic checks. It never panics.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, fmt.Errorf("%w: %d header bytes", ErrShortBatch, len(b))
	}
	be := binary.BigEndian
	return BatchHeader{
		BaseOffset:           int64(be.Uint64(b[offBaseOffset:])),
		BatchLength:          int32(be.Uint32(b[offBatchLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  be.Uint32(b[offCRC:]),
		Attributes:           int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:        int64(be.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[offBaseSequence:])),
		RecordCount:          int32(be.Uint32(b[offRecordCount:])),
	}, nil
}

// Validate checks the framing fields: batchLength >= MinBatchLength
// (ErrBatchLength) and magic == 2 (ErrBatchMagic).
func (h *BatchHeader) Validate() error {
	if h.BatchLength < MinBatchLength {
		return fmt.Errorf("%w: %d", ErrBatchLength, h.BatchLength)
	}
	if h.Magic != 2 {
		return fmt.Errorf("%w: %d", ErrBatchMagic, h.Magic)
	}
	return nil
}

// Size is the number of bytes the batch occupies (12 + batchLength).
func (h *BatchHeader) Size() int64 { return BatchLengthPrefix + int64(h.BatchLength) }

// LastOffset is baseOffset + lastOffsetDelta.
func (h *BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// LastSequence is the sequence number of the last record, wrapping past
// MaxInt32 to 0 like Kafka's DefaultRecordBatch.incrementSequence.
func (h *BatchHeader) LastSequence() int32 {
	return IncrementSequence(h.BaseSequence, h.LastOffsetDelta)
}

// Compression returns the codec of attribute bits 0-2.
func (h *BatchHeader) Compression() Compression { return CompressionOf(h.Attributes) }

// IsLogAppendTime reports attribute bit 3 (timestamp type LogAppendTime).
func (h *BatchHeader) IsLogAppendTime() bool { return IsLogAppendTime(h.Attributes) }

// IsTransactional reports attribute bit 4.
func (h *BatchHeader) IsTransactional() bool { return IsTransactional(h.Attributes) }

// IsControl reports attribute bit 5.
func (h *BatchHeader) IsControl() bool { return IsControl(h.Attributes) }

// CompressionOf returns the codec encoded in attrs.
func CompressionOf(attrs int16) Compression { return Compression(attrs & AttrCompressionMask) }

// IsLogAppendTime reports whether attrs has the LogAppendTime bit.
func IsLogAppendTime(attrs int16) bool { return attrs&AttrTimestampType != 0 }

// IsTransactional reports whether attrs has the transactional bit.
func IsTransactional(attrs int16) bool { return attrs&AttrTransactional != 0 }

// IsControl reports whether attrs has the control bit.
func IsControl(attrs int16) bool { return attrs&AttrControl != 0 }

// IncrementSequence returns seq+delta, wrapping past MaxInt32 to 0.
func IncrementSequence(seq, delta int32) int32 {
	const maxInt32 = 1<<31 - 1
	if delta < 0 || seq < 0 {
		return seq + delta
	}
	if seq > maxInt32-delta {
		return delta - (maxInt32 - seq) - 1
	}
	return seq + delta
}

// BatchCRC computes the CRC-32C a batch should carry: over the bytes from
// attributes to the end of the batch (12 + batchLength). It returns
// ok=false when b is too short for its declared length.
func BatchCRC(b []byte) (crc uint32, ok bool) {
	if len(b) < BatchHeaderSize {
		return 0, false
	}
	n := int64(int32(binary.BigEndian.Uint32(b[offBatchLength:])))
	if n < MinBatchLength || BatchLengthPrefix+n > int64(len(b)) {
		return 0, false
	}
	return CRC32C(0, b[BatchCRCFrom:BatchLengthPrefix+n]), true
}

// VerifyBatchCRC reports whether the batch at the start of b is complete
// and its stored CRC matches its contents.
func VerifyBatchCRC(b []byte) bool {
	c, ok := BatchCRC(b)
	return ok && c == binary.BigEndian.Uint32(b[offCRC:])
}

// SetBatchCRC recomputes and stores the CRC of the batch at the start of b
// (after its attributes, timestamps, ... were patched). It does nothing if
// b is shorter than its declared length.
func SetBatchCRC(b []byte) {
	if c, ok := BatchCRC(b); ok {
		PutBatchCRC(b, c)
	}
}

// SetBaseOffset patches baseOffset in place. The CRC does not cover it.
// It does nothing if len(b) < 8.
func SetBaseOffset(b []byte, off int64) {
	if len(b) >= 8 {
		binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(off))
	}
}

// SetPartitionLeaderEpoch patches partitionLeaderEpoch in place (not
// covered by the CRC). It does nothing if b is too short.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	if len(b) >= offLeaderEpoch+4 {
		binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
	}
}

// SetLogAppendTime sets the timestamp type bit and maxTimestamp to ts and
// recomputes the CRC, as a broker does for message.timestamp.type =
// LogAppendTime. It does nothing if b is not a complete batch.
func SetLogAppendTime(b []byte, ts int64) {
	if _, ok := BatchCRC(b); !ok {
		return
	}
	be := binary.BigEndian
	attrs := be.Uint16(b[offAttributes:]) | AttrTimestampType
	be.PutUint16(b[offAttributes:], attrs)
	be.PutUint64(b[offMaxTimestamp:], uint64(ts))
	SetBatchCRC(b)
}

// NextBatch splits the first batch off b. It checks framing only: a header
// is present, batchLength >= MinBatchLength, magic == 2 and the whole batch
// is present (ErrShortBatch otherwise). It does not check the CRC.
func NextBatch(b []byte) (batch, rest []byte, err error) {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return nil, nil, err
	}
	if err := h.Validate(); err != nil {
		return nil, nil, err
	}
	size := h.Size()
	if size > int64(len(b)) {
		return nil, nil, fmt.Errorf("%w: batch of %d bytes, %d available", ErrShortBatch, size, len(b))
	}
	return b[:size:size], b[size:], nil
}

// SplitBatches splits a produce request's concatenated batches. The
// returned slices alias records. Trailing partial bytes, a batchLength
// below MinBatchLength or a magic other than 2 are errors. An empty input
// yields no batches and no error.
func SplitBatches(records []byte) ([][]byte, error) {
	var out [][]byte
	for len(records) > 0 {
		batch, rest, err := NextBatch(records)
		if err != nil {
			return nil, err
		}
		out = append(out, batch)
		records = rest
	}
	return out, nil
}

// WalkRecords calls fn with each record's offsetDelta and timestampDelta
// in an uncompressed batch, stopping early when fn returns false. It
// returns ErrCompressedBatch for a compressed batch and ErrBadRecord for a
// record that does not decode; it never panics.
func WalkRecords(batch []byte, fn func(offsetDelta int32, timestampDelta int64) bool) error {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return err
	}
	if h.Compression() != CompressionNone {
		return ErrCompressedBatch
	}
	size := h.Size()
	if h.BatchLength < MinBatchLength || size > int64(len(batch)) {
		return fmt.Errorf("%w: batch length %d", ErrShortBatch, h.BatchLength)
	}
	b := batch[BatchHeaderSize:size]
	for i := int32(0); i < h.RecordCount && len(b) > 0; i++ {
		length, n := binary.Varint(b)
		if n <= 0 || length < 0 || length > int64(len(b)-n) {
			return fmt.Errorf("%w: record %d length", ErrBadRecord, i)
		}
		rec := b[n : n+int(length)]
		b = b[n+int(length):]
		if len(rec) < 1 {
			return fmt.Errorf("%w: record %d empty", ErrBadRecord, i)
		}
		rec = rec[1:] // attributes
		tsDelta, n := binary.Varint(rec)
		if n <= 0 {
			return fmt.Errorf("%w: record %d timestamp", ErrBadRecord, i)
		}
		rec = rec[n:]
		offDelta, n := binary.Varint(rec)
		if n <= 0 || offDelta < 0 || offDelta > 1<<31-1 {
			return fmt.Errorf("%w: record %d offset delta", ErrBadRecord, i)
		}
		if !fn(int32(offDelta), tsDelta) {
			return nil
		}
	}
	return nil
}

// ValidateRecords checks the record framing of an uncompressed batch, as
// Kafka's LogValidator does on produce: exactly RecordCount records whose
// lengths cover the batch with no trailing bytes, with offset deltas 0,
// 1, 2, … in order. Compressed batches are not inspected (it returns nil):
// their records are only reachable by decompressing, which Shoal leaves to
// consumers.
func ValidateRecords(batch []byte) error { return validateRecords(batch, false) }

// ValidateCompactedRecords is ValidateRecords for a batch with holes (a
// broker-rewritten or compacted batch): RecordCount records, possibly
// fewer than the offset span, with strictly increasing offset deltas no
// larger than LastOffsetDelta.
func ValidateCompactedRecords(batch []byte) error { return validateRecords(batch, true) }

func validateRecords(batch []byte, holes bool) error {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return err
	}
	if h.Compression() != CompressionNone {
		return nil
	}
	size := h.Size()
	if h.BatchLength < MinBatchLength || size > int64(len(batch)) {
		return fmt.Errorf("%w: batch length %d", ErrShortBatch, h.BatchLength)
	}
	b := batch[BatchHeaderSize:size]
	var i int32
	prev := int64(-1)
	for ; len(b) > 0; i++ {
		if i >= h.RecordCount {
			return fmt.Errorf("%w: bytes after the %d records the header declares", ErrBadRecord, h.RecordCount)
		}
		length, n := binary.Varint(b)
		if n <= 0 || length < 1 || length > int64(len(b)-n) {
			return fmt.Errorf("%w: record %d length", ErrBadRecord, i)
		}
		rec := b[n+1 : n+int(length)] // past the attributes byte
		b = b[n+int(length):]
		_, n = binary.Varint(rec) // timestamp delta
		if n <= 0 {
			return fmt.Errorf("%w: record %d timestamp", ErrBadRecord, i)
		}
		offDelta, n := binary.Varint(rec[n:])
		switch {
		case n <= 0:
			return fmt.Errorf("%w: record %d offset delta", ErrBadRecord, i)
		case !holes && offDelta != int64(i),
			holes && (offDelta <= prev || offDelta > int64(h.LastOffsetDelta)):
			return fmt.Errorf("%w: record %d has offset delta %d", ErrBadRecord, i, offDelta)
		}
		prev = offDelta
	}
	if i != h.RecordCount {
		return fmt.Errorf("%w: %d records, the header declares %d", ErrBadRecord, i, h.RecordCount)
	}
	return nil
}

// RawRecord is one record of an uncompressed record section, as
// EachRawRecord finds it: its whole wire form (length prefix included),
// its offset delta, its key (nil when null) and whether its value is
// null (a tombstone).
type RawRecord struct {
	Wire           []byte
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte
	KeyNull        bool
	ValueNull      bool
}

// EachRawRecord calls fn for each of the n records in recs, the record
// section of a batch (after its 61-byte header, decompressed if the
// batch is compressed), stopping at fn's first error. It returns
// ErrBadRecord for a record that does not decode or bytes left over; it
// never panics. Record fields after the value (headers) are not decoded.
func EachRawRecord(recs []byte, n int32, fn func(r *RawRecord) error) error {
	var r RawRecord
	for i := int32(0); i < n; i++ {
		length, ln := binary.Varint(recs)
		if ln <= 0 || length < 1 || length > int64(len(recs)-ln) {
			return fmt.Errorf("%w: record %d length", ErrBadRecord, i)
		}
		wire := recs[:ln+int(length)]
		body := recs[ln+1 : ln+int(length)] // past the attributes byte
		recs = recs[ln+int(length):]
		tsDelta, k := binary.Varint(body)
		if k <= 0 {
			return fmt.Errorf("%w: record %d timestamp", ErrBadRecord, i)
		}
		body = body[k:]
		offDelta, k := binary.Varint(body)
		if k <= 0 || offDelta < 0 || offDelta > 1<<31-1 {
			return fmt.Errorf("%w: record %d offset delta", ErrBadRecord, i)
		}
		body = body[k:]
		keyLen, k := binary.Varint(body)
		if k <= 0 || keyLen < -1 || keyLen > int64(len(body)-k) {
			return fmt.Errorf("%w: record %d key", ErrBadRecord, i)
		}
		body = body[k:]
		r = RawRecord{Wire: wire, TimestampDelta: tsDelta, OffsetDelta: int32(offDelta)}
		if keyLen < 0 {
			r.KeyNull = true
		} else {
			r.Key = body[:keyLen]
			body = body[keyLen:]
		}
		valLen, k := binary.Varint(body)
		if k <= 0 || valLen < -1 || valLen > int64(len(body)-k) {
			return fmt.Errorf("%w: record %d value", ErrBadRecord, i)
		}
		r.ValueNull = valLen < 0
		if err := fn(&r); err != nil {
			return err
		}
	}
	if len(recs) != 0 {
		return fmt.Errorf("%w: %d bytes after the %d records", ErrBadRecord, len(recs), n)
	}
	return nil
}
