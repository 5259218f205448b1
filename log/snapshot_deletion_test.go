package log

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A roll's producer snapshot is written by the next Sync. If
// DeleteRecordsBefore or retention removed the segments below the roll
// before that Sync and the process died (SIGKILL: every file operation
// survives), Open loaded an older snapshot and replayed from the first
// remaining segment, skipping the batches in between: a committed
// transaction came back open, a producer's sequence went back. Deleting
// now writes the pending snapshot first. (Found by review.)
func TestSnapshotWrittenBeforeDeleteRecords(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	fsys := NewMemFS()
	p := openMem(t, fsys, cfg)
	mustAppend(t, p, makeBatch(batchSpec{n: 1, valueSize: 3000, pid: 100, seq: 0, attrs: 0x10})) // 0: txn opens
	mustAppend(t, p, testBatch(1, 3000, -1, 0, 0))                                               // 1: roll at 1
	_, err := p.Sync()                                                                           // writes snapshot 1 (txn open)
	require.NoError(t, err)
	_, err = p.WriteMarker(Marker{ProducerID: 100, Commit: true}, testNow) // 2: commit
	require.NoError(t, err)
	hw, err := p.Sync()
	require.NoError(t, err)
	p.SetHighWatermark(hw)
	mustAppend(t, p, testBatch(1, 3000, -1, 0, 0)) // 3: roll at 3, snapshot 3 pending
	_, err = p.DeleteRecordsBefore(3)
	require.NoError(t, err)
	require.Empty(t, p.OpenTransactions())

	// SIGKILL: reopen the same files without Close.
	q := openMem(t, fsys, cfg)
	require.Equal(t, int64(3), q.LogStartOffset())
	require.Empty(t, q.OpenTransactions(), "transaction committed at offset 2 is open again")
	require.Equal(t, q.HighWatermark(), q.LastStableOffset())
}

func TestSnapshotSequenceSurvivesDeleteRecords(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	fsys := NewMemFS()
	p := openMem(t, fsys, cfg)
	mustAppend(t, p, testBatch(1, 3000, 7, 0, 0)) // 0: seq 0
	mustAppend(t, p, testBatch(1, 3000, 7, 0, 1)) // 1: roll at 1, seq 1
	_, err := p.Sync()                            // snapshot 1: last seq 0
	require.NoError(t, err)
	mustAppend(t, p, testBatch(1, 3000, 7, 0, 2)) // 2: roll at 2 (pending)
	_, err = p.Sync()                             // snapshot 2: last seq 1
	require.NoError(t, err)
	mustAppend(t, p, testBatch(1, 3000, -1, 0, 0)) // 3: roll at 3 (pending)
	_, err = p.Sync()
	require.NoError(t, err)
	// now snapshots 2 and 3 on disk. Roll again without Sync:
	mustAppend(t, p, testBatch(1, 3000, 7, 0, 3)) // 4: roll at 4 (pending), seq 3
	hw, err := p.Sync()
	require.NoError(t, err)
	p.SetHighWatermark(hw)
	mustAppend(t, p, testBatch(1, 3000, -1, 0, 0)) // 5: roll at 5 (pending)
	_, err = p.DeleteRecordsBefore(5)
	require.NoError(t, err)
	q := openMem(t, fsys, cfg)
	_, err = q.Append(testBatch(1, 10, 7, 0, 4), testNow)
	require.NoError(t, err, "durable seq 3 at offset 4 forgotten")
}
func TestSnapshotWrittenBeforeRetention(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	cfg.RetentionMs = 1000
	fsys := NewMemFS()
	p := openMem(t, fsys, cfg)
	mustAppend(t, p, makeBatch(batchSpec{n: 1, valueSize: 3000, pid: 100, seq: 0, attrs: 0x10})) // 0
	mustAppend(t, p, testBatch(1, 3000, -1, 0, 0))                                               // 1: roll
	_, err := p.Sync()                                                                           // snapshot 1: txn open
	require.NoError(t, err)
	_, err = p.WriteMarker(Marker{ProducerID: 100, Commit: true}, testNow) // 2
	require.NoError(t, err)
	hw, err := p.Sync()
	require.NoError(t, err)
	p.SetHighWatermark(hw)
	n, err := p.EnforceRetention(testNow.Add(time.Hour)) // rolls at 3 and deletes everything
	require.NoError(t, err)
	require.Positive(t, n)
	q := openMem(t, fsys, cfg) // SIGKILL
	require.Equal(t, int64(3), q.LogStartOffset())
	require.Empty(t, q.OpenTransactions())
	require.Equal(t, int64(3), q.LastStableOffset())
}
