package log

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/protocol"
)

// holeyBatch encodes an idempotent batch spanning span offsets that holds
// only the records at the offset deltas keep (what the broker's dedup
// window appends).
func holeyBatch(span int, keep []int32, pid int64, seq int32) []byte {
	var recs []byte
	for _, d := range keep {
		r := kmsg.Record{OffsetDelta: d, Value: []byte{byte(d)}}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	b := (&kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(span - 1), FirstTimestamp: baseTime, MaxTimestamp: baseTime,
		ProducerID: pid, FirstSequence: seq, NumRecords: int32(len(keep)), Records: recs,
	}).AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	protocol.SetBatchCRC(b)
	return b
}

// TestAppendCompacted: batches with fewer records than their span (even
// none) are refused by Append, accepted by AppendCompacted with the
// producer's sequence intact, and survive a crash and recovery.
func TestAppendCompacted(t *testing.T) {
	fs := NewMemFS()
	p := openMem(t, fs, DefaultConfig())
	holey := holeyBatch(4, []int32{0, 2}, 7, 0)
	_, err := p.Append(append([]byte(nil), holey...), testNow)
	require.ErrorIs(t, err, ErrInvalidRecord)
	_, err = p.AppendCompacted(holeyBatch(4, []int32{2, 2}, 7, 0), testNow)
	require.ErrorIs(t, err, ErrInvalidRecord, "offset deltas must increase")
	_, err = p.AppendCompacted(holeyBatch(4, []int32{4}, 7, 0), testNow)
	require.ErrorIs(t, err, ErrInvalidRecord, "offset delta past the span")

	res, err := p.AppendCompacted(holey, testNow)
	require.NoError(t, err)
	require.Equal(t, int64(3), res.LastOffset)
	res, err = p.AppendCompacted(holeyBatch(3, nil, 7, 4), testNow) // every record dropped
	require.NoError(t, err)
	require.Equal(t, int64(6), res.LastOffset)
	res = mustAppend(t, p, testBatch(2, 1, 7, 0, 7)) // the producer's next sequence
	require.Equal(t, int64(8), res.LastOffset)
	_, err = p.Sync()
	require.NoError(t, err)

	crashed := fs.CrashClone()
	p2 := openMem(t, crashed, DefaultConfig())
	require.Equal(t, int64(9), p2.LogEndOffset())
	p2.SetHighWatermark(9)
	hs, _ := readAll(t, p2, 0)
	require.Len(t, hs, 3)
	require.Equal(t, []int32{2, 0, 2}, []int32{hs[0].RecordCount, hs[1].RecordCount, hs[2].RecordCount})
}
