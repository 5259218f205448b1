package log

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/shoal-mq/shoal/protocol"
)

// Batch ordinals: the batches of a partition are numbered consecutively,
// the first batch of a new log being 1, so that a raft replica can use
// them as its entry indexes (log/raftlog): raft needs dense indexes,
// Kafka offsets advance by record count. A segment's base ordinal is
// in its index header and each offset index entry has the batch's
// ordinal relative to it; the first segment's is anchored in the
// partition checkpoint, so every other is its predecessor's plus its
// batch count (see "Ordinals" in doc.go).

// FirstOrdinal returns the ordinal of the first batch of the first
// segment (NextOrdinal when the log is empty). Batches below the log
// start offset in that segment still count: they are on disk.
func (p *Partition) FirstOrdinal() int64 { return p.firstOrd.Load() }

// NextOrdinal returns the ordinal the next appended batch gets.
func (p *Partition) NextOrdinal() int64 { return p.nextOrd.Load() }

// OrdinalOffset returns the base offset of batch ord, or the log end
// offset for ord == NextOrdinal.
func (p *Partition) OrdinalOffset(ord int64) (int64, error) {
	p.segMu.RLock()
	defer p.segMu.RUnlock()
	if p.readClosed {
		return 0, ErrClosed
	}
	// The end is read from the active segment's view, whose batch count
	// and next offset change together (nextOrd and leo are published
	// one after the other).
	last := p.segs[len(p.segs)-1]
	if v := last.view(); ord == last.baseOrd+v.count {
		return v.next, nil
	}
	_, _, h, err := p.findOrdinalLocked(ord)
	return h.BaseOffset, err
}

// ReadOrdinals appends to dst the whole batches with ordinals in
// [lo, hi), stopping before the batch that would take the bytes read past
// maxBytes, except that the first batch is always returned (raft's
// Entries contract). It returns the extended slice and the number of
// batches read; on error dst is returned unchanged. It reads batches
// above the high watermark too: a replica sends its uncommitted entries.
func (p *Partition) ReadOrdinals(dst []byte, lo, hi int64, maxBytes int64) ([]byte, int, error) {
	p.segMu.RLock()
	defer p.segMu.RUnlock()
	if p.readClosed {
		return dst, 0, ErrClosed
	}
	if err := p.stickyErr(); err != nil {
		return dst, 0, err
	}
	if hi > p.nextOrd.Load() || hi < lo {
		return dst, 0, fmt.Errorf("%w: batches [%d, %d) with next ordinal %d", ErrOrdinalOutOfRange, lo, hi, p.nextOrd.Load())
	}
	if lo == hi {
		return dst, 0, nil
	}
	k, pos, _, err := p.findOrdinalLocked(lo)
	if err != nil {
		return dst, 0, err
	}
	base, n, total, full := len(dst), 0, int64(0), false
	for ; k < len(p.segs) && lo < hi && !full; k, pos = k+1, 0 {
		s := p.segs[k]
		r := batchReader{f: s.log, pos: pos, end: s.view().size}
		end := pos
		for lo < hi {
			bpos, h, _, err := r.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return dst[:base], 0, corruptAt(s, bpos, err)
			}
			if n > 0 && total+h.Size() > maxBytes {
				full = true
				break
			}
			end, total = bpos+h.Size(), total+h.Size()
			lo, n = lo+1, n+1
		}
		if end > pos {
			if dst, err = appendRange(dst, s, pos, end); err != nil {
				return dst[:base], 0, err
			}
		}
	}
	return dst, n, nil
}

// appendRange appends bytes [start, end) of segment s to dst.
func appendRange(dst []byte, s *segment, start, end int64) ([]byte, error) {
	l := len(dst)
	dst = slices.Grow(dst, int(end-start))[:l+int(end-start)]
	if _, err := s.log.ReadAt(dst[l:], start); err != nil {
		return dst[:l], fmt.Errorf("%w: read segment %d at %d: %w", ErrStorage, s.base, start, err)
	}
	return dst, nil
}

// corruptAt describes a batch reader's failure at pos of segment s.
func corruptAt(s *segment, pos int64, err error) error {
	if errors.Is(err, errTorn) {
		return fmt.Errorf("%w: invalid batch at position %d of segment %d", ErrCorruption, pos, s.base)
	}
	return err
}

// findOrdinalLocked returns the index in p.segs of the segment holding
// batch ord, the batch's position and its header. segMu held (shared is
// enough).
func (p *Partition) findOrdinalLocked(ord int64) (int, int64, protocol.BatchHeader, error) {
	segs := p.segs
	k := sort.Search(len(segs), func(i int) bool { return segs[i].baseOrd > ord }) - 1
	if k < 0 || ord >= p.nextOrd.Load() {
		return 0, 0, protocol.BatchHeader{}, fmt.Errorf("%w: batch %d not in [%d, %d)", ErrOrdinalOutOfRange, ord, p.firstOrd.Load(), p.nextOrd.Load())
	}
	s := segs[k]
	v := s.view()
	pos, at, err := s.lookupOrdinal(ord)
	if err != nil {
		return 0, 0, protocol.BatchHeader{}, err
	}
	r := batchReader{f: s.log, pos: pos, end: v.size, window: 8 << 10}
	for {
		bpos, h, _, err := r.next()
		if errors.Is(err, io.EOF) {
			return 0, 0, h, fmt.Errorf("%w: batch %d missing from segment %d", ErrCorruption, ord, s.base)
		}
		if err != nil {
			return 0, 0, h, corruptAt(s, bpos, err)
		}
		if at == ord {
			return k, bpos, h, nil
		}
		at++
	}
}
