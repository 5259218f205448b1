package log

import (
	"io"
	"os"
)

// FS abstracts all file access of the package so tests can inject errors
// and simulate crashes (MemFS). Paths use the OS separator conventions of
// path/filepath.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	Rename(oldpath, newpath string) error
	MkdirAll(path string, perm os.FileMode) error
	// ReadDir returns the sorted names (not paths) of the entries of dir.
	ReadDir(dir string) ([]string, error)
	RemoveAll(path string) error
	// SyncDir makes the directory entries of dir (creations, renames,
	// removals) durable.
	SyncDir(dir string) error
}

// File is an open file. ReadAt must be safe to call concurrently with
// Write, WriteAt and Sync (os.File is; MemFS is). Segment files are
// written with WriteAt (never opened O_APPEND): a segment may have a
// zero-filled tail beyond its data (Config.ZeroAheadBytes).
type File interface {
	io.ReaderAt
	io.Writer
	io.WriterAt
	Sync() error
	Close() error
	Truncate(size int64) error
	Size() (int64, error)
}

// OSFS returns the FS of the operating system.
func OSFS() FS { return osFS{} }

type osFS struct{}

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) RemoveAll(path string) error                  { return os.RemoveAll(path) }

func (osFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

// partsWriter is implemented by files that write several buffers at an
// offset in one system call (Linux pwritev), as if they were joined.
type partsWriter interface {
	WritePartsAt(parts [][]byte, off int64) (int, error)
}

// writePartsAt writes parts to f one after the other from off: in one
// vectored write if f can, else one WriteAt each. It returns the bytes
// written.
func writePartsAt(f File, parts [][]byte, off int64) (int, error) {
	if len(parts) == 1 {
		return f.WriteAt(parts[0], off)
	}
	if w, ok := f.(partsWriter); ok {
		return w.WritePartsAt(parts, off)
	}
	total := 0
	for _, b := range parts {
		n, err := f.WriteAt(b, off+int64(total))
		total += n
		if err == nil && n != len(b) {
			err = io.ErrShortWrite
		}
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// writebackStarter is implemented by files that can start writing their
// dirty pages to the disk without waiting for it (Linux sync_file_range).
// A partition calls it after each append, so that by the time the group
// commit's fsync runs (often queued behind the partition's previous fsync)
// most of the data is already written. It is advice only: the fsync alone
// decides what is durable, and reports any error.
type writebackStarter interface {
	StartWriteback(off, n int64)
}

// startWriteback starts writing back n bytes of f from off if f can.
func startWriteback(f File, off, n int64) {
	if w, ok := f.(writebackStarter); ok {
		w.StartWriteback(off, n)
	}
}

// cacheDropper is implemented by files whose clean cached pages can be
// dropped (Linux posix_fadvise POSIX_FADV_DONTNEED). A partition with
// SetDropCache on calls it after each Sync for what the Sync made
// durable. It is advice only: dirty pages are never dropped, and a read
// of a dropped page reads it from the disk again.
type cacheDropper interface {
	DropCache(off, n int64)
}

// dropCache drops the cached pages wholly inside n bytes of f from off,
// if f can.
func dropCache(f File, off, n int64) {
	if d, ok := f.(cacheDropper); ok && n > 0 {
		d.DropCache(off, n)
	}
}
