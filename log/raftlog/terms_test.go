package raftlog

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/log"
)

func TestTermsAppendAndTerm(t *testing.T) {
	var c Terms
	_, ok := c.Term(1)
	require.False(t, ok, "empty")
	require.NoError(t, c.Append(1, 1, 0))
	require.NoError(t, c.Append(1, 2, 10)) // same term: no new run
	require.NoError(t, c.Append(3, 5, 40))
	require.NoError(t, c.Append(4, 6, 41))
	require.Len(t, c.runs, 3)
	for i, want := range map[uint64]uint64{1: 1, 4: 1, 5: 3, 6: 4, 100: 4} {
		got, ok := c.Term(i)
		require.True(t, ok)
		require.Equal(t, want, got, "entry %d", i)
	}
	_, ok = c.Term(0)
	require.False(t, ok, "before the first run")
	require.ErrorIs(t, c.Append(2, 7, 50), ErrTermOrder, "an older term")
	require.ErrorIs(t, c.Append(5, 6, 50), ErrTermOrder, "not after the last run's entry")
	require.ErrorIs(t, c.Append(5, 7, 40), ErrTermOrder, "an offset going back")
	require.Equal(t, uint64(4), c.Last())
}

func TestTermsTruncateAndCompact(t *testing.T) {
	var c Terms
	for _, r := range []termRun{{1, 1, 0}, {2, 10, 100}, {5, 20, 200}, {6, 30, 300}} {
		require.NoError(t, c.Append(r.term, r.first, r.offset))
	}
	c.TruncateFrom(25) // inside term 5's run: it stays
	require.Equal(t, uint64(5), c.Last())
	c.TruncateFrom(20) // term 5's first entry: the run goes
	require.Equal(t, uint64(2), c.Last())
	require.NoError(t, c.Append(7, 20, 200), "the overwriting term")
	c.Compact(15, 140) // entry 14 is term 2's: that run stays, from 14 at the log start; term 1's goes
	term, ok := c.Term(14)
	require.True(t, ok)
	require.Equal(t, uint64(2), term)
	_, ok = c.Term(13)
	require.False(t, ok, "compacted")
	require.Equal(t, termRun{2, 14, 140}, c.runs[0])
	c.Compact(10, 90) // below what is kept already: nothing changes
	require.Len(t, c.runs, 2)
	require.Equal(t, termRun{2, 14, 140}, c.runs[0])
	c.Compact(25, 250) // into term 7's run: term 2's goes, term 7's starts at 24, offset 250
	require.Equal(t, []termRun{{7, 24, 250}}, c.runs)
	term, off, ok := c.EndOffsetFor(3, 400)
	require.True(t, ok)
	require.Equal(t, uint64(3), term, "older than every run: itself")
	require.Equal(t, int64(250), off, "the first run's offset, at the log start")
}

// TestTermsEndOffsetFor: OffsetForLeaderEpoch's answers, as Kafka's
// LeaderEpochFileCache.endOffsetFor gives them.
func TestTermsEndOffsetFor(t *testing.T) {
	var c Terms
	_, off, ok := c.EndOffsetFor(1, 50)
	require.False(t, ok)
	require.Equal(t, int64(-1), off)
	for _, r := range []termRun{{2, 1, 0}, {4, 10, 100}, {7, 20, 200}} {
		require.NoError(t, c.Append(r.term, r.first, r.offset))
	}
	for _, tc := range []struct {
		ask, term uint64
		off       int64
		ok        bool
	}{
		{7, 7, 250, true}, // the newest term: the log end
		{4, 4, 200, true}, // a known term: where the next began
		{5, 4, 200, true}, // between terms: the largest not above it
		{1, 1, 0, true},   // older than every run: itself, the first offset
		{9, 0, -1, false}, // newer than every run
		{2, 2, 100, true},
	} {
		term, off, ok := c.EndOffsetFor(tc.ask, 250)
		require.Equal(t, tc.ok, ok, "term %d", tc.ask)
		require.Equal(t, tc.term, term, "term %d", tc.ask)
		require.Equal(t, tc.off, off, "term %d", tc.ask)
	}
}

// TestTermsMatchesModel: random appends, truncations and compactions
// against a plain list of every entry's term.
func TestTermsMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 29))
	for round := 0; round < 200; round++ {
		var c Terms
		var model []uint64 // model[k] is entry first+k's term
		first, term := uint64(1), uint64(1)
		offsetOf := func(i uint64) int64 { return int64(i) * 3 }
		for op := 0; op < 300; op++ {
			next := first + uint64(len(model))
			switch r := rng.IntN(10); {
			case r < 6:
				if rng.IntN(4) == 0 {
					term += uint64(1 + rng.IntN(3))
				}
				require.NoError(t, c.Append(term, next, offsetOf(next)))
				model = append(model, term)
			case r < 8 && len(model) > 0:
				cut := first + uint64(rng.IntN(len(model)))
				c.TruncateFrom(cut)
				model = model[:cut-first]
				term = max(term, c.Last())
			case len(model) > 1:
				k := uint64(rng.IntN(len(model)))
				c.Compact(first+k, offsetOf(first+k))
				// entries below first+k-1 may be forgotten: the model
				// keeps asking only from first+k-1 on
				if k > 0 {
					model, first = model[k-1:], first+k-1
				}
			}
			for k, want := range model {
				got, ok := c.Term(first + uint64(k))
				require.True(t, ok, "round %d op %d entry %d", round, op, first+uint64(k))
				require.Equal(t, want, got, "round %d op %d entry %d", round, op, first+uint64(k))
			}
		}
	}
}

func TestTermsCheckpoint(t *testing.T) {
	m := newFS(t)
	got, found, err := ReadTerms(m, dir)
	require.NoError(t, err)
	require.False(t, found)
	require.Empty(t, got.runs)
	var c Terms
	for _, r := range []termRun{{2, 1, 0}, {4, 10, 100}, {7, 20, 200}} {
		require.NoError(t, c.Append(r.term, r.first, r.offset))
	}
	require.NoError(t, WriteTerms(m, dir, &c))
	got, found, err = ReadTerms(m.CrashClone(), dir)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, c.runs, got.runs)
	good, err := m.ReadFile(dir + "/" + TermsFile)
	require.NoError(t, err)
	for i := range good {
		b := append([]byte(nil), good...)
		b[i] ^= 0x10
		require.NoError(t, m.WriteFile(dir+"/"+TermsFile, b))
		_, _, err := ReadTerms(m, dir)
		require.ErrorIs(t, err, ErrCorruptTerms, "byte %d", i)
	}
	m.SetErrorHook(func(op log.Op, _ string) error {
		if op == log.OpRead {
			return errors.New("eio")
		}
		return nil
	})
	_, _, err = ReadTerms(m, dir)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrCorruptTerms, "an I/O error is not corruption")
}

// FuzzDecodeTerms: arbitrary bytes never panic, and what decodes
// re-encodes to the same bytes (the encoding is canonical).
func FuzzDecodeTerms(f *testing.F) {
	var c Terms
	_ = c.Append(2, 1, 0)
	_ = c.Append(4, 10, 100)
	f.Add(c.encode())
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := decodeTerms(in)
		if err != nil {
			return
		}
		if string(got.encode()) != string(in) {
			t.Fatal("decoded runs encode differently")
		}
	})
}
