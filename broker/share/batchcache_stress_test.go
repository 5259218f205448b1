package share

// Stress tests for the batch cache's reuse of read buffers (e712dae): a
// buffer handed out again while a fetch or a response still reads the
// batch in it would send other records, trimmed under a fresh CRC. Their
// length can be raised with SHOAL_STRESS_SECONDS (seconds per part). They
// come from a review of that change.
//
// TestBatchCacheClientsStress, which reads through franz-go share
// consumers, stays in the root package (share_batchcache_stress_test.go),
// with its own copies of stressValue, stressCheck and stressDuration.

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/broker/topics"
	"github.com/shoal-mq/shoal/protocol"
	"github.com/shoal-mq/shoal/sharegroup"
)

// stressValue is the value of the record produced i-th (at offset i): its
// index and pseudo-random (poorly compressible) padding derived from it.
func stressValue(i int64) []byte {
	rng := rand.New(rand.NewSource(i*7919 + 17))
	n := 100 + rng.Intn(2500)
	v := make([]byte, 0, n+12)
	v = strconv.AppendInt(v, i, 10)
	v = append(v, '|')
	for len(v) < n {
		v = append(v, byte('a'+rng.Intn(26)))
	}
	return v
}

func stressCheck(off int64, v []byte) error {
	if !bytes.Equal(v, stressValue(off)) {
		p := v
		if len(p) > 24 {
			p = p[:24]
		}
		return fmt.Errorf("offset %d: value %q... (len %d) is not its own", off, p, len(v))
	}
	return nil
}

func stressDuration(def time.Duration) time.Duration {
	if s := os.Getenv("SHOAL_STRESS_SECONDS"); s != "" {
		n, _ := strconv.Atoi(s)
		return time.Duration(n) * time.Second
	}
	return def
}

// stressProduce creates topic (one partition, small segments) and produces n
// records in chunks of random size (batches from one record to 1 MiB),
// keys over groups message groups, values stressValue(offset).
//
// The root's version produced each chunk through a franz-go client
// (ProducerBatchMaxBytes 1 MiB, linger 0), whose batching of a chunk
// depends on timing; here a chunk is cut into batches of up to 1 MiB
// (less 1 KiB) of uncompressed records, as ProducerBatchMaxBytes counts
// them, and each is appended with h.appendBatch, compressed with codec by
// records.Compress rather than franz-go's compressors, without a producer
// id. The chunks, keys and values are the same (same seed), so are the
// offsets. The values do not compress (zstd and lz4 output is a little
// larger than the records): franz-go, which keeps a compressed batch only
// when it is smaller, sent these batches uncompressed, so the root's "z"
// and "l" topics held uncompressed batches; here they are compressed, as
// the test means them to be, and the 1 KiB keeps a compressed batch within
// max.message.bytes.
func stressProduce(t *testing.T, h *testShare, topic string, codec protocol.Compression, n, groups int) {
	t.Helper()
	h.createTopic(topic, 1, map[string]string{"segment.bytes": strconv.Itoa(3 << 20)})
	// The harness's log config ignores topic overrides: set segment.bytes
	// on the log itself so the partition rolls its segments as the root's did.
	lp := h.topics.Partition(topic, 0)
	cfg := lp.Log.Config()
	cfg.SegmentBytes = 3 << 20
	lp.Log.SetConfig(cfg)
	const maxBatch = 1<<20 - 1<<10
	rng := rand.New(rand.NewSource(int64(len(topic))))
	for i := 0; i < n; {
		k := 1 + rng.Intn(1200)
		if rng.Intn(3) == 0 {
			k = 1 + rng.Intn(5)
		}
		var recs []testRecord
		size := protocol.BatchHeaderSize
		flush := func() {
			if len(recs) > 0 {
				h.appendBatch(topic, 0, encodeBatch(recs, batchOpts{codec: codec}))
			}
			recs, size = nil, protocol.BatchHeaderSize
		}
		run := rng.Intn(2) == 0 // the chunk's records all of one group: whole batches, sent without a copy
		runKey := rng.Intn(groups)
		for ; k > 0 && i < n; k, i = k-1, i+1 {
			key := i % groups // interleaved: trimmed batches
			if run {
				key = runKey
			}
			r := testRecord{key: []byte("g" + strconv.Itoa(key)), value: stressValue(int64(i))}
			rs := len(records.AppendRecord(nil, &kmsg.Record{OffsetDelta: int32(len(recs)), Key: r.key, Value: r.value}))
			if len(recs) > 0 && size+rs > maxBatch {
				flush()
				rs = len(records.AppendRecord(nil, &kmsg.Record{Key: r.key, Value: r.value}))
			}
			recs, size = append(recs, r), size+rs
		}
		flush()
	}
	require.Equal(t, int64(n), lp.Log.HighWatermark(), "%s: every record produced", topic)
}

// stressVerify checks every record of data against its offset and that every
// acquired offset is in it.
func stressVerify(data []byte, acq []sharegroup.Acquired) error {
	seen := map[int64]bool{}
	raw := data
	for len(raw) > 0 {
		h, err := protocol.ParseBatchHeader(raw)
		if err != nil {
			return fmt.Errorf("header: %w", err)
		}
		size := int(h.Size())
		if size > len(raw) {
			return fmt.Errorf("truncated batch at %d", h.BaseOffset)
		}
		batch := raw[:size]
		if !protocol.VerifyBatchCRC(batch) {
			return fmt.Errorf("batch %d: bad CRC", h.BaseOffset)
		}
		var cerr error
		if err := records.EachRecord(batch, func(off, _ int64, r *kmsg.Record, _ []byte) bool {
			if cerr = stressCheck(off, r.Value); cerr != nil {
				return false
			}
			seen[off] = true
			return true
		}); err != nil {
			return fmt.Errorf("batch %d: %w", h.BaseOffset, err)
		}
		if cerr != nil {
			return fmt.Errorf("batch %d (%d bytes, compression %d): %w", h.BaseOffset, size, h.Compression(), cerr)
		}
		raw = raw[size:]
	}
	for _, a := range acq {
		for o := a.First; o <= a.Last; o++ {
			if !seen[o] {
				return fmt.Errorf("acquired offset %d not in the data", o)
			}
		}
	}
	return nil
}

type stressSent struct {
	data  []byte
	acq   []sharegroup.Acquired
	clone []byte
}

// TestBatchCacheAcquireStress: many members of ordered and fair share
// groups acquire concurrently (straight through sharePart.acquire) from
// uncompressed and compressed topics sharing a batch cache of a few
// batches (or none), releasing a fifth of what they get so it is read
// again; every response is checked at once and again a few fetches later
// (after other fetches recycled buffers), against its own earlier copy.
func TestBatchCacheAcquireStress(t *testing.T) {
	t.Parallel()
	for _, cacheBytes := range []int64{0, 5 << 19} { // none, and a few batches
		t.Run(strconv.FormatInt(cacheBytes, 10), func(t *testing.T) {
			t.Parallel()
			stressAcquire(t, cacheBytes, stressDuration(1500*time.Millisecond))
		})
	}
}

func stressAcquire(t *testing.T, cacheBytes int64, dur time.Duration) {
	// The root's broker ran with fsync=interval (Config.Fsync); the harness
	// fsyncs every append (appendBatch waits for it), which changes only
	// how long producing takes.
	h := newTestShare(t, "", func(o *Options) { o.BatchCacheBytes = cacheBytes })
	h.setBrokerConfig("group.share.min.record.lock.duration.ms", "1000") // as the root's startShareTest
	const n, ngroups = 3000, 41
	topics := map[string]protocol.Compression{
		"u": protocol.CompressionNone, "z": protocol.CompressionZstd, "l": protocol.CompressionLZ4,
	}
	for name, codec := range topics {
		stressProduce(t, h, name, codec, n, ngroups)
	}
	var (
		wg                         sync.WaitGroup
		fetches, records, zeroCopy atomic.Int64
		failed                     atomic.Bool
		gen                        atomic.Int64
		deadline                   = time.Now().Add(dur)
	)
	fail := func(format string, args ...any) {
		if failed.CompareAndSwap(false, true) {
			t.Errorf(format, args...)
		}
	}
	for name := range topics {
		tp := h.tp(name, 0)
		_, lp, _ := h.topics.PartitionByID(tp.topicID, 0)
		for _, mode := range []string{"ordered", "fair"} {
			for g := 0; g < 2; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewSource(gen.Add(1)))
					for !failed.Load() && time.Now().Before(deadline) {
						group := fmt.Sprintf("%s-%s-%d", name, mode, gen.Add(1))
						h.setGroupConfigs(group, "share.auto.offset.reset", "earliest",
							"share.message.group.source", "key", "share.message.group."+mode, "true")
						st := h.c.shareSettings(group)
						sp := h.c.part(shareKey(group, tp))
						var accepted atomic.Int64
						var mwg sync.WaitGroup
						for m := 0; m < 4; m++ {
							mwg.Add(1)
							seed := rng.Int63()
							go func() {
								defer mwg.Done()
								rng := rand.New(rand.NewSource(seed))
								member := "m" + strconv.Itoa(m)
								var ring []stressSent
								idle := 0
								for !failed.Load() && time.Now().Before(deadline) && accepted.Load() < n {
									var arena []byte
									if rng.Intn(2) == 0 {
										arena = make([]byte, 0, 64<<10)
									}
									budget := []int{1, 4 << 10, 256 << 10, 1 << 30}[rng.Intn(4)]
									acq, data, err := sp.acquire(st, member, rng.Intn(2) == 0, lp, []int{1 + rng.Intn(500), 5000}[rng.Intn(2)], sharegroup.BatchOptimized, budget, &arena, nil)
									if err != nil {
										fail("acquire: %v", err)
										return
									}
									fetches.Add(1)
									if len(acq) == 0 {
										idle++
										if idle > 200000 {
											return
										}
										continue
									}
									if err := stressVerify(data, acq); err != nil {
										fail("%s %s member %s: at once: %v", name, mode, member, err)
										return
									}
									if len(arena) < len(data) || &data[0] != &arena[len(arena)-len(data)] {
										zeroCopy.Add(1)
									}
									ring = append(ring, stressSent{data: data, acq: acq, clone: bytes.Clone(data)})
									if len(ring) > 6 {
										old := ring[0]
										ring = ring[1:]
										if !bytes.Equal(old.data, old.clone) {
											fail("%s %s member %s: a response's bytes changed after it was built (acquired %v)", name, mode, member, old.acq)
											return
										}
									}
									var batches []sharegroup.AckBatch
									cnt := int64(0)
									for _, a := range acq {
										typ := sharegroup.AckAccept
										if rng.Intn(5) == 0 {
											typ = sharegroup.AckRelease
										} else {
											cnt += a.Last - a.First + 1
										}
										batches = append(batches, sharegroup.AckBatch{First: a.First, Last: a.Last, Types: []sharegroup.AckType{typ}})
										records.Add(a.Last - a.First + 1)
									}
									acks := []*shareAck{{tp: tp, batches: batches}}
									h.c.acknowledge(time.Now(), group, st, member, acks)
									if acks[0].code != 0 {
										fail("ack: %d %s", acks[0].code, acks[0].msg)
										return
									}
									accepted.Add(cnt)
								}
								for _, s := range ring {
									if !bytes.Equal(s.data, s.clone) {
										fail("%s %s: a response's bytes changed after it was built (acquired %v)", name, mode, s.acq)
									}
								}
							}()
						}
						mwg.Wait()
					}
				}()
			}
		}
	}
	stop := make(chan struct{})
	var samples, nonEmpty, maxFree int
	sampled := make(chan struct{})
	go func() { // how often a read buffer waits for reuse
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
			h.c.trims.mu.Lock()
			f := len(h.c.trims.free)
			h.c.trims.mu.Unlock()
			samples++
			if f > 0 {
				nonEmpty++
			}
			maxFree = max(maxFree, f)
		}
	}()
	wg.Wait()
	close(stop)
	<-sampled
	free := fmt.Sprintf("free list non-empty in %d/%d samples, max %d;", nonEmpty, samples, maxFree)

	t.Logf("cache %d: %d fetches, %d records delivered, %s", cacheBytes, fetches.Load(), records.Load(), free+fmt.Sprintf(" %d sent without a copy", zeroCopy.Load()))
}

// TestTrimCacheConcurrent drives trimCache directly: makers
// adopt batches into buffers from readBuf (scribbling over them first, as
// a read does), put them, get others, copy from or pin them, and release,
// from many goroutines, with budgets that evict constantly. A use of a
// batch whose buffer was handed out again sees the scribble.
func TestTrimCacheConcurrent(t *testing.T) {
	for _, max := range []int64{0, 1 << 20, 3 << 20, 9 << 20} { // entries hold a read buffer each
		t.Run(strconv.FormatInt(max, 10), func(t *testing.T) {
			t.Parallel()
			cache := &trimCache{max: max}
			lps := []*topics.Partition{{}, {}}
			// Batches of 10 records at bases 0, 10, ..., 190 per partition;
			// each is made from a template and copied into a read buffer.
			// The second partition's are lz4-compressed: their records are
			// decompressed into buffers from readBuf too.
			tmpls := []map[int64][]byte{{}, {}}
			for base := int64(0); base < 200; base += 10 {
				raw, _ := numberedBatch(t, base, 10)
				tmpls[0][base] = raw
				craw := encodeCompressedBatch(t, numberedRecords(base, 10), 10, protocol.CompressionLZ4)
				protocol.SetBaseOffset(craw, base)
				tmpls[1][base] = craw
			}
			scribbled := func(buf []byte) []byte {
				buf = buf[:4096]
				for i := range buf {
					buf[i] = 0xee // what a read does to a reused buffer
				}
				return buf
			}
			var wg sync.WaitGroup
			var bad atomic.Int64
			var recycled atomic.Int64
			deadline := time.Now().Add(stressDuration(1500 * time.Millisecond))
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewSource(int64(g)))
					for time.Now().Before(deadline) && bad.Load() == 0 {
						pi := rng.Intn(len(lps))
						lp, tmpl := lps[pi], tmpls[pi]
						base := int64(rng.Intn(20)) * 10
						if pb := cache.get(lp, base+int64(rng.Intn(10)), nil); pb != nil {
							stressUseBatch(t, pb, base, rng, &bad)
							cache.release(pb)
							continue
						}
						buf := cache.readBuf()
						if buf != nil {
							recycled.Add(1)
							buf = scribbled(buf)
						} else {
							buf = make([]byte, 0, shareReadBytes)
						}
						src := tmpl[base]
						extra := rng.Intn(3) // sometimes a second (cloned) batch follows
						raw := append(buf[:0], src...)
						if extra > 0 {
							raw = append(raw, tmpl[(base+10)%200]...)
						}
						h, err := protocol.ParseBatchHeader(raw)
						require.NoError(t, err)
						var made []*parsedBatch
						var body []byte // a compressed batch's records
						if pi == 1 {
							if body = cache.readBuf(); body != nil {
								recycled.Add(1)
								body = scribbled(body)
							}
						}
						pb := adoptBatch(&h, raw[:len(src)], cap(raw), body)
						pb.buf = raw[:0]
						if rng.Intn(4) == 0 { // someone else cached it meanwhile
							if other := cache.get(lp, base, nil); other != nil {
								cache.release(other)
							}
						}
						cache.put(lp, pb, nil)
						made = append(made, pb)
						stressUseBatch(t, pb, base, rng, &bad)
						if extra > 0 {
							nb := (base + 10) % 200
							h2, err := protocol.ParseBatchHeader(raw[len(src):])
							require.NoError(t, err)
							var body []byte
							if pi == 1 {
								if body = cache.readBuf(); body != nil {
									body = scribbled(body)
								}
							}
							pb2 := parseBatch(&h2, raw[len(src):], body)
							cache.put(lp, pb2, nil)
							made = append(made, pb2)
							stressUseBatch(t, pb2, nb, rng, &bad)
						}
						for _, pb := range made {
							cache.release(pb)
						}
					}
				}()
			}
			wg.Wait()
			require.Zero(t, bad.Load())
			// Drain: every cached batch still intact, and refs back to 1 (the cache's).
			cache.mu.Lock()
			for lp, es := range cache.parts {
				tmpl := tmpls[slices.Index(lps, lp)]
				for _, e := range es {
					require.Equal(t, int32(1), e.pb.refs.Load(), "refs of a cached batch with no users")
					require.True(t, bytes.Equal(e.pb.batch, tmpl[e.pb.h.BaseOffset]))
				}
			}
			cache.mu.Unlock()
			t.Logf("max %d: %d reused buffers", max, recycled.Load())
		})
	}
}

// stressUseBatch copies (trimmed or whole) from pb, or pins it, checking
// the bytes; it yields in between to widen windows.
func stressUseBatch(t *testing.T, pb *parsedBatch, base int64, rng *rand.Rand, bad *atomic.Int64) {
	first := base + int64(rng.Intn(10))
	last := min(first+int64(rng.Intn(4)), base+9)
	acq := []sharegroup.Acquired{{First: first, Last: last}}
	if rng.Intn(5) == 0 {
		acq = []sharegroup.Acquired{{First: base, Last: base + 9}}
	}
	var arena []byte
	d := shareData{arena: &arena}
	d.add(pb, acq)
	runtimeYield(rng)
	stressCheckNumbered(t, d.data, base, bad)
	if len(d.data) > 0 && len(pb.batch) > 0 && &d.data[0] == &pb.batch[0] { // sent without a copy
		pinnedMu.Lock()
		pinnedKept = append(pinnedKept, pinnedData{d.data, base})
		if len(pinnedKept) > 64 {
			old := pinnedKept[0]
			pinnedKept = pinnedKept[1:]
			pinnedMu.Unlock()
			stressCheckNumbered(t, old.data, old.base, bad) // still intact long after
			return
		}
		pinnedMu.Unlock()
	}
}

type pinnedData struct {
	data []byte
	base int64
}

var (
	pinnedMu   sync.Mutex
	pinnedKept []pinnedData
)

func stressCheckNumbered(t *testing.T, data []byte, base int64, bad *atomic.Int64) {
	_, _, offs, vals := batchOffsets(t, data)
	for i, o := range offs {
		if vals[i] != strconv.FormatInt(o, 10) {
			bad.Add(1)
			t.Errorf("batch %d: offset %d holds %q", base, o, vals[i])
			return
		}
	}
	if len(offs) == 0 {
		bad.Add(1)
		t.Errorf("batch %d: nothing delivered", base)
	}
}

func runtimeYield(rng *rand.Rand) {
	if rng.Intn(4) == 0 {
		time.Sleep(time.Duration(rng.Intn(50)) * time.Microsecond)
	}
}

// TestTrimCacheKeepsOnlyUsualBuffers: a batch too big for the cache
// (over trimCacheMaxBatch, read whole) is adopted with its read buffer
// and rejected by put; on release that buffer is not kept for reuse: the
// next ordinary read into it would find its 1 MiB batch under half of it
// and copy it instead of keeping it in place. Nor is a small one (a read
// cut short at a segment's end).
func TestTrimCacheKeepsOnlyUsualBuffers(t *testing.T) {
	t.Parallel()
	b, h := numberedBatch(t, 0, 10)
	cache := &trimCache{max: DefaultBatchCacheBytes}
	for _, size := range []int{8 << 20, 4096} {
		buf := append(make([]byte, 0, size), b...)
		pb := adoptBatch(&h, buf, cap(buf), nil)
		pb.buf = buf[:0]
		cache.put(&topics.Partition{}, pb, nil) // rejected: held > trimCacheMaxBatch, or cached already
		cache.release(pb)
		require.Nil(t, cache.readBuf(), "a buffer of %d bytes is not kept", size)
	}
	buf := append(make([]byte, 0, shareReadBytes), b...)
	cache.giveBack(buf)
	require.Equal(t, shareReadBytes, cap(cache.readBuf()), "one of the usual size is")
}
