package store

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/sharegroup"
)

// crashLog stops s's change log as a kill -9 would leave it: no final
// checkpoint, no segment removal (background workers stopped, files
// closed). badger itself is then closed by the caller (it has SyncWrites).
func crashLog(t *testing.T, s *Store) {
	t.Helper()
	l := s.log
	l.mu.Lock()
	l.mu.closed = true
	l.mu.Unlock()
	close(l.stop)
	l.workers.Wait()
	l.ckpt.Lock()
	defer l.ckpt.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sg := range append(append([]*segment{}, l.mu.sealed...), l.mu.cur, l.mu.spare) {
		if sg != nil {
			sg.f.Close()
		}
	}
}

// pin has member x hold offset 0 (acquisitions are not persisted): the
// SPSO stays 0, so replayed deltas of later ranges are not skipped as
// below it, and a stale one overwriting an acknowledged range is refused.
func pin(t *testing.T, p *sharegroup.Partition) {
	t.Helper()
	acq, _ := p.Acquire(at(1), "x", []sharegroup.LogBatch{{First: 0, Last: 0}}, 1, sharegroup.RecordLimit)
	require.NotEmpty(t, acq)
}

// TestChangeLogQuarantinesRecordsThatDoNotFold: a batch that badger mode
// refuses at prepare time (here: a snapshot then a delta of another state
// epoch, which the fold's Recover rejects) fails only its own write
// without a change log. With the change log it is durable before any fold,
// so the checkpoint sets that share-partition aside (loading it fails with
// ErrCorruptRecord until Delete) instead of failing on it forever: other
// share-partitions load, and the store opens again after a crash. Found
// by review: every checkpoint failed, and so did Open (a crash loop).
func TestChangeLogQuarantinesRecordsThatDoNotFold(t *testing.T) {
	for _, mode := range []string{"badger", "log"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			db := openDB(t, filepath.Join(dir, "db"))
			opts := Options{Prefix: []byte("sg/")}
			if mode == "log" {
				opts.LogDir = filepath.Join(dir, "log")
			}
			s, err := Open(db, opts)
			require.NoError(t, err)
			good, bad := Key{Group: "g", Partition: 1}, Key{Group: "g", Partition: 2}
			newPartitionAt(t, s, good)
			_, eff, err := sharegroup.New(sharegroup.DefaultConfig(), 1, 0)
			require.NoError(t, err)
			poison := append(eff.Records, sharegroup.Record{Kind: sharegroup.KindDelta, StateEpoch: 2, StartOffset: 0})
			werr := s.Write([]PartitionRecords{{Key: bad, Records: poison}})
			if mode == "badger" {
				require.ErrorIs(t, werr, sharegroup.ErrCorruptRecord)
			} else {
				require.NoError(t, werr, "durable in the log before any fold")
			}

			_, found, err := s.Load(good, sharegroup.DefaultConfig())
			require.NoError(t, err, "load of an unrelated share-partition")
			require.True(t, found)
			if mode == "log" {
				_, _, err = s.Load(bad, sharegroup.DefaultConfig())
				require.ErrorIs(t, err, sharegroup.ErrCorruptRecord, "set aside")
				crashLog(t, s)
			}
			require.NoError(t, db.Close())
			db = openDB(t, filepath.Join(dir, "db"))
			defer db.Close()
			s, err = Open(db, opts)
			require.NoError(t, err, "restart")
			defer s.Close()
			_, found, err = s.Load(good, sharegroup.DefaultConfig())
			require.NoError(t, err)
			require.True(t, found)
			if mode == "log" {
				_, _, err = s.Load(bad, sharegroup.DefaultConfig())
				require.ErrorIs(t, err, sharegroup.ErrCorruptRecord, "still set aside after a restart")
				require.NoError(t, s.Delete(bad))
				recs, err := s.LoadRecords(bad)
				require.NoError(t, err, "Delete clears the quarantine")
				require.Empty(t, recs)
			}
		})
	}
}

// TestChangeLogSkipsFramesBehindMark: badger's Commit can return an error
// after its entries are in the memtable (SyncWrites: the WAL sync fails
// after the writes went in; they are visible). The checkpoint then keeps
// the frames pending, and the next one must skip those before the stored
// watermark, not apply them a second time. Emulated: frames committed with
// applyFrames and left pending. Found by review.
func TestChangeLogSkipsFramesBehindMark(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, filepath.Join(dir, "db"))
	defer db.Close()
	s, err := Open(db, Options{Prefix: []byte("sg/"), LogDir: filepath.Join(dir, "log"), CheckpointBytes: 1 << 30})
	require.NoError(t, err)
	defer s.Close()
	k := Key{Group: "g", Partition: 1}
	p := newPartitionAt(t, s, k)
	pin(t, p)
	_, err = s.Keys("g") // checkpoints what is pending so far
	require.NoError(t, err)
	require.NoError(t, s.Write([]PartitionRecords{{Key: k, Records: ackRangeAs(t, p, 1, 10, sharegroup.AckRelease)}}))
	require.NoError(t, s.Write([]PartitionRecords{{Key: k, Records: ackRange(t, p, 1, 10)}}))

	// The commit that applies the frames "fails" after applying them.
	l := s.log
	l.ckpt.Lock()
	mark, err := s.readMark()
	require.NoError(t, err)
	l.mu.Lock()
	frames := l.mu.pending
	l.mu.Unlock()
	_, err = s.applyFrames(frames, &mark)
	require.NoError(t, err)
	l.ckpt.Unlock()

	q, found, err := s.Load(k, sharegroup.DefaultConfig())
	require.NoError(t, err, "frames behind the stored mark were applied a second time")
	require.True(t, found)
	require.Equal(t, p.Snapshot(), q.Snapshot())
}

// TestChangeLogBrokenLogRefusesDelete: write() could not unmake a failed
// frame (zeroing it or its sync failed): the frame may be whole on disk,
// to be replayed at the next start, and the log is broken. A Delete then
// must fail rather than succeed and be undone by that replay (found by
// review: the deleted share-partition came back). Emulated: the frame's
// bytes put where write() put them, and broken set.
func TestChangeLogBrokenLogRefusesDelete(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Prefix: []byte("sg/"), LogDir: filepath.Join(dir, "log")}
	db := openDB(t, filepath.Join(dir, "db"))
	s, err := Open(db, opts)
	require.NoError(t, err)
	k := Key{Group: "g", Partition: 1}
	p := newPartitionAt(t, s, k)

	payload, err := appendEntry([]byte{frameVersion}, PartitionRecords{Key: k, Records: ackRange(t, p, 0, 9)})
	require.NoError(t, err)
	l := s.log
	l.mu.Lock()
	_, err = l.mu.cur.f.WriteAt(appendFrame(nil, payload), l.mu.cur.off) // pwrite done, fdatasync failed
	require.NoError(t, err)
	l.mu.broken = errors.New("injected: zeroing the failed frame failed")
	l.mu.Unlock()

	require.Error(t, s.Delete(k), "a delete the next start could undo")
	crashLog(t, s)
	require.NoError(t, db.Close())

	db = openDB(t, filepath.Join(dir, "db"))
	defer db.Close()
	s, err = Open(db, opts)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Delete(k), "the restarted log is whole")
	recs, err := s.LoadRecords(k)
	require.NoError(t, err)
	require.Empty(t, recs)
}

// TestChangeLogBoundsFramesWhileCheckpointsFail: while checkpoints fail
// (here: a watermark badger cannot decode), frames wait in memory and in
// the log; past MaxUncheckpointedBytes writes are refused instead of
// letting both grow without end, and once a checkpoint works again
// (a reload checkpoints first) writes go on.
func TestChangeLogBoundsFramesWhileCheckpointsFail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := openDB(t, filepath.Join(dir, "db"))
	defer db.Close()
	const limit = 4096
	var bgErrs atomic.Int32
	s, err := Open(db, Options{Prefix: []byte("sg/"), LogDir: filepath.Join(dir, "log"), CheckpointBytes: 1,
		MaxUncheckpointedBytes: limit, BackgroundError: func(error) { bgErrs.Add(1) }})
	require.NoError(t, err)
	defer s.Close()
	k := Key{Group: "g", Partition: 1}
	p := newPartitionAt(t, s, k)

	s.log.ckpt.Lock() // no checkpoint in between
	good, err := s.readMark()
	require.NoError(t, err)
	require.NoError(t, db.Update(func(txn *badger.Txn) error { return txn.Set(s.markKey(), []byte("bad")) }))
	s.log.ckpt.Unlock()

	// One checkpoint fails first: until one has, nothing is known to
	// wait for failing checkpoints, and how many frames a loaded
	// machine accepts before the background checkpoint runs is timing.
	require.NoError(t, s.Write([]PartitionRecords{{Key: k, Records: ackRange(t, p, 0, 9)}}))
	require.Eventually(t, func() bool { return bgErrs.Load() > 0 }, 10*time.Second, time.Millisecond)
	var refused error
	next := int64(10)
	for ; next < 100_000 && refused == nil; next += 10 {
		refused = s.Write([]PartitionRecords{{Key: k, Records: ackRange(t, p, next, next+9)}})
	}
	require.ErrorIs(t, refused, sharegroup.ErrCorruptRecord, "refused, naming the checkpoints' failure")
	s.log.mu.Lock()
	pending := s.log.mu.bytes
	s.log.mu.Unlock()
	require.Less(t, pending, int64(2*limit), "frames stopped piling up near the bound")

	s.log.ckpt.Lock()
	require.NoError(t, db.Update(func(txn *badger.Txn) error { return txn.Set(s.markKey(), good.encode()) }))
	s.log.ckpt.Unlock()
	recs, err := s.LoadRecords(k) // checkpoints first: it works again
	require.NoError(t, err)
	q, err := sharegroup.Recover(sharegroup.DefaultConfig(), recs)
	require.NoError(t, err)
	require.NoError(t, s.Write([]PartitionRecords{{Key: k, Records: ackRange(t, q, next, next+9)}}))
}
