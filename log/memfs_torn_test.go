package log

import (
	"bytes"
	randv2 "math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMemFSTornOverwrite: after unsynced writes over synced bytes (and
// past them), a torn crash clone keeps the synced contents with a
// prefix of the changed bytes in place, from the first one that
// changed; every length of that prefix occurs, and nothing else.
func TestMemFSTornOverwrite(t *testing.T) {
	synced := bytes.Repeat([]byte{0}, 64)
	copy(synced, "head")
	seen := map[int]bool{}
	for seed := range uint64(400) {
		fsys := NewMemFS()
		require.NoError(t, fsys.MkdirAll("/d", 0o755))
		f, err := fsys.OpenFile("/d/f", os.O_CREATE|os.O_RDWR, 0o644)
		require.NoError(t, err)
		_, err = f.WriteAt(synced, 0)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, fsys.SyncDir("/d"))
		_, err = f.WriteAt(bytes.Repeat([]byte{'x'}, 70), 10) // over the zeros and 16 bytes past them
		require.NoError(t, err)
		got, err := fsys.CrashCloneTorn(randv2.New(randv2.NewPCG(seed, 1))).ReadFile("/d/f")
		require.NoError(t, err)
		k := bytes.LastIndexByte(got, 'x') + 1 // bytes [10, k) landed
		if k == 0 {
			k = 10
		}
		want := append([]byte{}, synced...)
		if k > len(want) {
			want = append(want, make([]byte, k-len(want))...)
		}
		copy(want[10:], bytes.Repeat([]byte{'x'}, k-10))
		require.Equal(t, want, got, "seed %d", seed)
		seen[k] = true
	}
	require.True(t, seen[10] && seen[80], "none and all of the write land")
	require.Greater(t, len(seen), 40)
}
