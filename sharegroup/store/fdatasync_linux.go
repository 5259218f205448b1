package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's data durable, without its metadata unless reading
// the data needs it (a grown size).
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
