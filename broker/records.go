package broker

// Record-level access to RecordBatch v2 bytes, for the few broker
// features that must look inside batches (dead-letter writes read the
// source records, share_dlq.go; the dedup window inspects keys and
// headers, dedup.go). The produce and fetch paths never use it: they move
// batches verbatim.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/protocol"
)

// errBadBatch is a batch whose records do not decode.
var errBadBatch = errors.New("broker: malformed record batch")

// decompressor is franz-go's: gzip, snappy (plain and xerial-framed), lz4
// and zstd, safe for concurrent use.
var decompressor = kgo.DefaultDecompressor()

// batchRecords decodes one whole batch (header, then its records,
// decompressed if needed) and calls fn for each record with its absolute
// offset and timestamp. The record's slices alias the batch or the
// decompressed buffer and are valid only during fn. fn returns false to
// stop.
func batchRecords(batch []byte, fn func(offset, timestamp int64, r *kmsg.Record) bool) error {
	var rb kmsg.RecordBatch
	if err := rb.UnsafeReadFrom(batch); err != nil {
		return fmt.Errorf("%w: %v", errBadBatch, err)
	}
	raw := rb.Records
	if codec := protocol.CompressionOf(rb.Attributes); codec != protocol.CompressionNone {
		var err error
		raw, err = decompressor.Decompress(raw, kgo.CompressionCodecType(codec))
		if err != nil {
			return fmt.Errorf("%w: decompress: %v", errBadBatch, err)
		}
	}
	var r kmsg.Record
	for i := int32(0); i < rb.NumRecords; i++ {
		length, n := binary.Varint(raw)
		if n <= 0 || length < 0 || int64(len(raw)-n) < length {
			return fmt.Errorf("%w: record %d truncated", errBadBatch, i)
		}
		size := n + int(length)
		if err := r.UnsafeReadFrom(raw[:size]); err != nil {
			return fmt.Errorf("%w: record %d: %v", errBadBatch, i, err)
		}
		raw = raw[size:]
		if !fn(rb.FirstOffset+int64(r.OffsetDelta), rb.FirstTimestamp+r.TimestampDelta64, &r) {
			return nil
		}
	}
	return nil
}

// eachBatch calls fn for every whole batch in raw log bytes; a truncated
// tail is ignored (a read may end mid-batch).
func eachBatch(raw []byte, fn func(h *protocol.BatchHeader, batch []byte) error) error {
	for len(raw) > 0 {
		h, err := protocol.ParseBatchHeader(raw)
		if err != nil || h.Validate() != nil {
			return nil
		}
		size := h.Size()
		if size > int64(len(raw)) {
			return nil
		}
		if err := fn(&h, raw[:size]); err != nil {
			return err
		}
		raw = raw[size:]
	}
	return nil
}

// appendRecord appends r in wire form (length-prefixed) to dst.
func appendRecord(dst []byte, r *kmsg.Record) []byte {
	r.Length = 0
	start := len(dst)
	dst = r.AppendTo(dst) // a zero length varint is one byte
	body := len(dst) - start - 1
	var lb [binary.MaxVarintLen32]byte
	n := binary.PutVarint(lb[:], int64(body))
	if n == 1 {
		dst[start] = lb[0]
		return dst
	}
	dst = append(dst, lb[:n-1]...) // grow by n-1 bytes
	copy(dst[start+n:], dst[start+1:start+1+body])
	copy(dst[start:], lb[:n])
	return dst
}

// encodeBatch builds an uncompressed, non-idempotent RecordBatch v2 from
// records already in wire form (appendRecord), with base offset 0 (the log
// assigns offsets) and a valid CRC.
func encodeBatch(records []byte, count int32, firstTs, maxTs int64) []byte {
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      count - 1,
		FirstTimestamp:       firstTs,
		MaxTimestamp:         maxTs,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           count,
		Records:              records,
	}
	out := rb.AppendTo(make([]byte, 0, 61+len(records)))
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-protocol.BatchLengthPrefix))
	protocol.SetBatchCRC(out)
	return out
}
