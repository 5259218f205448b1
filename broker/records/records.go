package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/protocol"
)

// ErrBadBatch is a batch whose records do not decode.
var ErrBadBatch = errors.New("broker: malformed record batch")

// MaxDecompressed bounds what one batch may inflate to when the
// broker looks inside it (dedup on produce, dead-letter copies, message
// groups): a client's small compressed batch (a "zip bomb") must not make
// the broker allocate gigabytes. franz-go's own decompressor allows 2 GiB.
const MaxDecompressed = 256 << 20

// ErrTooLarge is a batch that would decompress past the limit.
var ErrTooLarge = errors.New("batch decompresses past the broker's limit")

// zstdDecoders serve concurrent DecodeAll calls, bounded, by limit.
var zstdDecoders sync.Map // int → *zstd.Decoder

// Decompress inflates a batch's records (Kafka's codecs: gzip, snappy
// plain or xerial-framed, lz4 frames, zstd), refusing to produce more than
// MaxDecompressed bytes.
func Decompress(src []byte, codec protocol.Compression) ([]byte, error) {
	return DecompressAppend(nil, src, codec, MaxDecompressed)
}

// DecompressAppend is Decompress appending to dst (limit bounds what it
// appends). What dst has spare is filled first: a caller inflating batch
// after batch into one buffer allocates only when a batch outgrows it.
// Allocating the output was most of the cost of inflating a batch: a
// fresh 1 MiB buffer is zeroed and faulted in page by page, and growing
// it from nothing (io.ReadAll) did that a dozen times (BenchmarkDecompress).
// Nothing of one call's input or output reaches another call's.
func DecompressAppend(dst, src []byte, codec protocol.Compression, limit int) ([]byte, error) {
	switch codec {
	case protocol.CompressionGzip:
		zr, _ := gzipReaders.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(bytes.NewReader(src))
		} else {
			err = zr.Reset(bytes.NewReader(src))
		}
		if err != nil {
			return nil, err
		}
		defer gzipReaders.Put(zr)
		return readAppend(dst, zr, limit)
	case protocol.CompressionSnappy:
		return unsnappyAppend(dst, src, limit)
	case protocol.CompressionLZ4:
		// A new reader per batch, never a pooled one: Reset keeps the
		// previous stream's history (the reader's dict), from which a
		// frame of linked blocks referring back before its own start
		// would decode another batch's bytes, maybe another topic's
		// (TestDecompressLZ4KeepsNoHistory).
		return readAppend(dst, lz4.NewReader(bytes.NewReader(src)), limit)
	case protocol.CompressionZstd:
		d, ok := zstdDecoders.Load(limit)
		if !ok {
			dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxMemory(uint64(limit)), zstd.WithDecoderMaxWindow(uint64(limit)))
			if err != nil {
				return nil, err
			}
			d, _ = zstdDecoders.LoadOrStore(limit, dec)
		}
		out, err := d.(*zstd.Decoder).DecodeAll(src, dst)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return nil, ErrTooLarge
		}
		return out, err
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

// gzipReaders keeps decompressors for reuse: each new one allocates its
// window, and Reset starts a stream with an empty one
// (TestDecompressGzipKeepsNoHistory).
var gzipReaders sync.Pool

// readAppend appends what r yields to dst, up to limit bytes (more is
// ErrTooLarge), growing dst as append does when full. Without a buffer
// to fill it is io.ReadAll, which allocates less for an output of
// unknown size.
func readAppend(dst []byte, r io.Reader, limit int) ([]byte, error) {
	if cap(dst) == 0 {
		out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
		if err != nil {
			return nil, err
		}
		if len(out) > limit {
			return nil, ErrTooLarge
		}
		return out, nil
	}
	start := len(dst)
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		// One byte past the limit tells a batch that is too large: r
		// is never asked for more.
		n, err := r.Read(dst[len(dst):min(cap(dst), start+limit+1)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > limit {
			return nil, ErrTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// xerialMagic starts the framing Java's snappy-java writes (and franz-go
// and librdkafka can): magic, version and compatible version, then blocks
// of a 4-byte big-endian length and a snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

func unsnappyAppend(dst, src []byte, limit int) ([]byte, error) {
	start := len(dst)
	block := func(b []byte) error {
		n, err := s2.DecodedLen(b)
		if err != nil {
			return err
		}
		if len(dst)-start+n > limit {
			return ErrTooLarge
		}
		at := len(dst)
		dst = slices.Grow(dst, n)[:at+n]
		_, err = s2.Decode(dst[at:], b)
		return err
	}
	if !bytes.HasPrefix(src, xerialMagic) {
		if err := block(src); err != nil {
			return nil, err
		}
		return dst, nil
	}
	if len(src) < 16 {
		return nil, errors.New("snappy: truncated xerial header")
	}
	for rest := src[16:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, errors.New("snappy: truncated xerial block length")
		}
		size := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(size) > uint64(len(rest)) {
			return nil, errors.New("snappy: truncated xerial block")
		}
		if err := block(rest[:size]); err != nil {
			return nil, err
		}
		rest = rest[size:]
	}
	return dst, nil
}

// EachRecord decodes one whole batch (header, then its records,
// decompressed if needed) and calls fn for each record with its absolute
// offset and timestamp, and the record's wire bytes. The record's slices
// and raw alias the batch or the decompressed buffer and are valid only
// during fn. fn returns false to stop.
func EachRecord(batch []byte, fn func(offset, timestamp int64, r *kmsg.Record, raw []byte) bool) error {
	var rb kmsg.RecordBatch
	if err := rb.UnsafeReadFrom(batch); err != nil {
		return fmt.Errorf("%w: %v", ErrBadBatch, err)
	}
	raw := rb.Records
	if codec := protocol.CompressionOf(rb.Attributes); codec != protocol.CompressionNone {
		var err error
		raw, err = Decompress(raw, codec)
		if err != nil {
			return fmt.Errorf("%w: decompress: %v", ErrBadBatch, err)
		}
	}
	var r kmsg.Record
	for i := int32(0); i < rb.NumRecords; i++ {
		length, n := binary.Varint(raw)
		if n <= 0 || length < 0 || int64(len(raw)-n) < length {
			return fmt.Errorf("%w: record %d truncated", ErrBadBatch, i)
		}
		size := n + int(length)
		if err := r.UnsafeReadFrom(raw[:size]); err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrBadBatch, i, err)
		}
		rec := raw[:size]
		raw = raw[size:]
		if !fn(rb.FirstOffset+int64(r.OffsetDelta), rb.FirstTimestamp+r.TimestampDelta64, &r, rec) {
			return nil
		}
	}
	return nil
}

// EachBatch calls fn for every whole batch in raw log bytes; a truncated
// tail is ignored (a read may end mid-batch).
func EachBatch(raw []byte, fn func(h *protocol.BatchHeader, batch []byte) error) error {
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

// AppendRecord appends r in wire form (length-prefixed) to dst.
func AppendRecord(dst []byte, r *kmsg.Record) []byte {
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

// EncodeBatch builds an uncompressed, non-idempotent RecordBatch v2 from
// records already in wire form (AppendRecord), with base offset 0 (the log
// assigns offsets) and a valid CRC.
func EncodeBatch(records []byte, count int32, firstTs, maxTs int64) []byte {
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
