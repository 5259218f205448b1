package share

import (
	"bytes"
	"container/list"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/broker/topics"
	"github.com/shoal-mq/shoal/protocol"
	"github.com/shoal-mq/shoal/sharegroup"
)

// The message-group modes' batch cache.
//
// A fetch in ordered or fair mode takes a few records of each message
// group, and the heads of a topic's groups lie close together in the log,
// so consecutive fetches of a share-partition (by any member, of any
// share group reading the partition) need the same few log batches again
// and again, each time trimmed to other records (parsedBatch.trim). Reading
// a 1 MiB batch from the page cache and walking its records cost about
// 0.8 ms per share-partition per fetch, on the path between an
// acknowledgement and the next delivery. The cache keeps recently read
// batches parsed: the batch (a copy, or the read buffer it filled) and
// where each of its records is.
//
// Log batches never change once appended (offsets and bytes are fixed;
// retention and DeleteRecords only remove whole batches below the log
// start, and a hit below the log start is ignored), so entries need no
// invalidation; a deleted and re-created topic has new partition objects. The cache is
// bounded by bytes (shoal.share.batch.cache.bytes, default trimCacheBytes)
// across all partitions, least recently used first out; batches over
// trimCacheMaxBatch are not kept. A batch also leaves once the
// share-partition that used it last is past it (trimCache.passed), so
// the cache holds about the batches in use rather than the last 64 MiB
// read.
//
// A batch read on a miss is kept in the buffer it was read into (the
// usual 1 MiB batch fills it), and that buffer is used again for a later
// read once the batch is out of the cache and nobody uses it: a new
// buffer per read cost as much in zeroing and page faults as the read
// itself. Users are counted (parsedBatch.refs: the cache while it holds
// the batch, each get until release, the reader that made it until
// release); a batch that went out in a response as it is, without a
// copy, is pinned and left to the garbage collector. A compressed batch's
// records are decompressed into such a buffer too (parsedBatch.bodyAt),
// given back the same way, pinned or not: they only ever leave copied.

const (
	DefaultBatchCacheBytes = 64 << 20
	trimCacheMaxBatch      = 4 << 20
	trimCacheFreeBufs      = 4 // buffers kept for reuse (reads, decompressed records)

	// shareReadBytes is what a group-mode fetch reads at a time on a
	// miss (the usual batch fits); only buffers of about that size are
	// kept for reuse (a larger one, read for a larger batch, would make
	// the usual batch look too small to keep in place).
	shareReadBytes = 1 << 20
)

// parsedBatch is a log batch with the position of each record.
type parsedBatch struct {
	h     protocol.BatchHeader
	batch []byte   // as stored (owned: never changed)
	offs  []int64  // offset of each record, ascending
	body  []byte   // the records' wire bytes: in batch, or decompressed
	pos   []int32  // record i is body[pos[i]:pos[i+1]]
	crcs  []uint32 // uncompressed: crcs[i] is the CRC-32C of the batch from its attributes up to record i (see appendKept)
	whole bool     // always sent as stored: a control batch, a bad CRC, records that do not parse, are out of order or outside the header's span
	size  int      // bytes held

	buf    []byte       // the read buffer batch lies in, reused once unused (nil: never)
	bodyAt []byte       // the buffer a compressed batch's body lies in, reused once unused (nil: never)
	refs   atomic.Int32 // users (see the file comment); starts at 1, its maker's
	pinned atomic.Bool  // batch went out without a copy: buf is never reused
}

// parseBatch copies batch and indexes its records.
func parseBatch(h *protocol.BatchHeader, batch []byte, bodyBuf []byte) *parsedBatch {
	return adoptBatch(h, bytes.Clone(batch), 0, bodyBuf)
}

// adoptBatch indexes the records of batch, which it keeps without a copy:
// the caller gives up batch and the buffer around it, held bytes long
// (0: just the batch), which the cache accounts for. A compressed
// batch's records are decompressed into bodyBuf (from its start; nil: a
// new buffer), which the batch then owns; callers pass one only for a
// compressed batch.
func adoptBatch(h *protocol.BatchHeader, batch []byte, held int, bodyBuf []byte) *parsedBatch {
	pb := &parsedBatch{h: *h, batch: batch[:len(batch):len(batch)]}
	pb.refs.Store(1)
	pb.size = max(len(pb.batch), held)
	// A batch whose CRC no longer matches (on-disk corruption since it
	// was appended) goes out as it is, so the client's CRC check still
	// catches it; a trimmed copy would carry a fresh, valid CRC. An
	// uncompressed batch's CRC is checked once its records are found,
	// noting the running CRC at each (runningCRCs).
	compressed := protocol.CompressionOf(h.Attributes) != protocol.CompressionNone
	if h.IsControl() || compressed && !protocol.VerifyBatchCRC(pb.batch) {
		pb.whole = true
		return pb
	}
	n := min(max(int(h.RecordCount), 0), len(batch)/4) // a record takes 4 bytes or more
	pb.offs, pb.pos = make([]int64, 0, n), make([]int32, 1, n+1)
	ascending := true
	bodyBuf = bodyBuf[:0]
	body, err := recordOffsets(pb.batch, &pb.h, &bodyBuf, func(off int64, raw []byte) {
		if n := len(pb.offs); n > 0 && off <= pb.offs[n-1] || off < h.BaseOffset || off > h.LastOffset() {
			// Trimming finds records by binary search, and a record
			// outside the header's span (the log does not look inside
			// compressed batches) must not be kept for a range that
			// belongs to the next batch.
			ascending = false
		}
		pb.offs = append(pb.offs, off)
		pb.pos = append(pb.pos, pb.pos[len(pb.pos)-1]+int32(len(raw)))
	})
	if err != nil || !ascending || !compressed && !pb.runningCRCs(body) {
		pb.whole, pb.offs, pb.pos = true, nil, nil
		return pb
	}
	pb.body = body
	if compressed {
		pb.bodyAt = bodyBuf
		pb.size += cap(bodyBuf)
	}
	pb.size += cap(pb.offs)*8 + cap(pb.pos)*4 + cap(pb.crcs)*4 // the index
	return pb
}

// runningCRCs computes the CRC of the uncompressed batch one record of
// body at a time, noting in crcs the CRC so far at each record's start
// and at the last one's end; it reports whether the whole matches the
// stored CRC. It reads the batch once, as checking the CRC alone does.
func (pb *parsedBatch) runningCRCs(body []byte) bool {
	b := pb.batch
	end := int(protocol.BatchLengthPrefix) + int(pb.h.BatchLength)
	// body is b past its header, and the records lie inside it
	// (recordOffsets); b is exactly the batch (records.EachBatch), or the batch
	// is sent as stored.
	if end != len(b) || end < protocol.BatchHeaderSize || len(body) != end-protocol.BatchHeaderSize {
		return false
	}
	crcs := make([]uint32, len(pb.pos))
	c := protocol.CRC32C(0, b[protocol.BatchCRCFrom:protocol.BatchHeaderSize])
	crcs[0] = c
	for i := 1; i < len(pb.pos); i++ {
		c = protocol.CRC32C(c, body[pb.pos[i-1]:pb.pos[i]])
		crcs[i] = c
	}
	// Bytes past the last record, if any, are covered too.
	if protocol.CRC32C(c, b[protocol.BatchHeaderSize+int(pb.pos[len(pb.pos)-1]):end]) != pb.h.CRC {
		return false
	}
	pb.crcs = crcs
	return true
}

// trim returns the batch, or a smaller copy holding only the records
// whose offsets lie in acq (see appendTrim).
func (pb *parsedBatch) trim(acq []sharegroup.Acquired) []byte {
	if !pb.trims(acq) {
		return pb.batch
	}
	return pb.appendTrim(nil, acq)
}

// appendTrim appends to dst the batch, or a smaller copy holding only
// the records whose offsets lie in acq (sorted ranges, possibly starting
// before the batch). A group mode acquires a few records of each message
// group, so a log batch of a thousand records interleaving many groups
// may hold only a handful this member gets; sending all of it costs the
// broker, the network and the client (which decodes every record and
// drops the ones it was not given) up to a hundred times the bytes
// delivered. The copy keeps the batch header (base offset, timestamps,
// producer fields, lastOffsetDelta) and the kept records' wire bytes
// (their offset and timestamp deltas), so it is a batch with holes, as
// Kafka's log compaction leaves them, which every client reads; it is
// uncompressed with a new CRC, and used only when smaller than the
// original (a compressed batch often is not). Control batches and fully
// acquired batches are appended as they are. The copy is written
// straight into dst (the response), which grows once for it; each
// stretch of consecutive kept records is one copy.
func (pb *parsedBatch) appendTrim(dst []byte, acq []sharegroup.Acquired) []byte {
	var buf [16][2]int
	return pb.appendKept(dst, pb.keptRuns(acq, buf[:0]))
}

// appendKept is appendTrim with the kept runs found (keptRuns).
func (pb *parsedBatch) appendKept(dst []byte, runs [][2]int) []byte {
	kept, size := pb.keptSize(runs)
	if !pb.trimmed(kept, size) {
		return append(dst, pb.batch...)
	}
	dst = slices.Grow(dst, size)
	at := len(dst)
	dst = append(dst, pb.batch[:protocol.BatchHeaderSize]...)
	for _, r := range runs {
		dst = append(dst, pb.body[pb.pos[r[0]]:pb.pos[r[1]]]...)
	}
	if pb.crcs == nil { // decompressed records: no running CRCs
		records.FinishRewritten(dst[at:], kept)
		return dst
	}
	// The new CRC without reading the kept records again: a stretch's
	// own CRC is the original's running CRC at its end combined
	// backwards with the one at its start; the CRC so far is then
	// carried past the stretch and the two combined, which folds into
	// one CRC32CCombine per stretch. It derives from the CRC checked
	// when the batch was read, so bytes changed since (in memory) fail
	// the client's CRC check, as they would untrimmed.
	out := dst[at:]
	records.PatchRewritten(out, kept)
	c := protocol.CRC32C(0, out[protocol.BatchCRCFrom:protocol.BatchHeaderSize])
	for _, r := range runs {
		c = protocol.CRC32CCombine(c^pb.crcs[r[0]], pb.crcs[r[1]], int64(pb.pos[r[1]]-pb.pos[r[0]]))
	}
	protocol.PutBatchCRC(out, c)
	return dst
}

// trims reports whether appendTrim sends a trimmed copy for acq.
func (pb *parsedBatch) trims(acq []sharegroup.Acquired) bool {
	var buf [16][2]int
	return pb.trimmed(pb.keptSize(pb.keptRuns(acq, buf[:0])))
}

// trimmed reports whether a batch keeping kept of its records, size
// bytes trimmed, is sent trimmed: when that is smaller, or when it is
// compressed and the client would throw away half its records or more
// after decompressing all of them. The uncompressed copy is then larger on
// the wire than the compressed batch, but it is what the client holds
// once it has decompressed anyway, and decompressing whole batches to
// keep a few records of each was most of a consumer's CPU in a group mode
// (sharebench --compression zstd).
func (pb *parsedBatch) trimmed(kept, size int) bool {
	switch {
	case pb.whole || kept == 0 || kept >= len(pb.offs):
		return false
	case size < len(pb.batch):
		return true
	}
	return protocol.CompressionOf(pb.h.Attributes) != protocol.CompressionNone && 2*kept <= len(pb.offs)
}

// keptSize counts the records of runs and the size of a batch holding
// only them.
func (pb *parsedBatch) keptSize(runs [][2]int) (n, size int) {
	size = protocol.BatchHeaderSize
	for _, r := range runs {
		n += r[1] - r[0]
		size += int(pb.pos[r[1]] - pb.pos[r[0]])
	}
	return n, size
}

// keptRuns appends to runs the stretches [i, j) of consecutive records of
// pb whose offsets lie in acq, in order. Each range of acq is found by
// binary search, so a fetch taking a few records of a large batch does
// not walk all of it.
func (pb *parsedBatch) keptRuns(acq []sharegroup.Acquired, runs [][2]int) [][2]int {
	if pb.whole || len(pb.offs) == 0 {
		return runs
	}
	last := pb.offs[len(pb.offs)-1]
	from := 0
	for _, a := range acq {
		if a.Last < pb.offs[0] {
			continue
		}
		if a.First > last {
			break
		}
		i := from + sort.Search(len(pb.offs)-from, func(k int) bool { return pb.offs[from+k] >= a.First })
		j := i + sort.Search(len(pb.offs)-i, func(k int) bool { return pb.offs[i+k] > a.Last })
		if i < j {
			if n := len(runs); n > 0 && runs[n-1][1] == i {
				runs[n-1][1] = j
			} else {
				runs = append(runs, [2]int{i, j})
			}
		}
		from = j
	}
	return runs
}

// trimCache is the broker's cache of parsed batches.
type trimCache struct {
	max   int64 // bytes; 0: nothing is kept
	mu    sync.Mutex
	parts map[*topics.Partition][]*trimEntry // per partition, by base offset
	lru   list.List                          // of *trimEntry, most recent first
	bytes int
	free  [][]byte // read buffers no batch uses any more
}

// release ends one use of pb (a get, or its maker's); the last one gives
// its buffers back for reuse: the read buffer unless the batch was
// pinned, the decompressed records' always (they go out only copied).
func (c *trimCache) release(pb *parsedBatch) {
	if pb.refs.Add(-1) != 0 || !pb.recyclable() {
		return
	}
	c.mu.Lock()
	c.recycleLocked(pb)
	c.mu.Unlock()
}

// recyclable reports whether pb, once unused, has a buffer to give back.
func (pb *parsedBatch) recyclable() bool {
	return pb.buf != nil && !pb.pinned.Load() || pb.bodyAt != nil
}

func (c *trimCache) recycleLocked(pb *parsedBatch) {
	if pb.buf != nil && !pb.pinned.Load() {
		c.keepLocked(pb.buf)
		pb.buf, pb.batch = nil, nil // a use after release fails loudly
	}
	if pb.bodyAt != nil {
		c.keepLocked(pb.bodyAt)
		pb.bodyAt = nil
	}
	pb.body = nil
}

// keepLocked keeps buf for reuse if it is of the usual size and there is
// room.
func (c *trimCache) keepLocked(buf []byte) {
	if n := cap(buf); len(c.free) < trimCacheFreeBufs && n >= shareReadBytes && n <= 2*shareReadBytes {
		c.free = append(c.free, buf[:0])
	}
}

// giveBack hands back a read buffer no batch lies in.
func (c *trimCache) giveBack(buf []byte) {
	c.mu.Lock()
	c.keepLocked(buf)
	c.mu.Unlock()
}

// readBuf returns a read buffer to use again, or nil.
func (c *trimCache) readBuf() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.free)
	if n == 0 {
		return nil
	}
	b := c.free[n-1]
	c.free[n-1] = nil
	c.free = c.free[:n-1]
	return b
}

type trimEntry struct {
	lp   *topics.Partition
	pb   *parsedBatch
	elem *list.Element
	user *sharePart // the share-partition that used it last (nil: none)
}

// get returns the cached batch of lp holding offset off, or nil, and
// notes user (the share-partition reading it; nil: none) as its last
// user; the caller releases it once done with it.
func (c *trimCache) get(lp *topics.Partition, off int64, user *sharePart) *parsedBatch {
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.parts[lp]
	i := sort.Search(len(es), func(i int) bool { return es[i].pb.h.LastOffset() >= off })
	if i == len(es) || es[i].pb.h.BaseOffset > off {
		return nil
	}
	c.lru.MoveToFront(es[i].elem)
	es[i].user = user
	es[i].pb.refs.Add(1)
	return es[i].pb
}

// wants reports whether put would keep a batch of lp at base, size bytes
// long: the cache keeps batches that size and does not have it yet.
func (c *trimCache) wants(lp *topics.Partition, base int64, size int) bool {
	if !c.keeps(size) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, found := findBase(c.parts[lp], base)
	return !found
}

// keeps reports whether the cache keeps a batch holding size bytes.
func (c *trimCache) keeps(size int) bool {
	return size <= trimCacheMaxBatch && int64(size) <= c.max
}

// findBase returns where the batch at base is, or would go, in es (a
// partition's entries, by base offset), and whether it is there.
func findBase(es []*trimEntry, base int64) (int, bool) {
	i := sort.Search(len(es), func(i int) bool { return es[i].pb.h.BaseOffset >= base })
	return i, i < len(es) && es[i].pb.h.BaseOffset == base
}

// passed drops the batches of lp that lie wholly below spso, user's
// SPSO, and that user used last: user will not read them again (their
// records are all done), and a batch nobody else reads (one share group
// draining a partition) would otherwise stay until the least recently
// used ones go. Keeping only the batches in use keeps the read buffers
// that go around warm in the CPU's caches: reads into buffers evicted
// from a full 64 MiB cost twice as much. A batch another share-partition
// used since stays; one it still needs after this is read again once.
func (c *trimCache) passed(lp *topics.Partition, user *sharePart, spso int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.parts[lp]
	var done []*trimEntry
	for _, e := range es { // by base offset
		if e.pb.h.LastOffset() >= spso {
			break
		}
		if e.user == user {
			done = append(done, e)
		}
	}
	for _, e := range done {
		c.remove(e)
	}
}

// put caches pb, a batch of lp read for user (see get), evicting the
// least recently used batches beyond the budget. The caller keeps its
// own use of pb.
func (c *trimCache) put(lp *topics.Partition, pb *parsedBatch, user *sharePart) {
	if !c.keeps(pb.size) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parts == nil {
		c.parts = map[*topics.Partition][]*trimEntry{}
	}
	es := c.parts[lp]
	i, found := findBase(es, pb.h.BaseOffset)
	if found {
		return // cached meanwhile by another fetch
	}
	e := &trimEntry{lp: lp, pb: pb, user: user}
	pb.refs.Add(1)
	e.elem = c.lru.PushFront(e)
	c.parts[lp] = append(es[:i], append([]*trimEntry{e}, es[i:]...)...)
	c.bytes += pb.size
	for int64(c.bytes) > c.max {
		old := c.lru.Back().Value.(*trimEntry)
		c.remove(old)
	}
}

func (c *trimCache) remove(e *trimEntry) {
	c.lru.Remove(e.elem)
	c.bytes -= e.pb.size
	if e.pb.refs.Add(-1) == 0 && e.pb.recyclable() {
		c.recycleLocked(e.pb)
	}
	es := c.parts[e.lp]
	for i, x := range es {
		if x == e {
			es = slices.Delete(es, i, i+1) // zeroes the freed slot: the batch can be collected
			break
		}
	}
	if len(es) == 0 {
		delete(c.parts, e.lp)
	} else {
		c.parts[e.lp] = es
	}
}
