package log

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOpenMakesNewDirectoriesDurable: a partition directory Open
// creates is made durable in its parent (and so on up for each level it
// created), so that a power loss cannot undo the directory and take its
// fsynced segments with it; reopening syncs no parent.
func TestOpenMakesNewDirectoriesDurable(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/data", 0o755))
	var mu sync.Mutex
	var synced []string
	m.SetErrorHook(func(op Op, name string) error {
		if op == OpSyncDir {
			mu.Lock()
			synced = append(synced, name)
			mu.Unlock()
		}
		return nil
	})
	p, err := Open(m, "/data/logs/t-0", Config{}, nil)
	require.NoError(t, err)
	require.NoError(t, p.Close())
	require.Subset(t, synced, []string{"/data/logs", "/data"}, "the parents of both created levels")
	synced = nil
	p, err = Open(m, "/data/logs/t-0", Config{}, nil)
	require.NoError(t, err)
	require.NoError(t, p.Close())
	require.NotContains(t, synced, "/data/logs", "an existing directory needs no parent sync")
	require.NotContains(t, synced, "/data")
}
