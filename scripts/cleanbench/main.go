// Command cleanbench measures the log cleaner (cleanup.policy=compact):
//
//	go run ./scripts/cleanbench [--mb 1024] [--keys 1000000] [--rounds 3]
//	                            [--seconds 20] [--retention-bytes 268435456]
//	                            [--dir DIR]
//
// Part 1, cleaner throughput: a partition log (package log, on this
// machine's disk) filled with --mb MiB of uncompressed batches of 100
// keyed records (100-byte values, keys drawn from --keys), fsynced, then
// cleaned once, unthrottled, with Kafka's default 128 MiB offset map;
// reported as MiB of dirty log cleaned per second (the page cache holds
// the log: what is measured is the cleaner, not a cold disk). A fresh log
// each round; the median of --rounds.
//
// Part 2, produce beside the cleaner: an in-process broker (fsync always)
// and four franz-go producers at full speed for --seconds on a compacted
// topic (16 MiB segments, keys from 10,000, so the cleaner has work all
// along), with log.cleaner.threads 0 (no cleaner) and 1 (the cleaner at
// its default throttle, which is Kafka's: unlimited), alternating,
// --rounds each: records/s and the p99 of produce acknowledgement. The
// topic is compact,delete with retention.bytes --retention-bytes per
// partition, so that without the cleaner the log stays about as small as
// with it and the two runs write to a disk equally full (--retention-bytes
// -1: cleanup.policy=compact alone, where the run without a cleaner
// writes gigabytes more, which on this machine's disk costs more than
// the cleaner does).
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker"
	slog "github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/protocol"
)

func main() {
	mb := flag.Int("mb", 1024, "MiB of log to clean per round")
	keys := flag.Int("keys", 1_000_000, "distinct keys in the cleaned log")
	rounds := flag.Int("rounds", 3, "rounds (medians reported)")
	seconds := flag.Int("seconds", 20, "length of each produce run")
	retention := flag.Int64("retention-bytes", 256<<20, "retention.bytes of the produce topic's partitions (-1: cleanup.policy=compact alone)")
	dir := flag.String("dir", "", "scratch directory (default: a temporary one)")
	flag.Parse()
	if *dir == "" {
		d, err := os.MkdirTemp("", "cleanbench")
		check(err)
		defer os.RemoveAll(d)
		*dir = d
	}

	var rates []float64
	for r := range *rounds {
		mbps, st := cleanRound(filepath.Join(*dir, fmt.Sprintf("clean-%d", r)), *mb, *keys)
		fmt.Printf("clean round %d: %.1f MiB/s of dirty log (read %d MiB, wrote %d MiB, removed %d records, %d segments)\n",
			r+1, mbps, st.BytesRead>>20, st.BytesWritten>>20, st.Removed, st.Segments)
		rates = append(rates, mbps)
	}
	fmt.Printf("cleaner throughput, median of %d: %.1f MiB/s\n\n", *rounds, median(rates))

	res := map[int][]result{}
	for r := range *rounds {
		for _, threads := range []int{0, 1} {
			if r%2 == 1 {
				threads = 1 - threads
			}
			x := produceRound(filepath.Join(*dir, fmt.Sprintf("produce-%d-%d", r, threads)), threads, *retention, time.Duration(*seconds)*time.Second)
			fmt.Printf("produce round %d, log.cleaner.threads=%d: %.0f records/s, ack p99 %.1f ms; %.0f MiB of values produced, %.0f MiB on disk at the end\n",
				r+1, threads, x.rate, x.p99ms, x.producedMiB, x.diskMiB)
			res[threads] = append(res[threads], x)
		}
	}
	for _, threads := range []int{0, 1} {
		var rate, p99 []float64
		for _, x := range res[threads] {
			rate, p99 = append(rate, x.rate), append(p99, x.p99ms)
		}
		fmt.Printf("log.cleaner.threads=%d, medians of %d: %.0f records/s, ack p99 %.1f ms\n", threads, *rounds, median(rate), median(p99))
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "cleanbench:", err)
		os.Exit(1)
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// batch encodes 100 keyed records with keys drawn from keys.
func batch(rng *rand.Rand, keys int) []byte {
	var raw []byte
	val := make([]byte, 100)
	for i := range 100 {
		for j := range val {
			val[j] = byte(rng.Uint32())
		}
		r := kmsg.Record{OffsetDelta: int32(i), Key: fmt.Appendf(nil, "key-%08d", rng.IntN(keys)), Value: val}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		raw = r.AppendTo(raw)
	}
	now := time.Now().UnixMilli()
	b := (&kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: 99, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, FirstSequence: -1, NumRecords: 100, Records: raw}).AppendTo(nil)
	b[8], b[9], b[10], b[11] = byte((len(b)-12)>>24), byte((len(b)-12)>>16), byte((len(b)-12)>>8), byte(len(b)-12)
	protocol.SetBatchCRC(b)
	return b
}

func cleanRound(dir string, mb, keys int) (float64, slog.CleanStats) {
	cfg := slog.DefaultConfig()
	cfg.Cleanup = slog.CleanupCompact
	cfg.SegmentBytes = 64 << 20
	p, err := slog.Open(slog.OSFS(), dir, cfg, zap.NewNop())
	check(err)
	defer os.RemoveAll(dir)
	defer p.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for p.Size() < int64(mb)<<20 {
		res, err := p.Append(batch(rng, keys), time.Now())
		check(err)
		p.SetHighWatermark(res.LastOffset + 1)
	}
	// Roll, so everything written is sealed and cleanable.
	cfg.SegmentMs = 1
	p.SetConfig(cfg)
	time.Sleep(5 * time.Millisecond)
	res, err := p.Append(batch(rng, keys), time.Now())
	check(err)
	p.SetHighWatermark(res.LastOffset + 1)
	_, err = p.Sync()
	check(err)
	info := p.Cleanable(time.Now())
	m := slog.NewOffsetMap(128<<20, 0.9)
	start := time.Now()
	st, err := p.Clean(slog.CleanOptions{Now: time.Now(), Map: m})
	check(err)
	took := time.Since(start)
	if st.End != info.End {
		check(fmt.Errorf("one pass cleaned to %d of %d: the map is too small for --keys", st.End, info.End))
	}
	return float64(info.DirtyBytes) / (1 << 20) / took.Seconds(), st
}

type result struct{ rate, p99ms, diskMiB, producedMiB float64 }

// duSize is the bytes of the files under dir.
func duSize(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func produceRound(dir string, threads int, retention int64, d time.Duration) result {
	cfg := broker.DefaultConfig()
	cfg.ListenAddr, cfg.DataDir, cfg.HTTPAddr = "127.0.0.1:0", dir, ""
	cfg.Logger = zap.NewNop()
	cfg.RetentionCheckInterval = time.Second // retention.bytes applies within a run
	cfg.BrokerConfigs = map[string]string{"log.cleaner.threads": fmt.Sprint(threads), "log.cleaner.backoff.ms": "100"}
	b, err := broker.Start(cfg)
	check(err)
	defer os.RemoveAll(dir)
	defer b.Close()
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(65536),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	check(err)
	defer cl.Close()
	const topic = "cleanbench"
	req := kmsg.NewCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 6, 1
	tc := map[string]string{"cleanup.policy": "compact", "segment.bytes": "16777216"}
	if retention >= 0 {
		tc["cleanup.policy"], tc["retention.bytes"] = "compact,delete", fmt.Sprint(retention)
	}
	for k, v := range tc {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	_, err = req.RequestWith(ctx, cl)
	check(err)

	var acked atomic.Int64
	var mu sync.Mutex
	var lat []float64
	val := make([]byte, 1000)
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for time.Now().Before(deadline) {
				sent := time.Now()
				cl.Produce(ctx, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%05d", rng.IntN(10_000)), Value: val}, func(_ *kgo.Record, err error) {
					check(err)
					acked.Add(1)
					ms := float64(time.Since(sent).Microseconds()) / 1000
					mu.Lock()
					lat = append(lat, ms)
					mu.Unlock()
				})
			}
		}()
	}
	wg.Wait()
	check(cl.Flush(ctx))
	slices.Sort(lat)
	return result{rate: float64(acked.Load()) / d.Seconds(), p99ms: lat[len(lat)*99/100],
		diskMiB: float64(duSize(dir)) / (1 << 20), producedMiB: float64(acked.Load()*int64(len(val))) / (1 << 20)}
}
