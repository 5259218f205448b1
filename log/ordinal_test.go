package log

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/protocol"
)

// TestOrdinalsAcrossRollsAndReopen numbers batches from 1 across
// segments, finds each by ordinal, and keeps the numbering through a
// clean reopen, a crash and retention.
func TestOrdinalsAcrossRollsAndReopen(t *testing.T) {
	fsys := NewMemFS()
	p := openMem(t, fsys, smallConfig())
	require.Equal(t, int64(1), p.FirstOrdinal())
	require.Equal(t, int64(1), p.NextOrdinal())
	var offs []int64
	for i := range 60 {
		res := mustAppend(t, p, testBatch(1+i%3, 100, -1, 0, 0))
		offs = append(offs, res.BaseOffset)
	}
	require.Greater(t, len(p.segs), 3)
	check := func(p *Partition) {
		t.Helper()
		require.Equal(t, int64(61), p.NextOrdinal())
		for i, off := range offs {
			got, err := p.OrdinalOffset(int64(i + 1))
			require.NoError(t, err)
			require.Equal(t, off, got, "ordinal %d", i+1)
		}
		got, err := p.OrdinalOffset(61)
		require.NoError(t, err)
		require.Equal(t, p.LogEndOffset(), got)
		b, n, err := p.ReadOrdinals(nil, 5, 50, 1<<20)
		require.NoError(t, err)
		require.Equal(t, 45, n)
		bs, err := protocol.SplitBatches(b)
		require.NoError(t, err)
		require.Len(t, bs, 45)
		for j, batch := range bs {
			h, _ := protocol.ParseBatchHeader(batch)
			require.Equal(t, offs[4+j], h.BaseOffset)
		}
		// maxBytes stops early but returns at least one batch.
		_, n, err = p.ReadOrdinals(nil, 10, 20, 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		_, _, err = p.ReadOrdinals(nil, 10, 62, 1<<20)
		require.ErrorIs(t, err, ErrOrdinalOutOfRange)
	}
	check(p)
	crashed := fsys.CrashClone()
	require.NoError(t, p.Close())
	p = openMem(t, fsys, smallConfig())
	check(p)
	require.NoError(t, p.Close())
	// A crash before any Sync: whatever survived is numbered from 1 again.
	pc := openMem(t, crashed, smallConfig())
	require.LessOrEqual(t, pc.NextOrdinal(), int64(61))
	require.NoError(t, pc.Close())

	p = openMem(t, fsys, smallConfig())
	_, err := p.DeleteRecordsBefore(offs[30])
	require.NoError(t, err)
	first := p.FirstOrdinal()
	require.Greater(t, first, int64(1))
	require.LessOrEqual(t, first, int64(31))
	_, err = p.OrdinalOffset(first - 1)
	require.ErrorIs(t, err, ErrOrdinalOutOfRange)
	require.NoError(t, p.Close())
	p = openMem(t, fsys, smallConfig())
	require.Equal(t, first, p.FirstOrdinal())
	got, err := p.OrdinalOffset(31)
	require.NoError(t, err)
	require.Equal(t, offs[30], got)
	require.Equal(t, int64(61), p.NextOrdinal())
	require.NoError(t, p.Close())
}

// TestPrepareAppendReplicatedTruncate: a leader prepares, a follower
// writes the leader's bytes verbatim, a truncation drops a tail and
// rebuilds producer state so the producer's retry is accepted again.
func TestPrepareAppendReplicatedTruncate(t *testing.T) {
	leader := openMem(t, NewMemFS(), smallConfig())
	cfg := smallConfig()
	cfg.Replica = true
	ffs := NewMemFS()
	follower := openMem(t, ffs, cfg)
	var sent [][]byte
	for i := range 40 {
		b := testBatch(2, 80, 7, 0, int32(2*i))
		res, err := leader.Prepare(b, testNow)
		require.NoError(t, err)
		require.False(t, res.Duplicate)
		protocol.SetPartitionLeaderEpoch(b, 3)
		_, err = leader.AppendReplicated(b, testNow)
		require.NoError(t, err)
		_, err = follower.AppendReplicated(b, testNow)
		require.NoError(t, err)
		sent = append(sent, b)
	}
	// A retry of the last batch is a duplicate at the leader.
	res, err := leader.Prepare(testBatch(2, 80, 7, 0, 78), testNow)
	require.NoError(t, err)
	require.True(t, res.Duplicate)
	require.Equal(t, int64(78), res.BaseOffset)
	// A gap is refused.
	_, err = follower.AppendReplicated(withOffset(testBatch(1, 1, -1, 0, 0), 999), testNow)
	require.ErrorIs(t, err, ErrInvalidRecord)

	require.Equal(t, leader.NextOrdinal(), follower.NextOrdinal())
	a, _, err := leader.ReadOrdinals(nil, 1, 41, 1<<30)
	require.NoError(t, err)
	b, _, err := follower.ReadOrdinals(nil, 1, 41, 1<<30)
	require.NoError(t, err)
	require.Equal(t, a, b)

	_, err = follower.Sync()
	require.NoError(t, err)
	follower.SetHighWatermark(40) // batch 21 starts at offset 40
	require.ErrorIs(t, follower.TruncateFrom(20), ErrInvalidTruncation)
	require.NoError(t, follower.TruncateFrom(21))
	require.Equal(t, int64(21), follower.NextOrdinal())
	require.Equal(t, int64(40), follower.LogEndOffset())
	// The producer's state is back at sequence 39: batch 21 (seq 40) is new again.
	res, err = follower.Prepare(testBatch(2, 80, 7, 0, 40), testNow)
	require.NoError(t, err)
	require.False(t, res.Duplicate)
	require.Equal(t, int64(40), res.BaseOffset)
	_, err = follower.AppendReplicated(sent[20], testNow)
	require.NoError(t, err)

	// A crash after the truncation and one append: the log is batches 1..21.
	_, err = follower.Sync()
	require.NoError(t, err)
	crashed := ffs.CrashClone()
	reopened := openMem(t, crashed, cfg)
	require.Equal(t, int64(22), reopened.NextOrdinal())
	got, _, err := reopened.ReadOrdinals(nil, 1, 22, 1<<30)
	require.NoError(t, err)
	require.Equal(t, a[:len(got)], got)
	require.NoError(t, reopened.Close())
	require.NoError(t, follower.Close())
	require.NoError(t, leader.Close())
}
