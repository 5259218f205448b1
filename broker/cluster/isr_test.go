package cluster

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/broker/clustertest"
	"github.com/shoal-mq/shoal/log"
)

// TestISRLeavesLaggingFollower: a follower that streams appends but
// cannot keep up (its fsyncs take longer than replica.lag.time.max.ms)
// leaves the partition's ISR, and is back in it once it has caught up,
// as Kafka's ISR is: before, streaming alone kept it in.
func TestISRLeavesLaggingFollower(t *testing.T) {
	var slow atomic.Bool
	c := newTestCluster(t, 3)
	for i := range c.nodes {
		c.stop(i)
	}
	c.tune = func(cfg *Config) { cfg.ReplicaLagMax, cfg.AutoLeaderRebalance = time.Second, false }
	for i := range c.nodes {
		c.fs = nil
		if i == 0 {
			c.fs = slowSyncFS{log.OSFS(), &slow, 1500 * time.Millisecond}
		}
		c.start(i)
	}
	c.fs = nil
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 20*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "lag", 1, 3, nil))
	const part = "lag-0"
	lead := c.leaderOf(part)
	if lead == 0 {
		transferByHand(t, c, 0, part, 2)
		require.Eventually(t, func() bool { return c.leaderOf(part) != 0 }, 20*time.Second, 10*time.Millisecond)
		lead = c.leaderOf(part)
	}
	leader := c.nodes[lead]
	isr := func() []uint64 {
		leader.mu.Lock()
		g := leader.groups[part]
		leader.mu.Unlock()
		ch := make(chan []uint64, 1)
		if !g.queue(func() { ch <- g.r.InSync() }) {
			return nil
		}
		return <-ch
	}
	require.Eventually(t, func() bool { return len(isr()) == 3 }, 20*time.Second, 10*time.Millisecond)

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // a steady stream of produces
		defer close(done)
		for seq := int32(0); ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, _ = leader.Produce(pctx, part, clustertest.Batch(seq))
			pcancel()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer func() { close(stop); <-done }()
	slow.Store(true)
	require.Eventually(t, func() bool { return !slices.Contains(isr(), 1) }, 20*time.Second, 20*time.Millisecond,
		"a follower 1.5 s behind stays in the ISR (replica.lag.time.max.ms 1 s): %v", isr())
	require.Len(t, isr(), 2, "the other follower keeps up")
	slow.Store(false)
	require.Eventually(t, func() bool { return slices.Contains(isr(), 1) }, 20*time.Second, 20*time.Millisecond, "caught up, back in the ISR")
}
