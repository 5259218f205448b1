package log

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Bugs found by the replica tests (replica_model_test.go,
// replica_truncate_test.go), each reduced to a deterministic
// reproduction. They fail until the bug is fixed.

// appendRep writes batch b at the log end with AppendReplicated.
func appendRep(t *testing.T, p *Partition, b []byte) []byte {
	t.Helper()
	b = withOffset(b, p.LogEndOffset())
	_, err := p.AppendReplicated(b, testNow)
	require.NoError(t, err)
	return b
}

// TestBugOrdinalsShiftWhenOpenDropsFirstSegment: when the first segment
// ends exactly at the log start (DeleteRecordsBefore the log end keeps
// the active segment; TruncateFrom the log start inside the first
// segment leaves it ending there), the running partition keeps it as its
// first segment and writes its base ordinal into the checkpoint. After a
// roll, the next Open deletes it as "wholly below the log start" (the
// interrupted-deletion rule in load) and gives the checkpoint's first
// ordinal to the next segment: every batch is renumbered, by the number
// of batches of the dropped segment. For a raft replica the entry
// indexes of its whole log change.
func TestRegressionOrdinalsShiftWhenOpenDropsFirstSegment(t *testing.T) {
	t.Run("DeleteRecordsBefore the log end", func(t *testing.T) {
		fsys := NewMemFS()
		cfg := replicaCfg()
		p := openMem(t, fsys, cfg)
		appendRep(t, p, testBatch(1, 3000, -1, 0, 0)) // batch 1, offset 0, segment 0
		appendRep(t, p, testBatch(1, 3000, -1, 0, 0)) // batch 2, offset 1, segment 1
		_, err := p.Sync()
		require.NoError(t, err)
		p.SetHighWatermark(2)
		_, err = p.DeleteRecordsBefore(2) // segment 0 goes; segment 1, active, ends at the log start
		require.NoError(t, err)
		require.Equal(t, int64(2), p.FirstOrdinal())
		b3 := appendRep(t, p, testBatch(1, 3000, -1, 0, 0)) // batch 3, offset 2: rolls
		_, err = p.Sync()
		require.NoError(t, err)
		require.Equal(t, int64(4), p.NextOrdinal())
		require.NoError(t, p.Close())

		p = openMem(t, fsys, cfg)
		defer p.Close()
		require.Equal(t, int64(4), p.NextOrdinal(), "reopening renumbered the batches")
		off, err := p.OrdinalOffset(3)
		require.NoError(t, err)
		require.Equal(t, int64(2), off)
		got, _, err := p.ReadOrdinals(nil, 3, 4, 1<<20)
		require.NoError(t, err)
		require.Equal(t, b3, got)
	})
	t.Run("TruncateFrom the log start", func(t *testing.T) {
		fsys := NewMemFS()
		cfg := replicaCfg()
		p := openMem(t, fsys, cfg)
		appendRep(t, p, testBatch(1, 2000, -1, 0, 0)) // batch 1, offset 0
		appendRep(t, p, testBatch(1, 1000, -1, 0, 0)) // batch 2, offset 1
		appendRep(t, p, testBatch(1, 500, -1, 0, 0))  // batch 3, offset 2, all in segment 0
		require.Len(t, p.segs, 1)
		_, err := p.Sync()
		require.NoError(t, err)
		p.SetHighWatermark(2)
		_, err = p.DeleteRecordsBefore(2)
		require.NoError(t, err)
		require.NoError(t, p.Close())

		p = openMem(t, fsys, cfg) // the HW opens at the log start, 2
		require.NoError(t, p.TruncateFrom(3))
		b3 := appendRep(t, p, testBatch(1, 3000, -1, 0, 0)) // the new batch 3, offset 2: rolls
		require.Len(t, p.segs, 2)
		require.Equal(t, int64(4), p.NextOrdinal())
		require.NoError(t, p.Close())

		p = openMem(t, fsys, cfg)
		defer p.Close()
		require.Equal(t, int64(4), p.NextOrdinal(), "reopening renumbered the batches")
		off, err := p.OrdinalOffset(3)
		require.NoError(t, err)
		require.Equal(t, int64(2), off)
		got, _, err := p.ReadOrdinals(nil, 3, 4, 1<<20)
		require.NoError(t, err)
		require.Equal(t, b3, got)
	})
}

// TestBugStaleSnapshotBelowFirstSegment: loadProducers takes the newest
// snapshot at or below the log end even when it lies below the first
// segment, and replays from the first segment on (from = max(snapshot,
// first base)): the batches between the snapshot and the first segment
// are skipped, and the state is a mix of an old snapshot and later
// batches. After retention and a TruncateFrom that removed the newer
// snapshots (or a crash that lost the tail a newer snapshot described),
// an idempotent producer's sequence goes back, and its next batch is
// refused as out of order (the replica, once leader, wedges the
// producer). A correct state is either the whole history (sequence 1)
// or none of the producer (rebuilt from the log: any sequence accepted).
func TestRegressionStaleSnapshotBelowFirstSegment(t *testing.T) {
	t.Run("TruncateFrom", func(t *testing.T) {
		cfg := replicaCfg()
		p := openMem(t, NewMemFS(), cfg)
		defer p.Close()
		for i := range 4 { // producer 7, sequences 0..3, one batch per segment
			appendRep(t, p, testBatch(1, 3000, 7, 0, int32(i)))
			if i == 1 || i == 3 {
				_, err := p.Sync() // writes the snapshots at 1 and then at 3
				require.NoError(t, err)
			}
		}
		require.Equal(t, []int64{1, 3}, p.snapshots)
		p.SetHighWatermark(2)
		_, err := p.DeleteRecordsBefore(2) // the first segment starts at 2
		require.NoError(t, err)
		require.NoError(t, p.TruncateFrom(3)) // cut at offset 2: the snapshot at 3 goes
		_, err = p.Prepare(testBatch(1, 10, 7, 0, 2), testNow)
		require.NoError(t, err, "producer 7's state came from the snapshot at 1 (sequence 0), skipping its batch at 1: %+v", p.Producers())
	})
	t.Run("crash", func(t *testing.T) {
		cfg := replicaCfg()
		fsys := NewMemFS()
		p := openMem(t, fsys, cfg)
		appendRep(t, p, testBatch(1, 3000, 7, 0, 0)) // offset 0
		appendRep(t, p, testBatch(1, 3000, 7, 0, 1)) // offset 1, rolls
		_, err := p.Sync()                           // writes the snapshot at 1
		require.NoError(t, err)
		appendRep(t, p, testBatch(1, 3000, 7, 0, 2)) // offset 2, rolls, not synced
		appendRep(t, p, testBatch(1, 3000, 7, 0, 3)) // offset 3, rolls, not synced
		p.SetHighWatermark(2)
		_, err = p.DeleteRecordsBefore(2) // writes the pending snapshot at 3
		require.NoError(t, err)
		crashed := fsys.CrashClone()
		abandon(p)
		p = openMem(t, crashed, cfg) // the log ends at 2; the snapshot at 3 is gone, the one at 1 is used
		defer p.Close()
		require.Equal(t, int64(2), p.LogEndOffset())
		_, err = p.Prepare(testBatch(1, 10, 7, 0, 2), testNow)
		require.NoError(t, err, "producer 7's state came from the snapshot at 1 (sequence 0), skipping its batch at 1: %+v", p.Producers())
	})
}

// TestBugSnapshotAboveLostTailResurrects: Open deletes the producer
// snapshots above the recovered log end (a crash lost the tail they
// describe, or interrupted a TruncateFrom) but does not sync the
// directory afterwards when it has no checkpoint to rewrite, and with
// CheckpointIntervalMs < 0 nothing syncs it until the next roll. The log
// then grows past the snapshot's offset with other batches; after
// another crash the deleted snapshot is back, is loaded, and brings the
// lost batches' producer state with it: a producer's retry of a batch
// that was never written (never acknowledged) is answered as a
// duplicate, at the offset of another producer's batch: its records are
// lost.
func TestRegressionSnapshotAboveLostTailResurrects(t *testing.T) {
	t.Run("after TruncateFrom", func(t *testing.T) {
		cfg := replicaCfg()
		cfg.CheckpointIntervalMs = -1
		fsys := NewMemFS()
		p := openMem(t, fsys, cfg)
		appendRep(t, p, testBatch(1, 3000, 7, 0, 0)) // offset 0
		appendRep(t, p, testBatch(1, 3000, 7, 0, 1)) // offset 1, rolls
		appendRep(t, p, testBatch(1, 3000, 9, 0, 0)) // offset 2, rolls
		_, err := p.Sync()                           // writes the snapshot at 2: producer 7 at sequence 1
		require.NoError(t, err)
		p.SetHighWatermark(1)
		// TruncateFrom(2) (offset 1) crashes before its last directory sync
		// (the third: the checkpoint's, the snapshots' deletion's, then
		// the segments'): the truncation of segment 1 is durable, the
		// deletion of segment 2 is not.
		syncDirs := 0
		fsys.SetErrorHook(func(op Op, name string) error {
			if op == OpSyncDir {
				syncDirs++
			}
			if syncDirs >= 3 {
				return errCrashed
			}
			return nil
		})
		require.ErrorIs(t, p.TruncateFrom(2), errCrashed)
		fsys.SetErrorHook(nil)
		crashed := fsys.CrashClone()
		abandon(p)
		p = openMem(t, crashed, cfg)
		require.Equal(t, int64(1), p.LogEndOffset())
		require.Equal(t, int32(0), p.Producers()[0].LastSequence)
		// The new leader's batches, from producer 8, synced; another crash.
		appendRep(t, p, testBatch(1, 10, 8, 0, 0)) // offset 1
		appendRep(t, p, testBatch(1, 10, 8, 0, 1)) // offset 2
		_, err = p.Sync()
		require.NoError(t, err)
		crashed = crashed.CrashClone()
		abandon(p)
		p = openMem(t, crashed, cfg)
		defer p.Close()
		require.Equal(t, int64(3), p.LogEndOffset())
		// Producer 7 retries its batch at sequence 1, which the log does not have.
		res, err := p.Prepare(testBatch(1, 3000, 7, 0, 1), testNow)
		require.NoError(t, err)
		require.False(t, res.Duplicate, "the retry is taken for the truncated batch, at offset %d (producer 8's); producers %+v",
			res.BaseOffset, p.Producers())
	})
	t.Run("after DeleteRecordsBefore", func(t *testing.T) {
		cfg := replicaCfg()
		cfg.CheckpointIntervalMs = -1
		fsys := NewMemFS()
		p := openMem(t, fsys, cfg)
		appendRep(t, p, testBatch(1, 3000, 7, 0, 0)) // offset 0
		appendRep(t, p, testBatch(1, 3000, 7, 0, 1)) // offset 1, rolls
		_, err := p.Sync()
		require.NoError(t, err)
		appendRep(t, p, testBatch(1, 3000, 7, 0, 2)) // offset 2, rolls, not synced
		appendRep(t, p, testBatch(1, 3000, 7, 0, 3)) // offset 3, rolls, not synced
		p.SetHighWatermark(2)
		// Writes the pending snapshot at 3 (producer 7 at sequence 2)
		// although the batches below it are not synced.
		_, err = p.DeleteRecordsBefore(2)
		require.NoError(t, err)
		crashed := fsys.CrashClone()
		abandon(p)
		p = openMem(t, crashed, cfg) // the log ends at 2: the snapshot at 3 is deleted, not durably
		require.Equal(t, int64(2), p.LogEndOffset())
		appendRep(t, p, testBatch(1, 10, 8, 0, 0)) // offset 2
		appendRep(t, p, testBatch(1, 10, 8, 0, 1)) // offset 3
		_, err = p.Sync()
		require.NoError(t, err)
		crashed = crashed.CrashClone()
		abandon(p)
		p = openMem(t, crashed, cfg)
		defer p.Close()
		require.Equal(t, int64(4), p.LogEndOffset())
		// Producer 7 retries its batch at sequence 2, never acknowledged (it was not synced) and lost.
		res, err := p.Prepare(testBatch(1, 3000, 7, 0, 2), testNow)
		require.NoError(t, err)
		require.False(t, res.Duplicate, "the retry is taken for the lost batch, at offset %d (producer 8's); producers %+v",
			res.BaseOffset, p.Producers())
	})
}

// TestBugOrdinalOffsetAtNextOrdinalRace: writeLocked publishes the next
// ordinal (under the segment lock) before AppendReplicated and Append
// publish the log end offset (after the producer state), and
// OrdinalOffset answers ord == NextOrdinal with the log end offset. A
// reader in between gets the old log end, the base offset of batch
// ord-1, for ord: OrdinalOffset(NextOrdinal()) is one batch short.
func TestRegressionOrdinalOffsetAtNextOrdinalRace(t *testing.T) {
	cfg := replicaCfg()
	cfg.SegmentBytes = 1 << 30
	p := openMem(t, NewMemFS(), cfg)
	defer p.Close()
	var stop atomic.Bool
	var wrong atomic.Int64
	var example atomic.Value
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				n := p.NextOrdinal()
				off, err := p.OrdinalOffset(n)
				if err != nil {
					if !errors.Is(err, ErrOrdinalOutOfRange) {
						t.Errorf("OrdinalOffset(%d): %v", n, err)
					}
					continue
				}
				if off != n-1 { // batch n (1 record each) starts at n-1
					wrong.Add(1)
					example.CompareAndSwap(nil, [2]int64{n, off})
				}
			}
		}()
	}
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; wrong.Load() == 0 && time.Now().Before(deadline); i++ {
		appendRep(t, p, txnBatch(1, 5, 0, int32(i)))
	}
	stop.Store(true)
	wg.Wait()
	require.Zero(t, wrong.Load(), "OrdinalOffset(ord, off) = %v: the base offset of batch ord-1", example.Load())
}
