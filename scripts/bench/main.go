// Command bench is Shoal's load generator. It runs the same franz-go
// workload (produce throughput, consume throughput, end-to-end latency at a
// fixed rate, a consumer group of 4 members draining with commits, 4 share
// consumers draining with accepts) against Shoal and against franz-go's
// kfake, both started
// in-process with fsync before ack, alternating the order each round, and
// prints side-by-side markdown tables of each round and of the medians.
//
//	go run ./scripts/bench                       # shoal vs kfake, 3 rounds, 1M records
//	go run ./scripts/bench --records 100000 --rounds 1
//	go run ./scripts/bench --records 100000 --rounds 1 --phases produce,group,share
//	go run ./scripts/bench --out docs/BENCHMARKS.md --json bench.json   # plots in docs/plots/
//	go run ./scripts/bench --seeds 127.0.0.1:9092 # an external broker
//
// Progress goes to stderr, the report to stdout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// options are the command-line flags; see parseFlags for their meaning.
type options struct {
	// clientOpts are added to every client of the target being run
	// (TLS and SASL for shoal-sasl-ssl); set by startTarget.
	clientOpts []kgo.Opt
	targets    []string
	seeds      []string
	// seedTLSCA and seedSCRAM512 ("user:password") make the clients of
	// the external target speak TLS (trusting that CA) and SCRAM-SHA-512.
	seedTLSCA, seedSCRAM512 string
	rounds                  int
	records                 int64
	valueSize               int
	partitions              int32
	replicationFactor       int16
	rfFlag                  int16 // --replication-factor; a target may override replicationFactor
	// offsetGaps: the target's logs have offsets no record has (a raft
	// cluster's own entries), so consume checks counts, not contiguity.
	offsetGaps        bool
	producers         int
	linger            time.Duration
	maxBuffered       int
	batchMaxBytes     int32
	compression       string
	fetchMaxBytes     int32
	fetchMaxPartBytes int32
	e2eRate           int
	e2eDuration       time.Duration
	groupMembers      int
	groupBalancer     string
	groupCommit       string
	shareMembers      int
	shareMaxRecords   int32
	txnRecords        int
	phases            map[string]bool
	dir               string
	out               string
	jsonPath          string
	shoalFsync        string
	timeout           time.Duration
	cooldown          time.Duration
	brokerLog         string
	clientLog         string
	profileDir        string
	fromJSON          string
	plots             string
}

const (
	phaseProduce = "produce"
	phaseConsume = "consume"
	phaseE2E     = "e2e"
	phaseGroup   = "group"
	phaseShare   = "share"
	phaseTxn     = "txn"

	targetShoal    = "shoal"
	targetShoalSec = "shoal-sasl-ssl" // Shoal on a SASL_SSL listener (SCRAM-SHA-512, TLS 1.3), ACLs on
	// targetShoalSecNoACL is shoal-sasl-ssl with the authorizer off:
	// against it, what the ACL checks cost.
	targetShoalSecNoACL = "shoal-sasl-ssl-noacl"
	// targetShoalCluster is three in-process brokers, a raft cluster
	// replicating every partition three times.
	targetShoalCluster = "shoal-cluster"
	// targetShoalClusterRF1 is the same cluster with topics of one
	// replica each, spread over the three brokers (criterion C10).
	targetShoalClusterRF1 = "shoal-cluster-rf1"
	targetKfake           = "kfake"
	targetCeiling         = "ceiling"
	targetExternal        = "external"
)

// allPhases are the phases in the order a round runs them.
var allPhases = []string{phaseProduce, phaseConsume, phaseE2E, phaseGroup, phaseShare, phaseTxn}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	var targets, seeds, phases string
	fs.StringVar(&targets, "target", "shoal,kfake", "comma-separated targets started in-process: shoal, shoal-sasl-ssl (Shoal over SASL_SSL with SCRAM-SHA-512 and ACLs: what TLS, authentication and authorization cost), shoal-sasl-ssl-noacl (the same without the authorizer), shoal-cluster (three brokers in this process, a raft cluster: every partition on three replicas, produce answered once two have it fsynced), shoal-cluster-rf1 (the same cluster, topics of one replica spread over the brokers), kfake, ceiling (kfake storing nothing: the client-side limit)")
	fs.StringVar(&seeds, "seeds", "", "comma-separated host:port of an external broker to bench (target \"external\"); alone it replaces --target's default")
	fs.StringVar(&o.seedTLSCA, "seeds-tls-ca", "", "with --seeds: connect with TLS, trusting the CA certificates in this PEM file")
	fs.StringVar(&o.seedSCRAM512, "seeds-scram-sha-512", "", "with --seeds: authenticate with SCRAM-SHA-512 as user:password")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; targets alternate order each round and the summary reports medians")
	fs.Int64Var(&o.records, "records", 1_000_000, "records produced (and then consumed) per round and target")
	fs.IntVar(&o.valueSize, "value-size", 1024, "record value size in bytes (no key)")
	partitions := fs.Int("partitions", 6, "partitions of the benchmark topics")
	rf := fs.Int("replication-factor", 1, "replication factor of the benchmark topics (-1: broker default)")
	fs.IntVar(&o.producers, "producers", 4, "producer goroutines sharing one kgo client")
	fs.DurationVar(&o.linger, "linger", 0, "kgo ProducerLinger (0: batches form while requests are in flight)")
	fs.IntVar(&o.maxBuffered, "max-buffered", 65536, "kgo MaxBufferedRecords")
	batch := fs.Int("batch-max-bytes", 1<<20, "kgo ProducerBatchMaxBytes")
	fs.StringVar(&o.compression, "compression", "none", "producer compression: none, gzip, snappy, lz4, zstd")
	fetchMax := fs.Int("fetch-max-bytes", 64<<20, "kgo FetchMaxBytes")
	fetchPart := fs.Int("fetch-max-partition-bytes", 1<<20, "kgo FetchMaxPartitionBytes (Kafka's max.partition.fetch.bytes default)")
	fs.IntVar(&o.e2eRate, "e2e-rate", 5000, "records/s produced during the end-to-end latency phase")
	fs.DurationVar(&o.e2eDuration, "e2e-duration", 10*time.Second, "length of the end-to-end latency phase")
	fs.IntVar(&o.groupMembers, "group-members", 4, "group phase: members of the consumer group, each its own kgo client")
	fs.StringVar(&o.groupBalancer, "group-balancer", "cooperative-sticky", "group phase: kgo balancer: cooperative-sticky (kgo's default), sticky, range, roundrobin")
	fs.StringVar(&o.groupCommit, "group-commit", groupCommitPoll, "group phase: poll (CommitUncommittedOffsets after every poll, BlockRebalanceOnPoll) or auto (kgo autocommit every 5s, one commit at the end)")
	fs.IntVar(&o.shareMembers, "share-members", 4, "share phase: share consumers (kgo.ShareGroup), each its own kgo client")
	shareMax := fs.Int("share-max-records", 0, "share phase: kgo ShareMaxRecords per ShareFetch (0: kgo's default, 500)")
	fs.IntVar(&o.txnRecords, "txn-records", 1000, "txn phase: records per transaction")
	fs.StringVar(&phases, "phases", strings.Join(allPhases, ","), "phases to run: produce, consume (needs produce), e2e, group (needs produce), share (needs produce), txn (transactional produce; its ratio to plain produce needs produce)")
	fs.StringVar(&o.dir, "dir", "", "parent of the per-round data dirs (default: the system temp dir); each is removed afterwards")
	fs.StringVar(&o.out, "out", "", "write the report into this markdown file (e.g. docs/BENCHMARKS.md), replacing the generated section")
	fs.StringVar(&o.jsonPath, "json", "", "write raw results as JSON to this file")
	fs.StringVar(&o.shoalFsync, "shoal-fsync", "always", "Shoal fsync policy: always (fsync before ack) or interval")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up on a phase after this long")
	fs.DurationVar(&o.cooldown, "cooldown", 2*time.Second, "pause after sync(2) between targets")
	fs.StringVar(&o.brokerLog, "broker-log", "warn", "log level of the in-process brokers (stderr): none, error, warn, info, debug")
	fs.StringVar(&o.clientLog, "client-log", "none", "log level of the kgo clients (stderr): none, error, warn, info, debug")
	fs.StringVar(&o.profileDir, "cpuprofile-dir", "", "write a CPU profile of each target run (broker and clients: one process) to DIR/<target>-r<round>.pprof")
	fs.StringVar(&o.fromJSON, "from-json", "", "run nothing: re-render the report (stdout, --out, plots) from a file written by --json")
	fs.StringVar(&o.plots, "plots", "", "directory for the PNG plots (default with --out: plots/ next to the --out file, embedded in it; none: no plots)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./scripts/bench [flags]\n\n"+
			"Runs the same franz-go load against Shoal and kfake (in-process, fresh data dir per round,\n"+
			"fsync before ack) or an external broker, and prints side-by-side markdown tables.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	targetSet := false
	fs.Visit(func(f *flag.Flag) { targetSet = targetSet || f.Name == "target" })
	if seeds != "" {
		o.seeds = splitList(seeds)
		if !targetSet {
			targets = ""
		}
	}
	for _, t := range splitList(targets) {
		if t != targetShoal && t != targetShoalSec && t != targetShoalSecNoACL && t != targetShoalCluster && t != targetShoalClusterRF1 && t != targetKfake && t != targetCeiling {
			return nil, fmt.Errorf("--target: unknown target %q (want shoal, shoal-sasl-ssl, shoal-sasl-ssl-noacl, shoal-cluster, shoal-cluster-rf1, kfake, ceiling)", t)
		}
		o.targets = append(o.targets, t)
	}
	if len(o.seeds) > 0 {
		o.targets = append(o.targets, targetExternal)
	}
	if len(o.targets) == 0 {
		return nil, errors.New("no targets")
	}
	o.phases = map[string]bool{}
	for _, p := range splitList(phases) {
		if !slices.Contains(allPhases, p) {
			return nil, fmt.Errorf("--phases: unknown phase %q (want %s)", p, strings.Join(allPhases, ", "))
		}
		o.phases[p] = true
	}
	for _, p := range []string{phaseConsume, phaseGroup, phaseShare} {
		if o.phases[p] && !o.phases[phaseProduce] {
			return nil, fmt.Errorf("--phases: %s reads what produce wrote; add produce", p)
		}
	}
	if _, err := balancer(o.groupBalancer); err != nil {
		return nil, fmt.Errorf("--group-balancer: %w", err)
	}
	switch {
	case o.rounds < 1:
		return nil, errors.New("--rounds must be at least 1")
	case o.records < 1:
		return nil, errors.New("--records must be at least 1")
	case o.valueSize < 8:
		return nil, errors.New("--value-size must be at least 8 (the e2e timestamp)")
	case *partitions < 1:
		return nil, errors.New("--partitions must be at least 1")
	case o.producers < 1:
		return nil, errors.New("--producers must be at least 1")
	case o.e2eRate < 1 || o.e2eDuration <= 0:
		return nil, errors.New("--e2e-rate and --e2e-duration must be positive")
	case o.txnRecords < 1:
		return nil, errors.New("--txn-records must be at least 1")
	case o.groupMembers < 1 || o.shareMembers < 1:
		return nil, errors.New("--group-members and --share-members must be at least 1")
	case o.groupCommit != groupCommitPoll && o.groupCommit != groupCommitAuto:
		return nil, errors.New("--group-commit must be poll or auto")
	case *shareMax < 0 || *shareMax > math.MaxInt32:
		return nil, errors.New("--share-max-records must be between 0 and 2^31-1")
	case o.shoalFsync != "always" && o.shoalFsync != "interval":
		return nil, errors.New("--shoal-fsync must be always or interval")
	}
	if _, err := codec(o.compression); err != nil {
		return nil, err
	}
	for _, l := range []string{o.brokerLog, o.clientLog} {
		switch l {
		case "none", "error", "warn", "info", "debug":
		default:
			return nil, fmt.Errorf("unknown log level %q", l)
		}
	}
	o.partitions = int32(*partitions)
	o.replicationFactor = int16(*rf)
	o.rfFlag = o.replicationFactor
	o.batchMaxBytes = int32(*batch)
	o.fetchMaxBytes = int32(*fetchMax)
	o.fetchMaxPartBytes = int32(*fetchPart)
	o.shareMaxRecords = int32(*shareMax)
	return o, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// run executes every round and writes the report.
func run(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	if o.fromJSON != "" {
		rep, err := readReport(o.fromJSON)
		if err != nil {
			return err
		}
		return rep.output(o, stdout, stderr)
	}
	rep := &report{
		Machine: collectMachine(o),
		Config:  configOf(o),
		Targets: o.targets,
	}
	for round := 1; round <= o.rounds; round++ {
		order := append([]string(nil), o.targets...)
		if round%2 == 0 { // alternate A/B so neither target always goes first
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		for _, t := range order {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(stderr, "== round %d/%d: %s\n", round, o.rounds, t)
			res := runTarget(ctx, o, t, round, stderr)
			if res.Error != "" {
				fmt.Fprintf(stderr, "== round %d/%d: %s failed: %s\n", round, o.rounds, t, res.Error)
			}
			rep.Runs = append(rep.Runs, res)
		}
		fmt.Fprintf(stdout, "%s\n", rep.roundMarkdown(round))
	}
	rep.computeMedians()
	if o.rounds > 1 {
		fmt.Fprintf(stdout, "%s\n", rep.summaryMarkdown())
	}
	return rep.output(o, stdout, stderr)
}

// output writes the JSON and markdown files asked for.
func (rep *report) output(o *options, stdout, stderr io.Writer) error {
	if o.fromJSON != "" {
		fmt.Fprintf(stdout, "%s", rep.generatedMarkdown())
	}
	if o.jsonPath != "" {
		if err := rep.writeJSON(o.jsonPath); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", o.jsonPath)
	}
	if dir := plotsDir(o); dir != "" {
		files, err := rep.writePlots(dir, func(path string) { fmt.Fprintf(stderr, "wrote %s\n", path) })
		if err != nil {
			return err
		}
		if o.out != "" {
			rel, err := filepath.Rel(filepath.Dir(o.out), dir)
			if err != nil {
				rel = dir
			}
			for _, f := range files {
				rep.plots = append(rep.plots, plotFile{Name: filepath.ToSlash(filepath.Join(rel, f.Name)), Caption: f.Caption})
			}
		}
	}
	if o.out != "" {
		if err := rep.writeMarkdownFile(o.out); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", o.out)
	}
	return nil
}

// plotsDir is where the plots go: --plots, else plots/ next to --out;
// "" means none.
func plotsDir(o *options) string {
	switch {
	case o.plots == "none":
		return ""
	case o.plots != "":
		return o.plots
	case o.out != "":
		return filepath.Join(filepath.Dir(o.out), "plots")
	}
	return ""
}
