// Command sharebench measures share-group delivery with message groups
// (issue 5): plain share groups against the fair and ordered modes, on the
// same topic, in one run.
//
// It starts Shoal in this process (fsync before every ack, as the main
// bench does), produces --records records of --value-size bytes to one
// topic of --partitions partitions, keyed by message group (--groups
// groups, round-robin), then for each round drains the whole topic once
// per mode (uncompressed unless --compression says otherwise), each time
// with a fresh share group of --consumers franz-go share consumers
// accepting every record. Two rates per drain (drainRates): steady, the
// rate between the deliveries of 10% and 90% of the records (what the
// consumers sustain; ordered mode cannot deliver without acknowledgements,
// plain mode's acknowledgements trail its deliveries by one fetch per
// consumer), and whole, from the first delivery until every record was
// accepted and every consumer's FlushAcks returned, which ends with a
// fixed tail of 0.5-1 s in every mode. Beside the rates, the process's
// CPU time per record over the whole drain (broker and clients: both run
// here), the steadier figure when comparing two builds on this noisy
// machine; the CPU cores the process used between those 10% and 90%
// deliveries (near 2 on this 2-core machine: CPU-bound; lower: bound by
// the cycle's latency); and the records per ShareFetch (the broker's
// request count, from its /metrics). The order of the modes rotates per
// round so each is measured early and late; the medians of --rounds rounds
// are printed as a markdown table with the ratios to plain. With
// --process each consumer sleeps that long per record it polled before
// accepting them, a handler bound by I/O. Every drain also prints, on
// stderr, how many records each consumer accepted.
//
//	go run ./scripts/sharebench --records 300000 --rounds 3
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker"
	"github.com/shoal-mq/shoal/integration/workload"
)

type options struct {
	records    int
	valueSize  int
	partitions int
	groups     int
	consumers  int
	maxRecords int
	rounds     int
	modes      string
	compress   string
	cpuprofile string
	process    time.Duration
}

var modes = []string{"plain", "fair", "ordered"}

func main() {
	var o options
	flag.IntVar(&o.records, "records", 300_000, "records to produce")
	flag.IntVar(&o.valueSize, "value-size", 1024, "value bytes per record")
	flag.IntVar(&o.partitions, "partitions", 6, "topic partitions")
	flag.IntVar(&o.groups, "groups", 1000, "message groups (record keys)")
	flag.IntVar(&o.consumers, "consumers", 8, "share consumers per mode")
	flag.IntVar(&o.maxRecords, "share-max-records", 500, "kgo.ShareMaxRecords")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds (medians are reported)")
	flag.StringVar(&o.modes, "modes", strings.Join(modes, ","), "modes to run: plain, fair, ordered")
	flag.StringVar(&o.compress, "compression", "none", "producer compression: none, gzip, snappy, lz4, zstd (group modes decompress each batch once to read keys)")
	flag.DurationVar(&o.process, "process", 0, "simulated handling time per record: each consumer sleeps this long per record it polled before accepting them (an I/O-bound handler); 0 = none")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run (broker and clients) here")
	flag.Parse()
	modes = strings.Split(o.modes, ",")
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "sharebench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "sharebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := broker.DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.Logger = zap.NewNop()
	cfg.HTTPAddr = "127.0.0.1:0" // /metrics: ShareFetch requests per drain
	b, err := broker.Start(cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	seeds := []string{b.Addr()}
	ctx := context.Background()

	codec := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}[o.compress]
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000),
		kgo.ProducerBatchCompression(codec))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic = "sharebench"
	if _, err := adm.CreateTopic(ctx, int32(o.partitions), 1, nil, topic); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "producing %d records of %d bytes in %d groups to %d partitions\n", o.records, o.valueSize, o.groups, o.partitions)
	value := make([]byte, o.valueSize)
	var wg sync.WaitGroup
	var perr atomic.Value
	for i := range o.records {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte("group-" + strconv.Itoa(i%o.groups)), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				perr.Store(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err, _ := perr.Load().(error); err != nil {
		return fmt.Errorf("produce: %w", err)
	}

	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	steady, whole, cpu := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	cores, perFetch := map[string][]float64{}, map[string][]float64{}
	for round := range o.rounds {
		for k := range modes {
			mode := modes[(k+round)%len(modes)]
			group := fmt.Sprintf("sharebench-%s-%d", mode, round)
			cpu0 := processCPU()
			f0, err := shareFetches(b.HTTPAddr())
			if err != nil {
				return err
			}
			r, err := drain(ctx, o, seeds, cl, topic, group, mode)
			if err != nil {
				return fmt.Errorf("round %d %s: %w", round+1, mode, err)
			}
			perRecord := float64((processCPU() - cpu0).Microseconds()) / float64(o.records)
			f1, err := shareFetches(b.HTTPAddr())
			if err != nil {
				return err
			}
			rpf := float64(o.records) / max(f1-f0, 1)
			fmt.Fprintf(os.Stderr, "round %d %-8s steady %10.0f records/s, whole drain %10.0f records/s, CPU %.2f µs/record, steady %.2f cores, %.0f records/ShareFetch\n",
				round+1, mode, r.steady, r.whole, perRecord, r.cores, rpf)
			steady[mode] = append(steady[mode], r.steady)
			whole[mode] = append(whole[mode], r.whole)
			cpu[mode] = append(cpu[mode], perRecord)
			cores[mode] = append(cores[mode], r.cores)
			perFetch[mode] = append(perFetch[mode], rpf)
		}
	}
	handling := ""
	if o.process > 0 {
		handling = fmt.Sprintf(", handling %v per record", o.process)
	}
	fmt.Printf("| mode (%d consumers, %d groups, %d × %d B, %d partitions, compression %s%s), medians of %d | steady records/s (10%%→90%%) | vs plain | whole drain records/s | vs plain | process CPU µs/record | steady CPU cores | records per ShareFetch |\n|---|--:|--:|--:|--:|--:|--:|--:|\n",
		o.consumers, o.groups, o.records, o.valueSize, o.partitions, o.compress, handling, o.rounds)
	ratio := func(v, plain float64) string {
		if plain <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f×", v/plain)
	}
	ps, pw := median(steady["plain"]), median(whole["plain"])
	for _, m := range modes {
		s, w := median(steady[m]), median(whole[m])
		fmt.Printf("| %s | %.0f | %s | %.0f | %s | %.2f | %.2f | %.0f |\n", m, s, ratio(s, ps), w, ratio(w, pw), median(cpu[m]), median(cores[m]), median(perFetch[m]))
	}
	return nil
}

// processCPU is the CPU time this process (broker and clients) has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// drainRates are one drain's two rates. steady is the rate between the
// deliveries of 10% and 90% of the records: what the consumers sustain,
// without the start (joining, the first fetches) and the end. whole runs
// from the first delivery until every record was accepted and every
// consumer's FlushAcks returned; its end includes a fixed tail of about
// 0.5-1 s in every mode: the last acknowledgements ride on the
// consumers' next ShareFetch, which long-polls an empty queue for
// franz-go's max wait before they can be sent (Kafka behaves the same),
// so it understates every mode and flatters the slower ones' ratios.
// cores is the CPU the process used over the steady window, in cores.
type drainRates struct{ steady, whole, cores float64 }

// drain consumes the whole topic with a fresh share group in mode and
// returns its rates (drainRates).
func drain(ctx context.Context, o options, seeds []string, admin *kgo.Client, topic, group, mode string) (drainRates, error) {
	kv := []string{"share.auto.offset.reset", "earliest"}
	if mode != "plain" {
		kv = append(kv, "share.message.group.source", "key", "share.message.group."+mode, "true")
	}
	if err := workload.SetGroupConfigs(ctx, admin, group, kv...); err != nil {
		return drainRates{}, err
	}
	var (
		seen     = make([][]bool, o.partitions)
		mu       sync.Mutex
		left     = o.records
		first    time.Time
		t10, t90 time.Time     // when 10% and 90% of the records were delivered
		c10, c90 time.Duration // processCPU then
		ackErr   atomic.Value
		done     = make(chan struct{})
		doneOnce sync.Once
	)
	for p := range seen {
		seen[p] = make([]bool, o.records) // generous: offsets per partition < records
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var clients []*kgo.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range o.consumers {
		c, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
			kgo.ShareMaxRecords(int32(o.maxRecords)), kgo.FetchMaxBytes(64<<20),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				for _, r := range rs {
					if r.Err != nil {
						ackErr.Store(r.Err)
					}
				}
			}))
		if err != nil {
			return drainRates{}, err
		}
		clients = append(clients, c)
	}
	var wg sync.WaitGroup
	perConsumer := make([]int, len(clients))
	for ci, c := range clients {
		wg.Go(func() {
			for pctx.Err() == nil {
				fs := c.PollRecords(pctx, -1)
				if o.process > 0 && fs.NumRecords() > 0 {
					select {
					case <-time.After(time.Duration(fs.NumRecords()) * o.process):
					case <-pctx.Done():
					}
				}
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					r.Ack(kgo.AckAccept)
					if first.IsZero() {
						first = time.Now()
					}
					if !seen[r.Partition][r.Offset] {
						seen[r.Partition][r.Offset] = true
						perConsumer[ci]++
						left--
						switch o.records - left {
						case o.records / 10:
							t10, c10 = time.Now(), processCPU()
						case o.records * 9 / 10:
							t90, c90 = time.Now(), processCPU()
						}
					}
				})
				finished := left == 0
				mu.Unlock()
				if finished {
					doneOnce.Do(func() { close(done) })
				}
			}
		})
	}
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		stop()
		wg.Wait()
		return drainRates{}, fmt.Errorf("timed out with %d records left", left)
	}
	stop()
	wg.Wait()
	for _, c := range clients {
		if err := c.FlushAcks(ctx); err != nil {
			return drainRates{}, fmt.Errorf("flush acks: %w", err)
		}
	}
	elapsed := time.Since(first)
	fmt.Fprintf(os.Stderr, "%s: records accepted per consumer %v\n", mode, perConsumer)
	if err, _ := ackErr.Load().(error); err != nil {
		return drainRates{}, fmt.Errorf("ack: %w", err)
	}
	r := drainRates{whole: float64(o.records) / elapsed.Seconds()}
	if d := t90.Sub(t10); d > 0 {
		r.steady = float64(o.records*9/10-o.records/10) / d.Seconds()
		r.cores = float64(c90-c10) / float64(d)
	}
	return r, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	return s[len(s)/2]
}

// shareFetches is the number of ShareFetch requests the broker at addr
// has served, from its /metrics.
func shareFetches(addr string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var n float64
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, `shoal_request_duration_seconds_count{api="ShareFetch"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics: %q: %w", line, err)
		}
		n += v
	}
	return n, nil
}
