package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLeadersReturnToPreferred: with AutoLeaderRebalance, a broker that
// was down gets the leadership of the partitions preferring it back
// once it is in sync again (raft's leadership transfer), as Kafka's
// auto.leader.rebalance.enable does; without it they stay where the
// failover put them.
func TestLeadersReturnToPreferred(t *testing.T) {
	for _, on := range []bool{true, false} {
		c := newTestCluster(t, 3)
		for i := range c.nodes {
			c.stop(i)
		}
		c.tune = func(cfg *Config) {
			cfg.AutoLeaderRebalance, cfg.LeaderImbalancePercentage, cfg.LeaderImbalanceCheckInterval = on, 10, 200*time.Millisecond
		}
		for i := range c.nodes {
			c.start(i)
		}
		require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 20*time.Second, 10*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		require.NoError(t, c.nodes[0].CreateTopic(ctx, "bal", 6, 3, nil))
		cancel()
		replicas := c.nodes[0].Image().Topics["bal"].Partitions
		atPreferred := func() int {
			n := 0
			for i, rs := range replicas {
				st, ok := c.nodes[rs[0]-1].Leadership(PartitionName("bal", int32(i)))
				if ok && st.IsLeader {
					n++
				}
			}
			return n
		}
		require.Eventually(t, func() bool { return atPreferred() == 6 }, 20*time.Second, 10*time.Millisecond, "new partitions led by their preferred replicas")

		c.stop(0)
		for i, rs := range replicas {
			if rs[0] == 1 {
				c.leaderOf(PartitionName("bal", int32(i))) // failed over
			}
		}
		c.start(0)
		if on {
			require.Eventually(t, func() bool { return atPreferred() == 6 }, 30*time.Second, 20*time.Millisecond,
				"leaders back at their preferred replicas (%d of 6)", atPreferred())
			continue
		}
		time.Sleep(2 * time.Second) // ten checks' worth
		require.Less(t, atPreferred(), 6, "leaders moved back with the rebalance off")
	}
}
