package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/broker/clustertest"
)

// TestElectSkipsSlowPreferred: a preferred election of a replica that is
// in the ISR but cannot catch up (its fsyncs take three election
// timeouts), asked again and again by a client, leaves the leader
// refusing produces for a small part of the time only: raft refuses
// every proposal while a transfer is pending, each try is cancelled
// after transferTicks, and the tries wait longer and longer. The first
// version made a try each election timeout until the request's
// deadline (review: 1,340 to 2,556 refusals in 4 s), the bug
// TestRebalanceSkipsSlowPreferred guards against for the rebalance.
func TestElectSkipsSlowPreferred(t *testing.T) {
	var slow atomic.Bool
	c := rebalanceCluster(t, false, time.Hour, &slow, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "slow", 3, 3, nil))
	replicas := c.nodes[0].Image().Topics["slow"].Partitions
	part := -1
	for i, rs := range replicas {
		if rs[0] == 1 {
			part = i
		}
	}
	require.GreaterOrEqual(t, part, 0)
	name := PartitionName("slow", int32(part))
	require.Eventually(t, func() bool { return c.leaderOf(name) == 0 }, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { ps, ok := c.nodes[0].PartitionState(name); return ok && len(ps.ISR) == 3 }, 20*time.Second, 10*time.Millisecond)
	slow.Store(true)
	to := replicas[part][1]
	transferByHand(t, c, 0, name, to)
	require.Eventually(t, func() bool { return c.leaderOf(name) == int(to-1) }, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		ps, ok := c.nodes[0].PartitionState(name)
		return ok && ps.Leader == to && len(ps.ISR) == 3
	}, 20*time.Second, 10*time.Millisecond)
	leader := c.nodes[to-1]

	ectx, ecancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer ecancel()
	res := make(chan error, 1)
	var tries atomic.Int32
	go func() {
		for {
			tries.Add(1)
			err := leader.ElectPreferred(ectx, []string{name})[name]
			if !errors.Is(err, ErrPreferredNotAvailable) || ectx.Err() != nil {
				res <- err
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	var ok, refused, seq int32
	var refusedFor time.Duration // the leader's refusing streaks, summed
	var since time.Time          // the current streak's start (zero: none)
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := leader.Produce(pctx, name, clustertest.Batch(seq))
		pcancel()
		var nl *ErrNotLeader
		switch {
		case err == nil:
			ok++
			seq++
			if !since.IsZero() {
				refusedFor += time.Since(since)
				since = time.Time{}
			}
		case errors.As(err, &nl):
			if st, _, _ := leader.Group(name); st.IsLeader {
				refused++
				if since.IsZero() {
					since = time.Now()
				}
			}
			time.Sleep(time.Millisecond)
		default:
			t.Fatalf("produce: %v", err)
		}
	}
	st, _, _ := leader.Group(name)
	if !since.IsZero() {
		refusedFor += time.Since(since)
	}
	t.Logf("requests %d (last: %v); produces ok %d, refused by the leader %d, for %s in all; still leader %v",
		tries.Load(), <-res, ok, refused, refusedFor.Round(time.Millisecond), st.IsLeader)
	require.Less(t, refusedFor, 400*time.Millisecond, "the leader refused produces for a tenth of the time or more")
	require.True(t, st.IsLeader)
}
