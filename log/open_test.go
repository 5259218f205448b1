package log

import (
	"sync"
	"testing"
	"time"

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

// TestReplicaOpensWithHWAtLogStart: a replica's log does not expose its
// recovered tail: Open leaves the high watermark at the log start, and
// only the replica raises it; a single node's Open sets it to the end.
func TestReplicaOpensWithHWAtLogStart(t *testing.T) {
	m := NewMemFS()
	p, err := Open(m, "/r", Config{}, nil)
	require.NoError(t, err)
	_, err = p.Append(testBatch(3, 10, -1, -1, -1), time.Now())
	require.NoError(t, err)
	_, err = p.Sync()
	require.NoError(t, err)
	require.NoError(t, p.Close())

	p, err = Open(m, "/r", Config{Replica: true}, nil)
	require.NoError(t, err)
	require.Equal(t, int64(3), p.LogEndOffset())
	require.Equal(t, int64(0), p.HighWatermark(), "nothing visible until the replica says so")
	p.SetHighWatermark(2)
	require.Equal(t, int64(2), p.HighWatermark())
	require.NoError(t, p.Close())

	p, err = Open(m, "/r", Config{}, nil)
	require.NoError(t, err)
	require.Equal(t, int64(3), p.HighWatermark(), "a single node's log opens at its end")
	require.NoError(t, p.Close())
}
