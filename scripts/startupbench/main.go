// Command startupbench measures how long a Shoal broker takes to start on a
// large data directory, after a clean shutdown and after a SIGKILL (issue #2,
// Storage: "startup of a 10 GiB data dir takes seconds, not minutes").
//
//	go run ./scripts/startupbench [--gib 10] [--dir DIR] [--keep] [--reuse]
//
// It fills a data directory through the real broker (broker.Start in this
// process, franz-go producers at full speed, acks=all), then runs every
// measurement in a fresh child process (this binary re-executed with a
// subcommand), dropping the page cache first for the cold rows. The
// subcommands (gen, start, crashprep) are internal; run without one.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/shoal-mq/shoal/broker"
)

const topicName = "startupbench"

type options struct {
	dir          string
	gib          float64
	keep         bool
	reuse        bool
	partitions   int
	segmentBytes int64
	valueSize    int
	producers    int
	crashSeconds time.Duration
	profileDir   string
	out          string
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "start":
			exit(childStart(os.Args[2:]))
		case "crashprep":
			exit(childCrashPrep(os.Args[2:]))
		}
	}
	var o options
	flag.StringVar(&o.dir, "dir", "", "data directory (default: a new temporary directory under /tmp)")
	flag.Float64Var(&o.gib, "gib", 10, "GiB of log segment data to generate")
	flag.BoolVar(&o.keep, "keep", false, "keep the data directory at the end")
	flag.BoolVar(&o.reuse, "reuse", false, "measure an existing --dir filled by an earlier --keep run instead of generating")
	flag.IntVar(&o.partitions, "partitions", 6, "partitions of the generated topic")
	flag.Int64Var(&o.segmentBytes, "segment-bytes", 256<<20, "segment.bytes of the generated topic")
	flag.IntVar(&o.valueSize, "value-size", 1024, "record value size in bytes")
	flag.IntVar(&o.producers, "producers", 4, "producer goroutines (sharing one kgo client)")
	flag.DurationVar(&o.crashSeconds, "crash-produce", 2*time.Second, "how long to produce before the SIGKILL in the crash rows")
	flag.StringVar(&o.profileDir, "profile-dir", "", "write a CPU profile of each measured broker.Start to this directory")
	flag.StringVar(&o.out, "out", "", "also write the markdown table to this file")
	flag.Parse()
	exit(run(&o))
}

func exit(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "startupbench:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ---------------------------------------------------------------- parent

type row struct {
	name      string
	cold      bool
	dropped   bool
	res       startResult
	ackedKill int64 // records acknowledged before the SIGKILL (crash rows)
}

func run(o *options) error {
	if o.dir == "" {
		if o.reuse {
			return errors.New("--reuse needs --dir")
		}
		d, err := os.MkdirTemp("/tmp", "shoal-startupbench-")
		if err != nil {
			return err
		}
		o.dir = d
	}
	if !o.keep {
		defer func() {
			fmt.Println("removing", o.dir)
			os.RemoveAll(o.dir)
		}()
	}
	target := int64(o.gib * (1 << 30))
	if !o.reuse {
		if free, ok := freeBytes(filepath.Dir(filepath.Clean(o.dir))); ok {
			if free < target+target/10+(1<<30) {
				return fmt.Errorf("only %.1f GiB free under %s, need about %.1f", gib(free), o.dir, gib(target+target/10+(1<<30)))
			}
		}
		if err := generate(o, target); err != nil {
			return err
		}
	}
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return err
		}
	}

	var rows []row
	measure := func(name string, cold bool, acked int64) error {
		r := row{name: name, cold: cold, ackedKill: acked}
		if cold {
			r.dropped = dropCaches()
		}
		res, err := runStartChild(o, strings.ReplaceAll(name, " ", "-"))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		r.res = res
		rows = append(rows, r)
		fmt.Printf("%-22s start %8s  RSS %6.1f MiB  segments %d  records %d  warnings %d\n",
			name, res.Start.Round(time.Millisecond), mib(res.RSS), res.Segments, res.EndOffsets, len(res.Warnings))
		return nil
	}
	// The data directory was closed cleanly by the generator.
	if err := measure("clean, cold cache", true, 0); err != nil {
		return err
	}
	if err := measure("clean, warm cache", false, 0); err != nil {
		return err
	}
	for _, cold := range []bool{true, false} {
		acked, err := crashPrep(o)
		if err != nil {
			return err
		}
		name := "crash, warm cache"
		if cold {
			name = "crash, cold cache"
		}
		if err := measure(name, cold, acked); err != nil {
			return err
		}
	}
	table := renderTable(o, rows)
	fmt.Println()
	fmt.Print(table)
	if o.out != "" {
		return os.WriteFile(o.out, []byte(table), 0o644)
	}
	return nil
}

// dropCaches writes back dirty pages and drops the page cache, dentries and
// inodes. It reports whether the kernel accepted it (needs root).
func dropCaches() bool {
	syncDisks()
	err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0)
	if err != nil {
		fmt.Println("drop_caches failed (cache stays warm):", err)
		return false
	}
	return true
}

func childCmd(o *options, sub string, args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe, append([]string{sub, "--dir", o.dir}, args...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

func runStartChild(o *options, tag string) (startResult, error) {
	var args []string
	if o.profileDir != "" {
		args = append(args, "--cpuprofile", filepath.Join(o.profileDir, tag+".pprof"))
	}
	cmd := childCmd(o, "start", args...)
	outp, err := cmd.Output()
	if err != nil {
		return startResult{}, fmt.Errorf("start child: %w\n%s", err, outp)
	}
	var res startResult
	for _, line := range strings.Split(string(outp), "\n") {
		if s, ok := strings.CutPrefix(line, "RESULT "); ok {
			return res, json.Unmarshal([]byte(s), &res)
		}
	}
	return res, fmt.Errorf("start child printed no result:\n%s", outp)
}

// crashPrep starts a child broker that produces at full speed, SIGKILLs it
// after o.crashSeconds of production and returns how many records it had
// seen acknowledged (a lower bound: the child reports every 100 ms).
func crashPrep(o *options) (int64, error) {
	cmd := childCmd(o, "crashprep", "--value-size", strconv.Itoa(o.valueSize), "--producers", strconv.Itoa(o.producers))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(stdout)
	var acked int64
	var deadline time.Time
	killed := false
	for sc.Scan() {
		line := sc.Text()
		if s, ok := strings.CutPrefix(line, "PRODUCING "); ok {
			deadline = time.Now().Add(o.crashSeconds)
			fmt.Printf("crash prep: broker started with %s records, producing; SIGKILL in %v\n", s, o.crashSeconds)
			continue
		}
		if s, ok := strings.CutPrefix(line, "ACKED "); ok {
			acked, _ = strconv.ParseInt(s, 10, 64)
		}
		if !deadline.IsZero() && !killed && time.Now().After(deadline) {
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		return 0, fmt.Errorf("crash prep child ended before the SIGKILL: %v", err)
	}
	fmt.Printf("crash prep: SIGKILLed with %d records acknowledged in total\n", acked)
	return acked, nil
}

// ---------------------------------------------------------------- generate

func newProducer(addr string, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.DefaultProduceTopic(topicName),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(1 << 16),
		kgo.ProducerBatchMaxBytes(1 << 20),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}, extra...)
	return kgo.NewClient(opts...)
}

// produceLoop produces 1-value records from n goroutines until stop is set,
// counting acknowledged records and value bytes. It returns once every
// record is acknowledged.
func produceLoop(cl *kgo.Client, n, valueSize int, stop *atomic.Bool, acked, ackedBytes *atomic.Int64, firstErr *atomic.Value) {
	value := make([]byte, valueSize)
	for i := range value {
		value[i] = byte(i*31 + 7)
	}
	pool := sync.Pool{New: func() any { return new(kgo.Record) }}
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			firstErr.CompareAndSwap(nil, err)
		} else {
			acked.Add(1)
			ackedBytes.Add(int64(len(r.Value)))
		}
		*r = kgo.Record{}
		pool.Put(r)
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			ctx := context.Background()
			for !stop.Load() && firstErr.Load() == nil {
				r := pool.Get().(*kgo.Record)
				r.Value = value
				cl.Produce(ctx, r, promise)
			}
		})
	}
	wg.Wait()
	cl.Flush(context.Background())
}

func startBroker(dir string, lg *zap.Logger) (*broker.Broker, error) {
	cfg := broker.DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.Fsync = broker.FsyncAlways
	cfg.Logger = lg
	return broker.Start(cfg)
}

func generate(o *options, target int64) error {
	fmt.Printf("generating %.1f GiB in %s: %d partitions, segment.bytes %d, %d B values, acks=all, fsync always\n",
		gib(target), o.dir, o.partitions, o.segmentBytes, o.valueSize)
	b, err := startBroker(o.dir, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	admin, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		return err
	}
	seg := strconv.FormatInt(o.segmentBytes, 10)
	_, err = kadm.NewClient(admin).CreateTopic(context.Background(), int32(o.partitions), 1,
		map[string]*string{"segment.bytes": &seg}, topicName)
	admin.Close()
	if err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	cl, err := newProducer(b.Addr())
	if err != nil {
		return err
	}
	defer cl.Close()
	var stop atomic.Bool
	var acked, ackedBytes atomic.Int64
	var firstErr atomic.Value
	done := make(chan struct{})
	go func() {
		produceLoop(cl, o.producers, o.valueSize, &stop, &acked, &ackedBytes, &firstErr)
		close(done)
	}()
	began := time.Now()
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	var last int64
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-tk.C:
			size, segs := logSize(o.dir)
			el := time.Since(began)
			rate := float64(size-last) / (1 << 20)
			last = size
			eta := "?"
			if size > 0 {
				eta = (time.Duration(float64(el) * float64(target-size) / float64(size))).Round(time.Second).String()
			}
			fmt.Printf("%5.0fs  %6.2f / %.2f GiB on disk  %3d segments  %6.1f MiB/s  %9d records acked  ETA %s\n",
				el.Seconds(), gib(size), gib(target), segs, rate, acked.Load(), eta)
			if size >= target {
				stop.Store(true)
			}
		}
	}
	if e := firstErr.Load(); e != nil {
		return fmt.Errorf("produce: %v", e)
	}
	cl.Close()
	t := time.Now()
	if err := b.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	size, segs := logSize(o.dir)
	fmt.Printf("generated %.2f GiB in %d segments, %d records, in %v (%.1f MiB/s); clean Close took %v\n",
		gib(size), segs, acked.Load(), time.Since(began).Round(time.Second),
		float64(size)/(1<<20)/time.Since(began).Seconds(), time.Since(t).Round(time.Millisecond))
	return nil
}

// logSize sums the .log segment files under dir/logs.
func logSize(dir string) (int64, int) {
	var size int64
	var n int
	filepath.WalkDir(filepath.Join(dir, "logs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".log") {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
				n++
			}
		}
		return nil
	})
	return size, n
}

// newestSegmentBytes sums the size of the newest .log file of every
// partition directory: the part of the log a crash leaves above the
// recovery point (which advances when a segment rolls and on a clean
// Close), so recovery re-reads it.
func newestSegmentBytes(dir string) int64 {
	parts, _ := os.ReadDir(filepath.Join(dir, "logs"))
	var sum int64
	for _, p := range parts {
		files, _ := filepath.Glob(filepath.Join(dir, "logs", p.Name(), "*.log"))
		if len(files) == 0 {
			continue
		}
		// Zero-padded base offsets: the lexically last is the newest.
		if fi, err := os.Stat(files[len(files)-1]); err == nil {
			sum += fi.Size()
		}
	}
	return sum
}

// ---------------------------------------------------------------- children

type startResult struct {
	Start      time.Duration // broker.Start until it returned (serving)
	Recover    time.Duration // the broker's own "recovered logs" figure
	Close      time.Duration // clean Close afterwards
	RSS        int64         // VmRSS right after Start
	HWM        int64         // VmHWM right after Start
	LogBytes   int64
	Segments   int
	TailBytes  int64 // before Start: bytes in each partition's newest segment (re-read after a crash)
	Partitions int
	EndOffsets int64    // sum of the partitions' end offsets (ListOffsets)
	Warnings   []string // broker log messages at Warn or above during Start
}

func childStart(args []string) error {
	fset := flag.NewFlagSet("start", flag.ExitOnError)
	dir := fset.String("dir", "", "data directory")
	cpuprofile := fset.String("cpuprofile", "", "CPU profile of broker.Start")
	fset.Parse(args)
	tail := newestSegmentBytes(*dir)
	core, logs := observer.New(zapcore.InfoLevel)
	lg := zap.New(core)
	var prof *os.File
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		prof = f
		pprof.StartCPUProfile(f)
	}
	began := time.Now()
	b, err := startBroker(*dir, lg)
	took := time.Since(began)
	if prof != nil {
		pprof.StopCPUProfile()
		prof.Close()
	}
	if err != nil {
		return err
	}
	res := startResult{Start: took, TailBytes: tail}
	res.RSS, res.HWM = procMem()
	for _, e := range logs.All() {
		if e.Message == "recovered logs" {
			for _, f := range e.Context {
				if f.Key == "took" {
					res.Recover = time.Duration(f.Integer)
				}
			}
		}
		if e.Level >= zapcore.WarnLevel {
			res.Warnings = append(res.Warnings, e.Message)
		}
	}
	res.LogBytes, res.Segments = logSize(*dir)
	// Untimed check that the broker serves: list the end offsets.
	res.EndOffsets, res.Partitions, err = endOffsets(b.Addr())
	if err != nil {
		return err
	}
	t := time.Now()
	if err := b.Close(); err != nil {
		return err
	}
	res.Close = time.Since(t)
	j, _ := json.Marshal(res)
	fmt.Printf("RESULT %s\n", j)
	return nil
}

// childCrashPrep starts the broker (untimed), produces at full speed and
// prints the acknowledged record count every 100 ms until it is killed.
func childCrashPrep(args []string) error {
	fset := flag.NewFlagSet("crashprep", flag.ExitOnError)
	dir := fset.String("dir", "", "data directory")
	valueSize := fset.Int("value-size", 1024, "value size")
	producers := fset.Int("producers", 4, "producer goroutines")
	fset.Parse(args)
	b, err := startBroker(*dir, nil)
	if err != nil {
		return err
	}
	_ = b // never closed: the parent SIGKILLs this process
	cl, err := newProducer(b.Addr())
	if err != nil {
		return err
	}
	var stop atomic.Bool
	var acked, ackedBytes atomic.Int64
	var firstErr atomic.Value
	base, err := endOffsetSum(b.Addr())
	if err != nil {
		return err
	}
	go produceLoop(cl, *producers, *valueSize, &stop, &acked, &ackedBytes, &firstErr)
	fmt.Printf("PRODUCING %d\n", base)
	w := bufio.NewWriter(os.Stdout)
	for {
		time.Sleep(100 * time.Millisecond)
		if e := firstErr.Load(); e != nil {
			return fmt.Errorf("produce: %v", e)
		}
		fmt.Fprintf(w, "ACKED %d\n", base+acked.Load())
		if err := w.Flush(); err != nil {
			return err
		}
	}
}

func endOffsetSum(addr string) (int64, error) {
	sum, _, err := endOffsets(addr)
	return sum, err
}

// endOffsets lists the topic's end offsets and returns their sum and the
// number of partitions.
func endOffsets(addr string) (sum int64, parts int, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topicName)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return 0, 0, fmt.Errorf("list end offsets: %w", err)
	}
	offs.Each(func(l kadm.ListedOffset) {
		parts++
		sum += l.Offset
	})
	return sum, parts, nil
}

// procMem returns VmRSS and VmHWM of this process in bytes.
func procMem() (rss, hwm int64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm
}

// ---------------------------------------------------------------- report

func gib(b int64) float64 { return float64(b) / (1 << 30) }
func mib(b int64) float64 { return float64(b) / (1 << 20) }

func renderTable(o *options, rows []row) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "| Start | Data size | Segments | Partitions | Newest segments | Start time | Of which log recovery | RSS after start | Cold cache | Records after start |\n")
	fmt.Fprintf(&sb, "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|\n")
	for _, r := range rows {
		cold := "no"
		if r.cold && r.dropped {
			cold = "yes (drop_caches)"
		} else if r.cold {
			cold = "no (drop_caches failed)"
		}
		recs := strconv.FormatInt(r.res.EndOffsets, 10)
		if r.ackedKill > 0 {
			verdict := "ok"
			if r.res.EndOffsets < r.ackedKill {
				verdict = "ACKNOWLEDGED RECORDS LOST"
			}
			recs += fmt.Sprintf(" (%d acked before the kill: %s)", r.ackedKill, verdict)
		}
		fmt.Fprintf(&sb, "| %s | %.2f GiB | %d | %d | %.0f MiB | %s | %s | %.0f MiB | %s | %s |\n",
			r.name, gib(r.res.LogBytes), r.res.Segments, r.res.Partitions, mib(r.res.TailBytes),
			fmtDur(r.res.Start), fmtDur(r.res.Recover), mib(r.res.RSS), cold, recs)
	}
	return sb.String()
}

func fmtDur(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
