package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDeleteRecordsLeaderLosesQuorum: a DeleteRecords proposed
// by a leader that then loses its quorum is answered NOT_LEADER when
// it steps down (not left to the timeout); once the followers are back
// the replicas agree on the log start, and a retry succeeds.
func TestDeleteRecordsLeaderLosesQuorum(t *testing.T) {
	c := newTestCluster(t, 3)
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 20*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "q", 1, 3, nil))
	const part = "q-0"
	var bases []int64
	for seq := range int32(6) {
		bases = append(bases, c.produce(part, seq))
	}
	lead := c.leaderOf(part)
	require.Eventually(t, func() bool {
		for _, nd := range c.nodes {
			if _, p, ok := nd.Group(part); !ok || p.HighWatermark() <= bases[5] {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	for i := range 3 {
		if i != lead {
			c.stop(i)
		}
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	start := time.Now()
	_, err := c.nodes[lead].DeleteRecords(dctx, part, bases[4])
	took := time.Since(start)
	t.Logf("answered after %v: %v", took, err)
	var nl *ErrNotLeader
	require.ErrorAs(t, err, &nl)
	require.Less(t, took, 5*time.Second)

	for i := range 3 {
		if i != lead {
			c.start(i)
		}
	}
	var low int64
	require.Eventually(t, func() bool {
		i := c.leaderOf(part)
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer rcancel()
		low, err = c.nodes[i].DeleteRecords(rctx, part, bases[3])
		return err == nil
	}, 20*time.Second, 50*time.Millisecond)
	t.Logf("retry: %d", low)
	require.GreaterOrEqual(t, low, bases[3])
	require.Eventually(t, func() bool {
		var s []int64
		for _, nd := range c.nodes {
			_, p, ok := nd.Group(part)
			if !ok {
				return false
			}
			s = append(s, p.LogStartOffset())
		}
		return s[0] == s[1] && s[1] == s[2] && s[0] == low
	}, 20*time.Second, 10*time.Millisecond)
}

// TestDeleteRecordsGroupStopped: a DeleteRecords waiting for its entry
// when the group stops (its topic deleted: deleteTopic closes g.halt; a
// storage failure) is answered NOT_LEADER then, not left to its timeout
// (found by review).
func TestDeleteRecordsGroupStopped(t *testing.T) {
	c := newTestClusterTick(t, 3, 50*time.Millisecond)
	part, bases, lead := isolatedLeader(t, c, "h")
	c.nodes[lead].mu.Lock()
	g := c.nodes[lead].groups[part]
	c.nodes[lead].mu.Unlock()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer dcancel()
		_, err := c.nodes[lead].DeleteRecords(dctx, part, bases[2])
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // proposed; no quorum to commit it
	close(g.halt)                     // as a topic deletion stops it
	err := <-done
	took := time.Since(start)
	t.Logf("answered after %v: %v", took, err)
	require.Less(t, took, 2*time.Second, "a stopped group leaves its DeleteRecords to the timeout")
}

// TestDeleteRecordsNotLeaderHint: the NOT_LEADER a leader's step down
// answers a waiting DeleteRecords with names the leader it knows then,
// never itself (found by review: the status read was the old one).
func TestDeleteRecordsNotLeaderHint(t *testing.T) {
	c := newTestCluster(t, 3)
	part, bases, lead := isolatedLeader(t, c, "s")
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	_, err := c.nodes[lead].DeleteRecords(dctx, part, bases[2])
	var nl *ErrNotLeader
	require.ErrorAs(t, err, &nl)
	require.NotEqual(t, uint64(lead+1), nl.Leader, "the hint names the broker that stepped down")
}

// isolatedLeader creates topic (one RF 3 partition, four batches) and
// stops every broker but its leader: the partition's name, the batches'
// base offsets and the leader's index.
func isolatedLeader(t *testing.T, c *testCluster, topic string) (string, []int64, int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 20*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[0].CreateTopic(ctx, topic, 1, 3, nil))
	part := PartitionName(topic, 0)
	var bases []int64
	for seq := range int32(4) {
		bases = append(bases, c.produce(part, seq))
	}
	lead := c.leaderOf(part)
	for i := range 3 {
		if i != lead {
			c.stop(i)
		}
	}
	return part, bases, lead
}
