package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNewPartitionsElectPreferredReplica: a new topic's partitions are
// led first by their preferred replica (the first of each partition's
// replicas, as Kafka's preferred leader), in the first term: it
// campaigns as soon as it runs the group (openGroup's eager campaigns)
// instead of waiting for an election timeout. The tick is the
// broker's default, so the eager campaigns (half an election timeout)
// end well before any other replica's timer could fire.
func TestNewPartitionsElectPreferredReplica(t *testing.T) {
	c := newTestClusterTick(t, 3, 100*time.Millisecond)
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 30*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[1].CreateTopic(ctx, "preferred", 6, 3, nil))
	for i := range int32(6) {
		name := PartitionName("preferred", i)
		want := c.nodes[0].Replicas("preferred", i)[0]
		lead := c.leaderOf(name)
		st, _, _ := c.nodes[lead].Group(name)
		require.Equal(t, want, uint64(lead+1), "%s: led by %d, not its preferred replica", name, lead+1)
		require.Equal(t, uint64(1), st.Term, "%s: first leader not in the first term", name)
	}

	// RF=1: the only replica leads at once too.
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "single", 3, 1, nil))
	for i := range int32(3) {
		name := PartitionName("single", i)
		lead := c.leaderOf(name)
		require.Equal(t, c.nodes[0].Replicas("single", i)[0], uint64(lead+1), name)
	}
}
