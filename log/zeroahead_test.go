package log

import (
	"bytes"
	randv2 "math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/protocol"
)

// zeroAheadConfig rolls every 64 KiB and writes up to 16 KiB of zeros
// ahead: syncs of less than 2 KiB are small.
func zeroAheadConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 64 << 10
	c.IndexIntervalBytes = 1024
	c.ZeroAheadBytes = 16 << 10
	return c
}

// segmentFiles returns the .log files of the test partition and their
// contents.
func segmentFiles(t *testing.T, fsys *MemFS, p *Partition) map[*segment][]byte {
	t.Helper()
	out := map[*segment][]byte{}
	p.segMu.RLock()
	defer p.segMu.RUnlock()
	for _, s := range p.segs {
		b, err := fsys.ReadFile(fileName(p.dir, s.base, logSuffix))
		require.NoError(t, err)
		out[s] = b
	}
	return out
}

// TestZeroAheadWritesCutsAndRecovers: small synced appends get zeros
// written ahead of them, never more than the segment, and only zeros;
// a sealed segment and a cleanly closed one are exactly their batches;
// large syncs write nothing ahead; a reopened log reads what was written.
func TestZeroAheadWritesCutsAndRecovers(t *testing.T) {
	fsys := NewMemFS()
	cfg := zeroAheadConfig()
	p := openMem(t, fsys, cfg)
	var written [][]byte
	sawAhead := false
	for i := range 900 {
		b := testBatch(1, 100, -1, 0, 0)
		mustAppend(t, p, b)
		written = append(written, b)
		_, err := p.Sync()
		require.NoError(t, err)
		for s, data := range segmentFiles(t, fsys, p) {
			v := s.view()
			require.GreaterOrEqual(t, int64(len(data)), v.size, "append %d", i)
			require.LessOrEqual(t, int64(len(data)), max(v.size, cfg.SegmentBytes), "append %d: zeros beyond segment.bytes", i)
			require.True(t, bytes.Equal(data[v.size:], make([]byte, int64(len(data))-v.size)), "append %d: only zeros after the data", i)
			if s == p.active {
				sawAhead = sawAhead || int64(len(data)) > v.size
			} else {
				require.Equal(t, v.size, int64(len(data)), "append %d: sealed segment %d is its batches", i, s.base)
			}
		}
	}
	require.True(t, sawAhead, "small syncs write zeros ahead")
	require.Greater(t, len(p.segs), 2, "the appends cross segments")

	// Large syncs (~30 KiB each, > 2 KiB): once one has run, a new
	// segment gets no zeros ahead.
	large := func() {
		for range 20 {
			b := testBatch(10, 100, -1, 0, 0)
			mustAppend(t, p, b)
			written = append(written, b)
		}
		_, err := p.Sync()
		require.NoError(t, err)
	}
	large()
	require.False(t, p.smallSyncs.Load())
	p.appendMu.Lock()
	require.NoError(t, p.rollLocked(testNow))
	p.appendMu.Unlock()
	large()
	files := segmentFiles(t, fsys, p)
	require.Equal(t, p.active.view().size, int64(len(files[p.active])), "large syncs write no zeros ahead")

	require.NoError(t, p.Close())
	for s, data := range segmentFiles(t, fsys, p) {
		require.Equal(t, s.size, int64(len(data)), "after Close, segment %d is its batches", s.base)
	}
	q := openMem(t, fsys, cfg)
	defer q.Close()
	_, got := readAll(t, q, 0)
	require.Len(t, got, len(written))
	for i := range written {
		require.Equal(t, written[i][protocol.BatchHeaderSize:], got[i][protocol.BatchHeaderSize:], "batch %d", i)
	}
}

// TestZeroAheadCrashAtEveryStep loses power at every file operation of a
// run of small synced appends across several rolls, with DeleteRecords
// among them (torn writes over the zeros included): every synced batch
// comes back, the log is contiguous, appends go on after it, and Open
// never reports corruption.
func TestZeroAheadCrashAtEveryStep(t *testing.T) {
	cfg := zeroAheadConfig()
	cfg.SegmentBytes = 8 << 10
	cfg.ZeroAheadBytes = 4 << 10
	cfg.CheckpointIntervalMs = 1 // most Syncs move the recovery point
	const appends = 120
	run := func(p *Partition, synced *int64) error {
		for i := range appends {
			p.segMu.RLock()
			segs := len(p.segs)
			p.segMu.RUnlock()
			res, err := p.Append(testBatch(1, 90, -1, 0, 0), testNow)
			if err != nil {
				return err
			}
			p.segMu.RLock()
			rolled := len(p.segs) > segs
			p.segMu.RUnlock()
			if rolled || i%9 == 8 {
				// DeleteRecords writes the checkpoint (and syncs the
				// directory) between a roll and the Sync that would cut
				// the rolled segment's zeros durably.
				p.SetHighWatermark(res.LastOffset)
				if _, err := p.DeleteRecordsBefore(max(0, res.LastOffset-40)); err != nil {
					return err
				}
			}
			end, err := p.Sync()
			if err != nil {
				return err
			}
			*synced = end
		}
		return nil
	}
	steps := 0
	for n := 1; ; n++ {
		fsys := NewMemFS()
		p := openMem(t, fsys, cfg)
		fsys.SetCrashPoint(n, randv2.New(randv2.NewPCG(uint64(n), 7)))
		var synced int64
		err := run(p, &synced)
		crashed := fsys.Crashed()
		if crashed == nil {
			require.NoError(t, err)
			steps = n
			break
		}
		q, err := Open(crashed, "/data/topic-0", cfg, testLogger(t))
		require.NoError(t, err, "crash at step %d", n)
		require.GreaterOrEqual(t, q.LogEndOffset(), synced, "crash at step %d: synced batches lost", n)
		q.SetHighWatermark(q.LogEndOffset())
		hs, _ := readAll(t, q, q.LogStartOffset())
		requireContiguous(t, hs, q.LogStartOffset(), q.LogEndOffset())
		// Appends go on, and survive a restart.
		leo := q.LogEndOffset()
		mustAppend(t, q, testBatch(2, 90, -1, 0, 0))
		_, err = q.Sync()
		require.NoError(t, err)
		require.NoError(t, q.Close())
		r := openMem(t, crashed, cfg)
		require.Equal(t, leo+2, r.LogEndOffset(), "crash at step %d", n)
		require.NoError(t, r.Close())
	}
	require.Greater(t, steps, appends*2)
}
