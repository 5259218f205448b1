//go:build linux || darwin

package broker

import "syscall"

// diskSpace returns the total and usable bytes of the volume holding
// dir, or -1, -1 if statfs fails (DescribeLogDirs v4).
func diskSpace(dir string) (total, usable int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1, -1
	}
	bs := uint64(st.Bsize)
	return int64(st.Blocks * bs), int64(st.Bavail * bs)
}
