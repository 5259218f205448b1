package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/broker/clustertest"
	"github.com/shoal-mq/shoal/broker/replica"
	"github.com/shoal-mq/shoal/log"
)

// TestMinInSyncAboveMajority: with min.insync.replicas 3 on three
// replicas (above raft's majority of two), a produce is answered once
// all three have it durable; with a follower stopped, once the leader
// notices (its ISR shrinks), a produce is NOT_ENOUGH_REPLICAS and
// nothing is appended, while one asking only a majority still commits.
func TestMinInSyncAboveMajority(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "mis", 1, 3, nil))
	const part = "mis-0"
	lead := c.leaderOf(part)
	produce := func(seq int32, minInSync int) (log.AppendResult, error) {
		type outcome struct {
			res log.AppendResult
			err error
		}
		ch := make(chan outcome, 1)
		<-c.nodes[lead].ProduceAsync(part, clustertest.Batch(seq), minInSync, func(res log.AppendResult, err error) { ch <- outcome{res, err} })
		select {
		case o := <-ch:
			return o.res, o.err
		case <-ctx.Done():
			return log.AppendResult{}, ctx.Err()
		}
	}
	// The followers join the ISR once they answer the new leader.
	require.Eventually(t, func() bool {
		_, err := produce(0, 3)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	// Answered only once every replica has it: each follower's log
	// holds the batch by then (durable, as its append response says).
	res, err := produce(1, 3)
	require.NoError(t, err)
	for i, nd := range c.nodes {
		_, p, ok := nd.Group(part)
		require.True(t, ok)
		require.Greater(t, p.LogEndOffset(), res.BaseOffset, "replica %d", i+1)
	}

	f := (lead + 1) % 3
	c.stop(f)
	require.Eventually(t, func() bool {
		_, err := produce(2, 3)
		return err != nil
	}, 10*time.Second, 20*time.Millisecond)
	_, p, _ := c.nodes[lead].Group(part)
	end := p.LogEndOffset()
	_, err = produce(2, 3)
	require.ErrorIs(t, err, replica.ErrNotEnoughReplicas)
	require.Equal(t, end, p.LogEndOffset(), "a refused produce appended nothing")
	_, err = produce(2, 2)
	require.NoError(t, err, "a majority is still in sync")
}
