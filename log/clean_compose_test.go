package log

import (
	"errors"
	"fmt"
	"math/rand"
	randv2 "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/protocol"
)

// DeleteRecords and cleanup.policy=compact,delete compose as in Kafka:
// the log start offset moves past cleaned and uncleaned records alike,
// the cleaner never brings back anything below it, and time and size
// retention delete whole segments of a compacted log.
func TestCleanComposesWithDeleteRecordsAndRetention(t *testing.T) {
	cfg := compactConfig()
	cfg.Cleanup = CleanupCompactDelete
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	fsys := NewMemFS()
	p := openMem(t, fsys, cfg)
	rng := rand.New(rand.NewSource(11))
	written := fillKeyed(t, p, rng, 3000, 40, true, false)
	m := NewOffsetMap(1<<20, 0.9)
	st := cleanFully(t, p, m, testNow)
	require.NotEmpty(t, st)

	// DeleteRecords in the middle of the cleaned log: nothing below the
	// new start is read, what is above is the compacted log as before.
	got := readRecords(t, p)
	cut := got[len(got)/2].off
	start, err := p.DeleteRecordsBefore(cut)
	require.NoError(t, err)
	require.Equal(t, cut, start)
	above := func(rs []rec, from int64) []rec {
		var out []rec
		for _, r := range rs {
			if r.off >= from {
				out = append(out, r)
			}
		}
		return out
	}
	require.Equal(t, above(got, cut), above(readRecords(t, p), cut))

	// More updates and another clean: still nothing below the start, and
	// above it the table of everything written at or after the start.
	written = append(written, fillKeyed(t, p, rng, 2000, 40, true, false)...)
	cleanFully(t, p, m, testNow)
	require.Equal(t, cut, p.LogStartOffset())
	after := readRecords(t, p)
	require.GreaterOrEqual(t, after[0].off, cut)
	require.Equal(t, table(above(written, cut)), table(after))

	// A reopen keeps the start and the table.
	require.NoError(t, p.Close())
	p = openMem(t, fsys, cfg)
	require.Equal(t, cut, p.LogStartOffset())
	require.Equal(t, table(above(written, cut)), table(readRecords(t, p)))

	// Size retention on the compacted log: whole segments go from the
	// front until the log fits; the cleaner goes on above them.
	cfg.RetentionBytes = p.Size() / 2
	p.SetConfig(cfg)
	_, err = p.EnforceRetention(testNow)
	require.NoError(t, err)
	require.LessOrEqual(t, p.Size(), cfg.RetentionBytes+int64(cfg.SegmentBytes))
	newStart := p.LogStartOffset()
	require.Greater(t, newStart, cut)
	written = append(written, fillKeyed(t, p, rng, 500, 40, false, false)...)
	cleanFully(t, p, m, testNow)
	require.Equal(t, table(above(written, newStart)), table(readRecords(t, p)))

	// Time retention: every sealed segment is older than retention.ms.
	cfg.RetentionBytes, cfg.RetentionMs = -1, 1000
	p.SetConfig(cfg)
	_, err = p.EnforceRetention(time.UnixMilli(baseTime + 3_600_000))
	require.NoError(t, err)
	require.Equal(t, p.LogEndOffset(), p.LogStartOffset())
	require.Empty(t, readRecords(t, p))
	require.NoError(t, p.Close())
}

// Reads and appends go on while the cleaner rewrites and swaps
// segments: every read returns whole, valid batches, contiguous from
// where it started (offsets that were cleaned away are covered by the
// empty batches holding their offsets), and the final table is right.
func TestCleanWhileReadingAndAppending(t *testing.T) {
	p := openMem(t, NewMemFS(), compactConfig())
	rng := rand.New(rand.NewSource(12))
	written := fillKeyed(t, p, rng, 3000, 30, true, false)

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rr := rand.New(rand.NewSource(int64(100 + r)))
			for !stop.Load() {
				hw := p.HighWatermark()
				from := p.LogStartOffset() + rr.Int63n(max(1, hw-p.LogStartOffset()))
				b, err := p.Read(from, hw, 1+rr.Intn(64<<10), true)
				if err != nil {
					errs <- err
					return
				}
				batches, err := protocol.SplitBatches(b)
				if err != nil {
					errs <- err
					return
				}
				next := int64(-1)
				for _, batch := range batches {
					h, err := protocol.ParseBatchHeader(batch)
					if err == nil && !protocol.VerifyBatchCRC(batch) {
						err = errors.New("bad CRC")
					}
					if err != nil {
						errs <- err
						return
					}
					if next >= 0 && h.BaseOffset != next {
						errs <- errGap{next, h.BaseOffset}
						return
					}
					if next < 0 && h.LastOffset() < from {
						errs <- errGap{from, h.LastOffset()}
						return
					}
					next = h.LastOffset() + 1
				}
			}
		}()
	}
	m := NewOffsetMap(24*64, 0.9) // several passes
	cleanErr := make(chan error, 1)
	var appending atomic.Bool
	appending.Store(true)
	var cleans, swaps int
	go func() {
		for appending.Load() {
			st, err := p.Clean(CleanOptions{Now: testNow, Map: m, Codec: gzipCodec{}})
			if err != nil {
				cleanErr <- err
				return
			}
			cleans++
			swaps += st.Segments
		}
		cleanErr <- nil
	}()
	wr := rand.New(rand.NewSource(13))
	for range 20 {
		written = append(written, fillKeyed(t, p, wr, 200, 30, true, false)...)
	}
	appending.Store(false)
	require.NoError(t, <-cleanErr)
	t.Logf("%d cleans swapped %d segments while appending and reading", cleans, swaps)
	require.Positive(t, swaps)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cleanFully(t, p, NewOffsetMap(1<<20, 0.9), testNow)
	require.Equal(t, table(written), table(readRecords(t, p)))
	require.NoError(t, p.Close())
}

type errGap struct{ want, got int64 }

func (e errGap) Error() string {
	return fmt.Sprintf("read not contiguous: want offset %d, got %d", e.want, e.got)
}

// Commit markers go once their transaction has no batch left and they
// are older than delete.retention.ms, as in Kafka; abort markers and
// the marker of a transaction that kept a batch (here the producer's
// newest, which carries its epoch and sequence) stay. Transactions
// stay closed, aborted records stay hidden, and a reopen (and a crash at
// every step of the clean) finds no transaction open.
func TestCleanRemovesCommitMarkersOfEmptiedTransactions(t *testing.T) {
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 60_000
	fsys := NewMemFS()
	p := openMem(t, fsys, cfg)
	txnBatch := func(pid int64, seq int32, key, val string) []byte { return txnKeyedBatch(t, pid, seq, key, val) }
	marker := func(pid int64, commit bool) {
		res, err := p.WriteMarker(Marker{ProducerID: pid, Commit: commit}, testNow)
		require.NoError(t, err)
		p.SetHighWatermark(res.LastOffset + 1)
	}
	want := map[string]string{}
	seq1, seq2 := int32(0), int32(0)
	for i := range 60 {
		mustAppend(t, p, txnBatch(1, seq1, fmt.Sprintf("k%d", i%3), fmt.Sprintf("committed %d", i)))
		seq1++
		marker(1, true)
		want[fmt.Sprintf("k%d", i%3)] = fmt.Sprintf("committed %d", i)
		if i%10 == 0 {
			mustAppend(t, p, txnBatch(2, seq2, "k0", "aborted"))
			seq2++
			marker(2, false)
		}
		for j := range 5 { // rolls segments (4 KiB), so snapshots are written
			mustAppend(t, p, keyedBatch(t, []kv{{fmt.Appendf(nil, "f%d", j), make([]byte, 100)}}, -1, 0, baseTime, false))
			want[fmt.Sprintf("f%d", j)] = string(make([]byte, 100))
		}
	}
	_, err := p.Sync()
	require.NoError(t, err)
	markers := func(p *Partition) (commits, aborts int) {
		hs, bs := readAll(t, p, p.LogStartOffset())
		for i, h := range hs {
			if h.IsControl() {
				if typ, _ := controlType(bs[i]); typ == controlCommit {
					commits++
				} else {
					aborts++
				}
			}
		}
		return commits, aborts
	}
	committed := func(p *Partition) map[string]string {
		got := map[string]string{}
		aborted := p.AbortedTransactions(0, p.LogEndOffset())
		for _, r := range readRecords(t, p) {
			skip := false
			for _, a := range aborted {
				skip = skip || (r.off >= a.FirstOffset && r.off <= a.LastOffset && r.key == "k0" && r.val == "aborted")
			}
			require.False(t, skip || r.val == "aborted", "aborted record at %d", r.off)
			got[r.key] = r.val
		}
		return got
	}
	c0, a0 := markers(p)
	require.Equal(t, 60, c0)
	require.Equal(t, 6, a0)

	// Within delete.retention.ms: every marker stays.
	cleanFully(t, p, NewOffsetMap(1<<20, 0.9), time.UnixMilli(baseTime+30_000))
	c1, a1 := markers(p)
	require.Equal(t, 60, c1)
	require.Equal(t, 6, a1)
	require.Equal(t, want, committed(p))

	// Later, after more records (so there is something dirty to clean):
	// the commit markers of emptied transactions go.
	base := fsys.CrashClone()
	later := time.UnixMilli(baseTime + 120_000)
	dirty := func(p *Partition) { // a segment and more of updates: something to clean
		for range 50 {
			mustAppend(t, p, keyedBatch(t, []kv{{[]byte("f0"), make([]byte, 100)}}, -1, 0, baseTime, false))
		}
		_, err := p.Sync()
		require.NoError(t, err)
	}
	dirty(p)
	st := cleanFully(t, p, NewOffsetMap(1<<20, 0.9), later)
	require.NotEmpty(t, st)
	c2, a2 := markers(p)
	t.Logf("commit markers %d -> %d, abort markers %d -> %d", c1, c2, a1, a2)
	require.Less(t, c2, 10, "commit markers of emptied transactions are removed")
	require.Positive(t, c2, "the marker of the transaction holding the producer's newest batch stays")
	require.Equal(t, 6, a2, "abort markers stay")
	require.Equal(t, want, committed(p))
	require.Equal(t, p.HighWatermark(), p.LastStableOffset())

	// Reopened: nothing open, the producers go on.
	require.NoError(t, p.Close())
	p = openMem(t, fsys, cfg)
	require.Empty(t, p.OpenTransactions())
	require.Equal(t, p.HighWatermark(), p.LastStableOffset())
	require.Equal(t, want, committed(p))
	mustAppend(t, p, txnBatch(1, seq1, "k0", "next"))
	marker(1, true)
	require.NoError(t, p.Close())

	// A power loss at every step of that clean: whatever is left opens
	// with no transaction open and the same committed table.
	for n := 1; ; n++ {
		fs := base.CrashClone()
		q := openMem(t, fs, cfg)
		dirty(q)
		fs.SetCrashPoint(n, randv2.New(randv2.NewPCG(uint64(n), 7)))
		_, err := q.Clean(CleanOptions{Now: later, Map: NewOffsetMap(1<<20, 0.9)})
		crashed := fs.Crashed()
		if crashed == nil {
			require.NoError(t, err)
			require.Greater(t, n, 5)
			break
		}
		r := openMem(t, crashed, cfg)
		require.Empty(t, r.OpenTransactions(), "crash at step %d", n)
		got := committed(r)
		require.Equal(t, want, got, "crash at step %d", n)
		require.NoError(t, r.Close())
	}
}

// Cleaned segments merge, as Kafka's cleaner groups them (at most
// segment.bytes together), so a compacted log keeps few segments; a
// power loss at every step of a merging clean leaves a log that opens
// (completing an interrupted merge from its .swap file) with the same
// records at the same offsets, never two segments holding one offset.
func TestCleanMergesSegmentsCrashAtEveryStep(t *testing.T) {
	cfg := compactConfig()
	fsys := NewMemFS()
	p := openMem(t, fsys, cfg)
	rng := rand.New(rand.NewSource(21))
	written := fillKeyed(t, p, rng, 3000, 20, true, false)
	before := len(p.segs)
	st := cleanFully(t, p, NewOffsetMap(1<<20, 0.9), testNow)
	merged := 0
	for _, s := range st {
		merged += s.Merged
	}
	written = append(written, fillKeyed(t, p, rng, 1000, 20, true, false)...)
	require.NoError(t, p.Close())
	base := fsys.CrashClone()

	check := func(q *Partition, step int) {
		got := readRecords(t, q) // contiguous offsets, whole batches
		require.Equal(t, table(written), table(got), "crash at step %d", step)
		byOff := map[int64]rec{}
		for _, r := range written {
			byOff[r.off] = r
		}
		for _, r := range got {
			require.Equal(t, byOff[r.off], r, "crash at step %d", step)
		}
		for i := 1; i < len(q.segs); i++ {
			require.Equal(t, q.segs[i-1].next, q.segs[i].base, "crash at step %d: segments overlap or leave a gap", step)
		}
	}
	steps := 0
	for n := 1; ; n++ {
		fs := base.CrashClone()
		q := openMem(t, fs, cfg)
		fs.SetCrashPoint(n, randv2.New(randv2.NewPCG(uint64(n), 21)))
		st, err := q.Clean(CleanOptions{Now: testNow, Map: NewOffsetMap(1<<20, 0.9)})
		crashed := fs.Crashed()
		if crashed == nil {
			require.NoError(t, err)
			fs.SetCrashPoint(0, nil)
			merged += st.Merged
			steps = n
			check(q, n)
			t.Logf("%d segments written, %d after cleaning; %d merged in all; %d crash points", before, len(q.segs), merged, n-1)
			require.Less(t, len(q.segs), before/2, "cleaned segments were not merged")
			require.NoError(t, q.Close())
			break
		}
		r := openMem(t, crashed, cfg)
		check(r, n)
		names, err := crashed.ReadDir("/data/topic-0")
		require.NoError(t, err)
		for _, name := range names {
			require.NotContains(t, name, ".swap", "crash at step %d: Open left %s", n, name)
		}
		// It cleans on from there.
		cleanFully(t, r, NewOffsetMap(1<<20, 0.9), testNow)
		check(r, n)
		require.NoError(t, r.Close())
		r = openMem(t, crashed, cfg)
		check(r, n)
		require.NoError(t, r.Close())
	}
	require.Positive(t, merged)
	require.Greater(t, steps, 10)
}
