package protocol

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// buildBatch encodes a RecordBatch v2 with n uncompressed records using kmsg
// and sets its length and CRC.
func buildBatch(t testing.TB, n int, attrs int16, baseTs int64) []byte {
	t.Helper()
	var recs []byte
	for i := range n {
		r := kmsg.Record{TimestampDelta64: int64(i * 10), OffsetDelta: int32(i), Value: []byte{byte(i), 1, 2, 3}}
		body := r.AppendTo(nil)[1:] // Length 0 encodes as one byte
		r.Length = int32(len(body))
		recs = r.AppendTo(recs)
	}
	b := (&kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: int32(n - 1),
		FirstTimestamp: baseTs, MaxTimestamp: baseTs + int64(n-1)*10, ProducerID: 7, ProducerEpoch: 3,
		FirstSequence: 11, NumRecords: int32(n), Records: recs,
	}).AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	SetBatchCRC(b)
	return b
}

func TestParseBatchHeader(t *testing.T) {
	t.Parallel()
	b := buildBatch(t, 3, AttrTransactional|int16(CompressionNone), 1000)
	h, err := ParseBatchHeader(b)
	require.NoError(t, err)
	require.NoError(t, h.Validate())
	require.Equal(t, int64(len(b)), h.Size())
	require.Equal(t, int8(2), h.Magic)
	require.Equal(t, int32(-1), h.PartitionLeaderEpoch)
	require.Equal(t, int32(2), h.LastOffsetDelta)
	require.Equal(t, int32(3), h.RecordCount)
	require.Equal(t, int64(1000), h.BaseTimestamp)
	require.Equal(t, int64(1020), h.MaxTimestamp)
	require.Equal(t, int64(7), h.ProducerID)
	require.Equal(t, int16(3), h.ProducerEpoch)
	require.Equal(t, int32(11), h.BaseSequence)
	require.Equal(t, int32(13), h.LastSequence())
	require.True(t, h.IsTransactional())
	require.False(t, h.IsControl())
	require.False(t, h.IsLogAppendTime())
	require.Equal(t, CompressionNone, h.Compression())
	require.Equal(t, crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)), h.CRC)
	require.True(t, VerifyBatchCRC(b))

	for n := range BatchHeaderSize {
		_, err := ParseBatchHeader(b[:n])
		require.ErrorIs(t, err, ErrShortBatch)
	}
}

func TestBaseOffsetNotCoveredByCRC(t *testing.T) {
	t.Parallel()
	b := buildBatch(t, 2, 0, 5)
	SetBaseOffset(b, 123456789)
	SetPartitionLeaderEpoch(b, 9)
	require.True(t, VerifyBatchCRC(b))
	h, err := ParseBatchHeader(b)
	require.NoError(t, err)
	require.Equal(t, int64(123456789), h.BaseOffset)
	require.Equal(t, int64(123456790), h.LastOffset())
	require.Equal(t, int32(9), h.PartitionLeaderEpoch)

	b[len(b)-1] ^= 1
	require.False(t, VerifyBatchCRC(b))
	require.False(t, VerifyBatchCRC(b[:len(b)-1]))
	SetBaseOffset(b[:4], 1) // too short: no-op, no panic
}

func TestSetLogAppendTime(t *testing.T) {
	t.Parallel()
	b := buildBatch(t, 2, int16(CompressionZstd), 5)
	SetLogAppendTime(b, 99)
	require.True(t, VerifyBatchCRC(b))
	h, err := ParseBatchHeader(b)
	require.NoError(t, err)
	require.True(t, h.IsLogAppendTime())
	require.Equal(t, CompressionZstd, h.Compression())
	require.Equal(t, int64(99), h.MaxTimestamp)
}

func TestAttributes(t *testing.T) {
	t.Parallel()
	require.Equal(t, CompressionLZ4, CompressionOf(0x3|AttrControl))
	require.True(t, IsControl(AttrControl))
	require.True(t, IsTransactional(AttrTransactional))
	require.True(t, IsLogAppendTime(AttrTimestampType))
	require.False(t, IsControl(AttrTransactional|AttrTimestampType|7))
}

func TestIncrementSequence(t *testing.T) {
	t.Parallel()
	require.Equal(t, int32(5), IncrementSequence(0, 5))
	require.Equal(t, int32(math.MaxInt32), IncrementSequence(math.MaxInt32-1, 1))
	require.Equal(t, int32(0), IncrementSequence(math.MaxInt32, 1))
	require.Equal(t, int32(2), IncrementSequence(math.MaxInt32-1, 4))
}

func TestSplitBatches(t *testing.T) {
	t.Parallel()
	a, b := buildBatch(t, 1, 0, 1), buildBatch(t, 4, 0, 2)
	all := append(append([]byte{}, a...), b...)
	got, err := SplitBatches(all)
	require.NoError(t, err)
	require.Equal(t, [][]byte{a, b}, got)

	got, err = SplitBatches(nil)
	require.NoError(t, err)
	require.Empty(t, got)

	_, err = SplitBatches(all[:len(all)-1])
	require.ErrorIs(t, err, ErrShortBatch)
	_, err = SplitBatches(append(append([]byte{}, all...), 0, 0, 0))
	require.ErrorIs(t, err, ErrShortBatch)

	bad := append([]byte{}, a...)
	binary.BigEndian.PutUint32(bad[8:], 48)
	_, err = SplitBatches(bad)
	require.ErrorIs(t, err, ErrBatchLength)

	bad = append([]byte{}, a...)
	bad[16] = 1
	_, err = SplitBatches(bad)
	require.ErrorIs(t, err, ErrBatchMagic)

	bad = append([]byte{}, a...)
	binary.BigEndian.PutUint32(bad[8:], math.MaxUint32) // negative length
	_, err = SplitBatches(bad)
	require.ErrorIs(t, err, ErrBatchLength)
}

func TestWalkRecords(t *testing.T) {
	t.Parallel()
	b := buildBatch(t, 4, 0, 100)
	var offs []int32
	var tss []int64
	require.NoError(t, WalkRecords(b, func(o int32, ts int64) bool {
		offs = append(offs, o)
		tss = append(tss, ts)
		return true
	}))
	require.Equal(t, []int32{0, 1, 2, 3}, offs)
	require.Equal(t, []int64{0, 10, 20, 30}, tss)

	n := 0
	require.NoError(t, WalkRecords(b, func(int32, int64) bool { n++; return n < 2 }))
	require.Equal(t, 2, n)

	require.ErrorIs(t, WalkRecords(buildBatch(t, 1, int16(CompressionGzip), 0), func(int32, int64) bool { return true }), ErrCompressedBatch)
	trunc := append([]byte{}, b...)
	trunc[BatchHeaderSize] = 0x7e // huge record length
	require.ErrorIs(t, WalkRecords(trunc, func(int32, int64) bool { return true }), ErrBadRecord)
}

func FuzzSplitBatches(f *testing.F) {
	f.Add(buildBatch(f, 1, 0, 0))
	f.Add(append(buildBatch(f, 3, 0, 0), buildBatch(f, 2, int16(CompressionSnappy), 5)...))
	f.Add(buildBatch(f, 2, 0, 0)[:40])
	f.Add([]byte{})
	f.Add(make([]byte, 61))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseBatchHeader(b)
		if err == nil {
			_ = h.Validate()
			_ = h.LastSequence()
		}
		_ = VerifyBatchCRC(b)
		_ = WalkRecords(b, func(int32, int64) bool { return true })
		_ = ValidateRecords(b)
		batches, err := SplitBatches(b)
		if err != nil {
			return
		}
		total := 0
		for _, batch := range batches {
			h, err := ParseBatchHeader(batch)
			require.NoError(t, err)
			require.NoError(t, h.Validate())
			require.Equal(t, int64(len(batch)), h.Size())
			total += len(batch)
		}
		require.Equal(t, len(b), total)
	})
}

func TestValidateRecords(t *testing.T) {
	t.Parallel()
	require.NoError(t, ValidateRecords(buildBatch(t, 3, 0, 1000)))

	// The header claims more or fewer records than the batch holds.
	withCount := func(n int32) []byte {
		b := buildBatch(t, 3, 0, 1000)
		binary.BigEndian.PutUint32(b[57:], uint32(n))
		binary.BigEndian.PutUint32(b[23:], uint32(n-1))
		SetBatchCRC(b)
		return b
	}
	require.ErrorIs(t, ValidateRecords(withCount(4)), ErrBadRecord)
	require.ErrorIs(t, ValidateRecords(withCount(2)), ErrBadRecord)

	// Offset deltas must be 0, 1, 2, ...
	var recs []byte
	for i := range 3 {
		r := kmsg.Record{OffsetDelta: int32(i * 2), Value: []byte("v")}
		body := r.AppendTo(nil)[1:]
		r.Length = int32(len(body))
		recs = r.AppendTo(recs)
	}
	b := (&kmsg.RecordBatch{Magic: 2, LastOffsetDelta: 2, NumRecords: 3, Records: recs}).AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	require.ErrorIs(t, ValidateRecords(b), ErrBadRecord)

	// Compressed batches are not inspected.
	require.NoError(t, ValidateRecords(buildBatch(t, 3, int16(CompressionGzip), 1000)))
}
