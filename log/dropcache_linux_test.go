package log

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// residentPages counts the pages of a file in the page cache (mincore)
// and all its pages.
func residentPages(t *testing.T, path string) (resident, total int) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	if fi.Size() == 0 {
		return 0, 0
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer func() { require.NoError(t, unix.Munmap(data)) }()
	ps := os.Getpagesize()
	vec := make([]byte, (len(data)+ps-1)/ps)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno, "mincore: %v", errno)
	for _, v := range vec {
		if v&1 != 0 {
			resident++
		}
	}
	return resident, len(vec)
}

// dropCacheDir is a temporary directory whose file system can drop
// cached pages: tmpfs keeps every page in memory whatever it is told.
func dropCacheDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	if st.Type == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs, whose pages cannot be dropped", dir)
	}
	return dir
}

// TestDropCacheAfterSync: with SetDropCache on, what a Sync made
// durable leaves the page cache (sealed segments and the active one,
// but for the page the next append writes into), and the log reads
// the same from the disk; off, the pages stay, so the check can tell.
func TestDropCacheAfterSync(t *testing.T) {
	for _, drop := range []bool{false, true} {
		t.Run(map[bool]string{false: "off", true: "on"}[drop], func(t *testing.T) {
			dir := dropCacheDir(t)
			cfg := DefaultConfig()
			cfg.SegmentBytes = 1 << 20
			cfg.ZeroAheadBytes = 0 // zeros ahead stay cached: the appends write over them
			p, err := Open(OSFS(), dir, cfg, testLogger(t))
			require.NoError(t, err)
			defer p.Close()
			p.SetDropCache(drop)

			var want [][]byte
			for i := range 40 { // 40 batches of 64 KiB and a bit: three segments
				b := testBatch(64, 1000, -1, 0, 0)
				res := mustAppend(t, p, b)
				require.Equal(t, int64(i*64), res.BaseOffset)
				want = append(want, b)
				if i%7 == 0 {
					_, err := p.Sync()
					require.NoError(t, err)
				}
			}
			_, err = p.Sync()
			require.NoError(t, err)

			logs, err := filepath.Glob(filepath.Join(dir, "*"+logSuffix))
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(logs), 3, "the log never rolled")
			for _, name := range logs {
				resident, total := residentPages(t, name)
				if drop {
					require.LessOrEqual(t, resident, 1, "%s: %d of %d pages cached", name, resident, total)
				} else { // most of it at least: a shared machine's memory pressure may evict some
					require.Greater(t, resident, total/2, "%s: %d of %d pages cached", name, resident, total)
				}
			}

			_, got := readAll(t, p, 0)
			require.Equal(t, want, got)
		})
	}
}

// TestDropCacheAfterTruncate: a replica log cut back by TruncateFrom
// and written again past where its last drop ended has the rewritten
// data dropped too (review: the drop's mark stayed above the cut, and
// the pages between the cut and it stayed cached for good), and reads
// back what was written.
func TestDropCacheAfterTruncate(t *testing.T) {
	dir := dropCacheDir(t)
	cfg := DefaultConfig()
	cfg.Replica = true
	cfg.RetentionMs = -1
	cfg.ZeroAheadBytes = 0
	p, err := Open(OSFS(), dir, cfg, testLogger(t))
	require.NoError(t, err)
	defer p.Close()
	p.SetDropCache(true)

	var want [][]byte
	add := func(n int) {
		for range n {
			want = append(want, appendRep(t, p, testBatch(64, 1000, -1, 0, 0)))
		}
		_, err := p.Sync()
		require.NoError(t, err)
	}
	resident := func(what string) {
		logs, err := filepath.Glob(filepath.Join(dir, "*"+logSuffix))
		require.NoError(t, err)
		require.Len(t, logs, 1)
		r, total := residentPages(t, logs[0])
		require.LessOrEqual(t, r, 1, "%s: %d of %d pages cached", what, r, total)
	}
	add(40)
	resident("written")
	require.NoError(t, p.TruncateFrom(11)) // keeps ordinals 1 to 10
	want = want[:10]
	add(40) // past where the first drop ended
	resident("cut and written again")

	p.SetHighWatermark(p.LogEndOffset())
	_, got := readAll(t, p, 0)
	require.Equal(t, want, got)
}
