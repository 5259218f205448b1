// Command eossoak is the long profile of issue 26's exactly-once tests
// (integration/eos_test.go is CI's short one): it runs the workloads of
// integration/workload against a fresh broker per run, Shoal in this
// process or franz-go's kfake side by side, directly, through an idle
// fault proxy, or with the proxy cutting every client connection at a
// random age of 0.5-1.5 s, and prints each run's outcome and a summary.
//
//	go run ./scripts/eossoak                      # the profile: 20 runs of every case, Shoal
//	go run ./scripts/eossoak -targets shoal,kfake # the same against kfake too, alternating
//	go run ./scripts/eossoak -runs 3 -workloads txn -protocols eager -faults cut
//
// The cases: txn (the transactional chain: 3 GroupTransactSession
// members, 50,000 records, every value exactly once under
// read_committed) for each of eager, cooperative and KIP-848 members,
// static or not; group (3 members committing synchronously: every record
// at least once, none after an answered commit past it) for each
// protocol; share (4 share consumers draining 100,000 records: nothing
// lost, no confirmed accept delivered again). Each under each of
// -faults. A member is replaced every -churn. The exit status is 1 if a
// run failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker"
	"github.com/shoal-mq/shoal/integration/faultproxy"
	"github.com/shoal-mq/shoal/integration/workload"
)

type options struct {
	runs               int
	txnRecords         int
	shareRecords       int
	churn, work        time.Duration
	maxPoll            int
	kgolog, brokerlog  bool
	timeout            time.Duration
	targets, workloads []string
	protocols, faults  []string
	statics            []bool
}

// runCase is one configuration the soak runs.
type runCase struct {
	target, workload, protocol, faults string
	static                             bool
}

func (c runCase) String() string {
	s := fmt.Sprintf("%-6s %-5s %-6s", c.target, c.workload, c.faults)
	if c.workload != "share" {
		s += fmt.Sprintf(" %-11s static=%-5v", c.protocol, c.static)
	}
	return s
}

func main() {
	var o options
	var targets, workloads, protocols, faults, statics string
	flag.IntVar(&o.runs, "runs", 20, "runs of each case")
	flag.StringVar(&targets, "targets", "shoal", "comma-separated: shoal, kfake (alternated run by run)")
	flag.StringVar(&workloads, "workloads", "txn,group,share", "comma-separated: txn, group, share")
	flag.StringVar(&protocols, "protocols", "eager,cooperative,consumer", "comma-separated group protocols: eager, cooperative, consumer (KIP-848)")
	flag.StringVar(&statics, "static", "false,true", "comma-separated: false (dynamic members), true (static members)")
	flag.StringVar(&faults, "faults", "cut,idle,none", "comma-separated: cut (every connection cut at 0.5-1.5 s), idle (a proxy without faults), none (no proxy)")
	flag.IntVar(&o.txnRecords, "records", 50000, "input records of the txn and group workloads")
	flag.IntVar(&o.shareRecords, "share-records", 100000, "records of the share workload")
	flag.DurationVar(&o.churn, "churn", 2*time.Second, "replace a member this often (0: never)")
	flag.DurationVar(&o.work, "work", 20*time.Millisecond, "time a member works on each poll")
	flag.IntVar(&o.maxPoll, "maxpoll", 50, "records per poll (and transaction), at most")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "time limit of one run")
	flag.BoolVar(&o.kgolog, "kgolog", false, "client logs at info, to stderr")
	flag.BoolVar(&o.brokerlog, "brokerlog", false, "Shoal's logs at debug, to stderr")
	flag.Parse()
	split := func(s string) []string { return strings.Split(s, ",") }
	o.targets, o.workloads, o.protocols, o.faults = split(targets), split(workloads), split(protocols), split(faults)
	for _, s := range split(statics) {
		o.statics = append(o.statics, s == "true")
	}

	var cases []runCase
	for _, f := range o.faults {
		for _, w := range o.workloads {
			if w == "share" {
				cases = append(cases, runCase{workload: w, faults: f})
				continue
			}
			for _, p := range o.protocols {
				for _, st := range o.statics {
					if w == "group" && st && f != "cut" {
						continue // the group workload's static runs: under cuts only
					}
					cases = append(cases, runCase{workload: w, protocol: p, faults: f, static: st})
				}
			}
		}
	}
	type tally struct {
		ok, n int
		took  []time.Duration
	}
	tallies := map[string]*tally{}
	var order []string
	failed := 0
	for _, c := range cases {
		for run := range o.runs {
			for _, target := range o.targets {
				c.target = target
				if target == "kfake" && c.workload == "share" {
					continue // kfake has no share groups here
				}
				t0 := time.Now()
				ok, out := runOne(o, c, run)
				took := time.Since(t0)
				fmt.Printf("%s run %2d: ok=%v in %v: %s\n", c, run, ok, took.Round(time.Millisecond), out)
				k := c.String()
				if tallies[k] == nil {
					tallies[k] = &tally{}
					order = append(order, k)
				}
				tallies[k].n++
				tallies[k].took = append(tallies[k].took, took)
				if ok {
					tallies[k].ok++
				} else {
					failed++
				}
			}
		}
	}
	fmt.Println("\nsummary (passed/runs, median and slowest run):")
	for _, k := range order {
		t := tallies[k]
		slices.Sort(t.took)
		fmt.Printf("  %s  %2d/%-2d  %8v %8v\n", k, t.ok, t.n, t.took[len(t.took)/2].Round(10*time.Millisecond), t.took[len(t.took)-1].Round(10*time.Millisecond))
	}
	if failed > 0 {
		fmt.Printf("%d runs failed\n", failed)
		os.Exit(1)
	}
}

// advertised is a listener that reports another address (the proxy's)
// as its own, so kfake advertises it.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }

// runOne runs case c once against a fresh broker and reports whether it
// passed, with a line of what it saw.
func runOne(o options, c runCase, run int) (bool, string) {
	var proxy *faultproxy.Proxy
	if c.faults != "none" {
		var err error
		if proxy, err = faultproxy.New(uint64(time.Now().UnixNano())); err != nil {
			return false, err.Error()
		}
		defer proxy.Close()
	}
	direct, stop, err := startTarget(o, c.target, proxy)
	if err != nil {
		return false, "start: " + err.Error()
	}
	defer stop()
	seeds := direct
	if proxy != nil {
		if err := proxy.Start(direct[0]); err != nil {
			return false, err.Error()
		}
		seeds = []string{proxy.Addr()}
	}
	common := workload.Common{Seeds: seeds, Direct: direct, Name: fmt.Sprintf("eos%d", run), Records: o.txnRecords,
		Seed: uint64(time.Now().UnixNano()), Work: o.work}
	if c.target == "shoal" {
		common.BrokerConfigs = maps.Clone(workload.ShoalGroupConfigs)
	}
	if o.kgolog {
		common.Logger = kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, func() string { return time.Now().Format("15:04:05.000 ") })
	}
	if c.faults == "cut" {
		proxy.Set(faultproxy.Faults{CutMin: 500 * time.Millisecond, CutMax: 1500 * time.Millisecond})
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	var ok bool
	var out string
	proto := workload.Protocol(c.protocol)
	switch c.workload {
	case "group":
		res, err := workload.GroupConsume{Common: common, Members: 3, Protocol: proto, Static: c.static, Churn: o.churn, MaxPollRecords: o.maxPoll}.Run(ctx)
		ok = err == nil && res.OK()
		out = fmt.Sprintf("%s; %d replaced, %d restarted %v", res, res.Churned, res.Restarts, res.Errors)
		if err != nil {
			out += "; " + err.Error()
		}
	case "share":
		common.Records = o.shareRecords
		res, err := workload.ShareDrain{Common: common, Consumers: 4}.Run(ctx)
		ok = err == nil && res.OK()
		out = fmt.Sprintf("%s; errors %v", res, res.Errors)
		if err != nil {
			out += "; " + err.Error()
		}
	default:
		res, err := workload.TxnChain{Common: common, Members: 3, Protocol: proto, Static: c.static, Churn: o.churn, MaxPollRecords: o.maxPoll}.Run(ctx)
		ok = err == nil && res.ExactlyOnce()
		out = fmt.Sprintf("%s; %d transactions, %d committed; %d replaced, %d restarted %v", res.Outcome, res.Txns, res.Committed, res.Churned, res.Restarts, res.Errors)
		if err != nil {
			out += "; " + err.Error()
		}
	}
	if proxy != nil {
		proxy.Set(faultproxy.Faults{})
		out += "; proxy: " + proxy.Stats().String()
	}
	return ok, out
}

// startTarget starts a fresh broker advertising proxy's address (if
// any) and returns its own addresses.
func startTarget(o options, target string, proxy *faultproxy.Proxy) ([]string, func(), error) {
	switch target {
	case "kfake":
		var direct []string
		opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(-1)}
		if proxy != nil {
			opts = append(opts, kfake.ListenFn(func(network, _ string) (net.Listener, error) {
				ln, err := net.Listen(network, "127.0.0.1:0")
				if err != nil {
					return nil, err
				}
				direct = append(direct, ln.Addr().String())
				pa, err := net.ResolveTCPAddr("tcp", proxy.Addr())
				if err != nil {
					ln.Close()
					return nil, err
				}
				return advertised{ln, pa}, nil
			}))
		}
		c, err := kfake.NewCluster(opts...)
		if err != nil {
			return nil, nil, err
		}
		if direct == nil {
			direct = c.ListenAddrs()
		}
		return direct, c.Close, nil
	case "shoal":
		dir, err := os.MkdirTemp("", "eossoak")
		if err != nil {
			return nil, nil, err
		}
		cfg := broker.DefaultConfig()
		cfg.ListenAddr = "127.0.0.1:0"
		cfg.DataDir = dir
		cfg.Logger = zap.NewNop()
		if o.brokerlog {
			if cfg.Logger, err = zap.NewDevelopment(); err != nil {
				return nil, nil, err
			}
		}
		if proxy != nil {
			cfg.AdvertisedAddr = proxy.Addr()
		}
		b, err := broker.Start(cfg)
		if err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
		return []string{b.Addr()}, func() { b.Close(); os.RemoveAll(dir) }, nil
	}
	return nil, nil, fmt.Errorf("unknown target %q", target)
}
