package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	compactCrashPartitions = 2
	compactCrashKeys       = 3000 // per partition; more than one pass of the test's offset map holds
)

func compactCrashCycles(t *testing.T) int {
	if s := os.Getenv("SHOAL_COMPACT_CRASH_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "SHOAL_COMPACT_CRASH_CYCLES")
		return n
	}
	if _, ci := os.LookupEnv("CI"); ci {
		return 10
	}
	return 4
}

// compactUpdate is one produced record of the test: its key, and its
// value (nil: a tombstone).
type compactUpdate struct {
	key string
	val []byte
}

// compactHistory is what the producers sent and what was acknowledged,
// per partition.
type compactHistory struct {
	mu    sync.Mutex
	sent  [compactCrashPartitions]map[string]compactUpdate // by value, for values that are not nil
	acked [compactCrashPartitions]map[int64]compactUpdate  // by offset
	last  [compactCrashPartitions]map[string]int64         // key -> offset of its last acknowledged update
}

// compactRead is a partition as a consumer reading from the start sees
// it: the last record of each key (offset and value, nil for a
// tombstone) and how many records it read.
type compactRead struct {
	table map[string]int64
	vals  map[int64][]byte
	n     int
}

// TestCompactionCrash SIGKILLs a child broker (fsync=always) while its
// cleaner compacts two partitions that idempotent acks=all producers keep
// updating (3,000 keys each, 1 update in 20 a tombstone; a small offset
// map, so cleaning takes several passes, and a throttle, so the cleaner
// is busy most of the time and most kills land inside a clean). After
// every restart a consumer reads each partition from the start and the
// test checks: offsets increase; every record is one that was sent, with
// its key, and an acknowledged one is at its acknowledged offset with its
// value; for every key, what the reader ends with is its last
// acknowledged update (at that offset, or gone if that was a tombstone)
// or an update sent after it, never an older one (no lost update, no
// deleted key resurrected). At least one kill must leave a half-written
// cleaned segment behind (the kill landed mid-clean), the cleaner must
// have cleaned, and the final log must be compacted.
func TestCompactionCrash(t *testing.T) {
	if len(externalSeeds()) > 0 {
		t.Skipf("runs its own shoal binary; %s is set", seedsEnv)
	}
	if testing.Short() {
		t.Skip("-short")
	}
	cycles := compactCrashCycles(t)
	seed := crashSeed(t)
	t.Logf("compaction crash test: %d kills, SHOAL_CRASH_SEED=%d", cycles, seed)
	rng := rand.New(rand.NewPCG(seed, 0xc1ea))

	child := newCrashChild(t, seed)
	props := filepath.Join(t.TempDir(), "shoal.properties")
	require.NoError(t, os.WriteFile(props, []byte(strings.Join([]string{
		"log.cleaner.backoff.ms=20",
		"log.cleaner.dedupe.buffer.size=65536",        // about 2,400 keys a pass
		"log.cleaner.io.max.bytes.per.second=6000000", // busy most of the time
	}, "\n")+"\n"), 0o644))
	child.args = []string{"--config", props}
	child.start()
	child.waitReady()

	topic := "compact-crash-" + strconv.FormatUint(seed%1e9, 10)
	adm := kadm.NewClient(newCrashClient(t, child.addr))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	resp, err := adm.CreateTopic(ctx, compactCrashPartitions, 1, map[string]*string{
		"cleanup.policy": strp("compact"), "segment.bytes": strp("1048576"),
		"min.cleanable.dirty.ratio": strp("0.01"), "delete.retention.ms": strp("500"),
	}, topic)
	cancel()
	adm.Close()
	require.NoError(t, err)
	require.NoError(t, resp.Err, resp.ErrMessage)

	h := &compactHistory{}
	for p := range compactCrashPartitions {
		h.sent[p], h.acked[p], h.last[p] = map[string]compactUpdate{}, map[int64]compactUpdate{}, map[string]int64{}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var clients []*kgo.Client
	for p := range compactCrashPartitions {
		codec := kgo.NoCompression() // partition 0 uncompressed, partition 1 snappy (recompressed by the cleaner)
		if p == 1 {
			codec = kgo.SnappyCompression()
		}
		cl := newCrashClient(t, child.addr,
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(codec),
			kgo.ProducerLinger(0))
		clients = append(clients, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.produce(cl, topic, p, seed, stop)
		}()
	}

	tmpLeft := 0
	for cycle := 1; cycle <= cycles; cycle++ {
		alive := 300*time.Millisecond + time.Duration(rng.IntN(1500))*time.Millisecond
		time.Sleep(alive)
		child.kill()
		left := cleanTmpFiles(t, child.dataDir)
		if left > 0 {
			tmpLeft++
		}
		child.start()
		took := child.waitReady()
		for p := range compactCrashPartitions {
			rd := h.verify(t, child.addr, topic, p)
			t.Logf("cycle %2d: alive %4dms, %d half-cleaned files left, ready after %4dms; partition %d: read %6d records, %4d keys",
				cycle, alive.Milliseconds(), left, took.Milliseconds(), p, rd.n, len(rd.table))
		}
	}

	close(stop)
	wg.Wait()
	for _, cl := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := cl.Flush(ctx); err != nil {
			t.Logf("flush: %v", err)
		}
		cancel()
		cl.Close()
	}
	// Let the cleaner catch up (the throttle is lifted: the last dynamic
	// value wins over the properties file), then a graceful restart and
	// the final check: the log is compacted.
	adm = kadm.NewClient(newCrashClient(t, child.addr))
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	_, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.cleaner.io.max.bytes.per.second", Value: strp("1e12")}})
	cancel()
	adm.Close()
	require.NoError(t, err)
	var final [compactCrashPartitions]compactRead
	require.Eventually(t, func() bool {
		for p := range compactCrashPartitions {
			final[p] = h.verify(t, child.addr, topic, p)
			// Compacted: every key once in the cleaned segments, and at
			// most once more in the active segment (1 MiB: under 8,000
			// records) with the older copy of its key in a cleaned one.
			if final[p].n > compactCrashKeys+2*8000 {
				return false
			}
		}
		return true
	}, 60*time.Second, 500*time.Millisecond, "the log was not compacted after the producers stopped")
	child.terminate()
	child.start()
	child.waitReady()
	for p := range compactCrashPartitions {
		rd := h.verify(t, child.addr, topic, p)
		h.mu.Lock()
		acked := len(h.acked[p])
		h.mu.Unlock()
		t.Logf("final: partition %d: %d updates acknowledged, %d records left for %d keys", p, acked, rd.n, len(rd.table))
		require.Greater(t, acked, 5000, "too little was produced to test anything")
	}
	shoalLog := readFileString(t, child.logPath)
	cleaned := strings.Count(shoalLog, "cleaned log")
	t.Logf("%d of %d kills left half-cleaned files (%d restarts completed a merge); the cleaner logged %d cleans",
		tmpLeft, cycles, strings.Count(shoalLog, "completed an interrupted merge"), cleaned)
	require.Positive(t, cleaned, "the cleaner never cleaned")
	if cycles >= 5 {
		require.Positive(t, tmpLeft, "no kill landed during a clean")
	}
	child.terminate()
}

// produce sends updates to partition p in batches of 100 until stop,
// each value unique; it records what it sent and, once acknowledged, at
// which offset.
func (h *compactHistory) produce(cl *kgo.Client, topic string, p int, seed uint64, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, uint64(p)))
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	for seq := 0; ; {
		select {
		case <-stop:
			return
		default:
		}
		rs := make([]*kgo.Record, 100)
		h.mu.Lock()
		for i := range rs {
			u := compactUpdate{key: fmt.Sprintf("k%05d", rng.IntN(compactCrashKeys))}
			if rng.IntN(20) != 0 {
				u.val = fmt.Appendf(nil, "p%d-%08d ", p, seq)
				for range 160 { // hardly compressible: 1 MiB segments roll every few thousand records
					u.val = append(u.val, letters[rng.IntN(len(letters))])
				}
				h.sent[p][string(u.val)] = u
			}
			seq++
			rs[i] = &kgo.Record{Topic: topic, Partition: int32(p), Key: []byte(u.key), Value: u.val}
		}
		h.mu.Unlock()
		res := cl.ProduceSync(context.Background(), rs...)
		h.mu.Lock()
		for _, r := range res {
			if r.Err != nil {
				continue
			}
			u := compactUpdate{key: string(r.Record.Key), val: r.Record.Value}
			h.acked[p][r.Record.Offset] = u
			if last, ok := h.last[p][u.key]; !ok || r.Record.Offset > last {
				h.last[p][u.key] = r.Record.Offset
			}
		}
		h.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
}

// verify reads partition p from the start up to its high watermark and
// checks it against what was acknowledged before the read began.
func (h *compactHistory) verify(t *testing.T, addr, topic string, p int) compactRead {
	t.Helper()
	h.mu.Lock()
	last := make(map[string]int64, len(h.last[p]))
	for k, o := range h.last[p] {
		last[k] = o
	}
	h.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := newCrashClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {int32(p): kgo.NewOffset().AtStart()}}), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var hw int64
	require.Eventually(t, func() bool {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false
		}
		o, ok := ends.Lookup(topic, int32(p))
		hw = o.Offset
		return ok && o.Err == nil
	}, 30*time.Second, 100*time.Millisecond, "ListOffsets after restart")

	rd := compactRead{table: map[string]int64{}, vals: map[int64][]byte{}}
	prev := int64(-1)
	for prev+1 < hw {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "reading partition %d: at %d of %d", p, prev+1, hw)
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			require.Greater(t, r.Offset, prev, "partition %d: offsets out of order", p)
			prev = r.Offset
			rd.n++
			key := string(r.Key)
			h.mu.Lock()
			a, isAcked := h.acked[p][r.Offset]
			s, isSent := h.sent[p][string(r.Value)]
			h.mu.Unlock()
			if isAcked {
				require.Equal(t, a.key, key, "partition %d offset %d: another key than acknowledged", p, r.Offset)
				require.Equal(t, a.val, r.Value, "partition %d offset %d: another value than acknowledged", p, r.Offset)
			}
			if r.Value != nil {
				require.True(t, isSent, "partition %d offset %d: a value never sent: %.40q", p, r.Offset, r.Value)
				require.Equal(t, s.key, key, "partition %d offset %d: value under another key", p, r.Offset)
			}
			rd.table[key] = r.Offset
			rd.vals[r.Offset] = r.Value
		})
	}
	for key, l := range last {
		got, ok := rd.table[key]
		h.mu.Lock()
		tomb := h.acked[p][l].val == nil
		h.mu.Unlock()
		switch {
		case ok && got > l: // a later update (sent, maybe not yet acknowledged) won
		case ok && got == l: // checked above: the acknowledged value
		case !ok && tomb: // deleted, and its tombstone removed
		case !ok:
			t.Fatalf("partition %d: key %s lost: its last acknowledged update at offset %d is gone", p, key, l)
		default:
			t.Fatalf("partition %d: key %s reads as of offset %d, older than its acknowledged update at %d (tombstone: %v)", p, key, got, l, tomb)
		}
	}
	for key := range rd.table {
		if _, ok := last[key]; !ok && rd.vals[rd.table[key]] == nil {
			delete(rd.table, key) // an unacknowledged tombstone
		}
	}
	for key, off := range rd.table {
		if rd.vals[off] == nil {
			delete(rd.table, key)
		}
	}
	return rd
}

// cleanTmpFiles counts the cleaner's half-written files (a segment or
// index being rewritten, merged segments not yet swapped in) under dir.
func cleanTmpFiles(t *testing.T, dir string) int {
	n := 0
	_ = filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err == nil && (strings.HasSuffix(path, ".clean.tmp") || strings.HasSuffix(path, ".log.swap")) {
			n++
		}
		return nil
	})
	return n
}

func readFileString(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
