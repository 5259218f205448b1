package log

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/shoal-mq/shoal/protocol"
)

// baseTime is the record timestamp used by testBatch.
const baseTime = int64(1_700_000_000_000)

type batchSpec struct {
	n         int
	valueSize int
	pid       int64
	epoch     int16
	seq       int32
	ts        int64 // first record timestamp (0: baseTime)
	tsStep    int64 // timestamp delta between records
	attrs     int16
}

// makeBatch encodes a RecordBatch v2 with kmsg and sets its length and CRC.
func makeBatch(s batchSpec) []byte {
	if s.ts == 0 {
		s.ts = baseTime
	}
	var recs []byte
	value := make([]byte, s.valueSize)
	for i := range s.n {
		for j := range value {
			value[j] = byte(i + j)
		}
		r := kmsg.Record{TimestampDelta64: int64(i) * s.tsStep, OffsetDelta: int32(i), Value: value}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	seq := s.seq
	if s.pid < 0 {
		seq = -1
	}
	b := (&kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: s.attrs, LastOffsetDelta: int32(s.n - 1),
		FirstTimestamp: s.ts, MaxTimestamp: s.ts + int64(s.n-1)*s.tsStep, ProducerID: s.pid, ProducerEpoch: s.epoch,
		FirstSequence: seq, NumRecords: int32(s.n), Records: recs,
	}).AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	protocol.SetBatchCRC(b)
	return b
}

// testBatch builds a batch of n records of valueSize bytes; producerID -1
// makes a non-idempotent batch.
func testBatch(n, valueSize int, producerID int64, epoch int16, seq int32) []byte {
	return makeBatch(batchSpec{n: n, valueSize: valueSize, pid: producerID, epoch: epoch, seq: seq})
}

// smallConfig rolls segments every few KiB so tests cross segments.
func smallConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 4096
	c.IndexIntervalBytes = 256
	return c
}

func testLogger(t testing.TB) *zap.Logger {
	if testing.Verbose() {
		return zaptest.NewLogger(t)
	}
	return zap.NewNop()
}

func openMem(t testing.TB, fsys FS, cfg Config) *Partition {
	t.Helper()
	p, err := Open(fsys, "/data/topic-0", cfg, testLogger(t))
	require.NoError(t, err)
	return p
}

var testNow = time.UnixMilli(baseTime)

// mustAppend appends and advances the high watermark.
func mustAppend(t testing.TB, p *Partition, b []byte) AppendResult {
	t.Helper()
	res, err := p.Append(b, testNow)
	require.NoError(t, err)
	p.SetHighWatermark(res.LastOffset + 1)
	return res
}

// readAll reads every batch from offset to the high watermark, one Read at a
// time, and returns their headers and bytes.
func readAll(t testing.TB, p *Partition, from int64) ([]protocol.BatchHeader, [][]byte) {
	t.Helper()
	var hs []protocol.BatchHeader
	var bs [][]byte
	off := from
	for off < p.HighWatermark() {
		b, err := p.Read(off, p.HighWatermark(), 1<<20, true)
		require.NoError(t, err)
		require.NotEmpty(t, b, "read at %d", off)
		batches, err := protocol.SplitBatches(b)
		require.NoError(t, err)
		for _, batch := range batches {
			h, err := protocol.ParseBatchHeader(batch)
			require.NoError(t, err)
			require.True(t, protocol.VerifyBatchCRC(batch))
			hs = append(hs, h)
			bs = append(bs, batch)
			off = h.LastOffset() + 1
		}
	}
	return hs, bs
}

// requireContiguous checks that headers cover [from, to) without gaps.
func requireContiguous(t testing.TB, hs []protocol.BatchHeader, from, to int64) {
	t.Helper()
	next := from
	for _, h := range hs {
		if h.BaseOffset < next && h.LastOffset() >= next { // first batch may start before from
			next = h.BaseOffset
		}
		require.Equal(t, next, h.BaseOffset)
		next = h.LastOffset() + 1
	}
	require.Equal(t, to, next)
}
