package log

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteParts: writePartsAt writes its buffers one after the other, as
// if joined, through the OS's vectored write (more buffers than IOV_MAX,
// empty ones among them) and through a file without one (MemFS).
func TestWriteParts(t *testing.T) {
	var parts [][]byte
	var want []byte
	for i := range 2500 {
		b := bytes.Repeat([]byte{byte(i)}, i%7*97)
		parts = append(parts, b)
		want = append(want, b...)
	}
	for name, fs := range map[string]FS{"os": OSFS(), "memfs": NewMemFS()} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, fs.MkdirAll(dir, 0o755))
			f, err := fs.OpenFile(filepath.Join(dir, "f"), os.O_CREATE|os.O_RDWR, 0o644)
			require.NoError(t, err)
			defer f.Close()
			if name == "os" {
				_, ok := f.(partsWriter)
				require.True(t, ok, "the OS file writes vectored")
			}
			_, err = f.Write([]byte("head"))
			require.NoError(t, err)
			n, err := writePartsAt(f, parts, 4)
			require.NoError(t, err)
			require.Equal(t, len(want), n)
			got := make([]byte, 4+len(want))
			_, err = f.ReadAt(got, 0)
			require.NoError(t, err)
			require.Equal(t, append([]byte("head"), want...), got)
		})
	}
}
