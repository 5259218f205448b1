package raftlog

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoal-mq/shoal/log"
)

var (
	modelSeeds = flag.Int("storage.seeds", modelSeedsDefault, "seeds of TestStorageMatchesMemoryStorage")
	modelSeed  = flag.Uint64("storage.seed", 1, "first seed")
	modelOps   = flag.Int("storage.ops", 10000, "operations per seed")
)

// TestStorageMatchesMemoryStorage (criterion C14 of the cluster issue):
// random appends (with overwrites above the applied index), fsyncs,
// HardState changes, applies, compactions by retention, clean restarts
// and power losses (unsynced data dropped, sometimes torn), with every
// answer of Storage compared after each operation with etcd raft's own
// MemoryStorage holding the same entries: FirstIndex, LastIndex, Term
// over the whole range and its errors outside, Entries over random ranges
// and sizes, InitialState, and the high watermark at the applied entry's
// end. 10 seeds of 10,000 operations by default (-storage.seeds,
// -storage.ops; -short runs 2 seeds).
func TestStorageMatchesMemoryStorage(t *testing.T) {
	seeds := *modelSeeds
	if testing.Short() {
		seeds = 2
	}
	total := 0
	for seed := *modelSeed; seed < *modelSeed+uint64(seeds); seed++ {
		m := newStorageModel(t, seed)
		for op := range *modelOps {
			m.step(op)
		}
		total += *modelOps
		require.NoError(t, m.p.Close())
		t.Logf("seed %d: %d appends, %d overwrites, %d compactions, %d restarts, %d power losses; log [%d, %d]",
			seed, m.stats.appends, m.stats.overwrites, m.stats.compactions, m.stats.restarts, m.stats.crashes, m.first(), m.last())
	}
	t.Logf("%d operations", total)
}

type storageModel struct {
	t   *testing.T
	rng *rand.Rand
	fs  *log.MemFS
	p   *log.Partition
	s   *Storage
	ms  *raft.MemoryStorage
	// ents are the model's entries from index 1 on (compacted ones stay:
	// they rebuild ms after a power loss).
	ents    map[uint64]*raftpb.Entry
	term    uint64 // the newest term written
	hs      *raftpb.HardState
	applied uint64
	durable uint64 // entries up to it are fsynced
	seed    uint64
	stats   struct{ appends, overwrites, compactions, restarts, crashes int }
}

func newStorageModel(t *testing.T, seed uint64) *storageModel {
	m := &storageModel{t: t, rng: rand.New(rand.NewPCG(seed, 7)), fs: log.NewMemFS(), ms: raft.NewMemoryStorage(),
		ents: map[uint64]*raftpb.Entry{}, term: 1, hs: &raftpb.HardState{}, seed: seed}
	m.open()
	// A replica writes its bootstrap configuration before raft starts
	// (replica.New): raft.state exists before any entry.
	require.NoError(t, m.s.SetConfState(&raftpb.ConfState{Voters: []uint64{1}}, 0))
	return m
}

func (m *storageModel) open() {
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = 1024 // a few dozen entries per segment: retention has segments to delete
	cfg.IndexIntervalBytes = 64
	cfg.Replica = true
	p, err := log.Open(m.fs, testDir, cfg, nil)
	require.NoError(m.t, err, "seed %d", m.seed)
	s, err := Open(m.fs, testDir, p)
	require.NoError(m.t, err, "seed %d", m.seed)
	m.p, m.s = p, s
}

func (m *storageModel) first() uint64 { i, _ := m.ms.FirstIndex(); return i }
func (m *storageModel) last() uint64  { i, _ := m.ms.LastIndex(); return i }

// entryAt makes an entry of term at index: data (a one-record batch at
// offset index-1, every entry taking one offset), raft's empty entry, or
// a configuration change.
func (m *storageModel) entryAt(index, term uint64) *raftpb.Entry {
	switch m.rng.IntN(6) {
	case 0:
		return entry(raftpb.EntryNormal, term, index, nil)
	case 1:
		cc, err := proto.Marshal(&raftpb.ConfChangeV2{})
		require.NoError(m.t, err)
		return entry(raftpb.EntryConfChangeV2, term, index, cc)
	}
	return entry(raftpb.EntryNormal, term, index, dataBatch(int64(index)-1, int32(term)))
}

func (m *storageModel) step(op int) {
	ctx := fmt.Sprintf("seed %d op %d", m.seed, op)
	switch r := m.rng.IntN(100); {
	case r < 40: // append, sometimes over the tail above the applied index
		// Never over applied entries, nor over records below the log
		// start (DeleteRecords moves it only over applied ones).
		at := m.last() + 1
		lo := max(m.applied+1, m.first(), uint64(m.p.LogStartOffset())+1)
		if m.rng.IntN(4) == 0 && at > lo {
			at = lo + uint64(m.rng.IntN(int(at-lo)))
			m.term++ // a new leader's entries
			m.stats.overwrites++
		}
		var ents []*raftpb.Entry
		for i := range uint64(1 + m.rng.IntN(5)) {
			e := m.entryAt(at+i, m.term)
			ents = append(ents, e)
			m.ents[at+i] = e
		}
		for i := at + uint64(len(ents)); m.ents[i] != nil; i++ {
			delete(m.ents, i)
		}
		require.NoError(m.t, m.s.Append(ents, time.Now()), ctx)
		require.NoError(m.t, m.ms.Append(ents), ctx)
		m.durable = min(m.durable, at-1)
		m.stats.appends++
	case r < 55:
		_, err := m.p.Sync()
		require.NoError(m.t, err, ctx)
		m.durable = m.last()
	case r < 65: // HardState: term and vote move on, commit anywhere in the log
		hs := &raftpb.HardState{Term: proto.Uint64(max(m.term, m.hs.GetTerm())), Vote: proto.Uint64(uint64(m.rng.IntN(3))),
			Commit: proto.Uint64(m.applied + uint64(m.rng.IntN(int(m.last()-m.applied)+1)))}
		if m.rng.IntN(2) == 0 {
			hs.Vote = proto.Uint64(m.hs.GetVote())
		}
		require.NoError(m.t, m.s.SetHardState(hs), ctx)
		require.NoError(m.t, m.ms.SetHardState(hs), ctx)
		m.hs = hs
	case r < 78: // raft hands back committed entries
		if c := min(m.hs.GetCommit(), m.last()); c > m.applied {
			m.applied += 1 + uint64(m.rng.IntN(int(c-m.applied)))
			require.NoError(m.t, m.s.SetApplied(m.applied), ctx)
		}
	case r < 85: // retention below the high watermark
		hw := m.p.HighWatermark()
		to := m.p.LogStartOffset() + int64(m.rng.IntN(int(hw-m.p.LogStartOffset())+1))
		_, err := m.p.DeleteRecordsBefore(to)
		require.NoError(m.t, err, ctx)
		_, err = m.p.EnforceRetention(time.UnixMilli(1_700_000_000_000))
		require.NoError(m.t, err, ctx)
		if f := uint64(m.p.FirstOrdinal()); f > m.first() {
			require.NoError(m.t, m.ms.Compact(f-1), ctx)
			m.stats.compactions++
		}
	case r < 92: // clean restart
		require.NoError(m.t, m.p.Close(), ctx)
		m.restarted()
		m.stats.restarts++
	default: // power loss
		if m.rng.IntN(2) == 0 {
			m.fs = m.fs.CrashClone()
		} else {
			m.fs = m.fs.CrashCloneTorn(m.rng)
		}
		m.restarted()
		m.stats.crashes++
	}
	m.check(ctx)
}

// restarted reopens the log and the storage and brings the model to what
// survived: the log is a prefix of the model at least as long as what
// was fsynced; term and vote are the last ones set (raft.state is
// written at once when they change); the high watermark starts over at
// the log start (raft hands entries back again from the applied index).
func (m *storageModel) restarted() {
	m.open()
	last, _ := m.s.LastIndex()
	require.GreaterOrEqual(m.t, last, m.durable, "seed %d: fsynced entries lost", m.seed)
	require.LessOrEqual(m.t, last, m.last(), "seed %d", m.seed)
	for i := last + 1; m.ents[i] != nil; i++ {
		delete(m.ents, i)
	}
	first, _ := m.s.FirstIndex()
	require.Equal(m.t, m.first(), first, "seed %d: first index after the restart", m.seed)
	ms := raft.NewMemoryStorage()
	var dummy uint64
	if first > 1 {
		dummy, _ = m.ms.Term(first - 1)
	}
	require.NoError(m.t, ms.ApplySnapshot(&raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
		Index: proto.Uint64(first - 1), Term: proto.Uint64(dummy), ConfState: &raftpb.ConfState{}}}))
	var ents []*raftpb.Entry
	for i := first; i <= last; i++ {
		ents = append(ents, m.ents[i])
	}
	require.NoError(m.t, ms.Append(ents))
	hard, _, err := m.s.InitialState()
	require.NoError(m.t, err)
	require.Equal(m.t, m.hs.GetTerm(), hard.GetTerm(), "seed %d: term after the restart", m.seed)
	require.Equal(m.t, m.hs.GetVote(), hard.GetVote(), "seed %d: vote after the restart", m.seed)
	m.hs = proto.Clone(hard).(*raftpb.HardState)
	require.NoError(m.t, ms.SetHardState(m.hs))
	m.ms, m.durable = ms, last
	m.applied = first - 1
	if m.term < m.hs.GetTerm() {
		m.term = m.hs.GetTerm()
	}
	// Entries past the log keep no term: a later overwrite needs a newer
	// term than any that survived.
}

func (m *storageModel) check(ctx string) {
	t := m.t
	first, last := m.first(), m.last()
	gotFirst, _ := m.s.FirstIndex()
	gotLast, _ := m.s.LastIndex()
	require.Equal(t, first, gotFirst, "%s: FirstIndex", ctx)
	require.Equal(t, last, gotLast, "%s: LastIndex", ctx)
	// Term, over the whole range when short, else at random points.
	probe := func(i uint64) {
		want, werr := m.ms.Term(i)
		got, gerr := m.s.Term(i)
		require.Equal(t, werr != nil, gerr != nil, "%s: Term(%d) errors %v, %v", ctx, i, werr, gerr)
		if werr != nil {
			require.True(t, errors.Is(gerr, werr), "%s: Term(%d) = %v, want %v", ctx, i, gerr, werr)
			return
		}
		require.Equal(t, want, got, "%s: Term(%d)", ctx, i)
	}
	if first > 1 {
		probe(first - 2)
	}
	probe(last + 1)
	if last+1-first <= 40 {
		for i := first - 1; i <= last; i++ {
			probe(i)
		}
	} else {
		probe(first - 1)
		probe(last)
		for range 8 {
			probe(first + uint64(m.rng.IntN(int(last-first+1))))
		}
	}
	// Entries over random ranges and sizes.
	for range 2 {
		if last < first {
			break
		}
		lo := first + uint64(m.rng.IntN(int(last-first+1)))
		hi := lo + 1 + uint64(m.rng.IntN(int(last-lo+1)))
		size := uint64(math.MaxUint64)
		if m.rng.IntN(2) == 0 {
			size = uint64(m.rng.IntN(400))
		}
		want, werr := m.ms.Entries(lo, hi, size)
		got, gerr := m.s.Entries(lo, hi, size)
		require.NoError(t, werr, "%s: model Entries(%d, %d)", ctx, lo, hi)
		require.NoError(t, gerr, "%s: Entries(%d, %d, %d)", ctx, lo, hi, size)
		require.NotEmpty(t, got, "%s: Entries(%d, %d, %d)", ctx, lo, hi, size)
		require.LessOrEqual(t, len(got), len(want), "%s: Entries(%d, %d, %d)", ctx, lo, hi, size)
		if size == math.MaxUint64 {
			require.Len(t, got, len(want), "%s: Entries(%d, %d) unlimited", ctx, lo, hi)
		}
		for i, e := range got {
			w := want[i]
			require.Equal(t, w.GetIndex(), e.GetIndex(), ctx)
			require.Equal(t, w.GetTerm(), e.GetTerm(), "%s: entry %d term", ctx, w.GetIndex())
			require.Equal(t, w.GetType(), e.GetType(), "%s: entry %d type", ctx, w.GetIndex())
			require.True(t, bytes.Equal(w.Data, e.Data), "%s: entry %d data", ctx, w.GetIndex())
		}
	}
	if first > 1 {
		_, err := m.s.Entries(first-1, first, math.MaxUint64)
		require.ErrorIs(t, err, raft.ErrCompacted, ctx)
	}
	hard, _, err := m.s.InitialState()
	require.NoError(t, err, ctx)
	require.Equal(t, m.hs.GetTerm(), hard.GetTerm(), ctx)
	require.Equal(t, m.hs.GetVote(), hard.GetVote(), ctx)
	// The high watermark is the end of the applied entry (one offset per
	// entry), or the log start when nothing applied is in the log.
	wantHW := max(int64(m.applied), m.p.LogStartOffset())
	if m.applied+1 < first {
		wantHW = m.p.LogStartOffset()
	}
	require.Equal(t, wantHW, m.p.HighWatermark(), "%s: high watermark with entry %d applied", ctx, m.applied)
}
