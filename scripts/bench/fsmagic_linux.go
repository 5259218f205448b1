package main

import "syscall"

// fsMagic is the file system type (statfs f_type) of dir.
func fsMagic(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Type), true
}
