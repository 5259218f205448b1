package log

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/shoal-mq/shoal/protocol"
)

// Read returns whole batches starting with the batch that contains offset,
// in a fresh slice the caller owns. It stops before the first batch whose
// last offset is >= maxOffset (usually the high watermark; clamped to the
// log end offset) and at maxBytes, but returns the first batch whole even
// if it is larger than maxBytes when minOne is set (KIP-74). It reads from
// one segment per call, like Kafka. An offset below the log start offset
// or above the log end offset is ErrOffsetOutOfRange; an offset at or past
// maxOffset returns nil, nil.
func (p *Partition) Read(offset int64, maxOffset int64, maxBytes int, minOne bool) ([]byte, error) {
	b, err := p.ReadAppend(nil, offset, maxOffset, maxBytes, minOne)
	if len(b) == 0 {
		b = nil
	}
	return b, err
}

// ReadAppend is Read appending to dst (which it may grow) instead of
// allocating: the broker reads a whole fetch into one pooled buffer. It
// returns the extended slice; the new bytes are its suffix past len(dst).
// With nothing to read, and on every error, it returns dst unchanged.
func (p *Partition) ReadAppend(dst []byte, offset int64, maxOffset int64, maxBytes int, minOne bool) ([]byte, error) {
	p.segMu.RLock()
	defer p.segMu.RUnlock()
	if p.readClosed {
		return dst, ErrClosed
	}
	if err := p.stickyErr(); err != nil { // the page cache may not match the disk
		return dst, err
	}
	leo, logStart := p.leo.Load(), p.logStart.Load()
	if offset < logStart || offset > leo {
		return dst, fmt.Errorf("%w: offset %d not in [%d, %d]", ErrOffsetOutOfRange, offset, logStart, leo)
	}
	maxOffset = min(maxOffset, leo)
	for offset < maxOffset {
		base := len(dst)
		out, next, err := p.readOnce(dst, offset, maxOffset, maxBytes, minOne)
		if err != nil || !p.replica {
			return out, err
		}
		// A replica's log holds raft's own entries, which no client may
		// see (docs/CLUSTER.md): they are cut out, and a read that held
		// nothing else goes on after them rather than answer empty,
		// which would stall a consumer at their offset.
		if out = dropInternal(out, base); len(out) > base || next <= offset {
			return out, nil
		}
		dst, offset = out, next
	}
	return dst, nil
}

// readOnce reads from the segment holding offset (see ReadAppend) and
// returns the extended slice and the offset after its last batch.
// segMu held shared.
func (p *Partition) readOnce(dst []byte, offset, maxOffset int64, maxBytes int, minOne bool) ([]byte, int64, error) {
	segs := p.segs
	i := max(sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })-1, 0)
	for ; i < len(segs); i++ {
		s := segs[i]
		v := s.view()
		if offset >= v.next {
			continue
		}
		pos, h, err := s.findBatch(offset, v.size)
		if err != nil {
			return dst, offset, err
		}
		if pos < 0 {
			continue
		}
		base := len(dst)
		out, err := s.readFrom(dst, pos, &h, v.size, maxOffset, maxBytes, minOne)
		next := offset
		for b := out[base:]; p.replica && len(b) >= protocol.BatchHeaderSize; { // only a replica reads on
			hh, _ := protocol.ParseBatchHeader(b)
			next = hh.LastOffset() + 1
			b = b[hh.Size():]
		}
		return out, next, err
	}
	return dst, offset, nil
}

// dropInternal removes raft's private control batches (types from
// 0x7000 up, log/raftlog) from b[base:], in place.
func dropInternal(b []byte, base int) []byte {
	w := base
	for r := base; r+protocol.BatchHeaderSize <= len(b); {
		h, _ := protocol.ParseBatchHeader(b[r:])
		size := int(h.Size())
		if r+size > len(b) {
			break
		}
		if typ, ok := controlType(b[r : r+size]); !(h.IsControl() && ok && typ >= privateControlTypes) {
			w += copy(b[w:], b[r:r+size])
		}
		r += size
	}
	return b[:w]
}

// privateControlTypes is the first control record type Shoal keeps to
// itself (raft's entries, log/raftlog); Kafka's own are 0 to 6.
const privateControlTypes = 0x7000

// findBatch returns the position and header of the first batch whose last
// offset is >= offset, or pos -1 when there is none below end.
func (s *segment) findBatch(offset, end int64) (int64, protocol.BatchHeader, error) {
	start, err := s.lookupPosition(offset)
	if err != nil {
		return -1, protocol.BatchHeader{}, err
	}
	// Headers only, usually within one index interval of start: a small
	// read-ahead keeps the per-fetch overhead low.
	r := batchReader{f: s.log, pos: start, end: end, window: 8 << 10}
	for {
		pos, h, _, err := r.next()
		switch {
		case errors.Is(err, io.EOF):
			return -1, h, nil
		case err != nil:
			return -1, h, corruptAt(s, pos, err)
		}
		if h.LastOffset() >= offset {
			return pos, h, nil
		}
	}
}

// readFrom reads whole batches from pos (where the batch h starts) up to
// end, maxOffset and maxBytes.
func (s *segment) readFrom(dst []byte, pos int64, h *protocol.BatchHeader, end, maxOffset int64, maxBytes int, minOne bool) ([]byte, error) {
	if h.LastOffset() >= maxOffset {
		return dst, nil
	}
	limit := int64(max(maxBytes, 0))
	if minOne && h.Size() > limit {
		limit = h.Size()
	}
	limit = min(limit, end-pos)
	if limit < h.Size() {
		return dst, nil
	}
	base := len(dst)
	if int64(cap(dst)-base) < limit {
		// Grow geometrically: a fetch appends partition after partition.
		grown := make([]byte, base, max(int64(base)+limit, 2*int64(cap(dst))))
		copy(grown, dst)
		dst = grown
	}
	buf := dst[base : int64(base)+limit]
	if _, err := s.log.ReadAt(buf, pos); err != nil {
		return dst, fmt.Errorf("%w: read segment %d at %d: %w", ErrStorage, s.base, pos, err)
	}
	n := int64(0)
	for n+protocol.BatchHeaderSize <= int64(len(buf)) {
		hh, _ := protocol.ParseBatchHeader(buf[n:])
		size := hh.Size()
		if hh.BatchLength < protocol.MinBatchLength {
			return dst, fmt.Errorf("%w: invalid batch at position %d of segment %d", ErrCorruption, pos+n, s.base)
		}
		if n+size > int64(len(buf)) || hh.LastOffset() >= maxOffset {
			break
		}
		n += size
	}
	return dst[:int64(base)+n], nil
}

// readBatch reads the whole batch h at pos.
func (s *segment) readBatch(pos int64, h *protocol.BatchHeader) ([]byte, error) {
	buf := make([]byte, h.Size())
	if _, err := s.log.ReadAt(buf, pos); err != nil {
		return nil, fmt.Errorf("%w: read segment %d at %d: %w", ErrStorage, s.base, pos, err)
	}
	return buf, nil
}

// recordAtOrAfter refines a batch-level match to the first record with
// timestamp >= ts (match) at offset >= minOffset. For compressed batches
// it cannot look inside (no codecs here) and returns the first offset
// >= minOffset with the batch's maxTimestamp. LogAppendTime batches give
// every record the batch's maxTimestamp.
func (s *segment) recordAtOrAfter(pos int64, h *protocol.BatchHeader, minOffset int64, match func(ts int64) bool) (int64, int64) {
	first := max(h.BaseOffset, minOffset)
	if h.IsLogAppendTime() || h.Compression() != protocol.CompressionNone {
		return first, h.MaxTimestamp
	}
	batch, err := s.readBatch(pos, h)
	if err != nil {
		return first, h.MaxTimestamp
	}
	off, ts := first, h.MaxTimestamp
	_ = protocol.WalkRecords(batch, func(offsetDelta int32, tsDelta int64) bool {
		o, t := h.BaseOffset+int64(offsetDelta), h.BaseTimestamp+tsDelta
		if o >= minOffset && match(t) {
			off, ts = o, t
			return false
		}
		return true
	})
	return off, ts
}

// OffsetForTimestamp returns the first offset below the high watermark
// whose record timestamp is >= ts, and that record's timestamp
// (ListOffsets by time). found is false when there is none. It uses the
// time index to skip, then scans batch headers; inside an uncompressed
// batch it finds the exact record, inside a compressed one it answers
// with the batch (first offset, maxTimestamp).
func (p *Partition) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, found bool) {
	p.segMu.RLock()
	defer p.segMu.RUnlock()
	if p.readClosed || p.failure.Load() != nil {
		return -1, -1, false
	}
	hw, logStart := p.hw.Load(), p.logStart.Load()
	for _, s := range p.segs {
		if s.base >= hw {
			break
		}
		v := s.view()
		if v.size == 0 || v.maxTs < ts || v.next <= logStart {
			continue
		}
		startOff, err := s.lookupTime(ts)
		if err != nil {
			return -1, -1, false
		}
		start := max(startOff, logStart)
		pos, err := s.lookupPosition(start)
		if err != nil {
			return -1, -1, false
		}
		r := batchReader{f: s.log, pos: pos, end: v.size}
		for {
			bpos, h, _, err := r.next()
			if err != nil {
				break
			}
			if h.LastOffset() < start || h.MaxTimestamp < ts || h.RecordCount == 0 {
				continue // an empty batch (compaction's) holds no record to answer with
			}
			if h.BaseOffset >= hw {
				return -1, -1, false
			}
			off, t := s.recordAtOrAfter(bpos, &h, start, func(t int64) bool { return t >= ts })
			if off >= hw {
				return -1, -1, false
			}
			return off, t, true
		}
	}
	return -1, -1, false
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp (the first such record), or (-1, -1) for an empty log
// (ListOffsets MAX_TIMESTAMP, KIP-734). Inside a compressed batch the
// batch's first offset stands for the record.
func (p *Partition) MaxTimestamp() (offset int64, timestamp int64) {
	p.segMu.RLock()
	defer p.segMu.RUnlock()
	if p.readClosed || p.failure.Load() != nil {
		return -1, -1
	}
	var best *segment
	var bv segView
	logStart := p.logStart.Load()
	for _, s := range p.segs {
		v := s.view()
		if v.next <= logStart {
			continue
		}
		if v.maxBase >= 0 && (best == nil || v.maxTs > bv.maxTs) {
			best, bv = s, v
		}
	}
	if best == nil {
		return -1, -1
	}
	pos, h, err := best.findBatch(bv.maxBase, bv.size)
	if err != nil || pos < 0 || h.BaseOffset != bv.maxBase {
		return bv.maxBase, bv.maxTs
	}
	return best.recordAtOrAfter(pos, &h, h.BaseOffset, func(t int64) bool { return t == bv.maxTs })
}
