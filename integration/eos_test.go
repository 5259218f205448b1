package integration

// Exactly-once and at-least-once through dying connections (issue 26):
// the workloads of package workload run against an in-process broker
// that advertises a fault proxy, which cuts every client connection at
// a random age of 0.5-1.5 s, landing the cut at once, on a request
// before the broker sees it whole, or on a response the broker sent
// (lost or cut short); the transactional chain also goes through an
// idle proxy and without one. This is CI's short profile: three runs of
// each workload under cuts (one per group protocol, or three share
// drains), about a minute under -race; scripts/eossoak runs the long
// one (20 runs of every case, and kfake side by side).
//
//   - the transactional chain (franz-go GroupTransactSession members,
//     read_committed, offsets committed in the transaction): every input
//     value exactly once in the read_committed output;
//   - a consumer group committing synchronously: every record consumed
//     at least once, none consumed again once a commit past it was
//     answered;
//   - four share consumers accepting everything: nothing lost, no record
//     delivered again after its accept was confirmed.

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/broker"
	"github.com/shoal-mq/shoal/integration/faultproxy"
	"github.com/shoal-mq/shoal/integration/workload"
)

// cutEveryConnection is issue 26's fault: every connection cut at a
// random age of 0.5-1.5 s, the cut landing in any of the proxy's ways.
var cutEveryConnection = faultproxy.Faults{CutMin: 500 * time.Millisecond, CutMax: 1500 * time.Millisecond}

// eosScale multiplies the runs' records: SHOAL_EOS_SCALE (default 1).
func eosScale(t *testing.T) int { return envScale(t, "SHOAL_EOS_SCALE") }

type eosProxy int

const (
	noProxy eosProxy = iota
	idleProxy
	cuttingProxy
)

func (p eosProxy) String() string { return [...]string{"direct", "idle-proxy", "cuts"}[p] }

// eosCommon starts a broker (behind a proxy, cutting or not, unless
// noProxy) and returns the workload's common settings and the proxy.
func eosCommon(t *testing.T, mode eosProxy, records int) (workload.Common, *faultproxy.Proxy) {
	t.Helper()
	var proxy *faultproxy.Proxy
	var opts []brokerOption
	if mode != noProxy {
		var err error
		proxy, err = faultproxy.New(uint64(time.Now().UnixNano()))
		require.NoError(t, err)
		t.Cleanup(func() { proxy.Close() })
		opts = append(opts, func(c *broker.Config) { c.AdvertisedAddr = proxy.Addr() })
	} else {
		// An option that changes nothing: the runs need our broker (its
		// configs), not SHOAL_TEST_SEEDS's.
		opts = append(opts, func(*broker.Config) {})
	}
	b := startBroker(t, opts...)
	b.requireInProcess(t)
	seeds := []string{b.Addr}
	if proxy != nil {
		require.NoError(t, proxy.Start(b.Addr))
		seeds = []string{proxy.Addr()}
	}
	return workload.Common{
		Seeds:         seeds,
		Direct:        []string{b.Addr},
		Name:          topicName(t),
		Records:       records * eosScale(t),
		Seed:          uint64(time.Now().UnixNano()),
		Work:          20 * time.Millisecond,
		BrokerConfigs: maps.Clone(workload.ShoalGroupConfigs),
	}, proxy
}

func eosContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(eosScale(t))*3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// proxyStats logs what the proxy did, and requires that a cutting proxy
// cut something.
func proxyStats(t *testing.T, mode eosProxy, p *faultproxy.Proxy) {
	t.Helper()
	if p == nil {
		return
	}
	p.Set(faultproxy.Faults{})
	s := p.Stats()
	t.Logf("proxy: %v", s)
	if mode == cuttingProxy {
		n := int64(0)
		for _, v := range s.Faults {
			n += v
		}
		require.Positive(t, n, "the proxy cut connections")
	}
}

func TestEOSTransactChain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode   eosProxy
		proto  workload.Protocol
		static bool
	}{
		{cuttingProxy, workload.Eager, false},
		{cuttingProxy, workload.Cooperative, true},
		{cuttingProxy, workload.NextGen, false},
		{idleProxy, workload.Eager, true},
		{noProxy, workload.Eager, false},
		{noProxy, workload.NextGen, true},
	} {
		t.Run(fmt.Sprintf("%s/%s/static=%v", tc.mode, tc.proto, tc.static), func(t *testing.T) {
			t.Parallel()
			common, proxy := eosCommon(t, tc.mode, 20000)
			if tc.mode == cuttingProxy {
				proxy.Set(cutEveryConnection)
			}
			res, err := workload.TxnChain{Common: common, Members: 3, Protocol: tc.proto, Static: tc.static,
				MaxPollRecords: 50, Churn: 2 * time.Second}.Run(eosContext(t))
			t.Logf("%s; %d transactions, %d committed; %d members replaced, %d restarted %v",
				res.Outcome, res.Txns, res.Committed, res.Churned, res.Restarts, res.Errors)
			proxyStats(t, tc.mode, proxy)
			require.NoError(t, err)
			require.True(t, res.ExactlyOnce(), "every input value exactly once in the read_committed output: %s", res.Outcome)
		})
	}
}

func TestEOSGroupSyncCommits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode   eosProxy
		proto  workload.Protocol
		static bool
	}{
		{cuttingProxy, workload.Eager, true},
		{cuttingProxy, workload.Cooperative, false},
		{cuttingProxy, workload.NextGen, false},
	} {
		t.Run(fmt.Sprintf("%s/%s/static=%v", tc.mode, tc.proto, tc.static), func(t *testing.T) {
			t.Parallel()
			common, proxy := eosCommon(t, tc.mode, 20000)
			proxy.Set(cutEveryConnection)
			res, err := workload.GroupConsume{Common: common, Members: 3, Protocol: tc.proto, Static: tc.static,
				MaxPollRecords: 50, Churn: 2 * time.Second}.Run(eosContext(t))
			t.Logf("%s; %d members replaced, %d restarted %v", res, res.Churned, res.Restarts, res.Errors)
			proxyStats(t, tc.mode, proxy)
			require.NoError(t, err)
			require.True(t, res.OK(), "every record at least once, none after an answered commit past it: %s", res)
		})
	}
}

func TestEOSShareDrain(t *testing.T) {
	t.Parallel()
	for run := range 3 {
		t.Run(fmt.Sprintf("cuts/%d", run), func(t *testing.T) {
			t.Parallel()
			common, proxy := eosCommon(t, cuttingProxy, 40000)
			proxy.Set(cutEveryConnection)
			res, err := workload.ShareDrain{Common: common, Consumers: 4}.Run(eosContext(t))
			t.Logf("%s; errors %v", res, res.Errors)
			proxyStats(t, cuttingProxy, proxy)
			require.NoError(t, err)
			require.True(t, res.OK(), "nothing lost, no confirmed accept delivered again: %s", res)
		})
	}
}
