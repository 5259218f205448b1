package log

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, fsys FS, name, data string, sync bool) File {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	require.NoError(t, err)
	_, err = f.Write([]byte(data))
	require.NoError(t, err)
	if sync {
		require.NoError(t, f.Sync())
	}
	return f
}

func TestMemFSCrashClone(t *testing.T) {
	t.Parallel()
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))

	a := writeFile(t, m, "/d/a", "synced", true)
	_, err := a.Write([]byte("+unsynced"))
	require.NoError(t, err)
	writeFile(t, m, "/d/b", "never dir-synced", true)

	// Neither entry is durable before SyncDir.
	c := m.CrashClone()
	names, err := c.ReadDir("/d")
	require.NoError(t, err)
	require.Empty(t, names)

	require.NoError(t, m.SyncDir("/d"))
	writeFile(t, m, "/d/c", "after syncdir", true)
	c = m.CrashClone()
	names, err = c.ReadDir("/d")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, names)
	got, err := c.ReadFile("/d/a")
	require.NoError(t, err)
	require.Equal(t, "synced", string(got), "unsynced bytes are lost")

	// Rename and remove become durable with SyncDir only.
	require.NoError(t, m.Rename("/d/a", "/d/a2"))
	require.NoError(t, m.Remove("/d/b"))
	names, err = m.CrashClone().ReadDir("/d")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, names)
	require.NoError(t, m.SyncDir("/d"))
	names, err = m.CrashClone().ReadDir("/d")
	require.NoError(t, err)
	require.Equal(t, []string{"a2", "c"}, names)

	// Torn clone keeps a prefix of unsynced appends.
	torn := m.CrashCloneTorn(rand.New(rand.NewPCG(1, 1)))
	got, err = torn.ReadFile("/d/a2")
	require.NoError(t, err)
	require.Contains(t, "synced+unsynced", string(got))
	require.GreaterOrEqual(t, len(got), len("synced"))
}

func TestMemFSFileSemantics(t *testing.T) {
	t.Parallel()
	m := NewMemFS()
	_, err := m.OpenFile("/missing/x", os.O_CREATE|os.O_RDWR, 0o644)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, m.MkdirAll("/d", 0o755))
	_, err = m.OpenFile("/d/x", os.O_RDWR, 0)
	require.ErrorIs(t, err, fs.ErrNotExist)

	f := writeFile(t, m, "/d/x", "hello", false)
	_, err = m.OpenFile("/d/x", os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	require.ErrorIs(t, err, fs.ErrExist)
	buf := make([]byte, 10)
	n, err := f.ReadAt(buf, 1)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, "ello", string(buf[:n]))
	require.NoError(t, f.Truncate(2))
	size, err := f.Size()
	require.NoError(t, err)
	require.Equal(t, int64(2), size)
	_, err = f.Write([]byte("y"))
	require.NoError(t, err)
	got, _ := m.ReadFile("/d/x")
	require.Equal(t, "hey", string(got), "O_APPEND writes at the end after truncation")

	// Non-append handles write at their position.
	g, err := m.OpenFile("/d/x", os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = g.Write([]byte("J"))
	require.NoError(t, err)
	got, _ = m.ReadFile("/d/x")
	require.Equal(t, "Jey", string(got))

	r, err := m.OpenFile("/d/x", os.O_RDONLY, 0)
	require.NoError(t, err)
	_, err = r.Write([]byte("no"))
	require.Error(t, err)

	boom := errors.New("boom")
	m.FailNextWrite(boom)
	_, err = f.Write([]byte("z"))
	require.ErrorIs(t, err, boom)
	_, err = f.Write([]byte("z"))
	require.NoError(t, err, "only the next write fails")
	m.FailNextSync(boom)
	require.ErrorIs(t, f.Sync(), boom)
	require.NoError(t, f.Sync())
	m.SetErrorHook(func(op Op, name string) error {
		if op == OpRename {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, m.Rename("/d/x", "/d/y"), boom)
	m.SetErrorHook(nil)

	require.NoError(t, f.Close())
	_, err = f.Write([]byte("z"))
	require.ErrorIs(t, err, os.ErrClosed)
	require.NoError(t, m.RemoveAll("/d"))
	_, err = m.ReadDir("/d")
	require.ErrorIs(t, err, fs.ErrNotExist)
}
