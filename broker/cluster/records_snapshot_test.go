package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/log"
)

// smallSegments makes partition logs roll every few batches, so a
// DeleteRecords deletes whole segments (moving raft's FirstIndex).
func smallSegments(c *testCluster) {
	c.tune = func(cfg *Config) {
		cfg.LogConfig = func(map[string]string) log.Config {
			lc := log.DefaultConfig()
			lc.SegmentBytes = 300
			return lc
		}
	}
}

// TestDeleteRecordsLaggingFollowerSnapshot: a follower down
// while the leader deletes segments it never had comes back through a
// snapshot (where the leader's log begins: a segment's base, below the
// leader's log start) and must end at the leader's log start.
func TestDeleteRecordsLaggingFollowerSnapshot(t *testing.T) {
	c := newTestCluster(t, 3)
	// Restart with small segments for partitions.
	smallSegments(c)
	for i := range 3 {
		c.stop(i)
	}
	for i := range 3 {
		c.start(i)
	}
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 20*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "lag", 1, 3, nil))
	const part = "lag-0"
	c.produce(part, 0)
	lead := c.leaderOf(part)
	down := (lead + 1) % 3
	c.stop(down)
	var bases []int64
	for seq := int32(1); seq < 40; seq++ {
		bases = append(bases, c.produce(part, seq))
	}
	cut := bases[31]
	lead = c.leaderOf(part)
	low, err := c.nodes[lead].DeleteRecords(ctx, part, cut)
	require.NoError(t, err)
	require.Equal(t, cut, low)
	_, lp, _ := c.nodes[lead].Group(part)
	t.Logf("leader log start %d first ordinal %d", lp.LogStartOffset(), lp.FirstOrdinal())
	require.Greater(t, lp.FirstOrdinal(), int64(3), "segments deleted")
	fo, err := lp.OrdinalOffset(lp.FirstOrdinal())
	require.NoError(t, err)
	t.Logf("leader's first entry at offset %d", fo)

	c.start(down)
	require.Eventually(t, func() bool {
		_, p, ok := c.nodes[down].Group(part)
		return ok && p.HighWatermark() >= lp.HighWatermark()
	}, 20*time.Second, 10*time.Millisecond, "the follower catches up")
	require.Eventually(t, func() bool {
		_, p, _ := c.nodes[down].Group(part)
		return p.LogStartOffset() == cut
	}, 10*time.Second, 10*time.Millisecond, "the follower's log start")
	_, fp, _ := c.nodes[down].Group(part)
	t.Logf("follower log start %d first ordinal %d hw %d", fp.LogStartOffset(), fp.FirstOrdinal(), fp.HighWatermark())

	// The caught-up follower leads: its earliest offset is the cut.
	c.stop(lead)
	c.produce(part, 40)
	next := c.leaderOf(part)
	_, np, _ := c.nodes[next].Group(part)
	require.Equal(t, cut, np.LogStartOffset())
}
