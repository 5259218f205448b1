package log

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

var (
	_ writebackStarter = osFile{}
	_ cacheDropper     = osFile{}
	_ partsWriter      = osFile{}
)

// WritePartsAt writes parts at off with pwritev(2), at most IOV_MAX at
// a time, going on after a short write as os.File.WriteAt does.
func (f osFile) WritePartsAt(parts [][]byte, off int64) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	const iovMax = 1024
	total := 0
	for {
		for len(parts) > 0 && len(parts[0]) == 0 {
			parts = parts[1:]
		}
		if len(parts) == 0 {
			return total, nil
		}
		var n int
		var werr error
		if cerr := rc.Write(func(fd uintptr) bool {
			n, werr = unix.Pwritev(int(fd), parts[:min(len(parts), iovMax)], off+int64(total))
			return !errors.Is(werr, unix.EAGAIN)
		}); cerr != nil {
			return total, cerr
		}
		if errors.Is(werr, unix.EINTR) {
			continue
		}
		if werr != nil {
			return total, &os.PathError{Op: "write", Path: f.Name(), Err: werr}
		}
		if n <= 0 {
			return total, io.ErrShortWrite
		}
		total += n
		for n >= len(parts[0]) {
			n -= len(parts[0])
			if parts = parts[1:]; len(parts) == 0 {
				break
			}
		}
		if n > 0 { // a short write ended inside parts[0]
			parts = append([][]byte{parts[0][n:]}, parts[1:]...)
		}
	}
}

// StartWriteback starts the write-out of the range's dirty pages and
// returns without waiting for it (SYNC_FILE_RANGE_WRITE). Errors are
// ignored: the fsync that follows reports them.
func (f osFile) StartWriteback(off, n int64) {
	f.adviseFd(func(fd int) { _ = unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE) })
}

// DropCache drops the range's clean pages from the page cache
// (POSIX_FADV_DONTNEED; the kernel keeps a page the range covers only
// in part). Errors are ignored: it is advice.
func (f osFile) DropCache(off, n int64) {
	f.adviseFd(func(fd int) { _ = unix.Fadvise(fd, off, n, unix.FADV_DONTNEED) })
}

// adviseFd runs advice on the file's descriptor; a file that has none
// any more (closed) gets none.
func (f osFile) adviseFd(advice func(fd int)) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { advice(int(fd)) })
}
