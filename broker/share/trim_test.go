package share

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/broker/topics"
	"github.com/shoal-mq/shoal/protocol"
	"github.com/shoal-mq/shoal/sharegroup"
)

// batchOffsets decodes raw ShareFetch Records: per batch its base offset,
// lastOffsetDelta and the offsets and values of the records it holds. Each
// batch's CRC must be valid.
func batchOffsets(t *testing.T, raw []byte) (bases []int64, lastDeltas []int32, offsets []int64, vals []string) {
	t.Helper()
	for len(raw) > 0 {
		var rb kmsg.RecordBatch
		require.NoError(t, rb.ReadFrom(raw))
		size := 12 + int(rb.Length)
		require.True(t, protocol.VerifyBatchCRC(raw[:size]), "batch at %d: bad CRC", rb.FirstOffset)
		bases, lastDeltas = append(bases, rb.FirstOffset), append(lastDeltas, rb.LastOffsetDelta)
		require.NoError(t, records.EachRecord(raw[:size], func(off, _ int64, r *kmsg.Record, _ []byte) bool {
			offsets, vals = append(offsets, off), append(vals, string(r.Value))
			return true
		}))
		raw = raw[size:]
	}
	return
}

// TestTrimCache: batches are found by any offset they hold, per
// partition; the least recently used go first when the budget is
// exceeded; a parsed batch trims like a freshly read one.
func TestTrimCache(t *testing.T) {
	t.Parallel()
	mk := func(base int64, n int) *parsedBatch {
		b, h := numberedBatch(t, base, n)
		return parseBatch(&h, b, nil)
	}
	p1, p2 := &topics.Partition{}, &topics.Partition{}
	a, b2, c := mk(0, 10), mk(10, 10), mk(0, 5)
	size := a.size
	cache := &trimCache{max: int64(2*size + size/2)}
	cache.put(p1, a, nil)
	cache.put(p1, b2, nil)
	require.Same(t, a, cache.get(p1, 0, nil))
	require.Same(t, a, cache.get(p1, 9, nil))
	require.Same(t, b2, cache.get(p1, 15, nil))
	require.Nil(t, cache.get(p1, 20, nil))
	require.Nil(t, cache.get(p2, 3, nil))
	require.Same(t, a, cache.get(p1, 5, nil)) // a used last
	cache.put(p2, c, nil)                     // over budget: b2 (least recently used) goes
	require.Nil(t, cache.get(p1, 15, nil))
	require.Same(t, a, cache.get(p1, 3, nil))
	require.Same(t, c, cache.get(p2, 3, nil))

	none := &trimCache{} // shoal.share.batch.cache.bytes=0
	none.put(p1, a, nil)
	require.Nil(t, none.get(p1, 0, nil), "a budget of 0 keeps nothing")
	small := &trimCache{max: int64(size - 1)}
	small.put(p1, a, nil)
	require.Nil(t, small.get(p1, 0, nil), "a batch over the whole budget is not kept")

	// A share-partition past a batch (wholly below its SPSO) drops it if
	// it used it last; one another share-partition used since stays.
	x, y := &sharePart{}, &sharePart{}
	p3 := &topics.Partition{}
	b0, b1, b3 := mk(0, 10), mk(10, 10), mk(20, 10)
	big := &trimCache{max: 1 << 30}
	big.put(p3, b0, x)
	big.put(p3, b1, x)
	big.put(p3, b3, x)
	require.Same(t, b1, big.get(p3, 12, y))
	big.passed(p3, x, 20)
	require.Nil(t, big.get(p3, 5, nil), "x passed it and used it last")
	require.Same(t, b1, big.get(p3, 15, y), "y used it since")
	require.Same(t, b3, big.get(p3, 20, x), "not wholly below the SPSO")
	big.passed(p3, y, 15)
	require.Same(t, b1, big.get(p3, 10, y), "y's SPSO is inside it")
	big.passed(p3, y, 20)
	require.Nil(t, big.get(p3, 10, nil))
	require.Equal(t, b3.size, big.bytes)

	out := a.trim([]sharegroup.Acquired{{First: 2, Last: 3}, {First: 7, Last: 7}})
	bases, deltas, offs, vals := batchOffsets(t, out)
	require.Equal(t, []int64{0}, bases)
	require.Equal(t, []int32{9}, deltas)
	require.Equal(t, []int64{2, 3, 7}, offs)
	require.Equal(t, []string{"2", "3", "7"}, vals)
	require.Equal(t, a.batch, a.trim([]sharegroup.Acquired{{First: 0, Last: 9}}), "all acquired: as stored")
}

// numberedBatch is an uncompressed batch at base of n records whose
// values are their offsets.
func numberedBatch(t *testing.T, base int64, n int) ([]byte, protocol.BatchHeader) {
	t.Helper()
	raw := records.EncodeBatch(numberedRecords(base, n), int32(n), 1000, 1000)
	protocol.SetBaseOffset(raw, base)
	h, err := protocol.ParseBatchHeader(raw)
	require.NoError(t, err)
	return raw, h
}

// numberedRecords is n records (wire form) whose values are their offsets
// from base on.
func numberedRecords(base int64, n int) []byte {
	var recs []byte
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(fmt.Sprint(base + int64(i)))}
		recs = records.AppendRecord(recs, &r)
	}
	return recs
}

// TestAppendTrim: appendTrim writes the same batch as trim after what the
// response already holds, and a batch adopted from a read buffer trims
// like a copied one.
func TestAppendTrim(t *testing.T) {
	t.Parallel()
	raw, h := numberedBatch(t, 100, 10)
	copied := parseBatch(&h, raw, nil)
	buf := append(make([]byte, 0, 2*len(raw)), raw...)
	adopted := adoptBatch(&h, buf, cap(buf), nil)
	require.Equal(t, cap(buf)+cap(adopted.offs)*8+cap(adopted.pos)*4+cap(adopted.crcs)*4, adopted.size, "the whole buffer is accounted for")

	some := []sharegroup.Acquired{{First: 90, Last: 101}, {First: 105, Last: 105}}
	all := []sharegroup.Acquired{{First: 100, Last: 109}}
	for _, pb := range []*parsedBatch{copied, adopted} {
		prefix := []byte("prefix")
		out := pb.appendTrim(append([]byte(nil), prefix...), some)
		require.Equal(t, prefix, out[:len(prefix)])
		require.Equal(t, pb.trim(some), out[len(prefix):])
		_, _, offs, vals := batchOffsets(t, out[len(prefix):])
		require.Equal(t, []int64{100, 101, 105}, offs)
		require.Equal(t, []string{"100", "101", "105"}, vals)
		require.Equal(t, raw, pb.appendTrim(nil, all), "all acquired: as stored")
		require.Equal(t, raw, shareDataOf(pb, all))
		require.Equal(t, pb.trim(some), shareDataOf(pb, some))
	}
}

// TestAppendTrimRandom: for random acquired ranges around a batch, the
// trimmed batch holds exactly the records in them, in order.
func TestAppendTrimRandom(t *testing.T) {
	t.Parallel()
	raw, h := numberedBatch(t, 200, 50)
	pb := parseBatch(&h, raw, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		var acq []sharegroup.Acquired
		var want []int64
		for off := int64(190); off < 260; {
			n := 1 + rng.Int64N(6)
			if rng.IntN(2) == 0 {
				acq = append(acq, sharegroup.Acquired{First: off, Last: off + n - 1})
				for o := max(off, 200); o < min(off+n, 250); o++ {
					want = append(want, o)
				}
			}
			off += n + rng.Int64N(2)
		}
		out := pb.appendTrim(nil, acq)
		_, _, offs, _ := batchOffsets(t, out)
		if len(want) == 0 || len(want) == 50 {
			require.Equal(t, raw, out)
			continue
		}
		require.Equal(t, want, offs, "%v", acq) // and the combined CRC is the batch's CRC
	}
}

// TestTrimCRCFollowsTheCheckedBatch: a trimmed copy's CRC derives from the
// CRC checked when the batch was read, so a record changed in memory
// since fails the client's CRC check, as the whole batch would; a batch
// whose CRC fails when read is sent whole, and so is a batch whose bytes
// run past its records into nothing (covered by the CRC too).
func TestTrimCRCFollowsTheCheckedBatch(t *testing.T) {
	t.Parallel()
	raw, h := numberedBatch(t, 0, 20)
	acq := []sharegroup.Acquired{{First: 3, Last: 5}, {First: 9, Last: 9}}

	pb := parseBatch(&h, raw, nil)
	require.True(t, protocol.VerifyBatchCRC(pb.trim(acq)))
	pb.body[pb.pos[5]-1] ^= 1 // the last byte of record 4 (its headers count)
	out := pb.trim(acq)
	var kept []int64
	require.NoError(t, records.EachRecord(out, func(off, _ int64, _ *kmsg.Record, _ []byte) bool { kept = append(kept, off); return true }))
	require.Equal(t, []int64{3, 4, 5, 9}, kept, "still trimmed")
	require.False(t, protocol.VerifyBatchCRC(out), "the change shows")

	bad := bytes.Clone(raw)
	bad[len(bad)-1] ^= 1
	require.Equal(t, bad, parseBatch(&h, bad, nil).trim(acq), "a CRC that fails when read: sent as stored")
}

// TestTrimRecordsOutsideSpan: the log checks record offsets only in
// uncompressed batches, so a compressed batch may hold a record whose
// offset lies past its header's last offset. Such a batch is sent as
// stored: a trimmed copy must never keep that record for an acquired
// range that belongs to the next batch (found by review).
func TestTrimRecordsOutsideSpan(t *testing.T) {
	t.Parallel()
	var recs []byte
	for _, d := range []int32{0, 1, 5} {
		recs = records.AppendRecord(recs, &kmsg.Record{OffsetDelta: d, Value: make([]byte, 300)})
	}
	var z bytes.Buffer
	w, err := zstd.NewWriter(&z)
	require.NoError(t, err)
	_, err = w.Write(recs)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	rb := kmsg.RecordBatch{FirstOffset: 100, PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(protocol.CompressionZstd),
		LastOffsetDelta: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 3, Records: z.Bytes()}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	protocol.SetBatchCRC(raw)
	h, err := protocol.ParseBatchHeader(raw)
	require.NoError(t, err)
	pb := parseBatch(&h, raw, nil)
	require.True(t, pb.whole, "a record at 105 lies outside 100..102")
	require.Equal(t, raw, shareDataOf(pb, []sharegroup.Acquired{{First: 100, Last: 100}, {First: 105, Last: 105}}))
}

// shareDataOf is the data shareData builds from pb alone.
func shareDataOf(pb *parsedBatch, acq []sharegroup.Acquired) []byte {
	d := shareData{arena: new([]byte)}
	d.add(pb, acq)
	return d.data
}

// TestShareDataArena: a partition's data goes onto the end of the
// response's arena without touching what other partitions put there; a
// batch sent as it is is not copied until another batch follows it.
func TestShareDataArena(t *testing.T) {
	t.Parallel()
	batch := func(base int64) *parsedBatch {
		raw, h := numberedBatch(t, base, 4)
		return parseBatch(&h, raw, nil)
	}
	a, b := batch(0), batch(4)
	arena := []byte("other partition")
	d := shareData{arena: &arena, start: len(arena)}
	d.add(a, []sharegroup.Acquired{{First: 0, Last: 3}})
	require.Equal(t, a.batch, d.data)
	require.Same(t, &a.batch[0], &d.data[0], "sent as it is: no copy")
	require.Equal(t, "other partition", string(arena), "nothing copied yet")

	some := []sharegroup.Acquired{{First: 5, Last: 5}}
	d.add(b, some)
	want := append(bytes.Clone(a.batch), b.trim(some)...)
	require.Equal(t, want, d.data)
	require.Equal(t, "other partition", string(arena[:15]))
	require.Equal(t, want, arena[15:])
}

// TestTrimCacheReusesReadBuffers: a batch kept in its read buffer gives
// the buffer back for another read once it is out of the cache and its
// last user released it, never before; a batch that went out in a
// response without a copy keeps its buffer.
func TestTrimCacheReusesReadBuffers(t *testing.T) {
	t.Parallel()
	adopt := func(base int64) (*parsedBatch, []byte) {
		b, h := numberedBatch(t, base, 10)
		buf := append(make([]byte, 0, shareReadBytes), b...) // a read buffer
		pb := adoptBatch(&h, buf, cap(buf), nil)
		pb.buf = buf[:0]
		return pb, buf
	}
	lp := &topics.Partition{}
	a, abuf := adopt(0)
	cache := &trimCache{max: int64(a.size + a.size/2)} // one batch
	cache.put(lp, a, nil)
	cache.release(a) // its reader is done; the cache holds it
	require.Nil(t, cache.readBuf())

	user := cache.get(lp, 3, nil) // a fetch still copying from it
	require.Same(t, a, user)
	b, _ := adopt(10)
	cache.put(lp, b, nil) // a goes out of the cache
	cache.release(b)
	require.Nil(t, cache.get(lp, 3, nil))
	require.Nil(t, cache.readBuf(), "a is still in use")
	require.Equal(t, []int64{2}, offsetsOf(t, user.trim([]sharegroup.Acquired{{First: 2, Last: 2}})))
	cache.release(user)
	got := cache.readBuf()
	require.NotNil(t, got)
	require.Same(t, &abuf[:1][0], &got[:1][0], "a's buffer comes back")
	require.Nil(t, a.batch, "a released batch is not used again")

	c, _ := adopt(20)
	cache.put(lp, c, nil) // b goes
	var arena []byte
	d := shareData{arena: &arena}
	pinned := cache.get(lp, 25, nil)
	d.add(pinned, []sharegroup.Acquired{{First: 20, Last: 29}}) // all of it: sent as stored
	cache.release(pinned)
	cache.release(c)
	require.NotNil(t, cache.readBuf(), "b's buffer")
	e, _ := adopt(30)
	cache.put(lp, e, nil) // c goes, pinned
	cache.release(e)
	require.Nil(t, cache.readBuf(), "c went out as it is: its buffer stays with the response")
	require.NotNil(t, c.batch)
}

func offsetsOf(t *testing.T, batch []byte) []int64 {
	t.Helper()
	_, _, offs, _ := batchOffsets(t, batch)
	return offs
}

// FuzzTrimBatch: for any batch whose CRC matches (whatever its records
// hold) and any acquired ranges, a group mode sends either the batch as
// stored or a trimmed copy whose CRC, combined from the running CRCs of
// the batch, matches the copy, and which holds exactly the acquired
// records of the batch, in order, as the producer wrote them.
func FuzzTrimBatch(f *testing.F) {
	raw := records.EncodeBatch(numberedRecords(10, 12), 12, 1000, 1000)
	protocol.SetBaseOffset(raw, 10)
	f.Add(raw, uint64(0x0f0f), uint8(1))
	f.Add(raw[:len(raw)-3], uint64(1), uint8(2))
	f.Fuzz(func(t *testing.T, raw []byte, mask uint64, step uint8) {
		if len(raw) < protocol.BatchHeaderSize {
			return
		}
		raw = bytes.Clone(raw)
		binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-protocol.BatchLengthPrefix))
		raw[16] = 2                                                                   // magic
		binary.BigEndian.PutUint16(raw[21:], binary.BigEndian.Uint16(raw[21:])&^0x27) // uncompressed, not control
		protocol.SetBatchCRC(raw)
		h, err := protocol.ParseBatchHeader(raw)
		if err != nil {
			return
		}
		// Acquired: the offsets of the header's span whose bit is set in
		// mask (cycled), in ranges of up to step+1.
		var acq []sharegroup.Acquired
		span := min(int64(h.LastOffsetDelta), 200)
		for i := int64(0); i <= span; i += int64(step%8) + 1 {
			if mask>>(uint(i)%64)&1 != 0 {
				acq = append(acq, sharegroup.Acquired{First: h.BaseOffset + i, Last: h.BaseOffset + i + int64(step%8)})
			}
		}
		pb := parseBatch(&h, raw, nil)
		out := pb.trim(acq)
		if bytes.Equal(out, raw) {
			return
		}
		require.True(t, protocol.VerifyBatchCRC(out), "trimmed copy with a bad CRC")
		var want, got []int64
		for i, off := range pb.offs {
			for _, a := range acq {
				if off >= a.First && off <= a.Last {
					want = append(want, pb.offs[i])
					break
				}
			}
		}
		oh, err := protocol.ParseBatchHeader(out)
		require.NoError(t, err)
		// Records are found as the broker finds them (a record need not
		// decode further: it goes out as the producer wrote it).
		_, err = recordOffsets(out, &oh, nil, func(off int64, _ []byte) { got = append(got, off) })
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
}
