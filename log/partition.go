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
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/protocol"
)

// Partition is the durable log of one topic partition. See doc.go for the
// concurrency contract.
type Partition struct {
	fs     FS
	dir    string
	logger *zap.Logger

	// Lock order: syncMu → appendMu → segMu → segment.mu.

	// syncMu serialises fsyncs with everything that removes files (Sync,
	// Close, EnforceRetention, DeleteRecordsBefore), so a file is never
	// closed under a running fsync. Never held by Append or Read.
	syncMu sync.Mutex
	// Owned by syncMu.
	durable   int64   // every offset below is fsynced (the recovery point)
	snapshots []int64 // offsets of producer snapshot files on disk, ascending
	// checkpointed is the recovery point in the checkpoint file, written
	// at checkpointAt.
	checkpointed int64
	checkpointAt time.Time
	// syncedBytes is size as the last Sync captured it.
	syncedBytes int64
	// dropCache: each Sync drops what it made durable from the page
	// cache (SetDropCache).
	dropCache atomic.Bool
	// smallSyncs: the last Sync covered less than an eighth of
	// Config.ZeroAheadBytes (zeroAheadLocked).
	smallSyncs atomic.Bool

	// appendMu serialises writers of the log: Append, rolls, retention.
	appendMu sync.Mutex
	// Owned by appendMu.
	cfg            Config
	active         *segment
	producers      producerState
	pending        []producerEntry // scratch for Append
	writeback      writeback       // the write-out to start once appendMu is released (unlockAppend)
	unsynced       []*segment      // sealed since the last Sync; their files need fsync
	dirDirty       bool            // files created since the last Sync
	needCheckpoint bool            // a roll happened: write the checkpoint at the next Sync
	snapshot       []byte          // producer snapshot taken at the last roll, written by Sync
	snapshotOffset int64
	closed         bool

	// segMu guards the segment list for readers. It is taken exclusively
	// (with appendMu held) only to add or drop segments, briefly.
	segMu      sync.RWMutex
	segs       []*segment // ascending base offsets; the last is active
	readClosed bool

	// Transactions (txn.go). ongoing maps a producer id to the first
	// offset of its open transaction; owned by appendMu. firstUnstable is
	// the least of those offsets (math.MaxInt64: none), written under
	// appendMu, read without locks for the last stable offset.
	ongoing       map[int64]int64
	firstUnstable atomic.Int64
	// txnMu guards aborted for readers; writers also hold appendMu.
	txnMu   sync.RWMutex
	aborted []AbortedTxn // by LastOffset (the abort marker), ascending

	// Compaction (clean.go): cleanMu serialises Clean (and is taken
	// before any other lock); cleanedTo is where the last clean ended,
	// loaded from the cleaner checkpoint once (cleanLoaded, cleanMu).
	cleanMu     sync.Mutex
	cleanLoaded bool
	cleanedTo   atomic.Int64
	// uncleanable is why a Clean failed on the log's contents (a batch
	// that does not decode, a map too small for one batch): the log is
	// not offered for cleaning again until reopened, as Kafka marks such
	// partitions uncleanable. cleanMu.
	uncleanable error
	// deleteHorizon is the latest delete horizon (KIP-534) the last
	// clean left on a tombstone it kept, 0 for none: once it passes, the
	// log is due a clean even with nothing dirty. cleanMu.
	deleteHorizon int64

	leo      atomic.Int64 // log end offset
	hw       atomic.Int64 // high watermark
	logStart atomic.Int64
	// removed: a file was deleted (remove) since the last directory
	// sync; load syncs the directory before it returns.
	removed bool
	// replica is Config.Replica as Open saw it (SetConfig cannot
	// change it): only raft writes the log, and reads leave raft's own
	// entries out.
	replica bool
	// Batch ordinals (ordinal.go): nextOrd is the next batch's, firstOrd
	// the first segment's first batch's. Written with leo and the
	// segment list.
	nextOrd  atomic.Int64
	firstOrd atomic.Int64
	// firstBase is the first segment's base offset, which the
	// checkpoint names with firstOrd.
	firstBase atomic.Int64
	size      atomic.Int64 // bytes of all segment .log files
	failure   atomic.Pointer[error]
}

// AppendResult describes a successful Append.
type AppendResult struct {
	BaseOffset, LastOffset int64
	// LogAppendTime is the timestamp stamped on the batches for a
	// LogAppendTime topic, -1 otherwise (and for duplicates).
	LogAppendTime  int64
	LogStartOffset int64
	// Duplicate is set when every batch was a retry of one of the last 5
	// batches of its idempotent producer: nothing was appended and the
	// offsets are the original ones.
	Duplicate bool
}

// ProducerInfo describes an idempotent producer's state (DescribeProducers).
type ProducerInfo struct {
	ProducerID            int64
	Epoch                 int16
	LastSequence          int32
	LastTimestamp         int64
	CoordinatorEpoch      int32
	CurrentTxnStartOffset int64
}

func storageErr(what, name string, err error) error {
	return fmt.Errorf("%w: %s %s: %w", ErrStorage, what, name, err)
}

// fail records the first storage failure; the partition stays failed.
func (p *Partition) fail(err error) error {
	if p.failure.CompareAndSwap(nil, &err) {
		p.logger.Error("partition log failed; refusing further writes", zap.String("dir", p.dir), zap.Error(err))
	}
	return p.stickyErr()
}

// writableLocked is the error a writer gets from a closed or failed
// partition (nil: it may write). appendMu held.
func (p *Partition) writableLocked() error {
	if p.closed {
		return ErrClosed
	}
	return p.stickyErr()
}

func (p *Partition) stickyErr() error {
	if e := p.failure.Load(); e != nil {
		return fmt.Errorf("log: partition %s failed: %w", p.dir, *e)
	}
	return nil
}

// Append validates and appends the batches of one produce partition
// (concatenated RecordBatch v2). See the package documentation for the
// rules. It patches baseOffset (and, for LogAppendTime topics, the
// timestamp type, maxTimestamp and CRC) in records in place, so records
// must not be used concurrently; Append does not keep records after it
// returns. All-or-nothing: on a validation error nothing is written.
func (p *Partition) Append(records []byte, now time.Time) (AppendResult, error) {
	return p.append(records, now, false)
}

// AppendCompacted is Append for batches the broker itself rewrote to drop
// records (the dedup window): a batch keeps its header (offset span,
// producer id, epoch and sequence) but may hold fewer records than its
// span, even none, as a batch compacted by Kafka's log cleaner does
// (KAFKA-5443); the dropped offsets are holes. Its records must be
// uncompressed, with increasing offset deltas within the span. The caller
// checks max.message.bytes against the client's batches it rewrote: a
// rewritten batch is uncompressed, so it may be larger than the one the
// client sent.
func (p *Partition) AppendCompacted(records []byte, now time.Time) (AppendResult, error) {
	return p.append(records, now, true)
}

func (p *Partition) append(records []byte, now time.Time, compacted bool) (AppendResult, error) {
	p.appendMu.Lock()
	defer p.unlockAppend()
	if p.replica {
		return AppendResult{}, ErrReplicated
	}
	v, err := p.validateLocked(records, compacted)
	defer func() { p.pending = v.pending[:0] }()
	if err != nil || v.dup.Duplicate {
		return v.dup, err
	}
	leo := p.leo.Load()
	p.assignOffsets(records, leo, now)
	off, err := p.writeLocked(records, v.next, v.firstMaxTs, now)
	if err != nil {
		return AppendResult{}, err
	}
	for i := range v.pending {
		p.producers.commit(&v.pending[i])
		if v.pending[i].txnStart >= 0 {
			p.txnBeganLocked(v.pending[i].id, v.pending[i].txnStart)
		}
	}
	p.leo.Store(off)
	return p.appended(leo, off, now), nil
}

// appended is the result of appending offsets [leo, off).
func (p *Partition) appended(leo, off int64, now time.Time) AppendResult {
	res := AppendResult{BaseOffset: leo, LastOffset: off - 1, LogAppendTime: -1, LogStartOffset: p.logStart.Load()}
	if p.cfg.LogAppendTime {
		res.LogAppendTime = now.UnixMilli()
	}
	return res
}

// validated is what validateLocked found.
type validated struct {
	pending    []producerEntry // producer states after the batches (p.pending's array)
	next       int64           // the log end offset after the batches
	firstMaxTs int64           // the first batch's maxTimestamp
	dup        AppendResult    // Duplicate set: every batch is a retry
}

// validateLocked checks the batches of an append (pass 1: framing, CRC,
// sizes, records, producer sequences) without changing anything.
// appendMu held.
func (p *Partition) validateLocked(records []byte, compacted bool) (validated, error) {
	v := validated{pending: p.pending[:0]}
	if err := p.writableLocked(); err != nil {
		return v, err
	}
	if len(records) == 0 {
		return v, fmt.Errorf("%w: no record batches", ErrInvalidRecord)
	}
	cfg := &p.cfg
	if int64(len(records)) > cfg.SegmentBytes {
		return v, fmt.Errorf("%w: %d bytes exceed segment.bytes %d", ErrMessageTooLarge, len(records), cfg.SegmentBytes)
	}

	next := p.leo.Load()
	nBatches, nDup := 0, 0
	var dupFirst, dupLast batchMeta
	for rest := records; len(rest) > 0; nBatches++ {
		h, err := protocol.ParseBatchHeader(rest)
		if err != nil {
			return v, fmt.Errorf("%w: batch %d: %w", ErrCorruptMessage, nBatches, err)
		}
		if h.Magic != 2 {
			return v, fmt.Errorf("%w: batch %d has magic %d", ErrUnsupportedMessageFormat, nBatches, h.Magic)
		}
		size := h.Size()
		if h.BatchLength < protocol.MinBatchLength || size > int64(len(rest)) {
			return v, fmt.Errorf("%w: batch %d length %d with %d bytes left", ErrCorruptMessage, nBatches, h.BatchLength, len(rest))
		}
		if size > int64(cfg.MaxMessageBytes) && !compacted { // compacted: checked by the caller, see AppendCompacted
			return v, fmt.Errorf("%w: batch of %d bytes exceeds max.message.bytes %d", ErrMessageTooLarge, size, cfg.MaxMessageBytes)
		}
		if !protocol.VerifyBatchCRC(rest[:size]) {
			return v, fmt.Errorf("%w: batch %d crc mismatch", ErrCorruptMessage, nBatches)
		}
		if !compacted && (h.RecordCount <= 0 || h.LastOffsetDelta < 0 || int64(h.LastOffsetDelta)+1 != int64(h.RecordCount)) ||
			compacted && (h.RecordCount < 0 || h.LastOffsetDelta < 0 || int64(h.RecordCount) > int64(h.LastOffsetDelta)+1) {
			return v, fmt.Errorf("%w: batch %d has %d records and lastOffsetDelta %d", ErrInvalidRecord, nBatches, h.RecordCount, h.LastOffsetDelta)
		}
		if h.IsControl() {
			// Only the broker writes control records (transaction
			// markers, WriteMarker).
			return v, fmt.Errorf("%w: batch %d is a control batch", ErrInvalidRecord, nBatches)
		}
		if h.IsTransactional() && h.ProducerID < 0 {
			return v, fmt.Errorf("%w: batch %d is transactional without a producer id", ErrInvalidRecord, nBatches)
		}
		validate := protocol.ValidateRecords
		if compacted {
			validate = protocol.ValidateCompactedRecords
		}
		if err := validate(rest[:size]); err != nil {
			return v, fmt.Errorf("%w: batch %d: %w", ErrInvalidRecord, nBatches, err)
		}
		if nBatches == 0 {
			v.firstMaxTs = h.MaxTimestamp
		}
		isDup := false
		if h.ProducerID >= 0 {
			upd, dup, d, err := p.producers.checkBatch(v.pending, &h, next)
			if err != nil {
				return v, err
			}
			if isDup = d; isDup {
				if nDup == 0 {
					dupFirst = dup
				}
				dupLast = dup
				nDup++
			} else {
				v.pending = append(v.pending, upd)
			}
		}
		if !isDup {
			next += int64(h.LastOffsetDelta) + 1
		}
		rest = rest[size:]
	}
	v.next = next
	if nDup > 0 {
		if nDup != nBatches {
			return v, fmt.Errorf("%w: %d of %d batches are duplicates", ErrInvalidRecord, nDup, nBatches)
		}
		v.dup = AppendResult{BaseOffset: dupFirst.baseOffset, LastOffset: dupLast.lastOffset, LogAppendTime: -1,
			LogStartOffset: p.logStart.Load(), Duplicate: true}
	}
	return v, nil
}

// assignOffsets gives the batches consecutive offsets from leo by
// patching baseOffset (not covered by the CRC) and, on a LogAppendTime
// topic, stamps them with now. appendMu held.
func (p *Partition) assignOffsets(records []byte, leo int64, now time.Time) {
	nowMs := now.UnixMilli()
	off := leo
	for rest := records; len(rest) > 0; {
		size := protocol.BatchLengthPrefix + int64(binary.BigEndian.Uint32(rest[8:]))
		protocol.SetBaseOffset(rest, off)
		if p.cfg.LogAppendTime {
			protocol.SetLogAppendTime(rest[:size], nowMs)
		}
		off += int64(binary.BigEndian.Uint32(rest[23:])) + 1
		rest = rest[size:]
	}
}

// writeLocked rolls the active segment if records (whose offsets run
// from the log end offset to next) do not fit, writes them and indexes
// them. It returns the offset after the last record; the caller
// publishes it (p.leo) after updating the producer state. appendMu held
// on entry.
func (p *Partition) writeLocked(records []byte, next, firstMaxTs int64, now time.Time) (int64, error) {
	return p.writePartsLocked([][]byte{records}, int64(len(records)), next, firstMaxTs, now)
}

// writePartsLocked is writeLocked for batches in several buffers (each
// whole batches, size bytes in all), written in one vectored write
// where the file can (writeParts) rather than joined first.
func (p *Partition) writePartsLocked(parts [][]byte, size, next, firstMaxTs int64, now time.Time) (int64, error) {
	cfg := &p.cfg
	// Roll first if the batches do not fit in the active segment.
	seg := p.active
	if seg.size > 0 && (seg.size+size > cfg.SegmentBytes ||
		next-1-seg.base > math.MaxUint32 ||
		p.segmentAge(seg, firstMaxTs, now) > cfg.maxSegmentMs()) {
		if err := p.rollLocked(now); err != nil {
			return 0, err
		}
		seg = p.active
	}

	pos := seg.size
	n, err := writePartsAt(seg.log, parts, pos)
	if err == nil && int64(n) != size {
		err = io.ErrShortWrite
	}
	if err != nil {
		return 0, p.fail(storageErr("write", fileName(p.dir, seg.base, logSuffix), err))
	}
	if cfg.StartWriteback {
		p.writeback = writeback{f: seg.log, off: pos, n: int64(n)}
	}
	seg.alloc = max(seg.alloc, pos+size)

	// Index; the caller publishes the new end to readers.
	seg.mu.Lock()
	for _, part := range parts {
		for rest := part; len(rest) > 0; {
			h, _ := protocol.ParseBatchHeader(rest)
			seg.indexBatch(pos, &h, cfg.IndexIntervalBytes)
			pos += h.Size()
			rest = rest[h.Size():]
		}
	}
	p.nextOrd.Store(seg.baseOrd + seg.count)
	seg.mu.Unlock()
	p.size.Add(size)
	p.zeroAheadLocked(seg)
	return next, nil
}

// zeros is what zeroAheadLocked writes.
var zeros [256 << 10]byte

// zeroAheadLocked writes zeros ahead of the active segment's data
// (Config.ZeroAheadBytes) when fewer than half of them are left and the
// partition's fsyncs are small (smallSyncs): the next fsync makes them
// durable, with the file's new length, and the fsyncs after it write
// over them without a journal commit. Never beyond segment.bytes, where
// the segment rolls. A failure (a full disk) only stops the writing
// ahead: the data is intact, and whatever zeros landed are a tail
// recovery and rolls cut off. appendMu held.
func (p *Partition) zeroAheadLocked(seg *segment) {
	ahead := p.cfg.ZeroAheadBytes
	if ahead <= 0 || !p.smallSyncs.Load() || seg.alloc-seg.size >= ahead/2 {
		return
	}
	to := min(seg.size+ahead, p.cfg.SegmentBytes)
	for seg.alloc < to {
		n, err := seg.log.WriteAt(zeros[:min(int64(len(zeros)), to-seg.alloc)], seg.alloc)
		seg.alloc += int64(n)
		if err != nil {
			p.logger.Debug("writing zeros ahead of the log failed", zap.Int64("base", seg.base), zap.Error(err))
			p.smallSyncs.Store(false)
			return
		}
	}
}

// cutZerosLocked truncates s to its data if zeros were written ahead of
// it, before it is sealed or closed. appendMu held (or the partition not
// shared).
func (p *Partition) cutZerosLocked(s *segment) error {
	if s.alloc <= s.size {
		return nil
	}
	if err := s.log.Truncate(s.size); err != nil {
		return storageErr("truncate", fileName(p.dir, s.base, logSuffix), err)
	}
	s.alloc = s.size
	return nil
}

// writeback is a range of a segment file whose write-out is to start.
type writeback struct {
	f      File
	off, n int64
}

// unlockAppend releases appendMu, then starts the write-out of what the
// holder wrote (writeLocked, Config.StartWriteback). sync_file_range
// blocks when the device's request queue is full; the next append must
// not wait for that. The file may be closed meanwhile (retention): the
// call then fails, harmlessly, as it is only a hint.
func (p *Partition) unlockAppend() {
	wb := p.writeback
	p.writeback = writeback{}
	p.appendMu.Unlock()
	if wb.f != nil {
		startWriteback(wb.f, wb.off, wb.n)
	}
}

// segmentAge is how long the active segment has been collecting, for
// segment.ms: like Kafka, measured on record timestamps (incoming max
// timestamp minus the first batch's) when there are any, else on the
// wall clock since the segment was created or opened.
func (p *Partition) segmentAge(s *segment, incomingTs int64, now time.Time) int64 {
	if s.firstTs >= 0 && incomingTs >= 0 {
		return incomingTs - s.firstTs
	}
	return now.Sub(s.created).Milliseconds()
}

// rollLocked seals the active segment (writing its index files, synced
// by the next Sync) and starts a new one at the log end offset.
// appendMu held on entry; the active segment must not be empty.
func (p *Partition) rollLocked(now time.Time) error {
	old := p.active
	base := p.leo.Load()
	// The next Sync fsyncs old, with its new length, before anything
	// appended after the roll counts as durable.
	if err := p.cutZerosLocked(old); err != nil {
		return p.fail(err)
	}
	name := fileName(p.dir, base, logSuffix)
	f, err := p.fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return p.fail(storageErr("create", name, err))
	}
	offF, timeF, err := writeIndexFiles(p.fs, p.dir, old)
	if err != nil {
		_ = f.Close()
		return p.fail(err)
	}
	old.seal(offF, timeF)
	ns := newSegment(base, p.nextOrd.Load(), f, now)
	p.segMu.Lock()
	p.segs = append(p.segs, ns)
	p.segMu.Unlock()
	p.active = ns
	p.unsynced = append(p.unsynced, old)
	p.dirDirty = true
	p.needCheckpoint = true
	p.snapshot = encodeSnapshot(base, p.producers.sorted(), p.abortedSinceLocked(p.logStart.Load()))
	p.snapshotOffset = base
	p.logger.Debug("rolled segment", zap.Int64("base", base), zap.Int64("previous_size", old.size))
	return nil
}

// Sync fsyncs everything appended so far and returns the offset below
// which everything is durable. Appends continue while it runs; concurrent
// Syncs are serialised and a Sync that finds nothing new returns at once
// (group commit).
func (p *Partition) Sync() (int64, error) {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.appendMu.Lock()
	if p.closed {
		p.appendMu.Unlock()
		return p.durable, ErrClosed
	}
	if err := p.stickyErr(); err != nil {
		p.appendMu.Unlock()
		return p.durable, err
	}
	leo := p.leo.Load()
	if bytes := p.size.Load(); bytes != p.syncedBytes {
		p.smallSyncs.Store(bytes-p.syncedBytes < p.cfg.ZeroAheadBytes/8)
		p.syncedBytes = bytes
	}
	active := p.active
	activeSize := active.size
	sealed := p.unsynced
	p.unsynced = nil
	dirDirty := p.dirDirty
	p.dirDirty = false
	snap, snapOff := p.takeSnapshotLocked()
	ckpt := p.needCheckpoint
	p.needCheckpoint = false
	logStart := p.logStart.Load()
	every := p.cfg.CheckpointIntervalMs
	p.appendMu.Unlock()
	// Move the recovery point on now and then (Kafka's
	// log.flush.offset.checkpoint.interval.ms), so a crash re-reads a
	// bounded part of the active segment, not all of it.
	if every >= 0 && leo > p.checkpointed && time.Since(p.checkpointAt).Milliseconds() >= every {
		ckpt = true
	}

	if leo == p.durable && len(sealed) == 0 && !dirDirty && snap == nil && !ckpt {
		return leo, nil
	}
	if err := p.syncFiles(sealed, active, dirDirty, snap, snapOff); err != nil {
		return p.durable, p.fail(err)
	}
	if ckpt {
		if err := p.writeCheckpoint(checkpoint{logStart: logStart, recoveryPoint: leo}); err != nil {
			return p.durable, p.fail(err)
		}
	}
	if p.dropCache.Load() {
		p.dropSynced(sealed, active, activeSize)
	}
	p.durable = leo
	return leo, nil
}

// SetDropCache sets whether each Sync drops the data it made durable
// from the page cache (advice to the kernel, cacheDropper), for a log
// whose data is written and rarely read: a raft follower's, which is
// read only if it comes to lead, by consumers behind the log end or
// by lagging followers, as from any log whose pages were evicted. Its
// pages then do not crowd out the cached tails of the partitions this
// broker leads, which consumers read. It also keeps the page cache
// from growing into memory that has not been touched for a while,
// which costs much more than reused pages on a virtual machine that
// hands unused memory back to its host (free page reporting): on this
// project's test machine, 1 MiB appends each fsynced cost 3.1 ns of
// system CPU per byte with the cache growing and 0.5 to 0.6 with each
// synced range dropped. Off by default. Safe on any goroutine.
func (p *Partition) SetDropCache(on bool) { p.dropCache.Store(on) }

// DropsCache reports whether SetDropCache is on.
func (p *Partition) DropsCache() bool { return p.dropCache.Load() }

// dropSynced drops what a Sync made durable from the page cache: the
// sealed segments it synced, whole, and the active segment's data up
// to activeSize, from where the last drop ended, in whole pages (the
// kernel keeps a page the range covers in part, and so the page the
// next append writes into). syncMu held.
func (p *Partition) dropSynced(sealed []*segment, active *segment, activeSize int64) {
	for _, s := range sealed {
		dropCache(s.log, s.dropped, s.size-s.dropped)
		s.dropped = s.size
	}
	end := activeSize &^ (dropPage - 1)
	if end > active.dropped { // a segment only shrinks in TruncateFrom, which resets dropped
		dropCache(active.log, active.dropped, end-active.dropped)
		active.dropped = end
	}
}

// dropPage is the page size dropSynced rounds to.
var dropPage = int64(os.Getpagesize())

// syncFiles fsyncs sealed segments, the active log, writes a pending
// producer snapshot and syncs the directory. syncMu held on entry.
func (p *Partition) syncFiles(sealed []*segment, active *segment, dirDirty bool, snap []byte, snapOff int64) error {
	for _, s := range sealed {
		for _, f := range []struct {
			f      File
			suffix string
		}{{s.log, logSuffix}, {s.offFile, indexSuffix}, {s.timeFile, timeIndexSuffix}} {
			if err := f.f.Sync(); err != nil {
				return storageErr("sync", fileName(p.dir, s.base, f.suffix), err)
			}
		}
	}
	if err := active.log.Sync(); err != nil {
		return storageErr("sync", fileName(p.dir, active.base, logSuffix), err)
	}
	if snap != nil {
		if err := p.writeSnapshot(snap, snapOff); err != nil {
			return err
		}
		dirDirty = true
	}
	if dirDirty {
		if err := p.fs.SyncDir(p.dir); err != nil {
			return storageErr("sync dir", p.dir, err)
		}
	}
	return nil
}

// writeFileAtomic writes name via a synced temporary file and a rename
// (WriteFileAtomic).
func (p *Partition) writeFileAtomic(name string, data []byte) error {
	return WriteFileAtomic(p.fs, name, data)
}

// writeCheckpoint durably replaces the partition checkpoint. syncMu held
// (or the partition not yet shared).
func (p *Partition) writeCheckpoint(c checkpoint) error {
	c.firstBase, c.firstOrd = p.firstBase.Load(), p.firstOrd.Load()
	if err := p.writeFileAtomic(filepath.Join(p.dir, checkpointName), encodeCheckpoint(c)); err != nil {
		return err
	}
	if err := p.fs.SyncDir(p.dir); err != nil {
		return storageErr("sync dir", p.dir, err)
	}
	p.checkpointed, p.checkpointAt = c.recoveryPoint, time.Now()
	return nil
}

// keepSnapshots is how many producer snapshots stay on disk.
const keepSnapshots = 2

// writeSnapshot writes a producer snapshot file and prunes old ones. The
// caller syncs the directory. syncMu held (or the partition not shared).
func (p *Partition) writeSnapshot(snap []byte, off int64) error {
	if err := p.writeFileAtomic(fileName(p.dir, off, snapshotSuffix), snap); err != nil {
		return err
	}
	if !slices.Contains(p.snapshots, off) {
		p.snapshots = append(p.snapshots, off)
		slices.Sort(p.snapshots)
	}
	for len(p.snapshots) > keepSnapshots {
		name := fileName(p.dir, p.snapshots[0], snapshotSuffix)
		if err := p.fs.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return storageErr("remove", name, err)
		}
		p.snapshots = p.snapshots[1:]
	}
	return nil
}

// HighWatermark returns the offset below which records are visible.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// SetHighWatermark advances the high watermark to off, clamped to the log
// end offset. It never moves it backwards.
func (p *Partition) SetHighWatermark(off int64) {
	for {
		cur := p.hw.Load()
		off = min(off, p.leo.Load())
		if off <= cur || p.hw.CompareAndSwap(cur, off) {
			return
		}
	}
}

// LogEndOffset returns the offset the next appended record will get.
func (p *Partition) LogEndOffset() int64 { return p.leo.Load() }

// LogStartOffset returns the first readable offset.
func (p *Partition) LogStartOffset() int64 { return p.logStart.Load() }

// Size returns the bytes of segment data on disk (index files excluded).
func (p *Partition) Size() int64 { return p.size.Load() }

// SetConfig replaces the configuration; it applies to the next Append or
// EnforceRetention. Replica is kept as Open set it (a dynamic config
// change of a cluster's partition must not turn its log into a leader's).
func (p *Partition) SetConfig(cfg Config) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	cfg.Replica = p.cfg.Replica // a mode fixed at Open, not a setting
	p.cfg = cfg.normalized()
}

// Config returns the configuration in effect (after normalisation).
func (p *Partition) Config() Config {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.cfg
}

// ProducerEpoch returns the epoch of producer id in this partition, if
// the partition knows it.
func (p *Partition) ProducerEpoch(id int64) (int16, bool) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if e, ok := p.producers.entries[id]; ok {
		return e.epoch, true
	}
	return 0, false
}

// Producers returns the state of every idempotent producer, ordered by id.
func (p *Partition) Producers() []ProducerInfo {
	p.appendMu.Lock()
	entries := p.producers.sorted()
	p.appendMu.Unlock()
	out := make([]ProducerInfo, len(entries))
	for i, e := range entries {
		last := int32(-1)
		if e.n > 0 {
			last = e.batches[e.n-1].lastSeq
		}
		out[i] = ProducerInfo{ProducerID: e.id, Epoch: e.epoch, LastSequence: last, LastTimestamp: e.lastTs,
			CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnStartOffset: e.txnStart}
	}
	return out
}

// DeleteRecordsBefore advances the log start offset to offset (-1 means
// the high watermark), persists it, and deletes the segments wholly below
// it. An offset above the high watermark is ErrOffsetOutOfRange; one at or
// below the current log start changes nothing. Producer state is kept.
func (p *Partition) DeleteRecordsBefore(offset int64) (int64, error) {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.appendMu.Lock()
	if p.closed {
		p.appendMu.Unlock()
		return 0, ErrClosed
	}
	if err := p.stickyErr(); err != nil {
		p.appendMu.Unlock()
		return 0, err
	}
	hw := p.hw.Load()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		p.appendMu.Unlock()
		return p.logStart.Load(), fmt.Errorf("%w: delete records before %d with high watermark %d", ErrOffsetOutOfRange, offset, hw)
	}
	if offset <= p.logStart.Load() {
		p.appendMu.Unlock()
		return p.logStart.Load(), nil
	}
	k := 0
	for k < len(p.segs)-1 && p.segs[k+1].base <= offset {
		k++
	}
	dead := p.dropSegmentsLocked(k, offset)
	snap, snapOff := p.takeSnapshotLocked()
	p.appendMu.Unlock()
	if err := p.writePendingSnapshot(snap, snapOff); err != nil {
		return offset, p.fail(err)
	}
	if err := p.writeCheckpoint(checkpoint{logStart: offset, recoveryPoint: p.durable}); err != nil {
		return offset, p.fail(err)
	}
	p.removeSegmentFiles(dead)
	return offset, nil
}

// takeSnapshotLocked takes the producer snapshot a roll left for the next
// Sync to write. Deleting segments must write it first (before the
// checkpoint, whose directory fsync makes it durable): once the segments
// below the roll are gone, an older snapshot replayed from the new first
// segment would skip the batches in between, and a crash could leave
// only that one. appendMu held.
func (p *Partition) takeSnapshotLocked() ([]byte, int64) {
	snap, off := p.snapshot, p.snapshotOffset
	p.snapshot = nil
	return snap, off
}

// writePendingSnapshot writes a snapshot from takeSnapshotLocked, if any.
// syncMu held.
func (p *Partition) writePendingSnapshot(snap []byte, off int64) error {
	if snap == nil {
		return nil
	}
	return p.writeSnapshot(snap, off)
}

// dropSegmentsLocked removes the first k segments from the list and sets
// the log start offset. The active segment is never dropped. appendMu held.
func (p *Partition) dropSegmentsLocked(k int, logStart int64) []*segment {
	dead := slices.Clone(p.segs[:k])
	p.segMu.Lock()
	p.segs = slices.Clone(p.segs[k:])
	p.logStart.Store(logStart)
	p.firstOrd.Store(p.segs[0].baseOrd)
	p.firstBase.Store(p.segs[0].base)
	p.segMu.Unlock()
	var bytes int64
	for _, s := range dead {
		bytes += s.size
		s.deleted = true
	}
	p.size.Add(-bytes)
	p.unsynced = slices.DeleteFunc(p.unsynced, func(s *segment) bool { return s.deleted })
	return dead
}

// removeSegmentFiles closes and deletes the files of dropped segments.
// No reader can hold them: readers hold segMu shared while using a
// segment, and the segments left the list under segMu. Failures are
// logged: a leftover file below the log start offset is deleted by the
// next Open.
func (p *Partition) removeSegmentFiles(dead []*segment) {
	for _, s := range dead {
		for _, f := range []File{s.log, s.offFile, s.timeFile} {
			if f != nil {
				_ = f.Close()
			}
		}
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			name := fileName(p.dir, s.base, suffix)
			if err := p.fs.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				p.logger.Warn("cannot remove deleted segment file", zap.String("file", name), zap.Error(err))
			}
		}
	}
}

// EnforceRetention rolls the active segment when it is older than
// segment.ms, forgets producers idle for producer.id.expiration.ms, and
// deletes the oldest segments (following Kafka: a prefix of segments wholly
// below the high watermark) whose largest timestamp is older than
// retention.ms, or while the log exceeds retention.bytes, or that lie
// wholly below the log start offset. A non-empty active segment that
// qualifies is rolled and then deleted, leaving an empty active segment.
// It returns the bytes deleted.
func (p *Partition) EnforceRetention(now time.Time) (int64, error) {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.appendMu.Lock()
	if p.closed {
		p.appendMu.Unlock()
		return 0, ErrClosed
	}
	if err := p.stickyErr(); err != nil {
		p.appendMu.Unlock()
		return 0, err
	}
	cfg := p.cfg
	nowMs := now.UnixMilli()
	if a := p.active; a.size > 0 && nowMs-max(a.firstTs, a.created.UnixMilli()) > cfg.maxSegmentMs() {
		if err := p.rollLocked(now); err != nil {
			p.appendMu.Unlock()
			return 0, err
		}
	}
	p.producers.expire(nowMs - cfg.ProducerIDExpirationMs)

	hw, leo, logStart := p.hw.Load(), p.leo.Load(), p.logStart.Load()
	diff := p.size.Load() - cfg.RetentionBytes
	k := 0
	for i, s := range p.segs {
		last := i == len(p.segs)-1
		upper := leo
		if !last {
			upper = p.segs[i+1].base
		}
		if (last && s.size == 0) || upper > hw {
			break
		}
		largest := s.maxTs
		if largest < 0 {
			largest = s.created.UnixMilli() // no timestamps: like Kafka's file mtime fallback
		}
		deletes := cfg.Cleanup.Deletes() // cleanup.policy=compact keeps old segments
		del := deletes && cfg.RetentionMs >= 0 && nowMs-largest > cfg.RetentionMs
		del = del || (deletes && cfg.RetentionBytes >= 0 && diff-s.size >= 0)
		del = del || (!last && p.segs[i+1].base <= logStart)
		if !del {
			break
		}
		diff -= s.size
		k++
	}
	if k == 0 {
		p.appendMu.Unlock()
		return 0, nil
	}
	if k == len(p.segs) {
		if err := p.rollLocked(now); err != nil {
			p.appendMu.Unlock()
			return 0, err
		}
	}
	newStart := max(logStart, p.segs[k].base)
	dead := p.dropSegmentsLocked(k, newStart)
	snap, snapOff := p.takeSnapshotLocked()
	p.appendMu.Unlock()
	if err := p.writePendingSnapshot(snap, snapOff); err != nil {
		return 0, p.fail(err)
	}

	var bytes int64
	for _, s := range dead {
		bytes += s.size
	}
	if err := p.writeCheckpoint(checkpoint{logStart: newStart, recoveryPoint: p.durable}); err != nil {
		return 0, p.fail(err)
	}
	p.removeSegmentFiles(dead)
	p.logger.Info("retention deleted segments", zap.Int("segments", len(dead)), zap.Int64("bytes", bytes),
		zap.Int64("log_start_offset", newStart))
	return bytes, nil
}

// Close flushes and fsyncs the log, writes the active segment's index
// files, a producer snapshot and the checkpoint (recovery point = log end
// offset), so the next Open needs no recovery, then closes all files. A
// failed partition only closes its files and returns its error. Closing
// twice returns nil.
func (p *Partition) Close() error { return p.close(true) }

// CloseDiscard closes the log's files without writing anything (no
// fsync, index files, snapshot or checkpoint): for a log about to be
// deleted, whose directory may be moved aside at once. Reads and
// writes answer ErrClosed after it, as after Close. Closing twice, or
// after Close, returns nil.
func (p *Partition) CloseDiscard() error { return p.close(false) }

// close is Close, making the log durable first when durable is set.
func (p *Partition) close(durable bool) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var err error
	var extra []File
	if durable {
		if err = p.stickyErr(); err == nil {
			extra, err = p.shutdownLocked()
			if err != nil {
				err = p.fail(err)
			}
		}
	}
	p.segMu.Lock()
	p.readClosed = true
	segs := p.segs
	p.segMu.Unlock()
	for _, s := range segs {
		for _, f := range []File{s.log, s.offFile, s.timeFile} {
			if f != nil {
				_ = f.Close()
			}
		}
	}
	for _, f := range extra {
		_ = f.Close()
	}
	return err
}

// shutdownLocked makes the whole log durable for a fast next Open.
// syncMu and appendMu held.
func (p *Partition) shutdownLocked() ([]File, error) {
	a := p.active
	// Before the index files, which describe the file's length.
	if err := p.cutZerosLocked(a); err != nil {
		return nil, err
	}
	offF, timeF, err := writeIndexFiles(p.fs, p.dir, a)
	if err != nil {
		return nil, err
	}
	extra := []File{offF, timeF}
	if err := offF.Sync(); err != nil {
		return extra, storageErr("sync", fileName(p.dir, a.base, indexSuffix), err)
	}
	if err := timeF.Sync(); err != nil {
		return extra, storageErr("sync", fileName(p.dir, a.base, timeIndexSuffix), err)
	}
	leo := p.leo.Load()
	if err := p.syncFiles(p.unsynced, a, true, encodeSnapshot(leo, p.producers.sorted(), p.abortedSinceLocked(p.logStart.Load())), leo); err != nil {
		return extra, err
	}
	p.unsynced, p.snapshot = nil, nil
	if err := p.writeCheckpoint(checkpoint{logStart: p.logStart.Load(), recoveryPoint: leo}); err != nil {
		return extra, err
	}
	p.durable = leo
	return extra, nil
}

// Delete closes the partition and removes its directory (topic deletion).
func (p *Partition) Delete() error {
	_ = p.Close() // a failed partition is deleted all the same
	if err := p.fs.RemoveAll(p.dir); err != nil {
		return storageErr("remove", p.dir, err)
	}
	if err := p.fs.SyncDir(filepath.Dir(p.dir)); err != nil {
		return storageErr("sync dir", filepath.Dir(p.dir), err)
	}
	return nil
}

// WriteFileAtomic replaces name with data: written to name.tmp, fsynced,
// then renamed over name. The caller fsyncs the directory (SyncDir) to
// make the rename durable; until then a power loss finds the old file or
// the new one, never a mix. A leftover .tmp is an interrupted write
// (Open deletes the partition's; other callers overwrite theirs).
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	tmp := name + tmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return storageErr("create", tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return storageErr("write", tmp, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return storageErr("sync", tmp, err)
	}
	if err := f.Close(); err != nil {
		return storageErr("close", tmp, err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return storageErr("rename", tmp, err)
	}
	return nil
}
