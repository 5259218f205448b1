package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
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

// Compaction (cleanup.policy=compact): see doc.go, "Compaction".

// Codec inflates and deflates the record sections of compressed batches
// for Clean (the broker's codecs: this package has none of its own).
type Codec interface {
	// Decompress appends the inflated records of src to dst.
	Decompress(dst, src []byte, c protocol.Compression) ([]byte, error)
	// Compress deflates raw records with c, as a producer would.
	Compress(raw []byte, c protocol.Compression) ([]byte, error)
}

// CleanOptions are one Clean call's resources.
type CleanOptions struct {
	Now time.Time
	// Map is the offset map (log.cleaner.dedupe.buffer.size); reused
	// across calls, one per cleaner thread.
	Map *OffsetMap
	// Codec handles compressed batches; without one a log holding a
	// compressed batch in the range to clean is not cleaned.
	Codec Codec
	// Throttle, when set, is called with the bytes read or written so
	// far and may sleep (log.cleaner.io.max.bytes.per.second).
	Throttle func(n int)
	// Cancel, when closed, abandons the clean at its next batch (the
	// segments swapped so far stay: each is a valid log).
	Cancel <-chan struct{}
}

// CleanStats describe one Clean.
type CleanStats struct {
	// FirstDirty..End is the range the offset map covered: every record
	// below End whose key has a later record below End is gone.
	FirstDirty, End         int64
	Segments                int   // segments rewritten
	BytesRead, BytesWritten int64 // segment bytes read, and written
	Removed, Tombstones     int64 // records removed, of which tombstones
	Markers                 int64 // transaction markers removed
	Merged                  int   // segments merged into the one before them
}

// CleanableInfo is what a cleaner needs to pick a log (Cleanable).
type CleanableInfo struct {
	// Compacts: cleanup.policy includes compact and the log is not a
	// raft replica.
	Compacts bool
	// FirstDirty is where the last clean ended (the log start before
	// any); End the end of what may be cleaned now: the base of the
	// first segment that is active, not yet fsynced, above the high
	// watermark or the last stable offset, or newer than
	// min.compaction.lag.ms.
	FirstDirty, End int64
	// CleanBytes are the bytes of the segments below FirstDirty's;
	// DirtyBytes those from it to End.
	CleanBytes, DirtyBytes int64
	// Ratio is DirtyBytes / (CleanBytes + DirtyBytes), Kafka's dirty
	// ratio (min.cleanable.dirty.ratio compares with it).
	Ratio float64
	// Due: the first dirty batch is older than max.compaction.lag.ms.
	Due bool
	// OldestDirty is the max timestamp of the first dirty segment (-1:
	// none), for "time since it became dirty".
	OldestDirty int64
	// Uncleanable is why an earlier Clean failed on the log's contents;
	// until the log is reopened there is nothing to clean.
	Uncleanable error
	// TombstonesDue: a tombstone's delete horizon has passed, so a clean
	// would remove it even if nothing is dirty.
	TombstonesDue bool
}

// OffsetMap maps record keys, by a 128-bit hash, to the last offset
// holding them, in memory fixed at creation: Kafka's dedupe buffer (24
// bytes per entry, filled to a load factor). Not safe for concurrent use.
type OffsetMap struct {
	seed1, seed2 maphash.Seed
	slots        []mapSlot
	used, limit  int
}

type mapSlot struct {
	h1, h2 uint64
	off    int64 // offset + 1; 0: empty
}

// NewOffsetMap returns a map using about bytes of memory, holding at
// most loadFactor of its slots (log.cleaner.io.buffer.load.factor, 0.9).
func NewOffsetMap(bytes int64, loadFactor float64) *OffsetMap {
	n := max(int(bytes/24), 16)
	// At least one slot stays empty, whatever the load factor: probing
	// for a key the map lacks ends at an empty slot.
	return &OffsetMap{seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed(), slots: make([]mapSlot, n),
		limit: min(max(int(float64(n)*loadFactor), 1), n-1)}
}

// Capacity is how many keys the map holds.
func (m *OffsetMap) Capacity() int { return m.limit }

func (m *OffsetMap) reset() {
	clear(m.slots)
	m.used = 0
}

// find returns the slot of key: its own or the empty one it would take.
func (m *OffsetMap) find(key []byte) (*mapSlot, uint64, uint64) {
	h1, h2 := maphash.Bytes(m.seed1, key), maphash.Bytes(m.seed2, key)
	n := uint64(len(m.slots))
	for i := h1 % n; ; i = (i + 1) % n {
		s := &m.slots[i]
		if s.off == 0 || (s.h1 == h1 && s.h2 == h2) {
			return s, h1, h2
		}
	}
}

// put records off as key's latest offset; false when key is new and
// the map is full.
func (m *OffsetMap) put(key []byte, off int64) bool {
	s, h1, h2 := m.find(key)
	if s.off == 0 {
		if m.used >= m.limit {
			return false
		}
		m.used++
		s.h1, s.h2 = h1, h2
	}
	s.off = off + 1
	return true
}

// get returns key's latest offset, if the map holds it.
func (m *OffsetMap) get(key []byte) (int64, bool) {
	s, _, _ := m.find(key)
	return s.off - 1, s.off != 0
}

const (
	cleanerCheckpointName  = "cleaner.checkpoint"
	cleanerCheckpointMagic = "SHCC"
	cleanSuffix            = ".clean" + tmpSuffix // a segment being rewritten; Open deletes it
	swapSuffix             = ".swap"              // "<base>.log.swap": merged segments; Open completes the swap
)

// ErrMapTooSmall is a Clean whose offset map cannot hold the keys of
// one batch.
var ErrMapTooSmall = errors.New("log: offset map too small for one batch; raise log.cleaner.dedupe.buffer.size")

// firstDirtyLocked is where the last clean ended, read from the cleaner
// checkpoint the first time. cleanMu held.
func (p *Partition) firstDirtyLocked() int64 {
	if !p.cleanLoaded {
		p.cleanLoaded = true
		b, err := readWholeFile(p.fs, filepath.Join(p.dir, cleanerCheckpointName))
		if err == nil && len(b) == 20 && string(b[:4]) == cleanerCheckpointMagic &&
			crc(b[:16]) == binary.BigEndian.Uint32(b[16:]) {
			p.cleanedTo.Store(int64(binary.BigEndian.Uint64(b[8:])))
		}
	}
	if p.cleanedTo.Load() > p.leo.Load() {
		// The log was cut below where cleaning ended (recovery truncated
		// a damaged tail): what follows the cut is not clean.
		p.cleanedTo.Store(p.logStart.Load())
	}
	return max(p.cleanedTo.Load(), p.logStart.Load())
}

// writeCleanerCheckpoint durably records that the log is clean below
// off. Its loss only makes the next Clean redo work.
func (p *Partition) writeCleanerCheckpoint(off int64) error {
	b := make([]byte, 20)
	copy(b, cleanerCheckpointMagic)
	b[4] = 1
	binary.BigEndian.PutUint64(b[8:], uint64(off))
	binary.BigEndian.PutUint32(b[16:], crc(b[:16]))
	if err := p.writeFileAtomic(filepath.Join(p.dir, cleanerCheckpointName), b); err != nil {
		return err
	}
	return p.fs.SyncDir(p.dir)
}

// cleanPlan is what Clean works on, taken under appendMu.
type cleanPlan struct {
	cfg      Config
	info     CleanableInfo
	segs     []*segment // sealed, fsynced segments from the first up to End
	aborted  []AbortedTxn
	lastOf   map[int64]int64 // producer id -> last offset of its newest batch
	interval int32
}

// Cleanable reports whether and how much of the log Clean would clean
// now.
// A log being cleaned reports nothing to do.
func (p *Partition) Cleanable(now time.Time) CleanableInfo {
	if !p.cleanMu.TryLock() {
		return CleanableInfo{}
	}
	defer p.cleanMu.Unlock()
	plan := p.plan(now)
	return plan.info
}

// cleanFailed marks the log uncleanable after a Clean failed on its
// contents (a storage failure fails the partition instead; a map too
// small or a missing codec are the configuration's, and a later Clean
// with another may succeed). cleanMu held.
func (p *Partition) cleanFailed(err error) error {
	if errors.Is(err, ErrCorruption) && p.stickyErr() == nil {
		p.uncleanable = err
		p.logger.Error("log cannot be cleaned; not cleaning it again until it is reopened", zap.Error(err))
	}
	return err
}

// plan takes the clean's inputs. cleanMu held.
func (p *Partition) plan(now time.Time) cleanPlan {
	firstDirty := p.firstDirtyLocked()
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	cfg := p.cfg
	pl := cleanPlan{cfg: cfg, interval: cfg.IndexIntervalBytes}
	pl.info = CleanableInfo{Compacts: cfg.Cleanup.Compacts() && !p.replica, FirstDirty: firstDirty, End: firstDirty, OldestDirty: -1,
		Uncleanable: p.uncleanable}
	if !pl.info.Compacts || p.closed || p.stickyErr() != nil || p.uncleanable != nil {
		return pl
	}
	limit := min(p.hw.Load(), p.firstUnstable.Load(), p.active.base)
	nowMs := now.UnixMilli()
	unsynced := func(s *segment) bool { return slices.Contains(p.unsynced, s) }
	for _, s := range p.segs[:len(p.segs)-1] {
		if s.next <= firstDirty {
			pl.info.CleanBytes += s.size
			pl.segs = append(pl.segs, s)
			continue
		}
		if s.next > limit || unsynced(s) || (cfg.MinCompactionLagMs > 0 && s.maxTs > nowMs-cfg.MinCompactionLagMs) {
			break
		}
		if pl.info.OldestDirty < 0 {
			pl.info.OldestDirty = s.maxTs
			first := s.firstTs
			if first < 0 {
				first = s.maxTs
			}
			pl.info.Due = cfg.MaxCompactionLagMs > 0 && first >= 0 && nowMs-first > cfg.MaxCompactionLagMs
		}
		pl.info.DirtyBytes += s.size
		pl.info.End = s.next
		pl.segs = append(pl.segs, s)
	}
	pl.info.TombstonesDue = p.deleteHorizon > 0 && p.deleteHorizon <= nowMs
	if pl.info.End <= firstDirty && !pl.info.TombstonesDue {
		pl.segs = nil
		return pl
	}
	if total := pl.info.CleanBytes + pl.info.DirtyBytes; total > 0 {
		pl.info.Ratio = float64(pl.info.DirtyBytes) / float64(total)
	}
	pl.aborted = p.AbortedTransactions(p.logStart.Load(), pl.info.End)
	pl.lastOf = make(map[int64]int64, len(p.producers.entries))
	for id, e := range p.producers.entries {
		if e.n > 0 {
			pl.lastOf[id] = e.batches[e.n-1].lastOffset
		}
	}
	return pl
}

func (pl *cleanPlan) isAborted(h *protocol.BatchHeader) bool {
	if !h.IsTransactional() || h.IsControl() {
		return false
	}
	for _, a := range pl.aborted {
		if a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset {
			return true
		}
	}
	return false
}

// cleaner is one Clean's working state.
type cleaner struct {
	p     *Partition
	pl    *cleanPlan
	opts  CleanOptions
	stats CleanStats
	raw   []byte // scratch: a batch's inflated records
	io    int
	// txnKept: producer ids whose current transaction (since their last
	// marker, in the rewrite's log order) kept a batch.
	txnKept map[int64]bool
	// horizon is the latest delete horizon left on a kept tombstone.
	horizon int64
	// snapshotAt is the oldest producer snapshot kept when the clean
	// began: recovery replays from it or a newer one (or, with none
	// valid, from the first segment, where the transaction's batches are
	// gone too), so a marker below it never has to close a transaction
	// the replay opened.
	snapshotAt int64
}

func (c *cleaner) throttle(n int) {
	c.io += n
	if c.opts.Throttle != nil {
		c.opts.Throttle(n)
	}
}

// records returns the record section of batch, inflated if compressed.
func (c *cleaner) records(h *protocol.BatchHeader, batch []byte) ([]byte, error) {
	body := batch[protocol.BatchHeaderSize:h.Size()]
	codec := h.Compression()
	if codec == protocol.CompressionNone {
		return body, nil
	}
	if c.opts.Codec == nil {
		return nil, fmt.Errorf("log: batch at offset %d is compressed and the cleaner has no codec", h.BaseOffset)
	}
	var err error
	c.raw, err = c.opts.Codec.Decompress(c.raw[:0], body, codec)
	if err != nil {
		return nil, fmt.Errorf("%w: batch at offset %d does not decompress: %w", ErrCorruption, h.BaseOffset, err)
	}
	return c.raw, nil
}

// eachBatch reads s's batches in order, calling fn with each whole batch
// (valid until fn returns). A read that fails because retention or Close
// removed the segment meanwhile, or a cancelled clean, is errAbandoned.
func (c *cleaner) eachBatch(s *segment, fn func(pos int64, h *protocol.BatchHeader, batch []byte) error) error {
	r := batchReader{f: s.log, end: s.size, full: true, window: 1 << 20}
	for {
		select {
		case <-c.opts.Cancel:
			return errAbandoned
		default:
		}
		pos, h, batch, err := r.next()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			if c.p.segmentGone(s) {
				return errAbandoned
			}
			return fmt.Errorf("%w: segment %d at position %d: %w", ErrCorruption, s.base, pos, err)
		}
		c.throttle(len(batch))
		c.stats.BytesRead += int64(len(batch))
		if err := fn(pos, &h, batch); err != nil {
			return err
		}
	}
}

// errAbandoned ends a Clean whose segments retention, DeleteRecords or
// Close removed meanwhile: nothing is swapped, nothing is wrong.
var errAbandoned = errors.New("log: clean abandoned")

// segmentGone says whether s left the log (or the log closed).
func (p *Partition) segmentGone(s *segment) bool {
	p.segMu.RLock()
	defer p.segMu.RUnlock()
	return p.readClosed || !slices.Contains(p.segs, s)
}

// Clean compacts the log once (Kafka's LogCleaner, one pass): it maps
// the keys of the dirty range [FirstDirty, End) to their last offsets,
// as many as opts.Map holds (End is lowered to the first batch that no
// longer fits; the rest is cleaned next time), then rewrites every
// segment from the first one holding records below End, keeping each
// record unless a later record of its key lies below End, it has no key,
// it belongs to an aborted transaction, or it is a tombstone older than
// delete.retention.ms. Offsets, timestamps, producer fields and
// attributes of kept batches are unchanged; batches left without
// records collapse into empty batches holding their offsets (see
// doc.go). Each segment is swapped whole (rename), in log order, so a
// crash leaves every segment either old or new, and any such mix is a
// valid log. Produce and Fetch go on meanwhile: locks are held only to
// take the plan and to swap a segment.
func (p *Partition) Clean(opts CleanOptions) (CleanStats, error) {
	if opts.Map == nil {
		return CleanStats{}, errors.New("log: Clean without an offset map")
	}
	p.cleanMu.Lock()
	defer p.cleanMu.Unlock()
	p.syncMu.Lock()
	snapshotAt := int64(-1)
	if len(p.snapshots) > 0 {
		snapshotAt = p.snapshots[0]
	}
	p.syncMu.Unlock()
	pl := p.plan(opts.Now)
	c := &cleaner{p: p, pl: &pl, opts: opts, txnKept: map[int64]bool{}, snapshotAt: snapshotAt}
	c.stats.FirstDirty, c.stats.End = pl.info.FirstDirty, pl.info.FirstDirty
	if len(pl.segs) == 0 {
		if pl.info.TombstonesDue {
			p.deleteHorizon = 0 // the segments holding them are gone
		}
		return c.stats, nil
	}
	end, err := c.buildMap()
	if errors.Is(err, errAbandoned) {
		return c.stats, nil
	}
	if err != nil {
		return c.stats, p.cleanFailed(err)
	}
	c.stats.End = end
	for _, g := range groupSegments(pl.segs, end, pl.cfg.SegmentBytes) {
		if err := c.rewrite(g, end); err != nil {
			if errors.Is(err, errAbandoned) {
				// What was swapped stays: make it durable, and remember
				// the horizons it stamped.
				p.deleteHorizon = max(p.deleteHorizon, c.horizon)
				if c.stats.Segments > 0 {
					if err := p.fs.SyncDir(p.dir); err != nil {
						return c.stats, p.fail(storageErr("sync dir", p.dir, err))
					}
				}
				return c.stats, nil
			}
			return c.stats, p.cleanFailed(err)
		}
	}
	if err := p.fs.SyncDir(p.dir); err != nil {
		return c.stats, p.fail(storageErr("sync dir", p.dir, err))
	}
	p.cleanedTo.Store(end)
	p.deleteHorizon = c.horizon
	if err := p.writeCleanerCheckpoint(end); err != nil {
		p.logger.Warn("cannot write the cleaner checkpoint", zap.Error(err))
	}
	return c.stats, nil
}

// buildMap fills the offset map from FirstDirty and returns where it
// stopped.
func (c *cleaner) buildMap() (int64, error) {
	m := c.opts.Map
	m.reset()
	first, end := c.pl.info.FirstDirty, c.pl.info.End
	stop := end
	full := errors.New("full")
	for _, s := range c.pl.segs {
		if s.next <= first {
			continue
		}
		err := c.eachBatch(s, func(_ int64, h *protocol.BatchHeader, batch []byte) error {
			if h.LastOffset() < first {
				return nil
			}
			if h.IsControl() || c.pl.isAborted(h) || h.RecordCount == 0 {
				return nil
			}
			recs, err := c.records(h, batch)
			if err != nil {
				return err
			}
			err = protocol.EachRawRecord(recs, h.RecordCount, func(r *protocol.RawRecord) error {
				if r.KeyNull {
					return nil
				}
				if !m.put(r.Key, h.BaseOffset+int64(r.OffsetDelta)) {
					stop = h.BaseOffset
					return full
				}
				return nil
			})
			if err != nil && !errors.Is(err, full) {
				return fmt.Errorf("%w: batch at offset %d: %w", ErrCorruption, h.BaseOffset, err)
			}
			return err
		})
		if errors.Is(err, full) {
			if stop <= first {
				return 0, ErrMapTooSmall
			}
			return stop, nil
		}
		if err != nil {
			return 0, err
		}
	}
	return stop, nil
}

// emptyRun is consecutive batches left without records, to be written
// as one empty batch spanning their offsets.
type emptyRun struct {
	base, last int64
	maxTs      int64
	attrs      int16
	epoch      int32
}

// groupSegments splits the segments below end into runs of consecutive
// ones to be cleaned into one segment each, as Kafka's cleaner groups
// them: together at most segment.bytes before cleaning (so the cleaned
// one is no larger than a segment may be), and spanning fewer than 2^31
// offsets (index entries hold 32-bit relative offsets). Cleaned logs so
// keep few segments, and few open files, however many rolls wrote them.
func groupSegments(segs []*segment, end, maxBytes int64) [][]*segment {
	var out [][]*segment
	var g []*segment
	var bytes int64
	for _, s := range segs {
		if s.base >= end {
			break
		}
		if len(g) > 0 && (bytes+s.size > maxBytes || s.next-1-g[0].base > math.MaxInt32) {
			out, g, bytes = append(out, g), nil, 0
		}
		g = append(g, s)
		bytes += s.size
	}
	if len(g) > 0 {
		out = append(out, g)
	}
	return out
}

// rewrite writes the cleaned copy of the segments g as one segment and
// swaps it in if it differs.
func (c *cleaner) rewrite(g []*segment, end int64) error {
	p := c.p
	s := g[0]
	name := fileName(p.dir, s.base, logSuffix)
	tmp := name + cleanSuffix
	f, err := p.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return p.fail(storageErr("create", tmp, err))
	}
	ns := newSegment(s.base, s.baseOrd, f, s.created)
	var out []byte
	var pos int64
	changed := len(g) > 1 // segments merge
	flush := func(force bool) error {
		if len(out) == 0 || (!force && len(out) < 1<<20) {
			return nil
		}
		if _, err := f.Write(out); err != nil {
			return p.fail(storageErr("write", tmp, err))
		}
		c.throttle(len(out))
		c.stats.BytesWritten += int64(len(out))
		out = out[:0]
		return nil
	}
	emit := func(b []byte) error {
		h, _ := protocol.ParseBatchHeader(b)
		ns.indexBatch(pos, &h, c.pl.interval)
		pos += int64(len(b))
		out = append(out, b...)
		return flush(false)
	}
	var run *emptyRun
	endRun := func() error {
		if run == nil {
			return nil
		}
		r := run
		run = nil
		return emit(emptyBatch(r))
	}
	discard := func() {
		_ = f.Close()
		_ = p.fs.Remove(tmp)
	}
	nowMs := c.opts.Now.UnixMilli()
	deleteBefore := nowMs - c.pl.cfg.DeleteRetentionMs
	// toRun adds a batch that keeps no record to the current empty run.
	// One with a producer id (an empty copy kept by an earlier clean, a
	// marker) changes the segment: left in place, a transactional one
	// would outlive a commit marker this clean removes, and recovery's
	// replay would open its transaction for good.
	toRun := func(h *protocol.BatchHeader) error {
		if h.RecordCount > 0 || h.ProducerID >= 0 {
			changed = true
		}
		if run != nil && h.LastOffset()-run.base <= 1<<31-1 {
			changed = true // two batches become one
			run.last = h.LastOffset()
			run.maxTs = max(run.maxTs, h.MaxTimestamp)
			return nil
		}
		if err := endRun(); err != nil {
			return err
		}
		run = &emptyRun{base: h.BaseOffset, last: h.LastOffset(), maxTs: h.MaxTimestamp,
			attrs: h.Attributes & protocol.AttrTimestampType, epoch: h.PartitionLeaderEpoch}
		return nil
	}
	emitData := func(h *protocol.BatchHeader, b []byte) error {
		if h.IsTransactional() && h.ProducerID >= 0 {
			c.txnKept[h.ProducerID] = true
		}
		if err := endRun(); err != nil {
			return err
		}
		return emit(b)
	}
	var kept [][]byte
	each := func(fn func(pos int64, h *protocol.BatchHeader, batch []byte) error) error {
		for _, s := range g {
			if err := c.eachBatch(s, fn); err != nil {
				return err
			}
		}
		return nil
	}
	gone := func() bool {
		for _, s := range g {
			if p.segmentGone(s) {
				return true
			}
		}
		return false
	}
	err = each(func(_ int64, h *protocol.BatchHeader, batch []byte) error {
		if h.IsControl() {
			// A commit marker goes, as in Kafka, once no batch of its
			// transaction is left and it is older than
			// delete.retention.ms (a consumer that read the transaction's
			// records has had that long to read the marker too), and once
			// recovery no longer replays from below it. Abort markers
			// stay: the aborted-transaction index (in memory and in
			// producer snapshots) lists every aborted transaction, and a
			// read_committed consumer given one skips its producer's
			// batches until it reads that abort marker; without it, the
			// producer's later committed records would be skipped too.
			if h.IsTransactional() && h.ProducerID >= 0 {
				txnKept := c.txnKept[h.ProducerID]
				delete(c.txnKept, h.ProducerID)
				if typ, _, ok := parseMarker(batch); ok && typ == controlCommit && !txnKept &&
					c.pl.cfg.DeleteRetentionMs >= 0 && h.MaxTimestamp < deleteBefore &&
					h.LastOffset() < end && h.LastOffset() < c.snapshotAt {
					c.stats.Markers++
					changed = true
					return toRun(h)
				}
			}
			if err := endRun(); err != nil {
				return err
			}
			return emit(batch)
		}
		kept = kept[:0]
		var recs []byte
		removed := int64(0)
		maxTsDelta := int64(math.MinInt64)
		// Tombstones (KIP-534): the first clean that keeps one stamps its
		// batch with a delete horizon, delete.retention.ms from then;
		// a clean after the horizon removes it. (Counting from the
		// record's own timestamp would drop at once a tombstone produced
		// with an old one, before a consumer that read the value it
		// deletes could see it.)
		horizonSet := h.Attributes&protocol.AttrDeleteHorizon != 0
		keptTombstone := false
		if h.RecordCount > 0 {
			var err error
			if recs, err = c.records(h, batch); err != nil {
				return err
			}
			aborted := c.pl.isAborted(h)
			err = protocol.EachRawRecord(recs, h.RecordCount, func(r *protocol.RawRecord) error {
				off := h.BaseOffset + int64(r.OffsetDelta)
				keep := !aborted
				switch {
				case !keep:
				case off >= end:
				case r.KeyNull:
					keep = false // Kafka's cleaner drops records without a key
				default:
					if last, ok := c.opts.Map.get(r.Key); ok && last > off {
						keep = false
					} else if r.ValueNull && horizonSet && h.BaseTimestamp <= nowMs {
						keep = false
						c.stats.Tombstones++
					}
				}
				if keep {
					kept = append(kept, r.Wire)
					maxTsDelta = max(maxTsDelta, r.TimestampDelta)
					keptTombstone = keptTombstone || r.ValueNull
				} else {
					removed++
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%w: batch at offset %d: %w", ErrCorruption, h.BaseOffset, err)
			}
		}
		c.stats.Removed += removed
		stamp := int64(-1)
		if keptTombstone && !horizonSet && c.pl.cfg.DeleteRetentionMs >= 0 && h.LastOffset() < end {
			stamp = nowMs + c.pl.cfg.DeleteRetentionMs
			c.horizon = max(c.horizon, stamp)
		} else if keptTombstone && horizonSet {
			c.horizon = max(c.horizon, h.BaseTimestamp)
		}
		switch {
		case removed == 0 && h.RecordCount > 0 && stamp < 0:
			return emitData(h, batch)
		case len(kept) > 0:
			nb, err := c.rebuild(h, batch, kept, maxTsDelta, stamp)
			if err != nil {
				return err
			}
			changed = true
			return emitData(h, nb)
		}
		// No record left. A producer's newest batch stays, empty: it
		// carries the producer's epoch and sequence (Kafka keeps it too),
		// and, if transactional, keeps its transaction's marker. The rest
		// join an empty run (a transaction's batches too: its marker,
		// left without them, closes nothing in recovery's replay).
		if h.ProducerID >= 0 && c.pl.lastOf[h.ProducerID] == h.LastOffset() {
			if h.RecordCount > 0 {
				changed = true
			}
			return emitData(h, emptyCopy(batch))
		}
		return toRun(h)
	})
	if err == nil {
		err = endRun()
	}
	if err == nil {
		err = flush(true)
	}
	if err != nil || !changed {
		discard()
		if err != nil && gone() {
			return errAbandoned
		}
		return err
	}
	if last := g[len(g)-1]; ns.next != last.next {
		discard()
		return fmt.Errorf("log: cleaned segment %d ends at %d, not %d", s.base, ns.next, last.next)
	}
	if err := f.Sync(); err != nil {
		discard()
		if gone() {
			return errAbandoned
		}
		return p.fail(storageErr("sync", tmp, err))
	}
	return c.swap(g, ns, tmp, name)
}

// rebuild encodes batch again with only the kept records (their wire
// bytes), compressed with the batch's codec, every header field but the
// length, record count, CRC and, with CreateTime, the max timestamp (the
// kept records' largest, maxTsDelta past the first timestamp, as Kafka
// recomputes it) as it was: lastOffsetDelta too, so the batch still
// spans its offsets. A horizon (>= 0) becomes the base timestamp, with
// the delete-horizon attribute, and the records' timestamp deltas are
// re-encoded from it, so every record keeps its timestamp.
func (c *cleaner) rebuild(h *protocol.BatchHeader, batch []byte, kept [][]byte, maxTsDelta, horizon int64) ([]byte, error) {
	var body []byte
	for _, w := range kept {
		if horizon < 0 {
			body = append(body, w...)
			continue
		}
		// length varint, attributes byte, timestamp delta varint, rest
		// (EachRawRecord checked them).
		_, n := binary.Varint(w)
		attrs := w[n]
		delta, k := binary.Varint(w[n+1:])
		rest := w[n+1+k:]
		rec := binary.AppendVarint([]byte{attrs}, h.BaseTimestamp+delta-horizon)
		rec = append(rec, rest...)
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
	}
	if codec := h.Compression(); codec != protocol.CompressionNone {
		var err error
		if body, err = c.opts.Codec.Compress(body, codec); err != nil {
			return nil, fmt.Errorf("log: recompress batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	nb := make([]byte, protocol.BatchHeaderSize+len(body))
	copy(nb, batch[:protocol.BatchHeaderSize])
	copy(nb[protocol.BatchHeaderSize:], body)
	binary.BigEndian.PutUint32(nb[8:], uint32(len(nb)-protocol.BatchLengthPrefix))
	binary.BigEndian.PutUint32(nb[57:], uint32(len(kept)))
	if !h.IsLogAppendTime() {
		binary.BigEndian.PutUint64(nb[35:], uint64(h.BaseTimestamp+maxTsDelta))
	}
	if horizon >= 0 {
		binary.BigEndian.PutUint64(nb[27:], uint64(horizon))
		binary.BigEndian.PutUint16(nb[21:], uint16(h.Attributes|protocol.AttrDeleteHorizon))
	}
	protocol.SetBatchCRC(nb)
	return nb, nil
}

// emptyCopy is batch's header alone, holding no record.
func emptyCopy(batch []byte) []byte {
	nb := slices.Clone(batch[:protocol.BatchHeaderSize])
	binary.BigEndian.PutUint16(nb[21:], uint16(int16(binary.BigEndian.Uint16(nb[21:]))&^protocol.AttrCompressionMask))
	binary.BigEndian.PutUint32(nb[8:], uint32(protocol.BatchHeaderSize-protocol.BatchLengthPrefix))
	binary.BigEndian.PutUint32(nb[57:], 0)
	protocol.SetBatchCRC(nb)
	return nb
}

// emptyBatch is one batch without records spanning r's offsets: no
// producer, its timestamps r's largest.
func emptyBatch(r *emptyRun) []byte {
	b := make([]byte, protocol.BatchHeaderSize)
	binary.BigEndian.PutUint64(b[0:], uint64(r.base))
	binary.BigEndian.PutUint32(b[8:], uint32(protocol.BatchHeaderSize-protocol.BatchLengthPrefix))
	binary.BigEndian.PutUint32(b[12:], uint32(r.epoch))
	b[16] = 2
	binary.BigEndian.PutUint16(b[21:], uint16(r.attrs))
	binary.BigEndian.PutUint32(b[23:], uint32(r.last-r.base))
	binary.BigEndian.PutUint64(b[27:], uint64(r.maxTs))
	binary.BigEndian.PutUint64(b[35:], uint64(r.maxTs))
	binary.BigEndian.PutUint64(b[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint16(b[51:], ^uint16(0)) // epoch -1
	binary.BigEndian.PutUint32(b[53:], ^uint32(0)) // base sequence -1
	protocol.SetBatchCRC(b)
	return b
}

// swap puts the cleaned segment ns (written and fsynced to tmp) in the
// place of the segments g. Its index files are written and fsynced under
// names of their own first, outside every lock; then, under the sync
// lock (so no retention or Close removes a segment of g meanwhile),
// three renames replace the first segment's files in one step each
// (readers keep reading old files through their open handles) and the
// segment list swaps g for ns. A crash between the renames leaves an
// index that disagrees with its .log, which Open rebuilds; the
// directory is synced by Clean.
//
// Merging (g longer than one) must never leave the merged segment beside
// a segment it replaced: the copy is first renamed to "<base>.log.swap"
// and the directory synced, from when on Open completes the swap (it
// deletes the segments the .swap file covers and renames it); then the
// other segments' files are deleted and the directory synced; only then
// is the .swap renamed over the first segment's .log.
func (c *cleaner) swap(g []*segment, ns *segment, tmp, name string) error {
	p := c.p
	s := g[0]
	offTmp := fileName(p.dir, s.base, indexSuffix) + cleanSuffix
	timeTmp := fileName(p.dir, s.base, timeIndexSuffix) + cleanSuffix
	var files []File
	cleanup := func(err error) error {
		for _, f := range append(files, ns.log) {
			_ = f.Close()
		}
		for _, n := range []string{tmp, offTmp, timeTmp} {
			_ = p.fs.Remove(n)
		}
		if errors.Is(err, errAbandoned) || p.segmentGone(s) {
			return errAbandoned
		}
		return p.fail(err)
	}
	for _, ix := range []struct {
		name, magic string
		size        int
		entries     []byte
	}{{offTmp, offsetIndexMagic, offsetEntrySize, ns.offIdx}, {timeTmp, timeIndexMagic, timeEntrySize, ns.timeIdx}} {
		f, err := writeIndexFile(p.fs, ix.name, ix.magic, ix.size, ns.meta(), ix.entries)
		if err != nil {
			return cleanup(err)
		}
		files = append(files, f)
		if err := f.Sync(); err != nil {
			return cleanup(storageErr("sync", ix.name, err))
		}
	}
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	for _, s := range g {
		if p.segmentGone(s) {
			return cleanup(errAbandoned)
		}
	}
	if len(g) > 1 {
		swapName := name + swapSuffix
		if err := p.fs.Rename(tmp, swapName); err != nil {
			return cleanup(storageErr("rename", tmp, err))
		}
		tmp = swapName
		if err := p.fs.SyncDir(p.dir); err != nil {
			return p.fail(storageErr("sync dir", p.dir, err)) // Open completes the swap
		}
		for _, o := range g[1:] {
			for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
				if err := p.fs.Remove(fileName(p.dir, o.base, suffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return p.fail(storageErr("remove", fileName(p.dir, o.base, suffix), err))
				}
			}
		}
		if err := p.fs.SyncDir(p.dir); err != nil {
			return p.fail(storageErr("sync dir", p.dir, err))
		}
	}
	for _, r := range [][2]string{{offTmp, fileName(p.dir, s.base, indexSuffix)},
		{timeTmp, fileName(p.dir, s.base, timeIndexSuffix)}, {tmp, name}} {
		if err := p.fs.Rename(r[0], r[1]); err != nil {
			if len(g) > 1 {
				return p.fail(storageErr("rename", r[0], err))
			}
			return cleanup(storageErr("rename", r[0], err))
		}
	}
	ns.seal(files[0], files[1])
	var old int64
	for _, o := range g {
		old += o.size
	}
	p.appendMu.Lock()
	p.segMu.Lock()
	i := slices.Index(p.segs, s)
	p.segs = slices.Concat(p.segs[:i], []*segment{ns}, p.segs[i+len(g):])
	for _, o := range g {
		o.deleted = true
	}
	p.segMu.Unlock()
	p.size.Add(ns.size - old)
	p.appendMu.Unlock()
	for _, o := range g {
		for _, f := range []File{o.log, o.offFile, o.timeFile} {
			if f != nil {
				_ = f.Close()
			}
		}
	}
	c.stats.Segments += len(g)
	c.stats.Merged += len(g) - 1
	return nil
}

// completeSwaps finishes the merges a crash interrupted (swap): each
// "<base>.log.swap" is a fsynced cleaned copy of the segments from base
// to its last offset, made durable before any of them was deleted. The
// segments it covers go (the first one's index files too: they describe
// the old .log), then it becomes "<base>.log". It reports whether it
// changed anything. Called by Open before the segments are listed.
func (p *Partition) completeSwaps(names []string) (bool, error) {
	did := false
	for _, n := range names {
		logName, ok := strings.CutSuffix(n, swapSuffix)
		if !ok {
			continue
		}
		base, ok := parseFileName(logName, logSuffix)
		if !ok {
			continue
		}
		swapName := filepath.Join(p.dir, n)
		f, err := p.fs.OpenFile(swapName, os.O_RDONLY, 0)
		if err != nil {
			return false, storageErr("open", swapName, err)
		}
		size, err := f.Size()
		if err != nil {
			_ = f.Close()
			return false, storageErr("stat", swapName, err)
		}
		next := base
		r := batchReader{f: f, end: size}
		for {
			_, h, _, err := r.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				_ = f.Close()
				return false, fmt.Errorf("%w: merged segment %s is damaged: %w", ErrCorruption, swapName, err)
			}
			next = h.LastOffset() + 1
		}
		_ = f.Close()
		for _, m := range names {
			b, ok := parseFileName(m, logSuffix)
			if !ok || b < base || b >= next {
				continue
			}
			suffixes := []string{indexSuffix, timeIndexSuffix}
			if b != base {
				suffixes = append(suffixes, logSuffix)
			}
			for _, suffix := range suffixes {
				if err := p.remove(fileName(p.dir, b, suffix)); err != nil {
					return false, err
				}
			}
		}
		if err := p.fs.SyncDir(p.dir); err != nil {
			return false, storageErr("sync dir", p.dir, err)
		}
		if err := p.fs.Rename(swapName, fileName(p.dir, base, logSuffix)); err != nil {
			return false, storageErr("rename", swapName, err)
		}
		p.logger.Info("completed an interrupted merge of cleaned segments", zap.Int64("base", base), zap.Int64("next", next))
		did = true
	}
	if did {
		if err := p.fs.SyncDir(p.dir); err != nil {
			return false, storageErr("sync dir", p.dir, err)
		}
	}
	return did, nil
}
