package cluster

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/broker/clustertest"
	"github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/protocol"
)

// TestProduceKeepsNoRecords: ProduceAsync's records are the caller's
// again once released is closed, long before the commit: a producer
// that writes every batch into one buffer, and scribbles over it as
// soon as it is released, still gets every batch committed intact on
// all three replicas (the leader's log, and what raft sent the
// followers). This holds because raft copies each proposed entry
// (raft.appendEntry clones it): a raft version that stopped doing so
// fails here, as would any reference this package kept.
func TestProduceKeepsNoRecords(t *testing.T) {
	c := newTestCluster(t, 3)
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 20*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "scribble", 1, 3, nil))
	const part = "scribble-0"
	leader := c.nodes[c.leaderOf(part)]

	const n = 300
	type outcome struct {
		res log.AppendResult
		err error
	}
	results := make([]chan outcome, n)
	var buf []byte
	for seq := range int32(n) {
		buf = append(buf[:0], clustertest.Batch(seq)...)
		ch := make(chan outcome, 1)
		results[seq] = ch
		released := leader.ProduceAsync(part, buf, 0, func(res log.AppendResult, err error) { ch <- outcome{res, err} })
		select {
		case <-released:
		case <-ctx.Done():
			t.Fatal("records never released")
		}
		for i := range buf {
			buf[i] = 0xAA
		}
	}
	offsets := map[int32]int64{}
	for seq, ch := range results {
		select {
		case o := <-ch:
			require.NoError(t, o.err, "sequence %d", seq)
			offsets[int32(seq)] = o.res.BaseOffset
		case <-ctx.Done():
			t.Fatalf("sequence %d never answered", seq)
		}
	}

	require.Eventually(t, func() bool {
		var logs [][]byte
		for _, nd := range c.nodes {
			_, p, ok := nd.Group(part)
			if !ok {
				return false
			}
			b, err := readCommitted(p)
			if err != nil || p.HighWatermark() <= offsets[n-1] {
				return false
			}
			logs = append(logs, b)
		}
		return bytes.Equal(logs[0], logs[1]) && bytes.Equal(logs[0], logs[2])
	}, 20*time.Second, 20*time.Millisecond, "replicas never converged")
	_, p, _ := c.nodes[0].Group(part)
	b, err := readCommitted(p)
	require.NoError(t, err)
	seen := map[int32]int64{}
	for len(b) > 0 {
		h, err := protocol.ParseBatchHeader(b)
		require.NoError(t, err)
		require.True(t, protocol.VerifyBatchCRC(b[:h.Size()]), "batch at %d", h.BaseOffset)
		if !h.IsControl() {
			seen[h.BaseSequence] = h.BaseOffset
		}
		b = b[h.Size():]
	}
	require.Equal(t, offsets, seen)
}

// TestProduceAnsweredAfterClose: a produce handed to a closed broker is
// answered and its records released at once, never left waiting in the
// queue of a goroutine that has returned.
func TestProduceAnsweredAfterClose(t *testing.T) {
	c := newTestCluster(t, 3)
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 20*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "closing", 1, 3, nil))
	const part = "closing-0"
	i := c.leaderOf(part)
	nd := c.nodes[i]
	c.stop(i)
	for seq := range int32(10) {
		done := make(chan error, 1)
		released := nd.ProduceAsync(part, clustertest.Batch(seq), 0, func(_ log.AppendResult, err error) { done <- err })
		select {
		case <-released:
		case <-time.After(5 * time.Second):
			t.Fatal("records never released")
		}
		select {
		case err := <-done:
			require.Error(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("never answered")
		}
	}
}
