package raftlog

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoal-mq/shoal/log"
)

const dir = "/p"

func newFS(t *testing.T) *log.MemFS {
	t.Helper()
	m := log.NewMemFS()
	require.NoError(t, m.MkdirAll(dir, 0o755))
	return m
}

func state(term, vote, commit uint64, voters ...uint64) State {
	return State{
		Hard:      &raftpb.HardState{Term: proto.Uint64(term), Vote: proto.Uint64(vote), Commit: proto.Uint64(commit)},
		Conf:      &raftpb.ConfState{Voters: voters, Learners: []uint64{9}},
		ConfIndex: commit / 2,
	}
}

func requireState(t *testing.T, want, got State, msg string) {
	t.Helper()
	require.True(t, proto.Equal(want.Hard, got.Hard), "%s: HardState %v, want %v", msg, got.Hard, want.Hard)
	require.True(t, proto.Equal(want.Conf, got.Conf), "%s: ConfState %v, want %v", msg, got.Conf, want.Conf)
	require.Equal(t, want.ConfIndex, got.ConfIndex, "%s: ConfIndex", msg)
}

func TestStateRoundTrip(t *testing.T) {
	m := newFS(t)
	_, found, err := ReadState(m, dir)
	require.NoError(t, err)
	require.False(t, found, "a replica never started has no state")
	s1 := state(3, 2, 17, 1, 2, 3)
	require.NoError(t, WriteState(m, dir, s1))
	got, found, err := ReadState(m, dir)
	require.NoError(t, err)
	require.True(t, found)
	requireState(t, s1, got, "read back")
	s2 := state(4, 0, 17, 1, 2, 3)
	require.NoError(t, WriteState(m, dir, s2))
	got, _, err = ReadState(m, dir)
	require.NoError(t, err)
	requireState(t, s2, got, "replaced")
	// Written, it is durable: power loss right after finds it.
	got, found, err = ReadState(m.CrashClone(), dir)
	require.NoError(t, err)
	require.True(t, found)
	requireState(t, s2, got, "after power loss")
}

// TestStateCrashAtEveryStep: a write interrupted after any number of
// its file operations, then power loss, leaves the old state or the
// new one, never a mix, a corrupt file or no file; torn unsynced
// growth included.
func TestStateCrashAtEveryStep(t *testing.T) {
	old, next := state(5, 1, 40, 1, 2, 3), state(6, 3, 41, 1, 2, 3, 4)
	rng := rand.New(rand.NewPCG(1, 2))
	sawNew := false
	for k := 0; ; k++ {
		m := newFS(t)
		require.NoError(t, WriteState(m, dir, old))
		n := 0
		crash := errors.New("crash")
		m.SetErrorHook(func(log.Op, string) error {
			if n++; n > k {
				return crash
			}
			return nil
		})
		err := WriteState(m, dir, next)
		m.SetErrorHook(nil)
		for _, after := range []*log.MemFS{m.CrashClone(), m.CrashCloneTorn(rng)} {
			got, found, rerr := ReadState(after, dir)
			require.NoError(t, rerr, "crash after %d operations", k)
			require.True(t, found, "crash after %d operations", k)
			if proto.Equal(got.Hard, next.Hard) {
				requireState(t, next, got, "new")
				sawNew = true
			} else {
				require.Error(t, err, "after %d operations the write had returned nil, yet the old state came back", k)
				requireState(t, old, got, "old")
			}
		}
		if err == nil {
			break // every operation ran
		}
		require.ErrorIs(t, err, crash)
		require.Less(t, k, 100)
	}
	require.True(t, sawNew)
}

// TestStateCorruption: any changed or missing byte is ErrCorruptState,
// never a state (a forgotten vote could be cast twice).
func TestStateCorruption(t *testing.T) {
	m := newFS(t)
	require.NoError(t, WriteState(m, dir, state(7, 2, 99, 1, 2, 3)))
	good, err := m.ReadFile(dir + "/" + StateFile)
	require.NoError(t, err)
	for i := range good {
		for _, bit := range []byte{0x01, 0x80} {
			b := append([]byte(nil), good...)
			b[i] ^= bit
			require.NoError(t, m.WriteFile(dir+"/"+StateFile, b))
			_, _, err := ReadState(m, dir)
			require.ErrorIs(t, err, ErrCorruptState, "byte %d bit %#x", i, bit)
		}
	}
	for n := 0; n < len(good); n++ {
		require.NoError(t, m.WriteFile(dir+"/"+StateFile, good[:n]))
		_, _, err := ReadState(m, dir)
		require.ErrorIs(t, err, ErrCorruptState, "truncated to %d bytes", n)
	}
}

// TestStateRefusesUnknownFields: a state written by a newer version,
// with fields this one does not know, is refused rather than read with
// them dropped.
func TestStateRefusesUnknownFields(t *testing.T) {
	st := state(2, 1, 5, 1, 2, 3)
	st.Hard.ProtoReflect().SetUnknown([]byte{0x78, 0x01}) // field 15, varint 1
	b, err := encodeState(st)
	require.NoError(t, err)
	_, err = decodeState(b)
	require.ErrorContains(t, err, "unknown protobuf fields")
	// A nil HardState and ConfState (a replica's first write) read back
	// as empty ones.
	b, err = encodeState(State{})
	require.NoError(t, err)
	got, err := decodeState(b)
	require.NoError(t, err)
	require.Zero(t, got.Hard.GetTerm())
	require.Empty(t, got.Conf.GetVoters())
}

// FuzzDecodeState: arbitrary bytes never panic, and whatever decodes
// encodes to bytes that decode to an equal state.
func FuzzDecodeState(f *testing.F) {
	b, err := encodeState(state(1, 1, 1, 1, 2, 3))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("SHRS\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		st, err := decodeState(in)
		if err != nil {
			return
		}
		out, err := encodeState(st)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeState(out)
		if err != nil || !proto.Equal(back.Hard, st.Hard) || !proto.Equal(back.Conf, st.Conf) {
			t.Fatalf("re-encoded state does not decode to itself: %v", err)
		}
	})
}
