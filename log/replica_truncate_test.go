package log

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// replicaCfg is smallConfig for a raft replica's log, without retention.
func replicaCfg() Config {
	cfg := smallConfig()
	cfg.Replica = true
	cfg.RetentionMs = -1
	return cfg
}

// truncateVariant describes the log a crash-during-TruncateFrom test
// starts from.
type truncateVariant struct {
	name string
	// closed: the log was closed and reopened (every segment indexed,
	// the recovery point at the end, a producer snapshot at the end).
	closed bool
	// unsynced batches appended after the last Sync.
	unsynced int
	// noIntervalCheckpoint: Sync writes the checkpoint only after a roll
	// (CheckpointIntervalMs < 0).
	noIntervalCheckpoint bool
}

// buildTruncateLog writes the same replica log into fsys every time for
// a seed: plain, idempotent and transactional batches over several
// segments, synced now and then, the HW at about a third.
func buildTruncateLog(t *testing.T, fsys *MemFS, seed uint64, v truncateVariant) *modelRun {
	t.Helper()
	cfg := replicaCfg()
	if v.noIntervalCheckpoint {
		cfg.CheckpointIntervalMs = -1
	}
	r := &modelRun{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 77)), cfg: cfg, fsys: fsys,
		m: newReplicaModel(), ops: map[string]int{}}
	r.op = "build"
	r.open()
	for r.step = 1; r.step <= 40; r.step++ {
		r.opAppend()
		if r.step%9 == 0 {
			r.opSync()
		}
	}
	r.opSync()
	if v.closed {
		r.opReopen()
	}
	m := r.m
	hwOrd := m.first + (m.next()-m.first)/3
	r.p.SetHighWatermark(m.offsetOf(hwOrd))
	m.hw = m.offsetOf(hwOrd)
	for range v.unsynced {
		r.step++
		r.opAppend()
	}
	r.op = "truncate"
	return r
}

// truncateCuts returns the ordinals to truncate at: the lowest the HW
// allows, the first batch of a sealed segment above it (a segment
// boundary) and one inside it, the first batch of the last sealed
// segment, one inside the active segment and the last batch.
func truncateCuts(r *modelRun) []int64 {
	m := r.m
	lo := m.ordAt(m.hw)
	cuts := []int64{lo, m.next() - 1}
	segs := r.p.segs
	end := func(i int) int64 {
		if i+1 < len(segs) {
			return segs[i+1].baseOrd
		}
		return m.next()
	}
	for i, s := range segs {
		if s.baseOrd > lo && end(i)-s.baseOrd > 2 && i+1 < len(segs)-1 {
			cuts = append(cuts, s.baseOrd, (s.baseOrd+end(i))/2)
			break
		}
	}
	if last := len(segs) - 1; last > 0 {
		cuts = append(cuts, segs[last-1].baseOrd)
		if end(last)-segs[last].baseOrd > 1 {
			cuts = append(cuts, segs[last].baseOrd+1)
		}
	}
	cuts = slices.DeleteFunc(cuts, func(ord int64) bool { return ord < lo })
	slices.Sort(cuts)
	return slices.Compact(cuts)
}

var errCrashed = errors.New("injected: crashed here")

// TestTruncateFromCrashAtEveryStep crashes a TruncateFrom after each of
// its file operations (the error hook fails that operation and every
// later one, then the durable state is cloned, with and without torn
// writes), for cuts at the HW, at segment boundaries, inside sealed
// segments and in the active one. Open must accept what the crash left:
// a prefix of the old log (never a mix), no shorter than the cut (or,
// with an unsynced tail, than what was durable), with the producer state
// its batches imply. Repeating the TruncateFrom then gives exactly the
// cut, and the log continues from it with the new leader's batches.
func TestTruncateFromCrashAtEveryStep(t *testing.T) {
	t.Parallel()
	variants := []truncateVariant{
		{name: "synced"},
		{name: "closed", closed: true},
		{name: "unsynced-tail", unsynced: 8},
		{name: "no-interval-checkpoint", unsynced: 3, noIntervalCheckpoint: true},
	}
	for vi, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			seed := uint64(100 + vi)
			ref := buildTruncateLog(t, NewMemFS(), seed, v)
			old := ref.m
			require.Greater(t, len(ref.p.segs), 4, "the log spans several segments")
			cuts := truncateCuts(ref)
			require.GreaterOrEqual(t, len(cuts), 5, "cuts %v", cuts)
			abandon(ref.p)
			rng := rand.New(rand.NewPCG(seed, 3))
			for _, ord := range cuts {
				steps := 0
				for failAt := 0; ; failAt++ {
					completed := truncateCrashAt(t, rng, seed, v, old, ord, failAt)
					if completed {
						steps = failAt
						break
					}
					require.Less(t, failAt, 1000)
				}
				t.Logf("%s: cut at ordinal %d of [1, %d) (HW at %d): TruncateFrom does %d file operations",
					v.name, ord, old.next(), old.ordAt(old.hw), steps)
			}
		})
	}
}

// truncateCrashAt builds the log, runs TruncateFrom(ord) with every file
// operation from the failAt-th on failing, crashes, and checks recovery.
// It reports whether TruncateFrom completed (failAt was past its last
// operation).
func truncateCrashAt(t *testing.T, rng *rand.Rand, seed uint64, v truncateVariant, old *replicaModel, ord int64, failAt int) bool {
	t.Helper()
	fsys := NewMemFS()
	r := buildTruncateLog(t, fsys, seed, v)
	require.True(t, bytes.Equal(old.bytesOf(1, old.next()), r.m.bytesOf(1, r.m.next())), "the build is deterministic")
	durable := r.m.durable
	ctx := fmt.Sprintf("%s: TruncateFrom(%d) crashed before file operation %d", v.name, ord, failAt)

	var done []string
	fsys.SetErrorHook(func(op Op, name string) error {
		if len(done) >= failAt {
			return errCrashed
		}
		if op != OpRead && op != OpReadDir { // reads change nothing to crash after
			done = append(done, string(op)+" "+name)
		}
		return nil
	})
	err := r.p.TruncateFrom(ord)
	fsys.SetErrorHook(nil)
	completed := err == nil
	if !completed {
		require.ErrorIs(t, err, errCrashed, ctx)
		require.ErrorIs(t, err, ErrStorage, ctx)
	} else {
		require.Equal(t, ord, r.p.NextOrdinal(), ctx)
	}
	ctx += fmt.Sprintf(" (done: %v)", done)
	var crashed *MemFS
	if rng.IntN(2) == 0 {
		crashed = fsys.CrashClone()
	} else {
		crashed = fsys.CrashCloneTorn(rng)
		ctx += " (torn)"
	}
	abandon(r.p)

	q, err := Open(crashed, testDir, r.cfg, testLogger(t))
	require.NoError(t, err, ctx)
	next := q.NextOrdinal()
	require.Equal(t, int64(1), q.FirstOrdinal(), ctx)
	require.GreaterOrEqual(t, next, min(ord, durable), "%s: shorter than the cut", ctx)
	require.LessOrEqual(t, next, old.next(), ctx)
	if completed {
		require.LessOrEqual(t, next, ord, "%s: a completed truncation came back", ctx)
	}
	got, n, err := q.ReadOrdinals(nil, 1, next, math.MaxInt64)
	require.NoError(t, err, ctx)
	require.Equal(t, int(next-1), n, ctx)
	require.True(t, bytes.Equal(old.bytesOf(1, next), got), "%s: not a prefix of the old log", ctx)
	require.Equal(t, old.offsetOf(next), q.LogEndOffset(), ctx)
	requireReplayedState(t, q, old, next, ctx)

	// raft repeats the truncation, which then is exact.
	if next >= ord {
		require.NoError(t, q.TruncateFrom(ord), ctx)
	}
	next = min(next, ord)
	require.Equal(t, next, q.NextOrdinal(), ctx)
	require.Equal(t, old.offsetOf(next), q.LogEndOffset(), ctx)
	requireReplayedState(t, q, old, next, ctx)

	// The new leader's batches follow, past the old log end (a compacted
	// batch spans many offsets in a few bytes, so nothing rolls), and
	// survive a crash after a Sync.
	span := old.leo() - q.LogEndOffset() + 5
	var newer []byte
	for _, b := range [][]byte{testBatch(2, 30, -1, 0, 0), holeyBatch(int(span), []int32{0, int32(span - 1)}, -1, -1), testBatch(1, 30, -1, 0, 0)} {
		b = withOffset(b, q.LogEndOffset())
		_, err := q.AppendReplicated(b, testNow)
		require.NoError(t, err, ctx)
		newer = append(newer, b...)
	}
	added := int64(3)
	_, err = q.Sync()
	require.NoError(t, err, ctx)
	c2 := crashed.CrashClone()
	abandon(q)
	q, err = Open(c2, testDir, r.cfg, testLogger(t))
	require.NoError(t, err, ctx)
	require.Equal(t, next+added, q.NextOrdinal(), ctx)
	got, _, err = q.ReadOrdinals(nil, 1, next+added, math.MaxInt64)
	require.NoError(t, err, ctx)
	require.True(t, bytes.Equal(append(old.bytesOf(1, next), newer...), got), ctx)
	if !v.noIntervalCheckpoint { // else TestBugSnapshotAboveLostTailResurrects
		requireReplayedState(t, q, old, next, ctx+", new batches and a crash")
	}
	require.NoError(t, q.Close(), ctx)
	q, err = Open(c2, testDir, r.cfg, testLogger(t))
	require.NoError(t, err, ctx)
	require.Equal(t, next+added, q.NextOrdinal(), ctx)
	if !v.noIntervalCheckpoint {
		requireReplayedState(t, q, old, next, ctx+", new batches, a crash and a clean reopen")
	}
	require.NoError(t, q.Close(), ctx)
	return completed
}

// requireReplayedState checks that p's producer and transaction state is
// what the batches [1, next) of m imply (no retention: the whole
// history is on disk).
func requireReplayedState(t *testing.T, p *Partition, m *replicaModel, next int64, ctx string) {
	t.Helper()
	want := m.replay(newMState(), 1, next)
	require.Equal(t, want.infos(), p.Producers(), "%s: producers", ctx)
	require.Equal(t, want.open(), p.OpenTransactions(), "%s: open transactions", ctx)
	require.Equal(t, want.abortedFrom(0), p.AbortedTransactions(0, math.MaxInt64), "%s: aborted transactions", ctx)
}
