package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/log"
)

// TestDeleteRecordsReplicated: DeleteRecords on a partition's leader
// moves the log start offset of every replica (an entry in the
// partition's raft log), so the deleted records stay deleted when
// another replica leads, and after a restart; a follower answers
// NOT_LEADER, an offset past the high watermark is out of range, -1 is
// the high watermark.
func TestDeleteRecordsReplicated(t *testing.T) {
	c := newTestCluster(t, 3)
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 20*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "dr", 1, 3, nil))
	const part = "dr-0"
	var bases []int64
	for seq := range int32(5) {
		bases = append(bases, c.produce(part, seq))
	}
	cut := bases[3]
	lead := c.leaderOf(part)
	follower := (lead + 1) % 3
	_, err := c.nodes[follower].DeleteRecords(ctx, part, cut)
	var nl *ErrNotLeader
	require.ErrorAs(t, err, &nl)
	_, err = c.nodes[lead].DeleteRecords(ctx, part, 1<<40)
	require.ErrorIs(t, err, log.ErrOffsetOutOfRange)

	low, err := c.nodes[lead].DeleteRecords(ctx, part, cut)
	require.NoError(t, err)
	require.Equal(t, cut, low)
	starts := func(want int64) func() bool {
		return func() bool {
			for _, nd := range c.nodes {
				if nd == nil {
					continue
				}
				if _, p, ok := nd.Group(part); !ok || p.LogStartOffset() != want {
					return false
				}
			}
			return true
		}
	}
	require.Eventually(t, starts(cut), 20*time.Second, 10*time.Millisecond, "every replica's log start offset")
	again, err := c.nodes[lead].DeleteRecords(ctx, part, bases[1]) // below it: nothing changes
	require.NoError(t, err)
	require.Equal(t, cut, again)

	// Another leader keeps it; so does the old one, restarted.
	c.stop(lead)
	next := c.leaderOf(part)
	require.NotEqual(t, lead, next)
	_, p, _ := c.nodes[next].Group(part)
	require.Equal(t, cut, p.LogStartOffset())
	c.produce(part, 5)
	c.start(lead)
	require.Eventually(t, starts(cut), 20*time.Second, 10*time.Millisecond, "after a restart")

	// -1: the high watermark (as asked: the entry itself then lies at
	// it, and moves it one further).
	next = c.leaderOf(part)
	_, p, _ = c.nodes[next].Group(part)
	hw := p.HighWatermark()
	low, err = c.nodes[next].DeleteRecords(ctx, part, -1)
	require.NoError(t, err)
	require.Equal(t, hw, low)
	require.Eventually(t, starts(low), 20*time.Second, 10*time.Millisecond)
}
