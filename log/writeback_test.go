package log

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// wbFS is a MemFS whose files take write-out hints (writebackStarter).
type wbFS struct {
	*MemFS
	onWriteback func(off, n int64)
}

func (f wbFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	file, err := f.MemFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return wbFile{File: file, fs: f}, nil
}

type wbFile struct {
	File
	fs wbFS
}

func (f wbFile) StartWriteback(off, n int64) { f.fs.onWriteback(off, n) }

// TestWritebackAfterUnlock: with StartWriteback each append and marker
// starts the write-out of exactly the bytes it wrote, and does so after
// releasing appendMu, since sync_file_range can block on a full device
// queue and the partition's next append must not wait for it.
func TestWritebackAfterUnlock(t *testing.T) {
	t.Parallel()
	var p *Partition
	var ranges [][2]int64
	held := 0
	fsys := wbFS{MemFS: NewMemFS()}
	fsys.onWriteback = func(off, n int64) {
		if p.appendMu.TryLock() {
			p.appendMu.Unlock()
		} else {
			held++
		}
		ranges = append(ranges, [2]int64{off, n})
	}
	cfg := DefaultConfig()
	cfg.StartWriteback = true
	p = openMem(t, fsys, cfg)
	defer p.Close()

	a := testBatch(3, 100, -1, -1, 0)
	mustAppend(t, p, a)
	txn := makeBatch(batchSpec{n: 2, valueSize: 10, pid: 7, epoch: 0, seq: 0, attrs: 0x10})
	mustAppend(t, p, txn)
	_, err := p.WriteMarker(Marker{ProducerID: 7, ProducerEpoch: 0, Commit: true}, testNow)
	require.NoError(t, err)
	require.Zero(t, held, "appendMu was held during a write-out hint")
	require.Len(t, ranges, 3)
	require.Equal(t, [2]int64{0, int64(len(a))}, ranges[0])
	require.Equal(t, [2]int64{int64(len(a)), int64(len(txn))}, ranges[1])
	require.Equal(t, int64(len(a)+len(txn)), ranges[2][0], "the marker follows")
	require.Equal(t, p.active.size, ranges[2][0]+ranges[2][1])

	cfg.StartWriteback = false
	ranges = nil
	q := openMem(t, wbFS{MemFS: NewMemFS(), onWriteback: fsys.onWriteback}, cfg)
	defer q.Close()
	mustAppend(t, q, a)
	require.Empty(t, ranges, "off unless configured")
}
