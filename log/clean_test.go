package log

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand"
	randv2 "math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/protocol"
)

// kv is one record of a keyed batch; a nil value is a tombstone, a nil
// key a record without one.
type kv struct {
	key, value []byte
}

// keyedBatch encodes a batch of keyed records (gzip-compressed with gz).
func keyedBatch(t testing.TB, recs []kv, pid int64, seq int32, ts int64, gz bool) []byte {
	var raw []byte
	for i, r := range recs {
		rec := kmsg.Record{OffsetDelta: int32(i), Key: r.key, Value: r.value}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		raw = rec.AppendTo(raw)
	}
	var attrs int16
	if gz {
		var err error
		raw, err = gzipCodec{}.Compress(raw, protocol.CompressionGzip)
		require.NoError(t, err)
		attrs = int16(protocol.CompressionGzip)
	}
	if pid < 0 {
		seq = -1
	}
	b := (&kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: pid, FirstSequence: seq, NumRecords: int32(len(recs)), Records: raw,
	}).AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	protocol.SetBatchCRC(b)
	return b
}

// txnKeyedBatch is a transactional batch of one keyed record.
func txnKeyedBatch(t testing.TB, pid int64, seq int32, key, val string) []byte {
	b := keyedBatch(t, []kv{{[]byte(key), []byte(val)}}, pid, seq, baseTime, false)
	binary.BigEndian.PutUint16(b[21:], binary.BigEndian.Uint16(b[21:])|protocol.AttrTransactional)
	protocol.SetBatchCRC(b)
	return b
}

// gzipCodec is a Codec for the tests (the broker's has every codec).
type gzipCodec struct{}

func (gzipCodec) Decompress(dst, src []byte, c protocol.Compression) ([]byte, error) {
	if c != protocol.CompressionGzip {
		return nil, fmt.Errorf("codec %d", c)
	}
	r, err := gzip.NewReader(bytes.NewReader(src))
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(r)
	return append(dst, b...), err
}

func (gzipCodec) Compress(raw []byte, c protocol.Compression) ([]byte, error) {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(raw)
	err := w.Close()
	return buf.Bytes(), err
}

// rec is a record as a consumer reads it.
type rec struct {
	off       int64
	key, val  string
	tombstone bool
}

// readRecords reads every record below the high watermark, decoding
// compressed batches, and checks each batch's framing on the way.
func readRecords(t testing.TB, p *Partition) []rec {
	t.Helper()
	hs, bs := readAll(t, p, p.LogStartOffset())
	requireContiguous(t, hs, p.LogStartOffset(), p.HighWatermark())
	var out []rec
	for i, b := range bs {
		h := hs[i]
		if h.IsControl() {
			continue
		}
		body := b[protocol.BatchHeaderSize:]
		if h.Compression() != protocol.CompressionNone {
			var err error
			body, err = gzipCodec{}.Decompress(nil, body, h.Compression())
			require.NoError(t, err)
		}
		require.NoError(t, protocol.EachRawRecord(body, h.RecordCount, func(r *protocol.RawRecord) error {
			var krec kmsg.Record
			require.NoError(t, krec.ReadFrom(r.Wire))
			out = append(out, rec{off: h.BaseOffset + int64(r.OffsetDelta), key: string(krec.Key), val: string(krec.Value), tombstone: krec.Value == nil})
			return nil
		}))
	}
	return out
}

// table is the latest value per key of records, tombstones deleting.
func table(records []rec) map[string]rec {
	m := map[string]rec{}
	for _, r := range records {
		if r.tombstone {
			delete(m, r.key)
		} else {
			m[r.key] = r
		}
	}
	return m
}

func compactConfig() Config {
	c := smallConfig()
	c.Cleanup = CleanupCompact
	c.DeleteRetentionMs = -1
	return c
}

// fillKeyed appends n updates over keys keys (some tombstones when
// tombstones), in batches of 1 to 5 records, rolling segments, and
// returns what was written.
func fillKeyed(t testing.TB, p *Partition, rng *rand.Rand, n, keys int, tombstones, gz bool) []rec {
	var all []rec
	for written := 0; written < n; {
		k := min(1+rng.Intn(5), n-written)
		var recs []kv
		for range k {
			key := fmt.Appendf(nil, "k%03d", rng.Intn(keys))
			val := fmt.Appendf(nil, "v%d", written+len(recs))
			if tombstones && rng.Intn(10) == 0 {
				val = nil
			}
			recs = append(recs, kv{key, val})
		}
		res := mustAppend(t, p, keyedBatch(t, recs, -1, 0, baseTime, gz))
		for i, r := range recs {
			all = append(all, rec{off: res.BaseOffset + int64(i), key: string(r.key), val: string(r.value), tombstone: r.value == nil})
		}
		written += k
	}
	_, err := p.Sync()
	require.NoError(t, err)
	return all
}

// cleanFully cleans until a pass changes nothing more.
func cleanFully(t testing.TB, p *Partition, m *OffsetMap, now time.Time) []CleanStats {
	var out []CleanStats
	for range 1000 {
		st, err := p.Clean(CleanOptions{Now: now, Map: m, Codec: gzipCodec{}})
		require.NoError(t, err)
		if st.End == st.FirstDirty {
			return out
		}
		out = append(out, st)
	}
	t.Fatal("clean never finished")
	return nil
}

// requireCompacted checks a cleaned log against what was written: the
// same final table (offsets included), and below cleanEnd no record
// whose key has a later record below it.
func requireCompacted(t testing.TB, got, written []rec, cleanEnd int64) {
	t.Helper()
	require.Equal(t, table(written), table(got))
	last := map[string]int64{}
	for _, r := range written {
		if r.off < cleanEnd {
			last[r.key] = r.off
		}
	}
	byOff := map[int64]rec{}
	for _, r := range written {
		byOff[r.off] = r
	}
	for _, r := range got {
		require.Equal(t, byOff[r.off], r, "record at %d changed", r.off)
		if r.off < cleanEnd {
			require.Equal(t, last[r.key], r.off, "%s at %d is superseded at %d", r.key, r.off, last[r.key])
		}
	}
}

func TestCleanKeepsTheLastRecordOfEveryKey(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			fsys := NewMemFS()
			p := openMem(t, fsys, compactConfig())
			rng := rand.New(rand.NewSource(1))
			written := fillKeyed(t, p, rng, 3000, 50, true, gz)
			sizeBefore := p.Size()
			info := p.Cleanable(testNow)
			require.True(t, info.Compacts)
			require.Equal(t, int64(0), info.FirstDirty)
			require.Greater(t, info.End, int64(0))
			require.InDelta(t, 1.0, info.Ratio, 0.001)

			stats := cleanFully(t, p, NewOffsetMap(1<<20, 0.9), testNow)
			require.Len(t, stats, 1)
			require.Equal(t, info.End, stats[0].End)
			require.Greater(t, stats[0].Removed, int64(2500))
			got := readRecords(t, p)
			requireCompacted(t, got, written, info.End)
			require.Less(t, p.Size(), sizeBefore/3)
			// Tombstones are kept (delete.retention.ms -1).
			tomb := 0
			for _, r := range got {
				if r.tombstone {
					tomb++
				}
			}
			require.Greater(t, tomb, 0)

			// Nothing left to clean: the dirty ratio is 0.
			info = p.Cleanable(testNow)
			require.Equal(t, info.End, info.FirstDirty)

			// More updates, another clean: still right, and after a
			// reopen too (offsets, table, appends go on).
			written = append(written, fillKeyed(t, p, rng, 1000, 50, true, gz)...)
			stats = cleanFully(t, p, NewOffsetMap(1<<20, 0.9), testNow)
			require.Len(t, stats, 1)
			requireCompacted(t, readRecords(t, p), written, stats[0].End)
			leo := p.LogEndOffset()
			require.NoError(t, p.Close())
			p = openMem(t, fsys, compactConfig())
			require.Equal(t, leo, p.LogEndOffset())
			requireCompacted(t, readRecords(t, p), written, stats[0].End)
			written = append(written, fillKeyed(t, p, rng, 10, 50, false, gz)...)
			require.Equal(t, table(written), table(readRecords(t, p)))
			require.NoError(t, p.Close())
		})
	}
}

func TestCleanDropsTombstonesAfterDeleteRetention(t *testing.T) {
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 60_000
	p := openMem(t, NewMemFS(), cfg)
	rng := rand.New(rand.NewSource(2))
	written := fillKeyed(t, p, rng, 2000, 30, true, false)
	m := NewOffsetMap(1<<20, 0.9)
	// Within delete.retention.ms: tombstones stay.
	st := cleanFully(t, p, m, time.UnixMilli(baseTime+30_000))
	got := readRecords(t, p)
	requireCompacted(t, got, written, st[0].End)
	require.Zero(t, st[0].Tombstones)

	// Later: the next clean (after new dirty records) drops them.
	written = append(written, fillKeyed(t, p, rng, 500, 30, false, false)...)
	st = cleanFully(t, p, m, time.UnixMilli(baseTime+120_000))
	require.NotEmpty(t, st)
	got = readRecords(t, p)
	for _, r := range got {
		if r.off < st[0].End {
			require.False(t, r.tombstone, "tombstone of %s at %d kept", r.key, r.off)
		}
	}
	require.Equal(t, table(written), table(got))
}

func TestCleanInPassesWithASmallMap(t *testing.T) {
	p := openMem(t, NewMemFS(), compactConfig())
	rng := rand.New(rand.NewSource(3))
	written := fillKeyed(t, p, rng, 4000, 200, true, false)
	m := NewOffsetMap(24*64, 0.9) // 57 keys a pass
	end := p.Cleanable(testNow).End
	stats := cleanFully(t, p, m, testNow)
	require.Greater(t, len(stats), 2, "passes")
	for i := 1; i < len(stats); i++ {
		require.Equal(t, stats[i-1].End, stats[i].FirstDirty)
	}
	require.Equal(t, end, stats[len(stats)-1].End)
	requireCompacted(t, readRecords(t, p), written, end)
}

func TestCleanRefusesWhatItMustNotTouch(t *testing.T) {
	// delete policy: nothing to clean.
	p := openMem(t, NewMemFS(), smallConfig())
	fillKeyed(t, p, rand.New(rand.NewSource(4)), 500, 10, false, false)
	require.False(t, p.Cleanable(testNow).Compacts)
	st, err := p.Clean(CleanOptions{Now: testNow, Map: NewOffsetMap(1<<16, 0.9)})
	require.NoError(t, err)
	require.Zero(t, st.Segments)

	// min.compaction.lag.ms: records newer than the lag stay dirty.
	cfg := compactConfig()
	cfg.MinCompactionLagMs = 3_600_000
	p = openMem(t, NewMemFS(), cfg)
	fillKeyed(t, p, rand.New(rand.NewSource(4)), 500, 10, false, false)
	info := p.Cleanable(time.UnixMilli(baseTime + 1000))
	require.Equal(t, info.FirstDirty, info.End)
	info = p.Cleanable(time.UnixMilli(baseTime + 3_700_000))
	require.Greater(t, info.End, info.FirstDirty)

	// A map that cannot hold one batch's keys.
	p = openMem(t, NewMemFS(), compactConfig())
	var recs []kv
	for i := range 40 {
		recs = append(recs, kv{fmt.Appendf(nil, "k%d", i), []byte("v")})
	}
	for range 10 {
		mustAppend(t, p, keyedBatch(t, recs, -1, 0, baseTime, false))
	}
	_, err = p.Sync()
	require.NoError(t, err)
	_, err = p.Clean(CleanOptions{Now: testNow, Map: NewOffsetMap(24*16, 0.9)})
	require.ErrorIs(t, err, ErrMapTooSmall)
}

func TestCleanKeepsIdempotentProducersState(t *testing.T) {
	p := openMem(t, NewMemFS(), compactConfig())
	seq := int32(0)
	for i := range 400 {
		b := keyedBatch(t, []kv{{[]byte("same"), fmt.Appendf(nil, "v%d", i)}}, 7, seq, baseTime, false)
		mustAppend(t, p, b)
		seq++
	}
	// Roll so the producer's last batch is in a sealed segment.
	mustAppend(t, p, keyedBatch(t, []kv{{[]byte("other"), []byte("x")}}, -1, 0, baseTime, false))
	for p.active.size < 3000 {
		mustAppend(t, p, keyedBatch(t, []kv{{[]byte("other"), []byte("x")}}, -1, 0, baseTime, false))
	}
	mustAppend(t, p, keyedBatch(t, []kv{{[]byte("z"), make([]byte, 2000)}}, -1, 0, baseTime, false))
	_, err := p.Sync()
	require.NoError(t, err)
	cleanFully(t, p, NewOffsetMap(1<<16, 0.9), testNow)
	// A retry of the producer's last batch is still a duplicate with its
	// original offsets; the next sequence is accepted.
	last := keyedBatch(t, []kv{{[]byte("same"), []byte("v399")}}, 7, seq-1, baseTime, false)
	res, err := p.Append(last, testNow)
	require.NoError(t, err)
	require.True(t, res.Duplicate)
	require.Equal(t, int64(399), res.BaseOffset)
	_, err = p.Append(keyedBatch(t, []kv{{[]byte("same"), []byte("next")}}, 7, seq, baseTime, false), testNow)
	require.NoError(t, err)
}

func TestCleanRemovesAbortedTransactionsAndStopsAtOpenOnes(t *testing.T) {
	p := openMem(t, NewMemFS(), compactConfig())
	txn := func(pid int64, seq int32, key, val string) []byte { return txnKeyedBatch(t, pid, seq, key, val) }
	fill := func(n int) {
		for i := range n {
			mustAppend(t, p, keyedBatch(t, []kv{{fmt.Appendf(nil, "f%d", i%5), []byte("x")}}, -1, 0, baseTime, false))
		}
	}
	mustAppend(t, p, txn(1, 0, "aborted", "a"))
	fill(100)
	res, err := p.WriteMarker(Marker{ProducerID: 1, Commit: false}, testNow)
	require.NoError(t, err)
	p.SetHighWatermark(res.LastOffset + 1)
	fill(100)
	open := mustAppend(t, p, txn(2, 0, "open", "o"))
	fill(200)
	_, err = p.Sync()
	require.NoError(t, err)
	info := p.Cleanable(testNow)
	require.LessOrEqual(t, info.End, open.BaseOffset, "cleaning stops before the open transaction")
	cleanFully(t, p, NewOffsetMap(1<<16, 0.9), testNow)
	for _, r := range readRecords(t, p) {
		require.NotEqual(t, "aborted", r.key)
	}
	require.Equal(t, []AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 101}}, p.AbortedTransactions(0, p.LogEndOffset()))
}

// TestCleanCrashAtEveryStep loses power at every file operation of a
// clean in turn: the log opened afterwards holds the same final table
// at the same offsets, and every record it holds is one that was
// written, at its offset.
func TestCleanCrashAtEveryStep(t *testing.T) {
	for _, gz := range []bool{false, true} {
		fsys := NewMemFS()
		p := openMem(t, fsys, compactConfig())
		rng := rand.New(rand.NewSource(5))
		written := fillKeyed(t, p, rng, 1500, 40, true, gz)
		require.NoError(t, p.Close())
		base := fsys.CrashClone()
		steps := 0
		for n := 1; ; n++ {
			fs := base.CrashClone()
			p := openMem(t, fs, compactConfig())
			fs.SetCrashPoint(n, randv2.New(randv2.NewPCG(uint64(n), 5)))
			_, err := p.Clean(CleanOptions{Now: testNow, Map: NewOffsetMap(24*32, 0.9), Codec: gzipCodec{}})
			crashed := fs.Crashed()
			if crashed == nil {
				require.NoError(t, err)
				steps = n
				break
			}
			q := openMem(t, crashed, compactConfig())
			got := readRecords(t, q)
			require.Equal(t, table(written), table(got), "crash at step %d", n)
			byOff := map[int64]rec{}
			for _, r := range written {
				byOff[r.off] = r
			}
			for _, r := range got {
				require.Equal(t, byOff[r.off], r, "crash at step %d", n)
			}
			// The log cleans on from there.
			cleanFully(t, q, NewOffsetMap(1<<20, 0.9), testNow)
			requireCompacted(t, readRecords(t, q), written, q.Cleanable(testNow).End)
			require.NoError(t, q.Close())
		}
		require.Greater(t, steps, 10)
	}
}
