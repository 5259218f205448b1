// Command eossoak runs the exactly-once workloads of integration/workload
// against a fresh Shoal (or kfake) per run, optionally behind the fault
// proxy, and prints each run's outcome.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker"
	"github.com/shoal-mq/shoal/integration/faultproxy"
	"github.com/shoal-mq/shoal/integration/workload"
)

// advertised is a listener that reports another address (the proxy's)
// as its own, so kfake advertises it.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }

func main() {
	target := flag.String("target", "shoal", "shoal or kfake")
	wl := flag.String("workload", "txn", "txn (the transactional chain), group (synchronous commits) or share (a share group draining)")
	runs := flag.Int("runs", 3, "runs")
	records := flag.Int("records", 50000, "records")
	proto := flag.String("protocol", "cooperative", "eager, cooperative or consumer")
	static := flag.Bool("static", false, "static members")
	churn := flag.Duration("churn", 0, "replace a member this often")
	maxPoll := flag.Int("maxpoll", 50, "records per transaction, at most")
	work := flag.Duration("work", 20*time.Millisecond, "time a member works on each poll")
	faults := flag.String("faults", "none", "none (no proxy), idle (a proxy without faults) or cut (every connection cut at 0.5-1.5 s)")
	kgolog := flag.Bool("kgolog", false, "client logs at info")
	brokerlog := flag.Bool("brokerlog", false, "broker logs at debug")
	flag.Parse()
	fails := 0
	for run := range *runs {
		dir, _ := os.MkdirTemp("", "eossoak")
		var proxy *faultproxy.Proxy
		if *faults != "none" {
			var err error
			if proxy, err = faultproxy.New(uint64(run)); err != nil {
				panic(err)
			}
		}
		var direct []string
		var stop func()
		switch *target {
		case "kfake":
			opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(-1)}
			if proxy != nil {
				opts = append(opts, kfake.ListenFn(func(network, address string) (net.Listener, error) {
					ln, err := net.Listen(network, "127.0.0.1:0")
					if err != nil {
						return nil, err
					}
					direct = append(direct, ln.Addr().String())
					pa, _ := net.ResolveTCPAddr("tcp", proxy.Addr())
					return advertised{ln, pa}, nil
				}))
			}
			c, err := kfake.NewCluster(opts...)
			if err != nil {
				panic(err)
			}
			if direct == nil {
				direct = c.ListenAddrs()
			}
			stop = c.Close
		default:
			cfg := broker.DefaultConfig()
			cfg.ListenAddr = "127.0.0.1:0"
			cfg.DataDir = dir
			cfg.Logger = zap.NewNop()
			if *brokerlog {
				cfg.Logger, _ = zap.NewDevelopment()
			}
			if proxy != nil {
				cfg.AdvertisedAddr = proxy.Addr()
			}
			b, err := broker.Start(cfg)
			if err != nil {
				panic(err)
			}
			direct, stop = []string{b.Addr()}, func() { b.Close() }
		}
		seeds := direct
		if proxy != nil {
			if err := proxy.Start(direct[0]); err != nil {
				panic(err)
			}
			seeds = []string{proxy.Addr()}
		}
		common := workload.Common{Seeds: seeds, Direct: direct, Name: fmt.Sprintf("eos%d", run), Records: *records, Seed: uint64(run),
			BrokerConfigs: map[string]string{}, Work: *work}
		if *target == "shoal" {
			common.BrokerConfigs = maps.Clone(workload.ShoalGroupConfigs)
		}
		if *kgolog {
			common.Logger = kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, func() string { return time.Now().Format("15:04:05.000 ") })
		}
		if *faults == "cut" {
			proxy.Set(faultproxy.Faults{CutMin: 500 * time.Millisecond, CutMax: 1500 * time.Millisecond})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		t0 := time.Now()
		var ok bool
		var out string
		switch *wl {
		case "group":
			res, err := workload.GroupConsume{Common: common, Protocol: workload.Protocol(*proto), Static: *static, Churn: *churn, MaxPollRecords: *maxPoll}.Run(ctx)
			ok = err == nil && res.OK()
			out = fmt.Sprintf("err=%v %s; restarts %d churned %d\n  errors %v", err, res, res.Restarts, res.Churned, res.Errors)
		case "share":
			res, err := workload.ShareDrain{Common: common}.Run(ctx)
			ok = err == nil && res.OK()
			out = fmt.Sprintf("err=%v %s\n  errors %v", err, res, res.Errors)
		default:
			res, err := workload.TxnChain{Common: common, Protocol: workload.Protocol(*proto), Static: *static, Churn: *churn, MaxPollRecords: *maxPoll}.Run(ctx)
			ok = err == nil && res.ExactlyOnce()
			out = fmt.Sprintf("err=%v %s; txns %d committed %d restarts %d churned %d\n  errors %v", err, res.Outcome, res.Txns, res.Committed, res.Restarts, res.Churned, res.Errors)
		}
		cancel()
		ps := ""
		if proxy != nil {
			ps = proxy.Stats().String()
			proxy.Close()
		}
		stop()
		os.RemoveAll(dir)
		if !ok {
			fails++
		}
		fmt.Printf("run %d %s %s %s static=%v faults=%s: ok=%v in %v %s\n  proxy %s\n",
			run, *wl, *target, *proto, *static, *faults, ok, time.Since(t0).Round(time.Millisecond), out, ps)
	}
	fmt.Printf("%d of %d runs failed\n", fails, *runs)
}
