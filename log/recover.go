package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/protocol"
)

// Open opens or creates the partition log in dir and recovers it (see
// "Recovery" in doc.go). A nil logger logs nothing. Errors wrap
// ErrStorage (file access failed) or ErrCorruption (data below the
// recovery point is damaged).
func Open(fsys FS, dir string, cfg Config, logger *zap.Logger) (*Partition, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	p := &Partition{fs: fsys, dir: dir, logger: logger, cfg: cfg.normalized(), producers: newProducerState(), replica: cfg.Replica}
	p.firstUnstable.Store(math.MaxInt64)
	if err := mkdirDurable(fsys, dir); err != nil {
		return nil, storageErr("create", dir, err)
	}
	start := time.Now()
	if err := p.load(start); err != nil {
		for _, s := range p.segs {
			for _, f := range []File{s.log, s.offFile, s.timeFile} {
				if f != nil {
					_ = f.Close()
				}
			}
		}
		return nil, err
	}
	if p.replica {
		p.hw.Store(p.logStart.Load())
	} else {
		p.hw.Store(p.leo.Load())
	}
	logger.Debug("opened partition log", zap.String("dir", dir), zap.Int("segments", len(p.segs)),
		zap.Int64("log_start_offset", p.logStart.Load()), zap.Int64("log_end_offset", p.leo.Load()),
		zap.Duration("took", time.Since(start)))
	return p, nil
}

// mkdirDurable creates dir and its missing parents and makes their
// entries durable (an fsync of each created directory's parent): a
// partition directory whose creation a power loss undid would take its
// fsynced segments with it, acknowledged records included.
func mkdirDurable(fsys FS, dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		_, err := fsys.ReadDir(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range created {
		if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// readWholeFile reads a small file (checkpoint, snapshot).
func readWholeFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > 1<<30 {
		return nil, fmt.Errorf("%w: %s is %d bytes", ErrCorruption, name, size)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

func (p *Partition) remove(name string) error {
	err := p.fs.Remove(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return storageErr("remove", name, err)
	}
	if err == nil {
		p.removed = true
	}
	return nil
}

// onlyEmptySegment reports whether the log is one empty segment file,
// which is what a first Open that failed before its checkpoint leaves.
func (p *Partition) onlyEmptySegment(bases []int64) bool {
	if len(bases) != 1 || bases[0] != 0 {
		return false
	}
	f, err := p.fs.OpenFile(fileName(p.dir, 0, logSuffix), os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	size, err := f.Size()
	if err != nil {
		return false
	}
	zero, err := zeroTail(f, 0, size) // zeros written ahead of no data
	return err == nil && zero
}

// load runs recovery. Called by Open before the partition is shared, so
// it touches every field without locks.
func (p *Partition) load(now time.Time) error {
	names, err := p.fs.ReadDir(p.dir)
	if err != nil {
		return storageErr("read dir", p.dir, err)
	}
	if did, err := p.completeSwaps(names); err != nil {
		return err
	} else if did {
		if names, err = p.fs.ReadDir(p.dir); err != nil {
			return storageErr("read dir", p.dir, err)
		}
	}
	var bases, snaps []int64
	var indexFiles []string
	haveCheckpoint := false
	for _, name := range names {
		full := filepath.Join(p.dir, name)
		if strings.HasSuffix(name, tmpSuffix) { // interrupted atomic write
			if err := p.remove(full); err != nil {
				return err
			}
			continue
		}
		if off, ok := parseFileName(name, logSuffix); ok {
			bases = append(bases, off)
		} else if off, ok := parseFileName(name, snapshotSuffix); ok {
			snaps = append(snaps, off)
		} else if _, ok := parseFileName(name, indexSuffix); ok {
			indexFiles = append(indexFiles, name)
		} else if _, ok := parseFileName(name, timeIndexSuffix); ok {
			indexFiles = append(indexFiles, name)
		} else if name == checkpointName {
			haveCheckpoint = true
		}
	}
	slices.Sort(bases)
	slices.Sort(snaps)
	for _, name := range indexFiles { // orphans of an interrupted segment deletion
		base, _ := parseFileName(strings.TrimSuffix(strings.TrimSuffix(name, timeIndexSuffix), indexSuffix)+logSuffix, logSuffix)
		if _, found := slices.BinarySearch(bases, base); !found {
			if err := p.remove(filepath.Join(p.dir, name)); err != nil {
				return err
			}
		}
	}

	cp := checkpoint{logStart: -1, recoveryPoint: 0, firstOrd: -1}
	if haveCheckpoint {
		name := filepath.Join(p.dir, checkpointName)
		b, err := readWholeFile(p.fs, name)
		if err != nil {
			return storageErr("read", name, err)
		}
		if c, ok := decodeCheckpoint(b); ok {
			cp = c
		} else {
			p.logger.Warn("partition checkpoint is damaged; ignoring it and recovering the whole log", zap.String("file", name))
		}
	}

	// The first segment's base ordinal. Unknown (no checkpoint, a
	// version 1 or a damaged one) on a single node, where ordinals only
	// count batches, they start again at 1; a replica's ordinals are its
	// raft log's indexes, which must not be guessed.
	anchor := cp.firstOrd
	if anchor >= 0 && len(bases) > 0 && bases[0] > cp.firstBase {
		anchor = -1 // the segment the ordinal belongs to is gone
	}
	if anchor < 0 {
		if p.replica && len(bases) > 0 && !p.onlyEmptySegment(bases) {
			return fmt.Errorf("%w: replica log without a valid checkpoint: its batch ordinals are unknown", ErrCorruption)
		}
		anchor = 1
	}
	if len(bases) == 0 {
		base := max(cp.logStart, 0)
		name := fileName(p.dir, base, logSuffix)
		f, err := p.fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return storageErr("create", name, err)
		}
		p.segs = []*segment{newSegment(base, anchor, f, now)}
		if cp.recoveryPoint > base {
			return fmt.Errorf("%w: no segments but recovery point %d", ErrCorruption, cp.recoveryPoint)
		}
	} else {
		for _, base := range bases {
			name := fileName(p.dir, base, logSuffix)
			f, err := p.fs.OpenFile(name, os.O_RDWR, 0)
			if err != nil {
				return storageErr("open", name, err)
			}
			p.segs = append(p.segs, newSegment(base, -1, f, now)) // ordinal set by recoverSegments
		}
	}
	// Segments below the checkpoint's first segment (or, in a version 1
	// checkpoint, wholly below its log start offset) are an interrupted
	// deletion (a failed unlink is only logged): drop them before
	// recovery, which would otherwise find the gap their deleted
	// successors left and call it damage below the recovery point. The
	// first segment itself may lie wholly below the log start (the
	// active segment is never deleted): it stays, and keeps its ordinal.
	if cp.logStart > 0 {
		k := 0
		if cp.firstBase >= 0 {
			for k < len(p.segs)-1 && p.segs[k].base < cp.firstBase {
				k++
			}
		} else {
			for k < len(p.segs)-1 && p.segs[k+1].base <= cp.logStart {
				k++
			}
		}
		if k > 0 {
			dead := slices.Clone(p.segs[:k])
			p.segs = slices.Clone(p.segs[k:])
			p.removeSegmentFiles(dead)
		}
	}
	p.segs[0].baseOrd = anchor
	if err := p.recoverSegments(cp.recoveryPoint, now); err != nil {
		return err
	}

	last := p.segs[len(p.segs)-1]
	leo := last.next
	p.nextOrd.Store(last.baseOrd + last.count)
	p.firstOrd.Store(p.segs[0].baseOrd)
	p.firstBase.Store(p.segs[0].base)
	logStart := cp.logStart
	if logStart < p.segs[0].base {
		logStart = p.segs[0].base
	}
	logStart = min(logStart, leo)

	p.active = last
	p.leo.Store(leo)
	p.logStart.Store(logStart)
	var size int64
	for _, s := range p.segs {
		size += s.size
	}
	p.size.Store(size)

	if err := p.loadProducers(snaps, leo); err != nil {
		return err
	}
	p.durable = leo
	if !haveCheckpoint || cp.logStart != logStart || cp.recoveryPoint != leo || cp.firstOrd != p.firstOrd.Load() || cp.firstBase != p.firstBase.Load() {
		if err := p.writeCheckpoint(checkpoint{logStart: logStart, recoveryPoint: leo}); err != nil {
			return err
		}
	} else if p.removed {
		// What recovery deleted (a snapshot above the log end, stale
		// index files) must stay deleted: a later crash must not bring
		// back a snapshot of batches that are gone.
		if err := p.fs.SyncDir(p.dir); err != nil {
			return storageErr("sync dir", p.dir, err)
		}
	}
	p.removed = false
	return nil
}

// recoverSegments establishes every segment's extent and indexes:
//
//  1. A prefix of segments is trusted: those whose index files are intact,
//     describe the current .log size, continue the previous segment, and
//     end at or below the recovery point. Only their index headers are read.
//  2. A segment wholly below the recovery point whose index is missing or
//     damaged is rebuilt by scanning it; any invalid batch there is
//     ErrCorruption (it was fsynced).
//  3. From the first other segment on, every batch is re-read and checked
//     (framing, CRC, offset continuity); the first invalid byte truncates
//     its segment and every later segment is deleted.
//
// The recovered tail is then fsynced so the caller may advance the
// recovery point to the log end offset.
func (p *Partition) recoverSegments(recoveryPoint int64, now time.Time) error {
	interval := p.cfg.IndexIntervalBytes
	sizes := make([]int64, len(p.segs))
	for i, s := range p.segs {
		sz, err := s.log.Size()
		if err != nil {
			return storageErr("stat", fileName(p.dir, s.base, logSuffix), err)
		}
		sizes[i] = sz
	}
	i := 0
	for ; i < len(p.segs); i++ {
		s := p.segs[i]
		last := i == len(p.segs)-1
		if i > 0 && s.base != p.segs[i-1].next {
			break
		}
		if i > 0 {
			s.baseOrd = p.segs[i-1].baseOrd + p.segs[i-1].count
		}
		if p.loadIndexes(s, sizes[i]) {
			if s.next <= recoveryPoint && (last || s.next == p.segs[i+1].base) {
				continue
			}
			s.unloadIndexes()
		}
		if last || p.segs[i+1].base > recoveryPoint {
			break
		}
		// Wholly below the recovery point, but the index is unusable.
		end, err := p.scanSegment(s, sizes[i], interval, -1)
		if err != nil {
			return err
		}
		if end < sizes[i] && s.next == p.segs[i+1].base {
			// Zeros written ahead of the data of what was the active
			// segment (Config.ZeroAheadBytes), durable, and a roll's cut
			// of them that was not: the next segment continues the data,
			// so nothing is missing.
			cut, err := p.cutZeroTail(s, end, sizes[i])
			if err != nil {
				return err
			}
			if cut {
				sizes[i] = end
			}
		}
		if end != sizes[i] || s.next != p.segs[i+1].base {
			return fmt.Errorf("%w: segment %d below recovery point %d is damaged at position %d",
				ErrCorruption, s.base, recoveryPoint, end)
		}
		p.logger.Info("rebuilt index of segment", zap.Int64("base", s.base))
		if err := p.sealRecovered(s); err != nil {
			return err
		}
		if err := syncAll(p.dir, s); err != nil {
			return err
		}
	}

	// Phase 3: recover the tail.
	var recovered []*segment
	drop := len(p.segs)
	for j := i; j < len(p.segs); j++ {
		s := p.segs[j]
		if j > 0 && s.base != p.segs[j-1].next {
			if p.segs[j-1].next < recoveryPoint {
				return fmt.Errorf("%w: segment %d does not continue the log at %d, below the recovery point %d",
					ErrCorruption, s.base, p.segs[j-1].next, recoveryPoint)
			}
			p.logger.Warn("segment does not continue the log; deleting it and later segments",
				zap.Int64("base", s.base), zap.Int64("expected", p.segs[j-1].next))
			drop = j
			break
		}
		if j > 0 {
			s.baseOrd = p.segs[j-1].baseOrd + p.segs[j-1].count
		}
		// An active segment has no index files until Close: their
		// absence is what a crash leaves, and its fsynced part is trusted
		// as a sealed one's is. Index files that exist but did not load
		// are damage: every batch is CRC-checked.
		trusted := int64(-1)
		if !p.hasIndexFile(s.base) {
			trusted = recoveryPoint
		}
		end, err := p.scanSegment(s, sizes[j], interval, trusted)
		if err != nil {
			return err
		}
		recovered = append(recovered, s)
		if end < sizes[j] {
			// Zeros written ahead of the data (Config.ZeroAheadBytes), or
			// a write of which no byte landed: the data ends here, and
			// the next segment may continue it (a roll's cut of the
			// zeros was not durable yet). Below the recovery point only
			// if it does: else fsynced data reads back as zeros, damage
			// reported below before anything is cut.
			if s.next >= recoveryPoint || j+1 < len(p.segs) && p.segs[j+1].base == s.next {
				cut, err := p.cutZeroTail(s, end, sizes[j])
				if err != nil {
					return err
				}
				if cut {
					continue
				}
			}
			if s.next < recoveryPoint { // checked before truncating: keep the evidence
				return fmt.Errorf("%w: segment %d is damaged at position %d (offset %d), below the recovery point %d",
					ErrCorruption, s.base, end, s.next, recoveryPoint)
			}
			p.logger.Warn("truncating torn or corrupt segment tail", zap.Int64("base", s.base),
				zap.Int64("valid_bytes", end), zap.Int64("file_bytes", sizes[j]), zap.Int64("log_end_offset", s.next))
			if err := s.log.Truncate(end); err != nil {
				return storageErr("truncate", fileName(p.dir, s.base, logSuffix), err)
			}
			drop = j + 1
			break
		}
	}
	if drop == 0 { // cannot happen: the first segment always continues
		drop = 1
	}
	if drop < len(p.segs) {
		dead := slices.Clone(p.segs[drop:])
		p.segs = p.segs[:drop]
		p.removeSegmentFiles(dead)
	}

	// Only the last segment is active; the others are sealed.
	for _, s := range recovered {
		if s != p.segs[len(p.segs)-1] && !s.sealed {
			if err := p.sealRecovered(s); err != nil {
				return err
			}
		}
	}
	last := p.segs[len(p.segs)-1]
	if last.sealed {
		if err := p.unsealLast(last); err != nil {
			return err
		}
	}
	for _, s := range recovered {
		if s.deleted {
			continue
		}
		if err := syncAll(p.dir, s); err != nil {
			return err
		}
	}
	if len(recovered) > 0 || drop < len(sizes) {
		if err := p.fs.SyncDir(p.dir); err != nil {
			return storageErr("sync dir", p.dir, err)
		}
	}
	if last.next < recoveryPoint {
		return fmt.Errorf("%w: log ends at %d below the recovery point %d", ErrCorruption, last.next, recoveryPoint)
	}
	// Index files of the active segment (from a clean Close) go stale with
	// the next append; the in-memory index replaces them.
	if err := p.remove(fileName(p.dir, last.base, indexSuffix)); err != nil {
		return err
	}
	return p.remove(fileName(p.dir, last.base, timeIndexSuffix))
}

// cutZeroTail truncates s's file to end if it holds only zeros from
// there to size, and reports whether it did.
func (p *Partition) cutZeroTail(s *segment, end, size int64) (bool, error) {
	name := fileName(p.dir, s.base, logSuffix)
	zero, err := zeroTail(s.log, end, size)
	if err != nil {
		return false, storageErr("read", name, err)
	}
	if !zero {
		return false, nil
	}
	p.logger.Debug("cutting the zero-filled tail of a segment", zap.Int64("base", s.base),
		zap.Int64("valid_bytes", end), zap.Int64("file_bytes", size))
	if err := s.log.Truncate(end); err != nil {
		return false, storageErr("truncate", name, err)
	}
	return true, nil
}

// zeroTail reports whether f holds only zero bytes in [from, to).
func zeroTail(f File, from, to int64) (bool, error) {
	buf := make([]byte, min(to-from, 64<<10))
	for off := from; off < to; {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), to-off)], off)
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		off += int64(n)
		if err != nil && (!errors.Is(err, io.EOF) || off < to) {
			return false, err
		}
	}
	return true, nil
}

// syncAll fsyncs a recovered segment's files.
func syncAll(dir string, s *segment) error {
	for _, f := range []struct {
		f      File
		suffix string
	}{{s.log, logSuffix}, {s.offFile, indexSuffix}, {s.timeFile, timeIndexSuffix}} {
		if f.f == nil {
			continue
		}
		if err := f.f.Sync(); err != nil {
			return storageErr("sync", fileName(dir, s.base, f.suffix), err)
		}
	}
	return nil
}

// scanSegment re-reads a segment from position 0, checking every batch
// (framing, CRC, record count, offset continuity from the segment's base,
// 32-bit relative offsets and positions) and indexing the valid ones. It
// returns the end of the valid prefix. Batches below trusted (the
// recovery point: fsynced, and CRC-checked when they were appended) are
// read by their headers alone, without their CRC, as a segment wholly
// below it is trusted by its index files: a crash then re-reads only what
// was appended since the checkpoint, not the whole active segment.
func (p *Partition) scanSegment(s *segment, fileSize int64, interval int32, trusted int64) (int64, error) {
	s.resetIndexes()
	r := batchReader{f: s.log, end: fileSize, full: true}
	for {
		r.full = s.next >= trusted
		pos, h, batch, err := r.next()
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, errTorn):
			return s.size, nil
		case err != nil:
			return 0, err
		}
		valid := (!r.full || protocol.VerifyBatchCRC(batch)) &&
			h.BaseOffset == s.next &&
			// Fewer records than offsets: a batch the broker rewrote
			// without duplicates (AppendCompacted).
			h.RecordCount >= 0 && h.LastOffsetDelta >= 0 && int64(h.RecordCount) <= int64(h.LastOffsetDelta)+1 &&
			h.BaseOffset <= math.MaxInt64-int64(h.LastOffsetDelta)-1 &&
			h.LastOffset()-s.base <= math.MaxUint32 &&
			pos+h.Size() <= math.MaxUint32
		if !valid {
			return s.size, nil
		}
		s.indexBatch(pos, &h, interval)
	}
}

// resetIndexes empties a segment's extent and in-memory indexes.
func (s *segment) resetIndexes() {
	s.size, s.next, s.count = 0, s.base, 0
	s.maxTs, s.maxBase, s.firstTs = -1, -1, -1
	s.offIdx, s.timeIdx = s.offIdx[:0], s.timeIdx[:0]
	s.lastIdx = math.MinInt64
	s.bytesSinceIndex = 0
}

// hasIndexFile reports whether either index file of the segment at base
// exists.
func (p *Partition) hasIndexFile(base int64) bool {
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		f, err := p.fs.OpenFile(fileName(p.dir, base, suffix), os.O_RDONLY, 0)
		if err == nil {
			_ = f.Close()
			return true
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return true // unreadable: not known to be absent
		}
	}
	return false
}

// loadIndexes opens a segment's index files if both are intact and match
// the .log size, and takes its extent from them (the segment is sealed).
func (p *Partition) loadIndexes(s *segment, logSize int64) bool {
	offF, m, _, ok := loadIndexFile(p.fs, p.dir, s.base, logSize, indexSuffix, offsetIndexMagic, offsetEntrySize)
	if !ok {
		return false
	}
	switch {
	case m.baseOrd == s.baseOrd:
	case !p.replica && m.baseOrd > s.baseOrd && s != p.segs[0]:
		// A cleaned segment before this one holds fewer batches than it
		// did: a single node's ordinals only count batches, and may skip.
		s.baseOrd = m.baseOrd
	default: // stale: written before an earlier truncation or deletion moved the ordinals
		_ = offF.Close()
		return false
	}
	timeF, tm, _, ok := loadIndexFile(p.fs, p.dir, s.base, logSize, timeIndexSuffix, timeIndexMagic, timeEntrySize)
	if !ok || tm.next != m.next || m.maxTs != tm.maxTs || tm.baseOrd != m.baseOrd || tm.count != m.count {
		_ = offF.Close()
		if timeF != nil {
			_ = timeF.Close()
		}
		return false
	}
	s.size, s.next, s.count = logSize, m.next, m.count
	s.maxTs, s.maxBase, s.firstTs = m.maxTs, m.maxTsBase, m.firstTs
	s.offFile, s.timeFile = offF, timeF
	s.offCount, s.timeCount = int(m.entries), int(tm.entries)
	s.sealed = true
	return true
}

func (s *segment) unloadIndexes() {
	for _, f := range []File{s.offFile, s.timeFile} {
		if f != nil {
			_ = f.Close()
		}
	}
	s.offFile, s.timeFile = nil, nil
	s.offCount, s.timeCount = 0, 0
	s.sealed = false
	s.resetIndexes()
}

// sealRecovered writes the index files of a recovered, non-active segment.
func (p *Partition) sealRecovered(s *segment) error {
	offF, timeF, err := writeIndexFiles(p.fs, p.dir, s)
	if err != nil {
		return err
	}
	s.seal(offF, timeF)
	return nil
}

// unsealLast turns the last segment, trusted through its index files, into
// the active segment with in-memory indexes.
func (p *Partition) unsealLast(s *segment) error {
	read := func(f File, n, size int) ([]byte, error) {
		b := make([]byte, n*size)
		if _, err := f.ReadAt(b, indexHeaderSize); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
			return nil, storageErr("read index", fileName(p.dir, s.base, indexSuffix), err)
		}
		return b, nil
	}
	offIdx, err := read(s.offFile, s.offCount, offsetEntrySize)
	if err != nil {
		return err
	}
	timeIdx, err := read(s.timeFile, s.timeCount, timeEntrySize)
	if err != nil {
		return err
	}
	_ = s.offFile.Close()
	_ = s.timeFile.Close()
	s.offFile, s.timeFile = nil, nil
	s.offIdx, s.timeIdx = offIdx, timeIdx
	s.lastIdx = math.MinInt64
	if n := len(timeIdx); n > 0 {
		s.lastIdx = int64(binary.BigEndian.Uint64(timeIdx[n-timeEntrySize:]))
	}
	s.sealed = false
	return nil
}

// loadProducers restores producer state from the newest valid snapshot at
// or below leo, then replays batch headers from there to leo. Damaged
// snapshots and snapshots above leo (the log was truncated) are deleted.
func (p *Partition) loadProducers(snaps []int64, leo int64) error {
	from := p.segs[0].base
	for i := len(snaps) - 1; i >= 0; i-- {
		off := snaps[i]
		name := fileName(p.dir, off, snapshotSuffix)
		// A snapshot below the first segment would need the batches
		// between it and the segment, which are gone: replaying from
		// the segment over it would mix two histories.
		if off <= leo && off >= from {
			b, err := readWholeFile(p.fs, name)
			if err != nil {
				return storageErr("read", name, err)
			}
			if at, entries, aborted, ok := decodeSnapshot(b); ok && at == off {
				for j := range entries {
					p.producers.commit(&entries[j])
				}
				p.aborted = aborted
				from = max(off, from)
				p.snapshots = snaps[max(0, i-keepSnapshots+1) : i+1]
				for _, old := range snaps[:max(0, i-keepSnapshots+1)] {
					if err := p.remove(fileName(p.dir, old, snapshotSuffix)); err != nil {
						return err
					}
				}
				break
			}
			p.logger.Warn("producer snapshot is damaged; ignoring it", zap.String("file", name))
		}
		if err := p.remove(name); err != nil {
			return err
		}
	}
	for _, s := range p.segs {
		if s.next <= from {
			continue
		}
		pos, err := s.lookupPosition(from)
		if err != nil {
			return err
		}
		r := batchReader{f: s.log, pos: pos, end: s.size}
		for {
			pos, h, _, err := r.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if errors.Is(err, errTorn) {
				return fmt.Errorf("%w: invalid batch in segment %d while rebuilding producer state", ErrCorruption, s.base)
			}
			if err != nil {
				return err
			}
			if h.BaseOffset >= from {
				p.producers.replay(&h)
				var batch []byte
				if h.IsControl() && h.IsTransactional() {
					// The marker type is in the record key.
					if batch, err = s.readBatch(pos, &h); err != nil {
						return err
					}
				}
				p.replayTxnLocked(&h, batch)
			}
		}
	}
	p.rebuildOngoingLocked()
	return nil
}
