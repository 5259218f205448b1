package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFollowersDropCache: a partition's followers drop what their
// fsyncs made durable from the page cache and its leader keeps it (it
// serves the consumers), and that follows the leadership when it moves.
func TestFollowersDropCache(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "drops", 1, 3, nil))
	const part = "drops-0"
	c.produce(part, 0)

	dropsOnlyOff := func(leader int) bool {
		for i, nd := range c.nodes {
			if nd == nil {
				continue
			}
			_, p, ok := nd.Group(part)
			if !ok || p.DropsCache() != (i != leader) {
				return false
			}
		}
		return true
	}
	old := c.leaderOf(part)
	require.Eventually(t, func() bool { return dropsOnlyOff(old) }, 10*time.Second, 10*time.Millisecond)

	c.stop(old)
	c.produce(part, 1)
	now := c.leaderOf(part)
	require.NotEqual(t, old, now)
	require.Eventually(t, func() bool { return dropsOnlyOff(now) }, 10*time.Second, 10*time.Millisecond)
}
