package log

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/protocol"
)

const testDir = "/data/topic-0"

// appendN appends n random batches and returns them with offsets assigned.
func appendN(t testing.TB, p *Partition, rng *rand.Rand, n int) [][]byte {
	t.Helper()
	var out [][]byte
	for range n {
		b := testBatch(1+rng.IntN(4), 10+rng.IntN(300), -1, 0, 0)
		res := mustAppend(t, p, b)
		out = append(out, withOffset(b, res.BaseOffset))
	}
	return out
}

func TestCrashKeepsSyncedData(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 99))
		fsys := NewMemFS()
		p := openMem(t, fsys, smallConfig())
		synced := appendN(t, p, rng, 1+rng.IntN(60))
		durable, err := p.Sync()
		require.NoError(t, err)
		require.Equal(t, p.LogEndOffset(), durable)
		appendN(t, p, rng, rng.IntN(60)) // lost at the crash

		crashed := fsys.CrashClone()
		p2 := openMem(t, crashed, smallConfig())
		require.Equal(t, durable, p2.LogEndOffset(), "seed %d", seed)
		_, got := readAll(t, p2, 0)
		require.Equal(t, synced, got, "seed %d", seed)
		// The recovered log accepts appends at the same offsets.
		more := appendN(t, p2, rng, 5)
		_, err = p2.Sync()
		require.NoError(t, err)
		require.NoError(t, p2.Close())
		p3 := openMem(t, crashed.CrashClone(), smallConfig())
		_, got = readAll(t, p3, 0)
		require.Equal(t, append(synced, more...), got)
		require.NoError(t, p3.Close())
		require.NoError(t, p.Close())
	}
}

// A torn crash keeps a random prefix of the unsynced bytes of every file:
// the recovered log is a prefix of what was appended, at least as long as
// what was synced, with no partial batch.
func TestCrashTornWrites(t *testing.T) {
	t.Parallel()
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		fsys := NewMemFS()
		p := openMem(t, fsys, smallConfig())
		all := appendN(t, p, rng, rng.IntN(40))
		durable, err := p.Sync()
		require.NoError(t, err)
		all = append(all, appendN(t, p, rng, rng.IntN(40))...)
		if rng.IntN(2) == 0 { // sometimes a second sync window
			_, err = p.Sync()
			require.NoError(t, err)
			durable = p.LogEndOffset()
			all = append(all, appendN(t, p, rng, rng.IntN(20))...)
		}

		crashed := fsys.CrashCloneTorn(rng)
		p2 := openMem(t, crashed, smallConfig())
		leo := p2.LogEndOffset()
		require.GreaterOrEqual(t, leo, durable, "seed %d", seed)
		_, got := readAll(t, p2, 0)
		require.LessOrEqual(t, len(got), len(all))
		if len(got) > 0 {
			require.Equal(t, all[:len(got)], got, "seed %d", seed)
		}
		// Reopening again changes nothing.
		require.NoError(t, p2.Close())
		p3 := openMem(t, crashed, smallConfig())
		require.Equal(t, leo, p3.LogEndOffset())
		require.NoError(t, p3.Close())
		require.NoError(t, p.Close())
	}
}

func activeLogName(p *Partition) string { return fileName(testDir, p.active.base, logSuffix) }

func TestTornTailIsTruncated(t *testing.T) {
	t.Parallel()
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 5))
		fsys := NewMemFS()
		cfg := DefaultConfig() // one segment
		p := openMem(t, fsys, cfg)
		batches := appendN(t, p, rng, 1+rng.IntN(20))
		name := activeLogName(p)
		require.NoError(t, p.Close())

		data, err := fsys.ReadFile(name)
		require.NoError(t, err)
		var damaged []byte
		switch rng.IntN(3) {
		case 0: // random truncation
			damaged = data[:rng.IntN(len(data)+1)]
		case 1: // garbage appended
			garbage := make([]byte, 1+rng.IntN(200))
			for i := range garbage {
				garbage[i] = byte(rng.IntN(256))
			}
			damaged = append(bytes.Clone(data), garbage...)
		case 2: // a flipped byte somewhere
			damaged = bytes.Clone(data)
			damaged[rng.IntN(len(damaged))] ^= byte(1 + rng.IntN(255))
		}
		require.NoError(t, fsys.WriteFile(name, damaged))
		// Pretend nothing was fsynced: the checkpoint trusts nothing.
		require.NoError(t, fsys.Remove(filepath.Join(testDir, checkpointName)))

		p2 := openMem(t, fsys, cfg)
		_, got := readAll(t, p2, 0)
		if len(got) > 0 {
			require.Equal(t, batches[:len(got)], got, "seed %d", seed)
		}
		// Valid prefix kept: only damaged batches were dropped.
		pos := 0
		for _, b := range batches {
			if pos+len(b) > len(damaged) || !bytes.Equal(damaged[pos:pos+len(b)], b) {
				break
			}
			pos += len(b)
		}
		kept := 0
		for _, b := range got {
			kept += len(b)
		}
		require.Equal(t, pos, kept, "seed %d", seed)
		size, err := fsys.ReadFile(name)
		require.NoError(t, err)
		require.Len(t, size, kept, "file truncated at the last valid byte")
		require.NoError(t, p2.Close())
	}
}

func TestCorruptionBelowRecoveryPoint(t *testing.T) {
	t.Parallel()
	fsys := NewMemFS()
	p := openMem(t, fsys, DefaultConfig())
	appendN(t, p, rand.New(rand.NewPCG(1, 1)), 10)
	name := activeLogName(p)
	require.NoError(t, p.Close())
	data, err := fsys.ReadFile(name)
	require.NoError(t, err)
	data[100] ^= 0xff
	require.NoError(t, fsys.WriteFile(name, data))
	// With intact index files a trusted segment is not re-read (that is
	// what makes Open fast); without them it is, and the damage is found.
	require.NoError(t, fsys.Remove(fileName(testDir, 0, indexSuffix)))
	_, err = Open(fsys, testDir, DefaultConfig(), testLogger(t))
	require.ErrorIs(t, err, ErrCorruption)
}

func TestSealedSegmentCorruptionIsReported(t *testing.T) {
	t.Parallel()
	fsys := NewMemFS()
	p := openMem(t, fsys, smallConfig())
	appendN(t, p, rand.New(rand.NewPCG(1, 2)), 50)
	first := p.segs[0].base
	require.NoError(t, p.Close())
	// Index gone and data damaged in a sealed, fsynced segment.
	require.NoError(t, fsys.Remove(fileName(testDir, first, indexSuffix)))
	name := fileName(testDir, first, logSuffix)
	data, err := fsys.ReadFile(name)
	require.NoError(t, err)
	data[len(data)-3] ^= 1
	require.NoError(t, fsys.WriteFile(name, data))
	_, err = Open(fsys, testDir, smallConfig(), testLogger(t))
	require.ErrorIs(t, err, ErrCorruption)
}

func TestDamagedIndexesAreRebuilt(t *testing.T) {
	t.Parallel()
	fsys := NewMemFS()
	cfg := smallConfig()
	p := openMem(t, fsys, cfg)
	want := appendN(t, p, rand.New(rand.NewPCG(3, 3)), 80)
	var bases []int64
	for _, s := range p.segs {
		bases = append(bases, s.base)
	}
	require.NoError(t, p.Close())
	require.Greater(t, len(bases), 4)
	// Missing, truncated, bit-flipped and stale index files.
	require.NoError(t, fsys.Remove(fileName(testDir, bases[0], indexSuffix)))
	require.NoError(t, fsys.Remove(fileName(testDir, bases[1], timeIndexSuffix)))
	idx, err := fsys.ReadFile(fileName(testDir, bases[2], indexSuffix))
	require.NoError(t, err)
	require.NoError(t, fsys.WriteFile(fileName(testDir, bases[2], indexSuffix), idx[:len(idx)-1]))
	idx, err = fsys.ReadFile(fileName(testDir, bases[3], timeIndexSuffix))
	require.NoError(t, err)
	idx[indexHeaderSize-10] ^= 4
	require.NoError(t, fsys.WriteFile(fileName(testDir, bases[3], timeIndexSuffix), idx))

	p2 := openMem(t, fsys, cfg)
	defer p2.Close()
	_, got := readAll(t, p2, 0)
	require.Equal(t, want, got)
	for _, b := range bases[:4] {
		_, _, _, ok := loadIndexFile(fsys, testDir, b, p2.segs[indexOfBase(p2, b)].size, indexSuffix, offsetIndexMagic, offsetEntrySize)
		require.True(t, ok, "index of %d rewritten", b)
	}
}

func indexOfBase(p *Partition, base int64) int {
	for i, s := range p.segs {
		if s.base == base {
			return i
		}
	}
	return -1
}

func TestDamagedCheckpointIsIgnored(t *testing.T) {
	t.Parallel()
	fsys := NewMemFS()
	p := openMem(t, fsys, smallConfig())
	want := appendN(t, p, rand.New(rand.NewPCG(4, 4)), 30)
	require.NoError(t, p.Close())
	name := filepath.Join(testDir, checkpointName)
	cp, err := fsys.ReadFile(name)
	require.NoError(t, err)
	cp[10] ^= 1
	require.NoError(t, fsys.WriteFile(name, cp))
	p2 := openMem(t, fsys, smallConfig())
	defer p2.Close()
	_, got := readAll(t, p2, 0)
	require.Equal(t, want, got)
}

func TestDamagedSnapshotIsIgnored(t *testing.T) {
	t.Parallel()
	fsys := NewMemFS()
	p := openMem(t, fsys, smallConfig())
	for i := range 30 {
		mustAppend(t, p, testBatch(1, 300, 77, 2, int32(i)))
	}
	leo := p.LogEndOffset()
	require.NoError(t, p.Close())
	name := fileName(testDir, leo, snapshotSuffix)
	snap, err := fsys.ReadFile(name)
	require.NoError(t, err)
	snap[len(snap)-20] ^= 1
	require.NoError(t, fsys.WriteFile(name, snap))
	p2 := openMem(t, fsys, smallConfig())
	defer p2.Close()
	require.Equal(t, int32(29), p2.Producers()[0].LastSequence, "rebuilt from an older snapshot and the log")
	res, err := p2.Append(testBatch(1, 300, 77, 2, 29), testNow)
	require.NoError(t, err)
	require.True(t, res.Duplicate)
}

func TestLeftoverFilesAreCleaned(t *testing.T) {
	t.Parallel()
	fsys := NewMemFS()
	p := openMem(t, fsys, smallConfig())
	appendN(t, p, rand.New(rand.NewPCG(5, 5)), 5)
	require.NoError(t, p.Close())
	require.NoError(t, fsys.WriteFile(filepath.Join(testDir, checkpointName+tmpSuffix), []byte("junk")))
	require.NoError(t, fsys.WriteFile(fileName(testDir, 999999, indexSuffix), []byte("orphan")))
	p2 := openMem(t, fsys, smallConfig())
	defer p2.Close()
	names, err := fsys.ReadDir(testDir)
	require.NoError(t, err)
	require.NotContains(t, names, checkpointName+tmpSuffix)
	require.NotContains(t, names, filepath.Base(fileName(testDir, 999999, indexSuffix)))
}

func TestFailedWriteIsSticky(t *testing.T) {
	t.Parallel()
	fsys := NewMemFS()
	p := openMem(t, fsys, DefaultConfig())
	mustAppend(t, p, testBatch(1, 10, -1, 0, 0))
	boom := errors.New("EIO")
	fsys.FailNextWrite(boom)
	_, err := p.Append(testBatch(1, 10, -1, 0, 0), testNow)
	require.ErrorIs(t, err, ErrStorage)
	require.ErrorIs(t, err, boom)
	// Sticky: the FS works again but the partition refuses.
	_, err = p.Append(testBatch(1, 10, -1, 0, 0), testNow)
	require.ErrorIs(t, err, boom)
	_, err = p.Sync()
	require.ErrorIs(t, err, boom)
	_, err = p.EnforceRetention(testNow)
	require.ErrorIs(t, err, boom)
	_, err = p.Read(0, 1, 1<<20, true)
	require.ErrorIs(t, err, boom, "no reads from a page cache that may not match the disk")
	require.ErrorIs(t, p.Close(), boom)
	// Reopening recovers from disk.
	p2 := openMem(t, fsys, DefaultConfig())
	require.Equal(t, int64(1), p2.LogEndOffset())
	require.NoError(t, p2.Close())
}

func TestFailedSyncIsSticky(t *testing.T) {
	t.Parallel()
	fsys := NewMemFS()
	p := openMem(t, fsys, DefaultConfig())
	mustAppend(t, p, testBatch(1, 10, -1, 0, 0))
	boom := errors.New("fsync EIO")
	fsys.FailNextSync(boom)
	_, err := p.Sync()
	require.ErrorIs(t, err, ErrStorage)
	require.ErrorIs(t, err, boom)
	_, err = p.Append(testBatch(1, 10, -1, 0, 0), testNow)
	require.ErrorIs(t, err, boom)
	_, err = p.Sync()
	require.ErrorIs(t, err, boom)
	require.Error(t, p.Close())
}

func TestFailuresDuringRollAndRetention(t *testing.T) {
	t.Parallel()
	for _, op := range []Op{OpOpen, OpWrite, OpSync, OpSyncDir, OpRename} {
		fsys := NewMemFS()
		cfg := smallConfig()
		p := openMem(t, fsys, cfg)
		rng := rand.New(rand.NewPCG(6, 6))
		appendN(t, p, rng, 3)
		_, err := p.Sync()
		require.NoError(t, err)
		boom := errors.New("injected " + string(op))
		var once sync.Once
		fsys.SetErrorHook(func(o Op, name string) error {
			var e error
			if o == op {
				once.Do(func() { e = boom })
			}
			return e
		})
		var failed error
		for i := 0; i < 100 && failed == nil; i++ {
			_, failed = p.Append(testBatch(1, 300, -1, 0, 0), testNow)
			if failed == nil && i%10 == 9 {
				_, failed = p.Sync()
			}
		}
		require.ErrorIs(t, failed, boom, string(op))
		require.ErrorIs(t, failed, ErrStorage, string(op))
		_, err = p.Append(testBatch(1, 10, -1, 0, 0), testNow)
		require.ErrorIs(t, err, boom)
		_ = p.Close()
		fsys.SetErrorHook(nil)
		p2 := openMem(t, fsys.CrashClone(), cfg)
		hs, _ := readAll(t, p2, 0)
		requireContiguous(t, hs, 0, p2.LogEndOffset())
		require.NoError(t, p2.Close())
	}
}

func TestConcurrentAppendReadSync(t *testing.T) {
	t.Parallel()
	fsys := NewMemFS()
	cfg := smallConfig()
	cfg.RetentionBytes = 40_000
	cfg.RetentionMs = -1
	p := openMem(t, fsys, cfg)
	const n = 400
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() { // appender
		defer wg.Done()
		defer close(done)
		for i := range n {
			res, err := p.Append(testBatch(1+i%3, 200, 42, 0, int32(seqFor(i))), testNow)
			if !assertNoError(t, err) {
				return
			}
			if i%2 == 0 {
				p.SetHighWatermark(res.LastOffset + 1)
			}
		}
	}()
	for range 2 { // syncers advance the HW to the durable offset
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				d, err := p.Sync()
				if !assertNoError(t, err) {
					return
				}
				p.SetHighWatermark(d)
			}
		}()
	}
	wg.Add(1)
	go func() { // retention
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			_, err := p.EnforceRetention(testNow)
			if !assertNoError(t, err) {
				return
			}
		}
	}()
	for range 2 { // readers
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := int64(0)
			for {
				select {
				case <-done:
					return
				default:
				}
				b, err := p.Read(off, p.HighWatermark(), 8192, true)
				if errors.Is(err, ErrOffsetOutOfRange) {
					off = p.LogStartOffset()
					continue
				}
				if !assertNoError(t, err) {
					return
				}
				batches, err := protocol.SplitBatches(b)
				if !assertNoError(t, err) {
					return
				}
				for _, batch := range batches {
					h, _ := protocol.ParseBatchHeader(batch)
					if !protocol.VerifyBatchCRC(batch) || h.LastOffset() < off {
						t.Errorf("bad batch at %d", off)
						return
					}
					off = h.LastOffset() + 1
				}
				p.OffsetForTimestamp(baseTime)
				p.MaxTimestamp()
			}
		}()
	}
	wg.Wait()
	p.SetHighWatermark(p.LogEndOffset())
	ls := p.LogStartOffset()
	hs, _ := readAll(t, p, ls)
	requireContiguous(t, hs, ls, p.LogEndOffset())
	require.NoError(t, p.Close())
}

func seqFor(i int) int {
	s := 0
	for j := range i {
		s += 1 + j%3
	}
	return s
}

func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

// FuzzRecover writes arbitrary bytes as a segment (optionally after a
// valid one) and opens it: Open must not panic and must yield a
// consistent log.
func FuzzRecover(f *testing.F) {
	valid := append(append(withOffset(testBatch(2, 10, -1, 0, 0), 0), withOffset(testBatch(1, 30, 4, 0, 0), 2)...),
		withOffset(testBatch(3, 5, 4, 0, 1), 3)...)
	f.Add(valid, false)
	f.Add(valid[:len(valid)-7], false)
	f.Add(append(bytes.Clone(valid), 0xde, 0xad), false)
	f.Add(valid, true)
	f.Add([]byte{}, false)
	f.Add(make([]byte, 200), true)
	bad := bytes.Clone(valid)
	bad[70] ^= 0x40
	f.Add(bad, false)
	f.Fuzz(func(t *testing.T, data []byte, second bool) {
		fsys := NewMemFS()
		require.NoError(t, fsys.MkdirAll(testDir, 0o755))
		base := int64(0)
		if second {
			first := withOffset(testBatch(2, 10, -1, 0, 0), 0)
			require.NoError(t, fsys.WriteFile(fileName(testDir, 0, logSuffix), first))
			base = 2
		}
		require.NoError(t, fsys.WriteFile(fileName(testDir, base, logSuffix), data))
		p, err := Open(fsys, testDir, smallConfig(), testLogger(t))
		require.NoError(t, err)
		leo := p.LogEndOffset()
		require.GreaterOrEqual(t, leo, base)
		hs, _ := readAll(t, p, 0)
		requireContiguous(t, hs, 0, leo)
		res, err := p.Append(testBatch(1, 3, -1, 0, 0), testNow)
		require.NoError(t, err)
		require.Equal(t, leo, res.BaseOffset)
		require.NoError(t, p.Close())
		p2, err := Open(fsys, testDir, smallConfig(), testLogger(t))
		require.NoError(t, err)
		require.Equal(t, leo+1, p2.LogEndOffset())
		require.NoError(t, p2.Close())
	})
}

func TestCorruptionIsNotTruncatedAway(t *testing.T) {
	t.Parallel()
	fsys := NewMemFS()
	p := openMem(t, fsys, DefaultConfig())
	appendN(t, p, rand.New(rand.NewPCG(1, 1)), 10)
	name := activeLogName(p)
	require.NoError(t, p.Close())
	require.NoError(t, fsys.Remove(fileName(testDir, 0, indexSuffix)))
	data, err := fsys.ReadFile(name)
	require.NoError(t, err)
	data[100] ^= 0xff
	require.NoError(t, fsys.WriteFile(name, data))
	for range 2 {
		_, err = Open(fsys, testDir, DefaultConfig(), testLogger(t))
		require.ErrorIs(t, err, ErrCorruption)
		after, err := fsys.ReadFile(name)
		require.NoError(t, err)
		require.Equal(t, data, after)
	}
}

// blockingFS wraps a MemFS so that the first File.Sync once armed
// blocks until released, outside the MemFS lock, saying so on syncing.
type blockingFS struct {
	*MemFS
	armed   atomic.Bool
	syncing chan struct{} // buffered: the armed Sync never waits to say so
	release chan struct{}
}

type blockingFile struct {
	File
	fs *blockingFS
}

func (b *blockingFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := b.MemFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return blockingFile{f, b}, nil
}

func (f blockingFile) Sync() error {
	if f.fs.armed.CompareAndSwap(true, false) {
		f.fs.syncing <- struct{}{}
		<-f.fs.release
	}
	return f.File.Sync()
}

func TestSyncDoesNotBlockAppendOrRead(t *testing.T) {
	t.Parallel()
	fsys := &blockingFS{MemFS: NewMemFS(), syncing: make(chan struct{}, 1), release: make(chan struct{})}
	p, err := Open(fsys, testDir, DefaultConfig(), testLogger(t))
	require.NoError(t, err)
	mustAppend(t, p, testBatch(2, 10, -1, 0, 0))
	type result struct {
		off int64
		err error
	}
	done := make(chan result)
	fsys.armed.Store(true)
	go func() {
		off, err := p.Sync()
		done <- result{off, err}
	}()
	<-fsys.syncing // Sync is now inside fsync
	res := mustAppend(t, p, testBatch(3, 10, -1, 0, 0))
	require.Equal(t, int64(2), res.BaseOffset)
	b, err := p.Read(0, p.HighWatermark(), 1<<20, true)
	require.NoError(t, err)
	require.NotEmpty(t, b)
	close(fsys.release)
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, int64(2), r.off, "Sync returns the LEO it captured before fsyncing")
	off, err := p.Sync()
	require.NoError(t, err)
	require.Equal(t, int64(5), off)
	require.NoError(t, p.Close())
}
