package log

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// Op names a MemFS operation for the error hook.
type Op string

// Operations passed to a MemFS error hook.
const (
	OpOpen      Op = "open"
	OpWrite     Op = "write"
	OpRead      Op = "read"
	OpSync      Op = "sync"
	OpTruncate  Op = "truncate"
	OpRemove    Op = "remove"
	OpRename    Op = "rename"
	OpMkdirAll  Op = "mkdirall"
	OpReadDir   Op = "readdir"
	OpRemoveAll Op = "removeall"
	OpSyncDir   Op = "syncdir"
)

// MemFS is an in-memory FS for tests. It models what survives a power
// loss: file contents are durable up to the last File.Sync, and directory
// entries created, renamed or removed become durable only after SyncDir of
// their parent. MkdirAll and RemoveAll are durable at once (a
// simplification: the package never depends on them being otherwise).
// CrashClone returns the state a machine would find after power loss.
//
// Errors can be injected with FailNextWrite, FailNextSync or SetErrorHook.
// MemFS is safe for concurrent use.
type MemFS struct {
	mu        sync.Mutex
	files     map[string]*memInode // current namespace
	durable   map[string]*memInode // namespace as of the last SyncDir of each parent
	dirs      map[string]bool
	failWrite error
	failSync  error
	hook      func(op Op, name string) error
	// Crash point (SetCrashPoint): operations left before it, and the
	// file system it left.
	crashIn  int
	crashRng *rand.Rand
	crashed  *MemFS
}

type memInode struct {
	data   []byte
	synced []byte
}

// NewMemFS returns an empty MemFS with a root directory "/".
func NewMemFS() *MemFS {
	return &MemFS{
		files:   map[string]*memInode{},
		durable: map[string]*memInode{},
		dirs:    map[string]bool{"/": true, ".": true},
	}
}

// FailNextWrite makes the next File.Write return err (writing nothing).
func (m *MemFS) FailNextWrite(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failWrite = err
}

// FailNextSync makes the next File.Sync or SyncDir return err (syncing
// nothing).
func (m *MemFS) FailNextSync(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failSync = err
}

// SetErrorHook installs fn, called before every operation with the path
// involved; a non-nil result fails the operation. fn runs with the MemFS
// lock held and must not call back into the MemFS. nil removes the hook.
func (m *MemFS) SetErrorHook(fn func(op Op, name string) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hook = fn
}

// ErrPowerLost is what every operation of a MemFS returns once its crash
// point has passed (SetCrashPoint).
var ErrPowerLost = errors.New("memfs: power lost")

// SetCrashPoint arranges a power loss just before the n-th next
// operation (n >= 1): what is durable at that moment is kept for
// Crashed (with torn unsynced tails drawn from rng, as CrashCloneTorn
// does, or none when rng is nil), and that operation and every later one
// fail with ErrPowerLost. It lets a test lose power in the middle of a
// call (a truncation, a roll), not only between calls.
func (m *MemFS) SetCrashPoint(n int, rng *rand.Rand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.crashIn, m.crashRng = n, rng
}

// Crashed returns the file system the crash point left, nil before it.
func (m *MemFS) Crashed() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crashed
}

func (m *MemFS) check(op Op, name string) error {
	if m.crashed != nil {
		return pathErr(string(op), name, ErrPowerLost)
	}
	if m.crashIn > 0 {
		if m.crashIn--; m.crashIn == 0 {
			m.crashed = m.crashCloneLocked(m.crashRng)
			return pathErr(string(op), name, ErrPowerLost)
		}
	}
	if m.hook != nil {
		if err := m.hook(op, name); err != nil {
			return err
		}
	}
	return nil
}

func clean(name string) string { return filepath.Clean(name) }

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// OpenFile implements FS.
func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpOpen, name); err != nil {
		return nil, err
	}
	if !m.dirs[filepath.Dir(name)] {
		return nil, pathErr("open", name, fs.ErrNotExist)
	}
	if m.dirs[name] {
		return nil, pathErr("open", name, errors.New("is a directory"))
	}
	ino, ok := m.files[name]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, fs.ErrExist)
	case !ok && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case !ok:
		ino = &memInode{}
		m.files[name] = ino
	}
	if flag&os.O_TRUNC != 0 {
		ino.data = nil
	}
	return &memFile{fs: m, name: name, ino: ino, flag: flag}, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpRemove, name); err != nil {
		return err
	}
	if _, ok := m.files[name]; ok {
		delete(m.files, name)
		return nil
	}
	if m.dirs[name] {
		for n := range m.files {
			if filepath.Dir(n) == name {
				return pathErr("remove", name, errors.New("directory not empty"))
			}
		}
		delete(m.dirs, name)
		return nil
	}
	return pathErr("remove", name, fs.ErrNotExist)
}

// Rename implements FS.
func (m *MemFS) Rename(oldpath, newpath string) error {
	oldpath, newpath = clean(oldpath), clean(newpath)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpRename, oldpath); err != nil {
		return err
	}
	ino, ok := m.files[oldpath]
	if !ok {
		return pathErr("rename", oldpath, fs.ErrNotExist)
	}
	if !m.dirs[filepath.Dir(newpath)] {
		return pathErr("rename", newpath, fs.ErrNotExist)
	}
	delete(m.files, oldpath)
	m.files[newpath] = ino
	return nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(path string, perm os.FileMode) error {
	path = clean(path)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpMkdirAll, path); err != nil {
		return err
	}
	for p := path; !m.dirs[p]; p = filepath.Dir(p) {
		if _, ok := m.files[p]; ok {
			return pathErr("mkdir", p, errors.New("not a directory"))
		}
		m.dirs[p] = true
	}
	return nil
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpReadDir, dir); err != nil {
		return nil, err
	}
	if !m.dirs[dir] {
		return nil, pathErr("readdir", dir, fs.ErrNotExist)
	}
	var names []string
	for n := range m.files {
		if filepath.Dir(n) == dir {
			names = append(names, filepath.Base(n))
		}
	}
	for d := range m.dirs {
		if d != dir && filepath.Dir(d) == dir {
			names = append(names, filepath.Base(d))
		}
	}
	slices.Sort(names)
	return names, nil
}

func under(name, path string) bool {
	return name == path || (len(name) > len(path) && name[:len(path)] == path && name[len(path)] == filepath.Separator)
}

// RemoveAll implements FS. Its effect is durable at once.
func (m *MemFS) RemoveAll(path string) error {
	path = clean(path)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpRemoveAll, path); err != nil {
		return err
	}
	for n := range m.files {
		if under(n, path) {
			delete(m.files, n)
		}
	}
	for n := range m.durable {
		if under(n, path) {
			delete(m.durable, n)
		}
	}
	for d := range m.dirs {
		if under(d, path) && d != "/" && d != "." {
			delete(m.dirs, d)
		}
	}
	return nil
}

// SyncDir implements FS: the current entries of dir become the durable
// ones.
func (m *MemFS) SyncDir(dir string) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpSyncDir, dir); err != nil {
		return err
	}
	if err := m.failSync; err != nil {
		m.failSync = nil
		return err
	}
	if !m.dirs[dir] {
		return pathErr("syncdir", dir, fs.ErrNotExist)
	}
	for n := range m.durable {
		if filepath.Dir(n) == dir {
			delete(m.durable, n)
		}
	}
	for n, ino := range m.files {
		if filepath.Dir(n) == dir {
			m.durable[n] = ino
		}
	}
	return nil
}

// CrashClone returns a new MemFS holding only what was durable: for every
// durable directory entry, the file's contents as of its last Sync.
func (m *MemFS) CrashClone() *MemFS { return m.crashClone(nil) }

// CrashCloneTorn is CrashClone, except that a file that grew since its
// last Sync keeps a random prefix (possibly empty, possibly all) of the
// unsynced bytes, as a torn write at power loss would; so does one
// written over its synced bytes (not shortened), from the first byte
// that changed.
func (m *MemFS) CrashCloneTorn(rng *rand.Rand) *MemFS { return m.crashClone(rng) }

func (m *MemFS) crashClone(rng *rand.Rand) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crashCloneLocked(rng)
}

func (m *MemFS) crashCloneLocked(rng *rand.Rand) *MemFS {
	c := NewMemFS()
	for d := range m.dirs {
		c.dirs[d] = true
	}
	names := make([]string, 0, len(m.durable))
	for n := range m.durable {
		names = append(names, n)
	}
	slices.Sort(names) // deterministic use of rng
	for _, n := range names {
		ino := m.durable[n]
		data := slices.Clone(ino.synced)
		if rng != nil && len(ino.data) > len(ino.synced) && bytes.Equal(ino.data[:len(ino.synced)], ino.synced) {
			extra := ino.data[len(ino.synced):]
			data = append(data, extra[:rng.IntN(len(extra)+1)]...)
		} else if rng != nil && len(ino.data) >= len(ino.synced) && !bytes.Equal(ino.data, ino.synced) {
			// Unsynced writes over synced bytes (into a segment's
			// zero-filled tail), perhaps growing it: a prefix of what
			// changed landed.
			d := 0
			for ino.data[d] == ino.synced[d] {
				d++
			}
			k := d + rng.IntN(len(ino.data)-d+1)
			data = append(slices.Clone(ino.data[:k]), data[min(k, len(data)):]...)
		}
		nino := &memInode{data: data, synced: slices.Clone(data)}
		c.files[n] = nino
		c.durable[n] = nino
	}
	return c
}

// ReadFile returns a copy of the current contents of name (a test helper).
func (m *MemFS) ReadFile(name string) ([]byte, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.files[name]
	if !ok {
		return nil, pathErr("readfile", name, fs.ErrNotExist)
	}
	return slices.Clone(ino.data), nil
}

// WriteFile replaces (or creates) name with data, durably (a test helper
// for planting corrupt files). The parent directory must exist.
func (m *MemFS) WriteFile(name string, data []byte) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[filepath.Dir(name)] {
		return pathErr("writefile", name, fs.ErrNotExist)
	}
	ino, ok := m.files[name]
	if !ok {
		ino = &memInode{}
		m.files[name] = ino
	}
	ino.data = slices.Clone(data)
	ino.synced = slices.Clone(data)
	m.durable[name] = ino
	return nil
}

type memFile struct {
	fs     *MemFS
	name   string
	ino    *memInode
	flag   int
	pos    int64
	closed bool
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, pathErr("read", f.name, os.ErrClosed)
	}
	if err := f.fs.check(OpRead, f.name); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, errors.New("negative offset"))
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.flag&os.O_APPEND != 0 {
		f.pos = int64(len(f.ino.data))
	}
	n, err := f.writeAtLocked(p, f.pos)
	f.pos += int64(n)
	return n, err
}

// WriteAt writes p at off, as os.File.WriteAt does (refused on a file
// opened O_APPEND).
func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.flag&os.O_APPEND != 0 {
		return 0, pathErr("write", f.name, errors.New("WriteAt on a file opened O_APPEND"))
	}
	if off < 0 {
		return 0, pathErr("write", f.name, errors.New("negative offset"))
	}
	return f.writeAtLocked(p, off)
}

// writeAtLocked writes p at off. f.fs.mu held.
func (f *memFile) writeAtLocked(p []byte, off int64) (int, error) {
	if f.closed {
		return 0, pathErr("write", f.name, os.ErrClosed)
	}
	if f.flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return 0, pathErr("write", f.name, errors.New("file not open for writing"))
	}
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	if err := f.fs.failWrite; err != nil {
		f.fs.failWrite = nil
		return 0, err
	}
	end := off + int64(len(p))
	if end > int64(len(f.ino.data)) {
		if end <= int64(cap(f.ino.data)) {
			f.ino.data = f.ino.data[:end]
		} else {
			grown := make([]byte, end, max(end, 2*int64(cap(f.ino.data))))
			copy(grown, f.ino.data)
			f.ino.data = grown
		}
	}
	copy(f.ino.data[off:], p)
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("sync", f.name, os.ErrClosed)
	}
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	if err := f.fs.failSync; err != nil {
		f.fs.failSync = nil
		return err
	}
	f.ino.synced = append(f.ino.synced[:0], f.ino.data...)
	return nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, os.ErrClosed)
	}
	f.closed = true
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("truncate", f.name, os.ErrClosed)
	}
	if err := f.fs.check(OpTruncate, f.name); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, errors.New("negative size"))
	}
	if size <= int64(len(f.ino.data)) {
		f.ino.data = f.ino.data[:size:size]
	} else {
		f.ino.data = append(f.ino.data, make([]byte, size-int64(len(f.ino.data)))...)
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, pathErr("stat", f.name, os.ErrClosed)
	}
	return int64(len(f.ino.data)), nil
}
