package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/shoal-mq/shoal/protocol"
)

// segment is one <base>.log file with its sparse offset and time indexes.
//
// The active (last) segment keeps its indexes in memory; a sealed segment
// is immutable and searches its .index/.timeindex files with ReadAt, so
// memory does not grow with the log.
type segment struct {
	base int64
	// baseOrd is the ordinal of the segment's first batch: batches are
	// numbered consecutively across the log (a raft replica's entry
	// index). Set when the segment is created or recovered, then fixed.
	baseOrd int64
	log     File // opened O_RDWR, written at size (WriteAt); kept open for ReadAt
	created time.Time

	// bytesSinceIndex is owned by whoever appends (the partition's append
	// lock, or Open before the partition is shared).
	bytesSinceIndex int64
	// alloc is the file's length when it holds zeros written ahead of
	// the data (Config.ZeroAheadBytes), else at most size; owned as
	// bytesSinceIndex is.
	alloc int64
	// dropped is where the partition's last page-cache drop of the
	// segment's data ended (Partition.SetDropCache); owned by the
	// partition's syncMu.
	dropped int64

	// mu guards everything below. Readers take it shared for short
	// lookups; the appender takes it exclusively to publish a batch.
	mu      sync.RWMutex
	sealed  bool
	size    int64 // bytes of whole batches in the .log file
	next    int64 // offset after the last batch (== base when empty)
	count   int64 // batches; baseOrd+count is the next batch's ordinal
	maxTs   int64 // -1 when empty
	maxBase int64 // base offset of the first batch carrying maxTs
	firstTs int64 // maxTimestamp of the first batch, -1 when empty
	// active segment: encoded index entries.
	offIdx  []byte
	timeIdx []byte
	lastIdx int64 // timestamp of the last time index entry
	// sealed segment: index files and entry counts.
	offFile, timeFile   File
	offCount, timeCount int
	deleted             bool
}

func newSegment(base, baseOrd int64, f File, now time.Time) *segment {
	return &segment{base: base, baseOrd: baseOrd, log: f, created: now, next: base, maxTs: -1, maxBase: -1, firstTs: -1, lastIdx: math.MinInt64}
}

// indexBatch records a batch appended at pos. Caller holds s.mu
// exclusively (or owns s), and the appender role.
func (s *segment) indexBatch(pos int64, h *protocol.BatchHeader, interval int32) {
	if s.firstTs == -1 && s.size == 0 {
		s.firstTs = h.MaxTimestamp
	}
	if s.maxBase == -1 || h.MaxTimestamp > s.maxTs {
		s.maxTs, s.maxBase = h.MaxTimestamp, h.BaseOffset
	}
	if s.bytesSinceIndex > int64(interval) {
		rel := uint32(h.BaseOffset - s.base)
		s.offIdx = binary.BigEndian.AppendUint32(s.offIdx, rel)
		s.offIdx = binary.BigEndian.AppendUint32(s.offIdx, uint32(pos))
		s.offIdx = binary.BigEndian.AppendUint32(s.offIdx, uint32(s.count))
		if s.maxTs > s.lastIdx {
			s.timeIdx = binary.BigEndian.AppendUint64(s.timeIdx, uint64(s.maxTs))
			s.timeIdx = binary.BigEndian.AppendUint32(s.timeIdx, rel)
			s.lastIdx = s.maxTs
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += h.Size()
	s.size = pos + h.Size()
	s.next = h.LastOffset() + 1
	s.count++
}

// view is a consistent snapshot of a segment's extent.
type segView struct {
	size, next     int64
	count          int64
	maxTs, maxBase int64
}

func (s *segment) view() segView {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return segView{size: s.size, next: s.next, count: s.count, maxTs: s.maxTs, maxBase: s.maxBase}
}

// indexEntry reads entry i of an index (memory or file) into buf.
func (s *segment) indexEntry(mem []byte, f File, i, size int, buf []byte) ([]byte, error) {
	if !s.sealed {
		return mem[i*size : (i+1)*size], nil
	}
	if _, err := f.ReadAt(buf[:size], int64(indexHeaderSize+i*size)); err != nil {
		return nil, fmt.Errorf("%w: read index of segment %d: %w", ErrStorage, s.base, err)
	}
	return buf[:size], nil
}

// lookupPosition returns the file position of the last indexed batch whose
// base offset is <= offset (0 when none): scanning from there finds the
// batch containing offset.
func (s *segment) lookupPosition(offset int64) (int64, error) {
	pos, _, err := s.searchOffsetIndex(0, offset-s.base)
	return pos, err
}

// lookupOrdinal returns the file position and ordinal of the last
// indexed batch whose ordinal is <= ord (the segment's first batch when
// none): scanning from there finds batch ord.
func (s *segment) lookupOrdinal(ord int64) (int64, int64, error) {
	pos, rel, err := s.searchOffsetIndex(8, ord-s.baseOrd)
	return pos, s.baseOrd + rel, err
}

// searchOffsetIndex binary-searches the offset index for the last entry
// whose column at byte col (0: relative offset, 8: relative ordinal) is
// <= target, and returns its position and column value (0, 0 when there
// is none, or target <= 0).
func (s *segment) searchOffsetIndex(col int, target int64) (pos, value int64, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if target <= 0 {
		return 0, 0, nil
	}
	n := s.offCount
	if !s.sealed {
		n = len(s.offIdx) / offsetEntrySize
	}
	var buf [offsetEntrySize]byte
	var ioErr error
	i := sort.Search(n, func(i int) bool { // the first entry past target
		if ioErr != nil {
			return true
		}
		e, err := s.indexEntry(s.offIdx, s.offFile, i, offsetEntrySize, buf[:])
		if err != nil {
			ioErr = err
			return true
		}
		return int64(binary.BigEndian.Uint32(e[col:])) > target
	})
	if ioErr != nil {
		return 0, 0, ioErr
	}
	if i == 0 {
		return 0, 0, nil
	}
	e, err := s.indexEntry(s.offIdx, s.offFile, i-1, offsetEntrySize, buf[:])
	if err != nil {
		return 0, 0, err
	}
	return int64(binary.BigEndian.Uint32(e[4:])), int64(binary.BigEndian.Uint32(e[col:])), nil
}

// lookupTime returns an offset from which scanning finds the first batch
// with maxTimestamp >= ts: the offset of the last time index entry whose
// timestamp is < ts (every batch up to and including it is older than ts),
// or the segment base.
func (s *segment) lookupTime(ts int64) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := s.timeCount
	if !s.sealed {
		n = len(s.timeIdx) / timeEntrySize
	}
	var buf [timeEntrySize]byte
	var ioErr error
	i := sort.Search(n, func(i int) bool {
		if ioErr != nil {
			return true
		}
		e, err := s.indexEntry(s.timeIdx, s.timeFile, i, timeEntrySize, buf[:])
		if err != nil {
			ioErr = err
			return true
		}
		return int64(binary.BigEndian.Uint64(e)) >= ts
	})
	if ioErr != nil {
		return 0, ioErr
	}
	if i == 0 {
		return s.base, nil
	}
	e, err := s.indexEntry(s.timeIdx, s.timeFile, i-1, timeEntrySize, buf[:])
	if err != nil {
		return 0, err
	}
	return s.base + int64(binary.BigEndian.Uint32(e[8:])), nil
}

// meta returns the header fields describing the segment. Caller owns the
// appender role or holds s.mu.
func (s *segment) meta() segmentMeta {
	return segmentMeta{base: s.base, next: s.next, logSize: s.size, maxTs: s.maxTs, maxTsBase: s.maxBase, firstTs: s.firstTs,
		baseOrd: s.baseOrd, count: s.count}
}

// writeIndexFiles writes the in-memory indexes of s to its .index and
// .timeindex files (truncating them) without syncing, and returns the open
// files. Caller owns the appender role.
func writeIndexFiles(fsys FS, dir string, s *segment) (offF, timeF File, err error) {
	write := func(suffix, magic string, entrySize int, entries []byte) (File, error) {
		return writeIndexFile(fsys, fileName(dir, s.base, suffix), magic, entrySize, s.meta(), entries)
	}
	if offF, err = write(indexSuffix, offsetIndexMagic, offsetEntrySize, s.offIdx); err != nil {
		return nil, nil, err
	}
	if timeF, err = write(timeIndexSuffix, timeIndexMagic, timeEntrySize, s.timeIdx); err != nil {
		_ = offF.Close()
		return nil, nil, err
	}
	return offF, timeF, nil
}

// writeIndexFile writes one index file (truncating it) without syncing
// and returns it open.
func writeIndexFile(fsys FS, name, magic string, entrySize int, m segmentMeta, entries []byte) (File, error) {
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: create %s: %w", ErrStorage, name, err)
	}
	m.entries = uint32(len(entries) / entrySize)
	m.entriesCRC = crc(entries)
	buf := make([]byte, indexHeaderSize+len(entries))
	encodeIndexHeader(buf, magic, m)
	copy(buf[indexHeaderSize:], entries)
	if _, err := f.Write(buf); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: write %s: %w", ErrStorage, name, err)
	}
	return f, nil
}

// seal switches s to its index files (already written). Readers see either
// the memory or the file index, both complete.
func (s *segment) seal(offF, timeF File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offCount = len(s.offIdx) / offsetEntrySize
	s.timeCount = len(s.timeIdx) / timeEntrySize
	s.offFile, s.timeFile = offF, timeF
	s.offIdx, s.timeIdx = nil, nil
	s.sealed = true
}

// loadIndexFile reads and verifies one index file of a segment whose .log
// holds logSize bytes. It returns the open file, the header and the
// entries; ok=false when the file is missing, damaged or stale (then the
// caller rebuilds the index from the log).
func loadIndexFile(fsys FS, dir string, base, logSize int64, suffix, magic string, entrySize int) (File, segmentMeta, []byte, bool) {
	f, err := fsys.OpenFile(fileName(dir, base, suffix), os.O_RDWR, 0)
	if err != nil {
		return nil, segmentMeta{}, nil, false
	}
	fail := func() (File, segmentMeta, []byte, bool) {
		_ = f.Close()
		return nil, segmentMeta{}, nil, false
	}
	size, err := f.Size()
	if err != nil || size < indexHeaderSize {
		return fail()
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return fail()
	}
	m, ok := decodeIndexHeader(buf, magic)
	if !ok || m.base != base || m.logSize != logSize || m.next < base ||
		int64(m.entries)*int64(entrySize) != size-indexHeaderSize || crc(buf[indexHeaderSize:]) != m.entriesCRC {
		return fail()
	}
	return f, m, buf[indexHeaderSize:], true
}

// errTorn marks a batch that fails validation while scanning a segment.
var errTorn = errors.New("log: torn or invalid batch")

// batchReader iterates over the batches of a segment file between pos and
// end, reading in large windows so small batches cost no syscall each.
type batchReader struct {
	f      File
	pos    int64 // position of the next batch
	end    int64
	full   bool  // return whole batch bytes (for CRC checks)
	window int64 // read-ahead; 0 means readWindow
	buf    []byte
	bufPos int64
}

const readWindow = 64 << 10

func (r *batchReader) ensure(n int64) error {
	if r.pos >= r.bufPos && r.pos+n <= r.bufPos+int64(len(r.buf)) {
		return nil
	}
	w := r.window
	if w == 0 {
		w = readWindow
	}
	want := max(n, w)
	if r.pos+want > r.end {
		want = r.end - r.pos
	}
	if want < n {
		return errTorn
	}
	if int64(cap(r.buf)) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	r.bufPos = r.pos
	if _, err := r.f.ReadAt(r.buf, r.pos); err != nil {
		r.buf = r.buf[:0]
		if errors.Is(err, io.EOF) {
			return errTorn
		}
		return fmt.Errorf("%w: read segment: %w", ErrStorage, err)
	}
	return nil
}

// next returns the next batch's position and header, and with full its
// bytes (valid until the next call). It returns io.EOF at end, errTorn
// for a batch that is truncated or has an invalid length or magic, or an
// ErrStorage error.
func (r *batchReader) next() (int64, protocol.BatchHeader, []byte, error) {
	if r.pos >= r.end {
		return r.pos, protocol.BatchHeader{}, nil, io.EOF
	}
	if err := r.ensure(protocol.BatchHeaderSize); err != nil {
		return r.pos, protocol.BatchHeader{}, nil, err
	}
	h, err := protocol.ParseBatchHeader(r.buf[r.pos-r.bufPos:])
	if err != nil || h.Validate() != nil {
		return r.pos, h, nil, errTorn
	}
	size := h.Size()
	if r.pos+size > r.end {
		return r.pos, h, nil, errTorn
	}
	var batch []byte
	if r.full {
		if err := r.ensure(size); err != nil {
			return r.pos, h, nil, err
		}
		off := r.pos - r.bufPos
		batch = r.buf[off : off+size]
	}
	pos := r.pos
	r.pos += size
	return pos, h, batch, nil
}
