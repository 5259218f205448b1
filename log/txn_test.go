package log

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/protocol"
)

func txnBatch(n int, pid int64, epoch int16, seq int32) []byte {
	return makeBatch(batchSpec{n: n, valueSize: 10, pid: pid, epoch: epoch, seq: seq, attrs: protocol.AttrTransactional})
}

func TestControlBatchRoundTrip(t *testing.T) {
	for _, commit := range []bool{true, false} {
		b := encodeControlBatch(42, Marker{ProducerID: 7, ProducerEpoch: 3, CoordinatorEpoch: 9, Commit: commit}, baseTime)
		require.True(t, protocol.VerifyBatchCRC(b))
		h, err := protocol.ParseBatchHeader(b)
		require.NoError(t, err)
		require.NoError(t, h.Validate())
		require.True(t, h.IsControl())
		require.True(t, h.IsTransactional())
		require.NoError(t, protocol.ValidateRecords(b))
		typ, ok := controlType(b)
		require.True(t, ok)
		want := int16(controlAbort)
		if commit {
			want = controlCommit
		}
		require.Equal(t, want, typ)
		_, ce, ok := parseMarker(b)
		require.True(t, ok)
		require.Equal(t, int32(9), ce)
	}
	_, ok := controlType([]byte{1, 2, 3})
	require.False(t, ok)
	_, ce, _ := parseMarker([]byte{1, 2, 3})
	require.Equal(t, int32(-1), ce)
}

// TestReplayRestoresCoordinatorEpoch: after a crash the producer state
// is rebuilt from the batches, and a marker's coordinator epoch comes
// back with it (DescribeProducers reports it), as a clean close keeps it
// in the snapshot.
func TestReplayRestoresCoordinatorEpoch(t *testing.T) {
	fsys := NewMemFS()
	p := openMem(t, fsys, smallConfig())
	mustAppend(t, p, txnBatch(2, 100, 0, 0))
	_, err := p.WriteMarker(Marker{ProducerID: 100, ProducerEpoch: 0, CoordinatorEpoch: 7, Commit: true}, testNow)
	require.NoError(t, err)
	_, err = p.Sync()
	require.NoError(t, err)
	byID := func(p *Partition) ProducerInfo {
		t.Helper()
		for _, pi := range p.Producers() {
			if pi.ProducerID == 100 {
				return pi
			}
		}
		t.Fatal("producer 100 not found")
		return ProducerInfo{}
	}
	require.Equal(t, int32(7), byID(p).CoordinatorEpoch)
	crashed := fsys.CrashClone()
	require.NoError(t, p.Close())
	p = openMem(t, fsys, smallConfig())
	require.Equal(t, int32(7), byID(p).CoordinatorEpoch, "clean close")
	require.NoError(t, p.Close())
	p = openMem(t, crashed, smallConfig())
	defer p.Close()
	pi := byID(p)
	require.Equal(t, int32(7), pi.CoordinatorEpoch, "replayed")
	require.Equal(t, int64(-1), pi.CurrentTxnStartOffset)
}

// TestTransactionsLSOAndAbortedIndex walks two producers through a commit
// and an abort and checks the last stable offset, the aborted index, the
// producer checks, and that all of it survives a clean reopen and a crash.
func TestTransactionsLSOAndAbortedIndex(t *testing.T) {
	fsys := NewMemFS()
	p := openMem(t, fsys, smallConfig())
	mustAppend(t, p, testBatch(2, 10, -1, 0, 0)) // 0-1 plain
	require.Equal(t, int64(2), p.LastStableOffset())

	mustAppend(t, p, txnBatch(3, 100, 0, 0)) // 2-4 producer 100
	mustAppend(t, p, txnBatch(2, 200, 0, 0)) // 5-6 producer 200
	mustAppend(t, p, txnBatch(1, 100, 0, 3)) // 7
	require.Equal(t, int64(8), p.HighWatermark())
	require.Equal(t, int64(2), p.LastStableOffset())
	require.Equal(t, map[int64]int64{100: 2, 200: 5}, p.OpenTransactions())

	// A plain batch from a producer inside a transaction is refused.
	_, err := p.Append(testBatch(1, 10, 100, 0, 4), testNow)
	require.ErrorIs(t, err, ErrInvalidTxnState)
	// Producers cannot write markers themselves.
	_, err = p.Append(encodeControlBatch(0, Marker{ProducerID: 100}, baseTime), testNow)
	require.ErrorIs(t, err, ErrInvalidRecord)

	res, err := p.WriteMarker(Marker{ProducerID: 100, ProducerEpoch: 0, Commit: true}, testNow) // 8
	require.NoError(t, err)
	require.Equal(t, int64(8), res.BaseOffset)
	p.SetHighWatermark(9)
	require.Equal(t, int64(5), p.LastStableOffset())
	res, err = p.WriteMarker(Marker{ProducerID: 200, ProducerEpoch: 1}, testNow) // 9: abort with a bumped epoch
	require.NoError(t, err)
	p.SetHighWatermark(res.LastOffset + 1)
	require.Equal(t, int64(10), p.LastStableOffset())
	require.Empty(t, p.OpenTransactions())
	want := []AbortedTxn{{ProducerID: 200, FirstOffset: 5, LastOffset: 9}}
	require.Equal(t, want, p.AbortedTransactions(0, 10))
	require.Nil(t, p.AbortedTransactions(10, 20))
	require.Nil(t, p.AbortedTransactions(0, 5))

	// The abort bumped producer 200's epoch: its zombie is fenced, in
	// batches and in markers.
	_, err = p.Append(txnBatch(1, 200, 0, 2), testNow)
	require.True(t, errors.Is(err, ErrInvalidProducerEpoch), "%v", err)
	_, err = p.WriteMarker(Marker{ProducerID: 200, ProducerEpoch: 0, Commit: true}, testNow)
	require.ErrorIs(t, err, ErrInvalidProducerEpoch)

	// An open transaction at the end, then many batches so segments roll
	// (snapshots carry the aborted index).
	mustAppend(t, p, txnBatch(1, 300, 0, 0)) // 10
	for i := range 60 {
		mustAppend(t, p, testBatch(1, 100, -1, 0, int32(i)))
	}
	_, err = p.Sync()
	require.NoError(t, err)
	check := func(p *Partition) {
		t.Helper()
		require.Equal(t, want, p.AbortedTransactions(0, 100))
		require.Equal(t, map[int64]int64{300: 10}, p.OpenTransactions())
		require.Equal(t, int64(10), p.LastStableOffset())
	}
	check(p)
	crashed := fsys.CrashClone()
	require.NoError(t, p.Close())
	p = openMem(t, fsys, smallConfig())
	check(p)
	require.NoError(t, p.Close())
	p = openMem(t, crashed, smallConfig())
	check(p)
	_, err = p.WriteMarker(Marker{ProducerID: 300, ProducerEpoch: 0}, testNow)
	require.NoError(t, err)
	p.SetHighWatermark(p.LogEndOffset())
	require.Equal(t, p.LogEndOffset(), p.LastStableOffset())
	require.Len(t, p.AbortedTransactions(0, 100), 2)
	require.NoError(t, p.Close())
}

// FuzzTxnDecoders: the marker type parser and the snapshot decoder never
// panic on hostile bytes, and a snapshot that decodes survives a
// re-encode unchanged.
func FuzzTxnDecoders(f *testing.F) {
	f.Add(encodeControlBatch(5, Marker{ProducerID: 1, ProducerEpoch: 2, Commit: true}, baseTime))
	f.Add(encodeControlBatch(0, Marker{ProducerID: 9}, baseTime))
	f.Add(encodeSnapshot(10, []producerEntry{newProducerEntry(3, 1)}, []AbortedTxn{{ProducerID: 3, FirstOffset: 1, LastOffset: 4}}))
	f.Add(encodeSnapshot(0, nil, nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = parseMarker(b)
		if off, entries, aborted, ok := decodeSnapshot(b); ok {
			off2, entries2, aborted2, ok2 := decodeSnapshot(encodeSnapshot(off, entries, aborted))
			require.True(t, ok2)
			require.Equal(t, off, off2)
			require.Equal(t, entries, entries2)
			require.Equal(t, len(aborted), len(aborted2))
		}
	})
}
