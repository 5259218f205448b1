package log

// An independent review's tests of log compaction (session 29): each of
// the first five failed on the code reviewed (dba61cd, 3533073) and
// passes since its fix; the last two are soundness probes.

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"math/rand"
	randv2 "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/protocol"
)

// tsRec is a keyed record with its own timestamp.
type tsRec struct {
	key, value []byte
	ts         int64
}

// tsBatch encodes an uncompressed CreateTime batch whose records carry
// their own timestamps (maxTimestamp: the largest).
func tsBatch(recs []tsRec, pid int64, seq int32, attrs int16) []byte {
	first, maxTs := recs[0].ts, recs[0].ts
	for _, r := range recs {
		first, maxTs = min(first, r.ts), max(maxTs, r.ts)
	}
	var raw []byte
	for i, r := range recs {
		rec := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: r.ts - first, Key: r.key, Value: r.value}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		raw = rec.AppendTo(raw)
	}
	if pid < 0 {
		seq = -1
	}
	b := (&kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: first, MaxTimestamp: maxTs, ProducerID: pid, FirstSequence: seq, NumRecords: int32(len(recs)), Records: raw,
	}).AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	protocol.SetBatchCRC(b)
	return b
}

// rollPast appends filler (key "filler") until the active segment rolls,
// then one more batch, and syncs: everything before is sealed and fsynced.
func rollPast(t *testing.T, p *Partition, ts int64) {
	t.Helper()
	base := p.active.base
	for p.active.base == base {
		mustAppend(t, p, tsBatch([]tsRec{{[]byte("filler"), make([]byte, 500), ts}}, -1, 0, 0))
	}
	_, err := p.Sync()
	require.NoError(t, err)
}

// 1. log.cleaner.io.buffer.load.factor is accepted up to 1 (broker/cleaner.go,
// configs.FloatRange(0.01, 1)); with 1 the OffsetMap's limit equals its
// slot count, and find (linear probing) never terminates once every slot
// is used: the put of the next new key (or a get of an absent key) spins
// for ever, with cleanMu held. The broker's cleanRound waits for it
// (wg.Wait), so cleaning stops for every partition and Close hangs.
func TestReviewOffsetMapLoadFactorOne(t *testing.T) {
	p := openMem(t, NewMemFS(), compactConfig())
	for i := range 40 { // 40 distinct keys, one batch each
		mustAppend(t, p, tsBatch([]tsRec{{fmt.Appendf(nil, "k%02d", i), []byte("v"), baseTime}}, -1, 0, 0))
	}
	rollPast(t, p, baseTime)
	m := NewOffsetMap(24*16, 1.0) // 16 slots, limit 16
	done := make(chan error, 1)
	go func() {
		_, err := p.Clean(CleanOptions{Now: testNow, Map: m})
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(3 * time.Second):
		t.Fatal("Clean with load factor 1.0 never returns: OffsetMap.find loops over a full table (the goroutine spins on)")
	}
}

// 2. A compressed batch whose payload does not decompress (or whose
// records do not match its header) passes Append (ValidateRecords skips
// compressed batches; the broker's keyedRecords lets it through too).
// From then on every Clean of the partition fails at the same batch and
// nothing marks the log uncleanable: Cleanable keeps reporting it dirty,
// cleanRound counts it as work done (backoff 0, 10 ms loop) and, being
// the dirtiest, it takes the only cleaner thread every round. Kafka
// marks such a partition uncleanable and cleans the others.
func TestReviewUndecodableCompressedBatchMarksLogUncleanable(t *testing.T) {
	p := openMem(t, NewMemFS(), compactConfig())
	for i := range 30 {
		mustAppend(t, p, tsBatch([]tsRec{{[]byte("k"), fmt.Appendf(nil, "v%d", i), baseTime}}, -1, 0, 0))
	}
	// gzip "records" that are not a record section: valid CRC, accepted.
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write([]byte("not records at all"))
	require.NoError(t, w.Close())
	b := (&kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(protocol.CompressionGzip),
		FirstTimestamp: baseTime, MaxTimestamp: baseTime, ProducerID: -1, FirstSequence: -1, NumRecords: 1, Records: gz.Bytes()}).AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	protocol.SetBatchCRC(b)
	mustAppend(t, p, b)
	rollPast(t, p, baseTime)

	before := p.Cleanable(testNow)
	require.Greater(t, before.End, before.FirstDirty)
	_, err := p.Clean(CleanOptions{Now: testNow, Map: NewOffsetMap(1<<16, 0.9), Codec: gzipCodec{}})
	require.ErrorIs(t, err, ErrCorruption)
	// A log that cannot be cleaned is not offered to the cleaner again
	// (Kafka: uncleanable partitions), and the next Clean does nothing;
	// the log itself stays readable and writable.
	after := p.Cleanable(testNow)
	require.Error(t, after.Uncleanable)
	require.Equal(t, after.FirstDirty, after.End)
	st, err := p.Clean(CleanOptions{Now: testNow, Map: NewOffsetMap(1<<16, 0.9), Codec: gzipCodec{}})
	require.NoError(t, err)
	require.Zero(t, st.Segments)
	mustAppend(t, p, tsBatch([]tsRec{{[]byte("k"), []byte("after"), baseTime}}, -1, 0, 0))
}

// 3. rebuild keeps the batch's MaxTimestamp (and ns's time index is built
// from it) after dropping the record that carried it; Kafka rebuilds a
// CreateTime batch's max timestamp from the records it keeps. ListOffsets
// by timestamp then answers with an offset whose record is older than
// the requested time, and a timestamp no record has.
func TestReviewListOffsetsByTimeAfterClean(t *testing.T) {
	p := openMem(t, NewMemFS(), compactConfig())
	mustAppend(t, p, tsBatch([]tsRec{{[]byte("a"), []byte("a1"), baseTime + 100}, {[]byte("b"), []byte("b1"), baseTime + 200}}, -1, 0, 0)) // 0, 1
	mustAppend(t, p, tsBatch([]tsRec{{[]byte("b"), []byte("b2"), baseTime + 300}}, -1, 0, 0))                                              // 2
	rollPast(t, p, baseTime+400)
	off, ts, ok := p.OffsetForTimestamp(baseTime + 150)
	require.True(t, ok)
	require.Equal(t, [2]int64{1, baseTime + 200}, [2]int64{off, ts}) // b1

	_, err := p.Clean(CleanOptions{Now: testNow, Map: NewOffsetMap(1<<16, 0.9)})
	require.NoError(t, err)
	// b1 is gone: the first record at or after +150 is b2 (offset 2, +300).
	off, ts, ok = p.OffsetForTimestamp(baseTime + 150)
	require.True(t, ok)
	require.Equal(t, [2]int64{2, baseTime + 300}, [2]int64{off, ts},
		"ListOffsets(+150) after cleaning: offset %d (record a1 at +100), timestamp %d", off, ts-baseTime)
}

// 4. max.compaction.lag.ms only sets CleanableInfo.Due for sealed
// segments: nothing rolls the active segment for it (Kafka's
// LogConfig.maxSegmentMs is min(segment.ms, max.compaction.lag.ms) on a
// compacted topic), so with the default segment.ms (7 days) and
// segment.bytes (1 GiB) a record superseded or deleted stays readable for
// up to a week however small max.compaction.lag.ms is (KIP-354's
// guarantee, used for GDPR-style deletion).
func TestReviewMaxCompactionLagRollsActiveSegment(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Cleanup = CleanupCompact
	cfg.MaxCompactionLagMs = 60_000
	p := openMem(t, NewMemFS(), cfg)
	for i := range 10 {
		mustAppend(t, p, tsBatch([]tsRec{{[]byte("user-1"), fmt.Appendf(nil, "pii-%d", i), baseTime}}, -1, 0, 0))
	}
	mustAppend(t, p, tsBatch([]tsRec{{[]byte("user-1"), nil, baseTime}}, -1, 0, 0)) // delete it
	_, err := p.Sync()
	require.NoError(t, err)
	// An hour on (60 times the lag; the active segment's age counts from
	// its creation, on the wall clock, as with segment.ms).
	later := time.Now().Add(time.Hour)
	_, err = p.EnforceRetention(later)
	require.NoError(t, err)
	_, err = p.Sync()
	require.NoError(t, err)
	info := p.Cleanable(later)
	require.True(t, info.Due || info.End > info.FirstDirty,
		"an hour after the records (max.compaction.lag.ms 1 min) nothing is cleanable: the active segment was never rolled")
}

// 5. Documented difference, with a consequence worth stating: a tombstone
// whose CreateTime is older than delete.retention.ms (a mirrored topic,
// a replayed changelog, a producer with a skewed clock) is removed by the
// first clean after it is written, together with the value it deletes,
// so a consumer that read the value before the clean never sees the
// delete. Kafka keeps every tombstone delete.retention.ms after the pass
// that first saw it (KIP-534).
func TestReviewFreshTombstoneWithOldTimestampKept(t *testing.T) {
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 86_400_000
	p := openMem(t, NewMemFS(), cfg)
	old := baseTime - 2*86_400_000
	mustAppend(t, p, tsBatch([]tsRec{{[]byte("k"), []byte("v"), old}}, -1, 0, 0))
	mustAppend(t, p, tsBatch([]tsRec{{[]byte("k"), nil, old}}, -1, 0, 0))
	rollPast(t, p, baseTime)
	// A consumer read "v" at offset 0 and is now at offset 1.
	st, err := p.Clean(CleanOptions{Now: testNow, Map: NewOffsetMap(1<<16, 0.9)}) // seconds after the write
	require.NoError(t, err)
	require.Zero(t, st.Tombstones, "the tombstone written just now was removed by the first clean")
}

// Soundness probe: Clean in a loop beside Append, Sync, Read,
// EnforceRetention and DeleteRecordsBefore; every read sees a contiguous
// log, and the table survives a reopen.
func TestReviewCleanBesideEverything(t *testing.T) {
	cfg := compactConfig()
	cfg.Cleanup = CleanupCompactDelete
	cfg.RetentionBytes = 64 << 10
	fsys := NewMemFS()
	p := openMem(t, fsys, cfg)
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := f(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	rng := rand.New(rand.NewSource(9))
	var mu sync.Mutex
	n := 0
	run(func() error { // append
		mu.Lock()
		k := rng.Intn(30)
		n++
		i := n
		mu.Unlock()
		_, err := p.Append(tsBatch([]tsRec{{fmt.Appendf(nil, "k%d", k), fmt.Appendf(nil, "v%d", i), baseTime}}, -1, 0, 0), testNow)
		if err == nil {
			p.SetHighWatermark(p.LogEndOffset())
		}
		return err
	})
	run(func() error { _, err := p.Sync(); return err })
	var swapped atomic.Int64
	run(func() error {
		st, err := p.Clean(CleanOptions{Now: testNow, Map: NewOffsetMap(24*64, 0.9)})
		swapped.Add(int64(st.Segments))
		return err
	})
	run(func() error { _, err := p.EnforceRetention(testNow); time.Sleep(time.Millisecond); return err })
	run(func() error {
		time.Sleep(5 * time.Millisecond)
		_, err := p.DeleteRecordsBefore(max(p.LogStartOffset(), p.HighWatermark()-200))
		return err
	})
	run(func() error { // read everything, check contiguity
		off, hw := p.LogStartOffset(), p.HighWatermark()
		for off < hw {
			// The current high watermark, as Fetch uses: a clean may have
			// merged empty batches across an older one since.
			b, err := p.Read(off, p.HighWatermark(), 1<<16, true)
			if err != nil {
				if off < p.LogStartOffset() {
					return nil // retention moved on
				}
				return fmt.Errorf("read %d: %w", off, err)
			}
			if len(b) == 0 {
				return fmt.Errorf("empty read at %d below %d", off, hw)
			}
			first := true
			for len(b) > 0 {
				h, err := protocol.ParseBatchHeader(b)
				if err != nil || !protocol.VerifyBatchCRC(b[:h.Size()]) {
					return fmt.Errorf("bad batch at %d", off)
				}
				if (first && (h.BaseOffset > off || h.LastOffset() < off)) || (!first && h.BaseOffset != off) {
					return fmt.Errorf("gap: want %d, batch %d..%d", off, h.BaseOffset, h.LastOffset())
				}
				first = false
				off = h.LastOffset() + 1
				b = b[h.Size():]
			}
		}
		return nil
	})
	time.Sleep(3 * time.Second)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	leo, start := p.LogEndOffset(), p.LogStartOffset()
	t.Logf("segments swapped %d, log start %d, end %d", swapped.Load(), start, leo)
	require.Greater(t, swapped.Load(), int64(10))
	want := table(readRecords(t, p))
	require.NoError(t, p.Close())
	q := openMem(t, fsys, cfg)
	require.Equal(t, leo, q.LogEndOffset())
	require.Equal(t, start, q.LogStartOffset())
	require.Equal(t, want, table(readRecords(t, q)))
	require.NoError(t, q.Close())
}

// Soundness probe: power loss at every step of a clean of a log that
// was NOT closed (recovery point behind, producer snapshots mid-segment,
// idempotent and transactional producers, an aborted transaction, a
// moved log start): after recovery the log start, end, aborted index,
// open transactions, producers and table are those of before the clean.
func TestReviewCleanCrashAtEveryStepRichState(t *testing.T) {
	cfg := compactConfig()
	cfg.CheckpointIntervalMs = -1
	fsys := NewMemFS()
	p := openMem(t, fsys, cfg)
	txnAttr := int16(protocol.AttrTransactional)
	seq := map[int64]int32{}
	app := func(pid int64, attrs int16, key string, val []byte) {
		mustAppend(t, p, tsBatch([]tsRec{{[]byte(key), val, baseTime}}, pid, seq[pid], attrs))
		if pid >= 0 {
			seq[pid]++
		}
	}
	for i := range 300 {
		key := fmt.Sprintf("k%d", i%17)
		switch i % 7 {
		case 0:
			app(5, 0, key, fmt.Appendf(nil, "p5-%d", i))
		case 3:
			app(6, txnAttr, key, fmt.Appendf(nil, "t6-%d", i))
			if i%2 == 1 {
				_, err := p.WriteMarker(Marker{ProducerID: 6, Commit: i%4 == 1}, testNow)
				require.NoError(t, err)
				p.SetHighWatermark(p.LogEndOffset())
			}
		default:
			var v []byte
			if i%11 != 0 {
				v = fmt.Appendf(nil, "v%d", i)
			}
			app(-1, 0, key, v)
		}
		if i == 120 {
			require.NoError(t, p.Close()) // a snapshot at the log end, mid-segment later
			p = openMem(t, fsys, cfg)
		}
	}
	_, err := p.DeleteRecordsBefore(40)
	require.NoError(t, err)
	rollPast(t, p, baseTime)
	app(6, txnAttr, "open", []byte("o")) // an open transaction in the active segment
	_, err = p.Sync()
	require.NoError(t, err)
	base := fsys.CrashClone()
	ref := openMem(t, base.CrashClone(), cfg)
	wantTable := committedTable(t, ref)
	wantAborted := ref.AbortedTransactions(0, ref.LogEndOffset())
	wantOpen := ref.OpenTransactions()
	wantProducers := ref.Producers()
	wantStart, wantEnd := ref.LogStartOffset(), ref.LogEndOffset()
	require.NoError(t, ref.Close())
	require.NotEmpty(t, wantAborted)
	require.NotEmpty(t, wantOpen)

	for n := 1; ; n++ {
		fs := base.CrashClone()
		q := openMem(t, fs, cfg)
		fs.SetCrashPoint(n, randv2.New(randv2.NewPCG(uint64(n), 7)))
		_, err := q.Clean(CleanOptions{Now: testNow, Map: NewOffsetMap(24*40, 0.9)})
		crashed := fs.Crashed()
		if crashed == nil {
			require.NoError(t, err)
			require.Greater(t, n, 10)
			return
		}
		r := openMem(t, crashed, cfg)
		require.Equal(t, wantStart, r.LogStartOffset(), "step %d", n)
		require.Equal(t, wantEnd, r.LogEndOffset(), "step %d", n)
		require.Equal(t, wantAborted, r.AbortedTransactions(0, r.LogEndOffset()), "step %d", n)
		require.Equal(t, wantOpen, r.OpenTransactions(), "step %d", n)
		require.Equal(t, wantTable, committedTable(t, r), "step %d", n)
		got := r.Producers()
		require.Equal(t, len(wantProducers), len(got), "step %d", n)
		for i := range got {
			require.Equal(t, wantProducers[i].ProducerID, got[i].ProducerID)
			require.Equal(t, wantProducers[i].Epoch, got[i].Epoch)
			require.Equal(t, wantProducers[i].LastSequence, got[i].LastSequence, "step %d", n)
			require.Equal(t, wantProducers[i].CurrentTxnStartOffset, got[i].CurrentTxnStartOffset, "step %d", n)
		}
		require.NoError(t, r.Close())
	}
}

// committedTable is the table a read_committed consumer builds: records
// of aborted transactions (by the aborted index) left out.
func committedTable(t *testing.T, p *Partition) map[string]rec {
	t.Helper()
	aborted := p.AbortedTransactions(0, p.LogEndOffset())
	hs, bs := readAll(t, p, p.LogStartOffset())
	var out []rec
	for i, b := range bs {
		h := hs[i]
		if h.IsControl() {
			continue
		}
		skip := false
		for _, a := range aborted {
			skip = skip || (h.IsTransactional() && a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset)
		}
		if skip {
			continue
		}
		require.NoError(t, protocol.EachRawRecord(b[protocol.BatchHeaderSize:], h.RecordCount, func(r *protocol.RawRecord) error {
			var krec kmsg.Record
			require.NoError(t, krec.ReadFrom(r.Wire))
			out = append(out, rec{off: h.BaseOffset + int64(r.OffsetDelta), key: string(krec.Key), val: string(krec.Value), tombstone: krec.Value == nil})
			return nil
		}))
	}
	return table(out)
}
