package log

import (
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/protocol"
)

// A raft replica's log (see "Replicas" in doc.go). The leader validates a
// produce with Prepare, which assigns offsets but writes nothing; raft
// replicates the prepared batches, and every replica, the leader
// included, writes them with AppendReplicated, which keeps the offsets
// and the leader epoch the leader gave them. A follower whose tail
// conflicts with the leader's log drops it with TruncateFrom.

// Prepare validates records as Append does and gives them their offsets
// from the log end offset (and, on a LogAppendTime topic, the append
// time), in place, but writes nothing and changes no state. The caller
// must have written every batch it prepared before (a replica writes its
// proposals before preparing the next produce), or the offsets collide.
// A retry of one of the last batches of an idempotent producer is
// reported as by Append (Duplicate, the original offsets), the records
// untouched.
func (p *Partition) Prepare(records []byte, now time.Time) (AppendResult, error) {
	return p.prepare(records, now, false)
}

// PrepareCompacted is Prepare for batches the broker rewrote to drop
// records (see AppendCompacted).
func (p *Partition) PrepareCompacted(records []byte, now time.Time) (AppendResult, error) {
	return p.prepare(records, now, true)
}

func (p *Partition) prepare(records []byte, now time.Time, compacted bool) (AppendResult, error) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	v, err := p.validateLocked(records, compacted)
	p.pending = v.pending[:0]
	if err != nil || v.dup.Duplicate {
		return v.dup, err
	}
	leo := p.leo.Load()
	p.assignOffsets(records, leo, now)
	return p.appended(leo, v.next, now), nil
}

// PrepareMarker returns the transaction marker WriteMarker would append
// now, at the log end offset, after the same epoch check, without
// writing it. The replica proposes it; AppendReplicated applies it.
func (p *Partition) PrepareMarker(m Marker, now time.Time) ([]byte, error) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if err := p.writableLocked(); err != nil {
		return nil, err
	}
	if _, err := p.markerStateLocked(m); err != nil {
		return nil, err
	}
	return encodeControlBatch(p.leo.Load(), m, now.UnixMilli()), nil
}

// AppendReplicated writes batches that a raft leader prepared, as they
// are: each must start at the log end offset (the leader assigned it),
// be whole and pass its CRC; its leader epoch, timestamps and attributes
// are kept. Control batches (transaction markers, raft's own entries)
// are accepted. Producer and transaction state follow the batches as in
// recovery, without sequence checks: the leader checked them, and a
// replica must hold what the majority holds. All-or-nothing on a
// validation error.
func (p *Partition) AppendReplicated(records []byte, now time.Time) (AppendResult, error) {
	var batches [][]byte
	for rest := records; len(rest) > 0; {
		n := len(rest) // not a whole batch: left to the validation to refuse
		if h, err := protocol.ParseBatchHeader(rest); err == nil && h.Size() > 0 && h.Size() <= int64(len(rest)) {
			n = int(h.Size())
		}
		batches = append(batches, rest[:n])
		rest = rest[n:]
	}
	return p.AppendReplicatedBatches(batches, false, now)
}

// AppendReplicatedBatches is AppendReplicated for batches one per
// buffer, written without being joined (one vectored write per run
// that fits a segment). crcChecked says this process made or already
// verified every batch (a raft leader's own entries: Prepare checked a
// client's CRC, and raft's own control batches are encoded here): the
// CRC is not computed again; everything else still is checked.
func (p *Partition) AppendReplicatedBatches(batches [][]byte, crcChecked bool, now time.Time) (AppendResult, error) {
	p.appendMu.Lock()
	defer p.unlockAppend()
	if err := p.writableLocked(); err != nil {
		return AppendResult{}, err
	}
	if len(batches) == 0 {
		return AppendResult{}, fmt.Errorf("%w: no record batches", ErrInvalidRecord)
	}
	leo := p.leo.Load()
	next := leo
	for i, b := range batches {
		h, err := protocol.ParseBatchHeader(b)
		if err != nil || h.Validate() != nil || h.Size() != int64(len(b)) {
			return AppendResult{}, fmt.Errorf("%w: replicated batch %d is not a whole RecordBatch v2", ErrCorruptMessage, i)
		}
		switch {
		case !crcChecked && !protocol.VerifyBatchCRC(b):
			return AppendResult{}, fmt.Errorf("%w: replicated batch %d crc mismatch", ErrCorruptMessage, i)
		case h.BaseOffset != next:
			return AppendResult{}, fmt.Errorf("%w: replicated batch %d starts at offset %d, not at the log end %d", ErrInvalidRecord, i, h.BaseOffset, next)
		case h.RecordCount < 0 || h.LastOffsetDelta < 0 || int64(h.RecordCount) > int64(h.LastOffsetDelta)+1 ||
			h.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta)-1:
			return AppendResult{}, fmt.Errorf("%w: replicated batch %d has %d records and lastOffsetDelta %d", ErrInvalidRecord, i, h.RecordCount, h.LastOffsetDelta)
		}
		// No size limit: the leader's Prepare applied max.message.bytes
		// and segment.bytes when the batch was produced, and a replica
		// must store what the majority holds whatever its config says
		// now (segment.bytes lowered since, by an AlterConfigs): a batch
		// larger than a segment gets a segment of its own.
		next = h.LastOffset() + 1
	}
	// Write in runs that fit a segment (raft may hand over many entries
	// at once), in bytes and in 32-bit relative offsets, each run one
	// write: what recovery accepts (scanSegment).
	for len(batches) > 0 {
		k, n, start := 0, int64(0), p.leo.Load()
		end := start
		var firstMaxTs int64
		for ; k < len(batches); k++ {
			h, _ := protocol.ParseBatchHeader(batches[k])
			if k > 0 && (n+h.Size() > p.cfg.SegmentBytes || h.LastOffset()-start > math.MaxUint32) {
				break
			}
			if k == 0 {
				firstMaxTs = h.MaxTimestamp
			}
			n += h.Size()
			end = h.LastOffset() + 1
		}
		run := batches[:k]
		if _, err := p.writePartsLocked(run, n, end, firstMaxTs, now); err != nil {
			return AppendResult{}, err
		}
		for _, b := range run {
			h, _ := protocol.ParseBatchHeader(b)
			p.applyReplicatedLocked(&h, b)
		}
		p.leo.Store(end)
		batches = batches[k:]
	}
	return AppendResult{BaseOffset: leo, LastOffset: next - 1, LogAppendTime: -1, LogStartOffset: p.logStart.Load()}, nil
}

// applyReplicatedLocked updates producer and transaction state for a
// written batch, as recovery replays it. appendMu held.
func (p *Partition) applyReplicatedLocked(h *protocol.BatchHeader, batch []byte) {
	p.producers.replay(h)
	if h.ProducerID < 0 || !h.IsTransactional() {
		return
	}
	p.txnMu.Lock()
	p.replayTxnLocked(h, batch)
	p.txnMu.Unlock()
	if e := p.producers.entries[h.ProducerID]; e.txnStart >= 0 {
		p.txnBeganLocked(h.ProducerID, e.txnStart)
	} else {
		p.txnEndedLocked(h.ProducerID)
	}
}

// TruncateFrom removes the batches with ordinals >= ord, as a raft
// follower must when the leader's log conflicts with its tail. It never
// removes records below the high watermark (ErrInvalidTruncation): those
// are committed and may have been read. Producer and transaction state
// are rebuilt as recovery does (the newest producer snapshot at or below
// the new log end, then the batches after it). ord == NextOrdinal changes
// nothing.
//
// Crash safety: the recovery point is lowered to the cut (durably)
// before anything is removed, then later segments are deleted and the
// cut segment truncated and fsynced, producer snapshots above the cut
// deleted and the directory synced before it returns. A crash in between
// leaves a prefix of the old log no shorter than the cut, which recovery
// accepts (a segment left beyond a gap is deleted, being above the
// recovery point): the truncation is then not complete, and the caller
// (raft) repeats it, as it never acknowledged what follows.
func (p *Partition) TruncateFrom(ord int64) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if err := p.writableLocked(); err != nil {
		return err
	}
	if ord == p.nextOrd.Load() {
		return nil
	}
	p.segMu.RLock()
	k, pos, h, err := p.findOrdinalLocked(ord)
	p.segMu.RUnlock()
	if err != nil {
		return err
	}
	cut := h.BaseOffset
	if hw := p.hw.Load(); cut < hw {
		return fmt.Errorf("%w: cut at offset %d (batch %d) below the high watermark %d", ErrInvalidTruncation, cut, ord, hw)
	}
	if p.durable > cut || p.checkpointed > cut {
		if err := p.writeCheckpoint(checkpoint{logStart: p.logStart.Load(), recoveryPoint: cut}); err != nil {
			return p.fail(err)
		}
	}
	p.durable = min(p.durable, cut)
	if err := p.truncateLocked(k, pos, cut); err != nil {
		return p.fail(err)
	}
	p.logger.Info("truncated log", zap.String("dir", p.dir), zap.Int64("ordinal", ord), zap.Int64("log_end_offset", cut))
	return nil
}

// truncateLocked cuts the log at position pos of segment k (offset cut),
// makes that segment the active one and rebuilds producer state.
// syncMu and appendMu held.
func (p *Partition) truncateLocked(k int, pos, cut int64) error {
	// Segments below the cut still waiting for a Sync are synced first,
	// so the prefix a crash leaves is at least the cut.
	for _, u := range p.unsynced {
		if u.base < p.segs[k].base {
			if err := syncAll(p.dir, u); err != nil {
				return err
			}
		}
	}
	// Producer snapshots above the cut describe batches about to go:
	// deleted, durably, before any batch is, so none can come back.
	if p.snapshot != nil && p.snapshotOffset > cut {
		p.snapshot = nil
	}
	var keep []int64
	for _, off := range p.snapshots {
		if off > cut {
			if err := p.remove(fileName(p.dir, off, snapshotSuffix)); err != nil {
				return err
			}
			continue
		}
		keep = append(keep, off)
	}
	if err := p.fs.SyncDir(p.dir); err != nil {
		return storageErr("sync dir", p.dir, err)
	}
	p.snapshots = keep

	p.segMu.Lock()
	defer p.segMu.Unlock()
	dead := p.segs[k+1:]
	s := p.segs[k]
	p.segs = slices.Clone(p.segs[:k+1])
	p.unsynced = slices.DeleteFunc(p.unsynced, func(u *segment) bool { return u == s || slices.Contains(dead, u) })
	var freed int64
	for i := len(dead) - 1; i >= 0; i-- { // the newest first: a crash leaves a prefix
		d := dead[i]
		d.deleted = true
		freed += d.size
		for _, f := range []File{d.log, d.offFile, d.timeFile} {
			if f != nil {
				_ = f.Close()
			}
		}
		// Unlike retention's, a file left here would lie above the cut,
		// where the log grows again: a failure fails the partition.
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if err := p.remove(fileName(p.dir, d.base, suffix)); err != nil {
				return err
			}
		}
	}
	if s.sealed {
		for _, f := range []File{s.offFile, s.timeFile} {
			_ = f.Close()
		}
		s.offFile, s.timeFile = nil, nil
		s.offCount, s.timeCount = 0, 0
		s.sealed = false
		for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
			if err := p.remove(fileName(p.dir, s.base, suffix)); err != nil {
				return err
			}
		}
	}
	freed += s.size - pos
	if err := s.log.Truncate(pos); err != nil {
		return storageErr("truncate", fileName(p.dir, s.base, logSuffix), err)
	}
	s.alloc = pos
	// The rescan below reads the kept part back into the page cache, and
	// what is written from pos on is new: the next drop starts over.
	s.dropped = 0
	if err := s.log.Sync(); err != nil {
		return storageErr("sync", fileName(p.dir, s.base, logSuffix), err)
	}
	if err := p.fs.SyncDir(p.dir); err != nil {
		return storageErr("sync dir", p.dir, err)
	}
	// Rebuild the segment's in-memory index from its batch headers.
	s.mu.Lock()
	end, err := p.scanSegment(s, pos, p.cfg.IndexIntervalBytes, cut)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if end != pos || s.next != cut {
		return fmt.Errorf("%w: segment %d rescanned to position %d (offset %d) after truncating at %d (offset %d)",
			ErrCorruption, s.base, end, s.next, pos, cut)
	}
	p.active = s
	p.size.Add(-freed)
	p.leo.Store(cut)
	p.nextOrd.Store(s.baseOrd + s.count)

	// Producer state as recovery rebuilds it. loadProducers rebuilds the
	// aborted index in place, so readers (AbortedTransactions) wait on
	// txnMu meanwhile. It takes segment locks shared under it, which is
	// safe: only the appender, whose lock is held, takes them
	// exclusively.
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	p.producers = newProducerState()
	p.aborted = nil
	return p.loadProducers(keep, cut)
}

// ResetTo empties the log and starts it again at offset, the next batch
// getting ordinal ord: a raft follower installing a snapshot (the
// leader's log begins there; what this replica had before is covered by
// the snapshot). The log start offset and the high watermark become
// offset; producer and transaction state are cleared (the batches that
// made them are gone).
//
// Crash safety: the recovery point goes down to the first segment's base
// first, so that deleting segments never leaves a log shorter than it;
// then every segment (newest first) and snapshot is deleted and the
// directory synced, and only then the new empty segment and the
// checkpoint naming offset and ord are written. A crash before the end
// leaves a prefix of the old log (possibly empty, at the old log start
// and ordinal), never a mix of old and new; the caller (raftlog) detects
// an interrupted reset and repeats it.
func (p *Partition) ResetTo(offset, ord int64, now time.Time) error {
	if offset < 0 || ord < 1 {
		return fmt.Errorf("%w: reset to offset %d, ordinal %d", ErrOrdinalOutOfRange, offset, ord)
	}
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if err := p.writableLocked(); err != nil {
		return err
	}
	if err := p.resetLocked(offset, ord, now); err != nil {
		return p.fail(err)
	}
	p.logger.Info("reset log", zap.String("dir", p.dir), zap.Int64("offset", offset), zap.Int64("ordinal", ord))
	return nil
}

// resetLocked does ResetTo's work. syncMu and appendMu held.
func (p *Partition) resetLocked(offset, ord int64, now time.Time) error {
	if base := p.segs[0].base; p.checkpointed > base || p.durable > base {
		if err := p.writeCheckpoint(checkpoint{logStart: p.logStart.Load(), recoveryPoint: base}); err != nil {
			return err
		}
	}
	p.segMu.Lock()
	defer p.segMu.Unlock()
	dead := p.segs
	for i := len(dead) - 1; i >= 0; i-- {
		dead[i].deleted = true
		p.removeSegmentFiles(dead[i : i+1])
	}
	for _, off := range p.snapshots {
		if err := p.remove(fileName(p.dir, off, snapshotSuffix)); err != nil {
			return err
		}
	}
	if err := p.fs.SyncDir(p.dir); err != nil {
		return storageErr("sync dir", p.dir, err)
	}
	name := fileName(p.dir, offset, logSuffix)
	f, err := p.fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return storageErr("create", name, err)
	}
	s := newSegment(offset, ord, f, now)
	p.segs = []*segment{s}
	p.active = s
	p.unsynced, p.snapshots, p.snapshot = nil, nil, nil
	p.dirDirty, p.needCheckpoint = false, false
	p.size.Store(0)
	p.leo.Store(offset)
	p.logStart.Store(offset)
	p.hw.Store(offset)
	p.nextOrd.Store(ord)
	p.firstOrd.Store(ord)
	p.firstBase.Store(offset)
	p.durable = offset
	p.producers = newProducerState()
	p.txnMu.Lock()
	p.aborted = nil
	p.txnMu.Unlock()
	p.ongoing = map[int64]int64{}
	p.resetFirstUnstableLocked()
	if err := p.writeCheckpoint(checkpoint{logStart: offset, recoveryPoint: offset}); err != nil {
		return err
	}
	return nil
}
