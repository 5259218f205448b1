package log

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/protocol"
)

// withOffset returns a copy of batch with its base offset set.
func withOffset(batch []byte, off int64) []byte {
	c := bytes.Clone(batch)
	protocol.SetBaseOffset(c, off)
	return c
}

func TestAppendReadRoundTripAcrossRolls(t *testing.T) {
	t.Parallel()
	fsys := NewMemFS()
	p := openMem(t, fsys, smallConfig())
	rng := rand.New(rand.NewPCG(1, 2))
	var want [][]byte
	next := int64(0)
	for i := range 300 {
		b := testBatch(1+rng.IntN(5), 10+rng.IntN(200), -1, 0, 0)
		res := mustAppend(t, p, bytes.Clone(b))
		require.Equal(t, next, res.BaseOffset, "batch %d", i)
		h, _ := protocol.ParseBatchHeader(b)
		require.Equal(t, next+int64(h.LastOffsetDelta), res.LastOffset)
		require.Equal(t, int64(-1), res.LogAppendTime)
		require.False(t, res.Duplicate)
		want = append(want, withOffset(b, next))
		next = res.LastOffset + 1
	}
	require.Equal(t, next, p.LogEndOffset())
	require.Equal(t, next, p.HighWatermark())
	require.Greater(t, len(p.segs), 10, "expected many segment rolls")

	check := func(p *Partition) {
		t.Helper()
		hs, bs := readAll(t, p, 0)
		requireContiguous(t, hs, 0, next)
		require.Equal(t, want, bs)
		// Every offset reads from the batch containing it.
		for _, w := range want {
			h, _ := protocol.ParseBatchHeader(w)
			for off := h.BaseOffset; off <= h.LastOffset(); off++ {
				got, err := p.Read(off, p.HighWatermark(), 1, true)
				require.NoError(t, err)
				require.Equal(t, w, got, "offset %d", off)
			}
		}
	}
	check(p)
	_, err := p.Sync()
	require.NoError(t, err)
	check(p)
	require.NoError(t, p.Close())

	// A clean reopen trusts the index files and yields the same log.
	p2 := openMem(t, fsys, smallConfig())
	defer p2.Close()
	require.Equal(t, next, p2.LogEndOffset())
	require.Equal(t, next, p2.HighWatermark())
	check(p2)
	// Appending continues where it stopped.
	res := mustAppend(t, p2, testBatch(2, 10, -1, 0, 0))
	require.Equal(t, next, res.BaseOffset)
}

func TestReadLimits(t *testing.T) {
	t.Parallel()
	p := openMem(t, NewMemFS(), DefaultConfig())
	defer p.Close()
	b1 := testBatch(3, 100, -1, 0, 0)
	b2 := testBatch(2, 100, -1, 0, 0)
	mustAppend(t, p, bytes.Clone(b1))
	mustAppend(t, p, bytes.Clone(b2))
	res, err := p.Append(testBatch(1, 10, -1, 0, 0), testNow) // above the HW
	require.NoError(t, err)
	require.Equal(t, int64(5), res.BaseOffset)
	require.Equal(t, int64(5), p.HighWatermark())
	require.Equal(t, int64(6), p.LogEndOffset())

	got, err := p.Read(0, p.HighWatermark(), 1<<20, false)
	require.NoError(t, err)
	require.Equal(t, append(withOffset(b1, 0), withOffset(b2, 3)...), got)

	got, err = p.Read(0, p.HighWatermark(), len(b1)+len(b2)-1, false)
	require.NoError(t, err)
	require.Equal(t, withOffset(b1, 0), got, "maxBytes cuts at a batch boundary")

	got, err = p.Read(0, p.HighWatermark(), 10, false)
	require.NoError(t, err)
	require.Nil(t, got, "first batch larger than maxBytes without minOne")

	got, err = p.Read(0, p.HighWatermark(), 10, true)
	require.NoError(t, err)
	require.Equal(t, withOffset(b1, 0), got, "minOne returns one whole batch")

	got, err = p.Read(4, 3, 1<<20, true)
	require.NoError(t, err)
	require.Nil(t, got)

	got, err = p.Read(0, 4, 1<<20, true)
	require.NoError(t, err)
	require.Equal(t, withOffset(b1, 0), got, "batch straddling maxOffset is held back")

	got, err = p.Read(5, p.HighWatermark(), 1<<20, true)
	require.NoError(t, err)
	require.Nil(t, got, "offset == HW")
	got, err = p.Read(6, p.HighWatermark(), 1<<20, true)
	require.NoError(t, err)
	require.Nil(t, got, "offset == LEO")

	_, err = p.Read(7, p.HighWatermark(), 1<<20, true)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	_, err = p.Read(-1, p.HighWatermark(), 1<<20, true)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)

	// The returned slice is the caller's.
	got, err = p.Read(0, p.HighWatermark(), 1<<20, true)
	require.NoError(t, err)
	got[100] ^= 0xff
	again, err := p.Read(0, p.HighWatermark(), 1<<20, true)
	require.NoError(t, err)
	require.NotEqual(t, got, again)
}

func TestHighWatermark(t *testing.T) {
	t.Parallel()
	p := openMem(t, NewMemFS(), DefaultConfig())
	defer p.Close()
	_, err := p.Append(testBatch(4, 10, -1, 0, 0), testNow)
	require.NoError(t, err)
	require.Equal(t, int64(0), p.HighWatermark())
	p.SetHighWatermark(100)
	require.Equal(t, int64(4), p.HighWatermark(), "clamped to LEO")
	p.SetHighWatermark(2)
	require.Equal(t, int64(4), p.HighWatermark(), "never decreases")
}

func TestIndexLookup(t *testing.T) {
	t.Parallel()
	for _, interval := range []int32{0, 100, 4096, math.MaxInt32} {
		cfg := DefaultConfig()
		cfg.IndexIntervalBytes = interval
		cfg.SegmentBytes = 64 << 10
		fsys := NewMemFS()
		p := openMem(t, fsys, cfg)
		var positions []int64
		pos := int64(0)
		for i := range 400 {
			b := testBatch(1+i%3, 50+i%200, -1, 0, 0)
			res := mustAppend(t, p, b)
			if res.BaseOffset == p.active.base {
				pos = 0
			}
			positions = append(positions, pos)
			pos += int64(len(b))
		}
		check := func() {
			p.segMu.RLock()
			defer p.segMu.RUnlock()
			for _, s := range p.segs {
				v := s.view()
				r := batchReader{f: s.log, end: v.size}
				for {
					bpos, h, _, err := r.next()
					if err != nil {
						break
					}
					for off := h.BaseOffset; off <= h.LastOffset(); off++ {
						ipos, err := s.lookupPosition(off)
						require.NoError(t, err)
						require.LessOrEqual(t, ipos, bpos)
						if interval == 0 && off == h.BaseOffset {
							require.Equal(t, bpos, ipos, "every batch indexed")
						}
						gotPos, gh, err := s.findBatch(off, v.size)
						require.NoError(t, err)
						require.Equal(t, bpos, gotPos)
						require.Equal(t, h, gh)
					}
				}
			}
		}
		check()
		require.NoError(t, p.Close())
		p = openMem(t, fsys, cfg)
		check()
		require.NoError(t, p.Close())
	}
}

func TestAppendValidation(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.MaxMessageBytes = 2000
	p := openMem(t, NewMemFS(), cfg)
	defer p.Close()

	good := testBatch(2, 10, -1, 0, 0)
	cases := map[string]struct {
		records []byte
		want    error
	}{
		"empty":       {nil, ErrInvalidRecord},
		"short":       {good[:30], ErrCorruptMessage},
		"truncated":   {good[:len(good)-1], ErrCorruptMessage},
		"trailing":    {append(bytes.Clone(good), 1, 2, 3), ErrCorruptMessage},
		"bad crc":     {func() []byte { b := bytes.Clone(good); b[len(b)-1] ^= 1; return b }(), ErrCorruptMessage},
		"magic 1":     {func() []byte { b := bytes.Clone(good); b[16] = 1; return b }(), ErrUnsupportedMessageFormat},
		"too large":   {testBatch(1, 3000, -1, 0, 0), ErrMessageTooLarge},
		"zero count":  {makeBadCount(good, 0), ErrInvalidRecord},
		"count delta": {makeBadCount(good, 3), ErrInvalidRecord},
		"second bad": {append(bytes.Clone(good), func() []byte {
			b := bytes.Clone(good)
			b[len(b)-1] ^= 1
			return b
		}()...), ErrCorruptMessage},
	}
	for name, c := range cases {
		_, err := p.Append(c.records, testNow)
		require.ErrorIs(t, err, c.want, name)
		require.Equal(t, int64(0), p.LogEndOffset(), "%s: nothing appended", name)
	}
	// Multi-batch append is accepted and contiguous.
	res, err := p.Append(append(bytes.Clone(good), testBatch(3, 5, -1, 0, 0)...), testNow)
	require.NoError(t, err)
	require.Equal(t, int64(0), res.BaseOffset)
	require.Equal(t, int64(4), res.LastOffset)
}

// makeBadCount sets recordCount and fixes the CRC.
func makeBadCount(b []byte, count int32) []byte {
	c := bytes.Clone(b)
	c[57], c[58], c[59], c[60] = byte(count>>24), byte(count>>16), byte(count>>8), byte(count)
	protocol.SetBatchCRC(c)
	return c
}

func TestLogAppendTime(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.LogAppendTime = true
	p := openMem(t, NewMemFS(), cfg)
	defer p.Close()
	now := time.UnixMilli(baseTime + 5000)
	res, err := p.Append(makeBatch(batchSpec{n: 3, valueSize: 5, pid: -1, tsStep: 1}), now)
	require.NoError(t, err)
	require.Equal(t, now.UnixMilli(), res.LogAppendTime)
	p.SetHighWatermark(res.LastOffset + 1)
	hs, _ := readAll(t, p, 0)
	require.True(t, hs[0].IsLogAppendTime())
	require.Equal(t, now.UnixMilli(), hs[0].MaxTimestamp)
	off, ts := p.MaxTimestamp()
	require.Equal(t, int64(0), off)
	require.Equal(t, now.UnixMilli(), ts)
}

func TestTimestamps(t *testing.T) {
	t.Parallel()
	fsys := NewMemFS()
	p := openMem(t, fsys, smallConfig())
	type rec struct{ off, ts int64 }
	var recs []rec
	rng := rand.New(rand.NewPCG(3, 4))
	ts := baseTime
	for range 200 {
		n := 1 + rng.IntN(4)
		step := int64(rng.IntN(3))
		start := ts + int64(rng.IntN(20)) - 8 // occasionally goes backwards
		res := mustAppend(t, p, makeBatch(batchSpec{n: n, valueSize: 40, pid: -1, ts: start, tsStep: step}))
		for i := range n {
			recs = append(recs, rec{res.BaseOffset + int64(i), start + int64(i)*step})
		}
		ts += 10
	}
	check := func(p *Partition) {
		t.Helper()
		maxIdx := 0
		for i, r := range recs {
			if r.ts > recs[maxIdx].ts {
				maxIdx = i
			}
		}
		off, mts := p.MaxTimestamp()
		require.Equal(t, recs[maxIdx].off, off)
		require.Equal(t, recs[maxIdx].ts, mts)
		for target := baseTime - 20; target <= ts+20; target += 3 {
			wantOff, wantTs, wantFound := int64(-1), int64(-1), false
			for _, r := range recs {
				if r.ts >= target {
					wantOff, wantTs, wantFound = r.off, r.ts, true
					break
				}
			}
			off, gts, found := p.OffsetForTimestamp(target)
			require.Equal(t, wantFound, found, "target %d", target)
			require.Equal(t, wantOff, off, "target %d", target)
			require.Equal(t, wantTs, gts, "target %d", target)
		}
	}
	check(p)
	require.NoError(t, p.Close())
	p = openMem(t, fsys, smallConfig())
	defer p.Close()
	check(p)

	empty := openMem(t, NewMemFS(), DefaultConfig())
	defer empty.Close()
	off, mts := empty.MaxTimestamp()
	require.Equal(t, int64(-1), off)
	require.Equal(t, int64(-1), mts)
	_, _, found := empty.OffsetForTimestamp(0)
	require.False(t, found)
}

func TestOffsetForTimestampBelowHW(t *testing.T) {
	t.Parallel()
	p := openMem(t, NewMemFS(), DefaultConfig())
	defer p.Close()
	mustAppend(t, p, makeBatch(batchSpec{n: 2, pid: -1, ts: 100, tsStep: 1}))
	_, err := p.Append(makeBatch(batchSpec{n: 2, pid: -1, ts: 200, tsStep: 1}), testNow)
	require.NoError(t, err)
	_, _, found := p.OffsetForTimestamp(150)
	require.False(t, found, "records above the HW are invisible")
	p.SetHighWatermark(4)
	off, ts, found := p.OffsetForTimestamp(150)
	require.True(t, found)
	require.Equal(t, int64(2), off)
	require.Equal(t, int64(200), ts)
}

func TestRetentionByTime(t *testing.T) {
	t.Parallel()
	cfg := smallConfig()
	cfg.RetentionMs = 60_000
	p := openMem(t, NewMemFS(), cfg)
	defer p.Close()
	// 10 minutes of data, one batch per 10 s.
	for i := range 60 {
		mustAppend(t, p, makeBatch(batchSpec{n: 2, valueSize: 300, pid: -1, ts: baseTime + int64(i)*10_000}))
	}
	now := time.UnixMilli(baseTime + 600_000)
	before := p.Size()
	deleted, err := p.EnforceRetention(now)
	require.NoError(t, err)
	require.Positive(t, deleted)
	require.Equal(t, before-deleted, p.Size())
	ls := p.LogStartOffset()
	require.Positive(t, ls)
	// Every remaining segment but the first must hold records newer than the cutoff.
	for _, s := range p.segs {
		require.GreaterOrEqual(t, s.maxTs, now.UnixMilli()-cfg.RetentionMs)
	}
	_, err = p.Read(ls-1, p.HighWatermark(), 1<<20, true)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	hs, _ := readAll(t, p, ls)
	requireContiguous(t, hs, ls, p.LogEndOffset())

	// Everything expired: the active segment is rolled and deleted too.
	deleted, err = p.EnforceRetention(now.Add(time.Hour))
	require.NoError(t, err)
	require.Positive(t, deleted)
	require.Equal(t, p.LogEndOffset(), p.LogStartOffset())
	require.Equal(t, int64(0), p.Size())
	require.Len(t, p.segs, 1)
	res := mustAppend(t, p, testBatch(1, 10, -1, 0, 0))
	require.Equal(t, p.LogStartOffset(), res.BaseOffset)
}

func TestRetentionByBytes(t *testing.T) {
	t.Parallel()
	cfg := smallConfig()
	cfg.RetentionMs = -1
	cfg.RetentionBytes = 10_000
	fsys := NewMemFS()
	p := openMem(t, fsys, cfg)
	for range 100 {
		mustAppend(t, p, testBatch(1, 400, -1, 0, 0))
	}
	require.Greater(t, p.Size(), int64(30_000))
	_, err := p.EnforceRetention(testNow)
	require.NoError(t, err)
	// Like Kafka: a segment goes only if the log stays >= retention.bytes.
	require.GreaterOrEqual(t, p.Size(), int64(10_000))
	require.Less(t, p.Size(), int64(10_000+4096))
	ls := p.LogStartOffset()
	hs, _ := readAll(t, p, ls)
	requireContiguous(t, hs, ls, p.LogEndOffset())
	// Files of deleted segments are gone; the log start survives a restart.
	names, err := fsys.ReadDir("/data/topic-0")
	require.NoError(t, err)
	for _, n := range names {
		if off, ok := parseFileName(n, logSuffix); ok {
			require.GreaterOrEqual(t, off, p.segs[0].base)
		}
	}
	require.NoError(t, p.Close())
	p = openMem(t, fsys, cfg)
	defer p.Close()
	require.Equal(t, ls, p.LogStartOffset())
}

func TestRetentionRespectsHighWatermark(t *testing.T) {
	t.Parallel()
	cfg := smallConfig()
	cfg.RetentionMs = 1
	p := openMem(t, NewMemFS(), cfg)
	defer p.Close()
	for range 20 {
		_, err := p.Append(testBatch(1, 400, -1, 0, 0), testNow)
		require.NoError(t, err)
	}
	deleted, err := p.EnforceRetention(testNow.Add(time.Hour))
	require.NoError(t, err)
	require.Zero(t, deleted, "nothing below the HW")
}

func TestSegmentMsRoll(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.SegmentMs = 1000
	p := openMem(t, NewMemFS(), cfg)
	defer p.Close()
	mustAppend(t, p, makeBatch(batchSpec{n: 1, pid: -1, ts: baseTime}))
	mustAppend(t, p, makeBatch(batchSpec{n: 1, pid: -1, ts: baseTime + 500}))
	require.Len(t, p.segs, 1)
	mustAppend(t, p, makeBatch(batchSpec{n: 1, pid: -1, ts: baseTime + 1500}))
	require.Len(t, p.segs, 2, "append rolls on record time")
	_, err := p.EnforceRetention(time.UnixMilli(baseTime + 1e6))
	require.NoError(t, err)
	require.Len(t, p.segs, 3, "retention rolls an old active segment")
	require.Equal(t, int64(0), p.active.size)
}

func TestDeleteRecords(t *testing.T) {
	t.Parallel()
	fsys := NewMemFS()
	p := openMem(t, fsys, smallConfig())
	for range 50 {
		mustAppend(t, p, testBatch(2, 300, -1, 0, 0))
	}
	_, err := p.Append(testBatch(2, 300, -1, 0, 0), testNow) // above HW
	require.NoError(t, err)
	_, err = p.Sync()
	require.NoError(t, err)
	hw := p.HighWatermark()
	_, err = p.DeleteRecordsBefore(hw + 1)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	_, err = p.DeleteRecordsBefore(-5)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)

	segsBefore := len(p.segs)
	ls, err := p.DeleteRecordsBefore(41)
	require.NoError(t, err)
	require.Equal(t, int64(41), ls)
	require.Equal(t, int64(41), p.LogStartOffset())
	require.Less(t, len(p.segs), segsBefore)
	require.LessOrEqual(t, p.segs[0].base, int64(41))
	_, err = p.Read(40, hw, 1<<20, true)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	b, err := p.Read(41, hw, 1<<20, true)
	require.NoError(t, err)
	h, _ := protocol.ParseBatchHeader(b)
	require.Equal(t, int64(40), h.BaseOffset, "the batch containing the log start offset")

	ls, err = p.DeleteRecordsBefore(10) // below: no-op
	require.NoError(t, err)
	require.Equal(t, int64(41), ls)

	ls, err = p.DeleteRecordsBefore(-1) // -1 = HW
	require.NoError(t, err)
	require.Equal(t, hw, ls)

	// Persisted before returning: survives a crash without any Sync.
	crashed := fsys.CrashClone()
	p2 := openMem(t, crashed, smallConfig())
	require.Equal(t, hw, p2.LogStartOffset())
	require.NoError(t, p2.Close())
	require.NoError(t, p.Close())
}

func TestIdempotentProducer(t *testing.T) {
	t.Parallel()
	fsys := NewMemFS()
	p := openMem(t, fsys, smallConfig())
	const pid = 1000
	var results []AppendResult
	var batches [][]byte
	for i := range 8 {
		b := testBatch(3, 20, pid, 0, int32(i*3))
		batches = append(batches, b)
		results = append(results, mustAppend(t, p, bytes.Clone(b)))
	}
	leo := p.LogEndOffset()
	// Each of the last 5 batches is a duplicate returning its original offsets.
	for i := 3; i < 8; i++ {
		res, err := p.Append(bytes.Clone(batches[i]), testNow)
		require.NoError(t, err)
		require.True(t, res.Duplicate)
		require.Equal(t, results[i].BaseOffset, res.BaseOffset)
		require.Equal(t, results[i].LastOffset, res.LastOffset)
		require.Equal(t, leo, p.LogEndOffset())
	}
	// Older ones fall out of the window: out of order.
	_, err := p.Append(bytes.Clone(batches[2]), testNow)
	require.ErrorIs(t, err, ErrOutOfOrderSequence)
	// A gap is out of order.
	_, err = p.Append(testBatch(1, 20, pid, 0, 25), testNow)
	require.ErrorIs(t, err, ErrOutOfOrderSequence)
	// The next sequence is accepted.
	mustAppend(t, p, testBatch(1, 20, pid, 0, 24))
	// A newer epoch must start at 0.
	_, err = p.Append(testBatch(1, 20, pid, 1, 25), testNow)
	require.ErrorIs(t, err, ErrOutOfOrderSequence)
	mustAppend(t, p, testBatch(2, 20, pid, 1, 0))
	// An older epoch is fenced.
	_, err = p.Append(testBatch(1, 20, pid, 0, 25), testNow)
	require.ErrorIs(t, err, ErrInvalidProducerEpoch)
	// Unknown producer: any sequence is accepted.
	mustAppend(t, p, testBatch(1, 20, pid+1, 0, 777))
	mustAppend(t, p, testBatch(1, 20, pid+1, 0, 778))

	infos := p.Producers()
	require.Len(t, infos, 2)
	require.Equal(t, ProducerInfo{ProducerID: pid, Epoch: 1, LastSequence: 1, LastTimestamp: baseTime, CoordinatorEpoch: -1, CurrentTxnStartOffset: -1}, infos[0])
	require.Equal(t, int32(778), infos[1].LastSequence)

	// State survives a clean restart (snapshot) and a crash (replay).
	_, err = p.Sync()
	require.NoError(t, err)
	crashed := fsys.CrashClone()
	require.NoError(t, p.Close())
	for _, f := range []FS{fsys, crashed} {
		p2 := openMem(t, f, smallConfig())
		require.Equal(t, infos, p2.Producers())
		res, err := p2.Append(testBatch(2, 20, pid, 1, 0), testNow)
		require.NoError(t, err)
		require.True(t, res.Duplicate)
		_, err = p2.Append(testBatch(1, 20, pid, 1, 3), testNow)
		require.ErrorIs(t, err, ErrOutOfOrderSequence)
		require.NoError(t, p2.Close())
	}
}

func TestIdempotentSequenceWrap(t *testing.T) {
	t.Parallel()
	p := openMem(t, NewMemFS(), DefaultConfig())
	defer p.Close()
	mustAppend(t, p, testBatch(2, 5, 9, 0, math.MaxInt32-3)) // seqs MaxInt32-3, MaxInt32-2
	mustAppend(t, p, testBatch(4, 5, 9, 0, math.MaxInt32-1)) // wraps: last seq 1
	require.Equal(t, int32(1), p.Producers()[0].LastSequence)
	mustAppend(t, p, testBatch(1, 5, 9, 0, 2))
	res, err := p.Append(testBatch(4, 5, 9, 0, math.MaxInt32-1), testNow)
	require.NoError(t, err)
	require.True(t, res.Duplicate)
	require.Equal(t, int64(2), res.BaseOffset)
}

func TestIdempotentMultiBatch(t *testing.T) {
	t.Parallel()
	p := openMem(t, NewMemFS(), DefaultConfig())
	defer p.Close()
	a, b := testBatch(2, 5, 3, 0, 0), testBatch(2, 5, 3, 0, 2)
	res, err := p.Append(append(bytes.Clone(a), b...), testNow)
	require.NoError(t, err)
	require.Equal(t, int64(3), res.LastOffset)
	res, err = p.Append(append(bytes.Clone(a), b...), testNow)
	require.NoError(t, err)
	require.True(t, res.Duplicate)
	require.Equal(t, int64(0), res.BaseOffset)
	require.Equal(t, int64(3), res.LastOffset)
	_, err = p.Append(append(bytes.Clone(b), testBatch(1, 5, 3, 0, 4)...), testNow)
	require.ErrorIs(t, err, ErrInvalidRecord, "mixed duplicate and new batches")
	// Out of order inside one request fails the whole request.
	_, err = p.Append(append(testBatch(1, 5, 3, 0, 4), testBatch(1, 5, 3, 0, 6)...), testNow)
	require.ErrorIs(t, err, ErrOutOfOrderSequence)
	require.Equal(t, int64(4), p.LogEndOffset())
}

func TestTransactionalStoredControlRefused(t *testing.T) {
	t.Parallel()
	p := openMem(t, NewMemFS(), DefaultConfig())
	defer p.Close()
	mustAppend(t, p, makeBatch(batchSpec{n: 2, pid: 5, seq: 0, attrs: protocol.AttrTransactional}))
	// Control records (transaction markers) are the broker's to write;
	// Kafka refuses them from producers with INVALID_RECORD.
	ctrl := makeBatch(batchSpec{n: 1, pid: 5, attrs: protocol.AttrTransactional | protocol.AttrControl})
	_, err := p.Append(ctrl, testNow)
	require.ErrorIs(t, err, ErrInvalidRecord)
	mustAppend(t, p, makeBatch(batchSpec{n: 1, pid: 5, seq: 2, attrs: protocol.AttrTransactional}))
	hs, _ := readAll(t, p, 0)
	require.Len(t, hs, 2)
}

func TestClosed(t *testing.T) {
	t.Parallel()
	fsys := NewMemFS()
	p := openMem(t, fsys, DefaultConfig())
	mustAppend(t, p, testBatch(1, 5, -1, 0, 0))
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	_, err := p.Append(testBatch(1, 5, -1, 0, 0), testNow)
	require.ErrorIs(t, err, ErrClosed)
	_, err = p.Sync()
	require.ErrorIs(t, err, ErrClosed)
	_, err = p.Read(0, 1, 100, true)
	require.ErrorIs(t, err, ErrClosed)
	_, err = p.EnforceRetention(testNow)
	require.ErrorIs(t, err, ErrClosed)
	_, err = p.DeleteRecordsBefore(0)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, p.Delete())
	_, err = fsys.ReadDir("/data/topic-0")
	require.Error(t, err)
}

func TestEveryErrorWrapsASentinel(t *testing.T) {
	t.Parallel()
	sentinels := []error{ErrCorruptMessage, ErrMessageTooLarge, ErrInvalidRecord, ErrUnsupportedMessageFormat,
		ErrOffsetOutOfRange, ErrOutOfOrderSequence, ErrInvalidProducerEpoch, ErrClosed, ErrStorage, ErrCorruption}
	fsys := NewMemFS()
	p := openMem(t, fsys, DefaultConfig())
	fsys.FailNextWrite(errors.New("disk on fire"))
	_, err := p.Append(testBatch(1, 5, -1, 0, 0), testNow)
	require.Error(t, err)
	wraps := false
	for _, s := range sentinels {
		wraps = wraps || errors.Is(err, s)
	}
	require.True(t, wraps, err.Error())
}

func TestProducerExpiration(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.ProducerIDExpirationMs = 60_000
	p := openMem(t, NewMemFS(), cfg)
	defer p.Close()
	mustAppend(t, p, makeBatch(batchSpec{n: 1, pid: 1, seq: 0, ts: baseTime}))
	mustAppend(t, p, makeBatch(batchSpec{n: 1, pid: 2, seq: 0, ts: baseTime + 120_000}))
	_, err := p.EnforceRetention(time.UnixMilli(baseTime + 130_000))
	require.NoError(t, err)
	infos := p.Producers()
	require.Len(t, infos, 1)
	require.Equal(t, int64(2), infos[0].ProducerID)
	// The forgotten producer is accepted at any sequence.
	mustAppend(t, p, makeBatch(batchSpec{n: 1, pid: 1, seq: 50, ts: baseTime + 130_000}))
}

// abandon closes a partition's files without any shutdown work, like a
// killed process.
func abandon(p *Partition) {
	for _, s := range p.segs {
		for _, f := range []File{s.log, s.offFile, s.timeFile} {
			if f != nil {
				_ = f.Close()
			}
		}
	}
}

func TestOSFS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/topic-3"
	cfg := smallConfig()
	p, err := Open(OSFS(), dir, cfg, testLogger(t))
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(9, 9))
	var want [][]byte
	for range 100 {
		b := testBatch(1+rng.IntN(3), 10+rng.IntN(300), -1, 0, 0)
		res := mustAppend(t, p, bytes.Clone(b))
		want = append(want, withOffset(b, res.BaseOffset))
	}
	_, err = p.Sync()
	require.NoError(t, err)
	for range 20 { // written, not synced: survives a process kill
		b := testBatch(2, 50, -1, 0, 0)
		res := mustAppend(t, p, bytes.Clone(b))
		want = append(want, withOffset(b, res.BaseOffset))
	}
	leo := p.LogEndOffset()
	abandon(p)

	p2, err := Open(OSFS(), dir, cfg, testLogger(t))
	require.NoError(t, err)
	require.Equal(t, leo, p2.LogEndOffset())
	_, got := readAll(t, p2, 0)
	require.Equal(t, want, got)
	require.NoError(t, p2.Close())

	p3, err := Open(OSFS(), dir, cfg, testLogger(t))
	require.NoError(t, err)
	_, got = readAll(t, p3, 0)
	require.Equal(t, want, got)
	require.NoError(t, p3.Delete())
	_, err = OSFS().ReadDir(dir)
	require.Error(t, err)
}

func TestSetConfig(t *testing.T) {
	t.Parallel()
	p := openMem(t, NewMemFS(), DefaultConfig())
	defer p.Close()
	for range 10 {
		mustAppend(t, p, testBatch(1, 500, -1, 0, 0))
	}
	require.Len(t, p.segs, 1)
	cfg := p.Config()
	cfg.SegmentBytes = 1024
	cfg.MaxMessageBytes = 0 // normalised to the default
	cfg.IndexIntervalBytes = -1
	p.SetConfig(cfg)
	got := p.Config()
	require.Equal(t, int32(DefaultMaxMessageBytes), got.MaxMessageBytes)
	require.Equal(t, int32(DefaultIndexIntervalBytes), got.IndexIntervalBytes)
	mustAppend(t, p, testBatch(1, 500, -1, 0, 0))
	require.Len(t, p.segs, 2, "smaller segment.bytes applies to the next append")
	_, err := p.Append(testBatch(1, 2000, -1, 0, 0), testNow)
	require.ErrorIs(t, err, ErrMessageTooLarge, "a request larger than segment.bytes")
	cfg.SegmentBytes = math.MaxInt64
	p.SetConfig(cfg)
	require.Equal(t, int64(math.MaxInt32), p.Config().SegmentBytes)
}

// TestCloseDiscard: CloseDiscard writes nothing (no index files,
// snapshot or checkpoint appear), answers ErrClosed afterwards, and a
// log reopened from what it left recovers what was written.
func TestCloseDiscard(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/gone-0"
	cfg := smallConfig()
	p, err := Open(OSFS(), dir, cfg, testLogger(t))
	require.NoError(t, err)
	var want [][]byte
	for range 30 {
		b := testBatch(2, 100, -1, 0, 0)
		res := mustAppend(t, p, bytes.Clone(b))
		want = append(want, withOffset(b, res.BaseOffset))
	}
	before, err := OSFS().ReadDir(dir)
	require.NoError(t, err)
	require.NoError(t, p.CloseDiscard())
	after, err := OSFS().ReadDir(dir)
	require.NoError(t, err)
	require.Equal(t, before, after, "CloseDiscard wrote files")
	_, err = p.Read(0, 1<<40, 1<<20, true)
	require.ErrorIs(t, err, ErrClosed)
	_, err = p.Append(testBatch(1, 10, -1, 0, 0), time.Now())
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, p.CloseDiscard())
	require.NoError(t, p.Close())

	p2, err := Open(OSFS(), dir, cfg, testLogger(t))
	require.NoError(t, err)
	_, got := readAll(t, p2, 0)
	require.Equal(t, want, got)
	require.NoError(t, p2.Close())
}
