package log

import "golang.org/x/sys/unix"

var _ writebackStarter = osFile{}

// StartWriteback starts the write-out of the range's dirty pages and
// returns without waiting for it (SYNC_FILE_RANGE_WRITE). Errors are
// ignored: the fsync that follows reports them.
func (f osFile) StartWriteback(off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	})
}
