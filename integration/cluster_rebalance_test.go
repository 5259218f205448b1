package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterLeadersReturn: three broker processes with a short
// leader.imbalance.check.interval.seconds; one is SIGKILLed, its
// partitions fail over, and once it is back and caught up Metadata
// shows every partition led by its preferred replica again (the first
// of its replicas), as with Kafka's auto.leader.rebalance.enable.
func TestClusterLeadersReturn(t *testing.T) {
	const topic = "balanced"
	children, adm, ctx := sixPartitionCluster(t, topic, "--leader-imbalance-check-interval", "1")
	atPreferred := func() (n int) {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return -1
		}
		for _, p := range md.Topics[topic].Partitions {
			if p.Err == nil && len(p.Replicas) > 0 && p.Leader == p.Replicas[0] && p.LeaderEpoch >= 0 {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return atPreferred() == 6 }, 30*time.Second, 100*time.Millisecond, "a new topic's leaders")

	children[0].kill()
	require.Eventually(t, func() bool { return atPreferred() == 4 }, 30*time.Second, 100*time.Millisecond, "broker 1's two partitions failed over")
	children[0].start()
	require.Eventually(t, func() bool { return atPreferred() == 6 }, 60*time.Second, 100*time.Millisecond,
		"leaders back at their preferred replicas (%d of 6)", atPreferred())
}

// sixPartitionCluster starts three broker processes with the flags
// extra and creates topic (six RF 3 partitions) through a kadm client;
// the context ends with the test, within two minutes. Skipped against
// external seeds.
func sixPartitionCluster(t *testing.T, topic string, extra ...string) ([]*clusterChild, *kadm.Client, context.Context) {
	t.Helper()
	if len(externalSeeds()) > 0 {
		t.Skipf("runs its own shoal binaries; %s is set", seedsEnv)
	}
	children := newCluster(t, 3, nil)
	for _, c := range children {
		c.extra = extra
		c.start()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	// franz-go answers Metadata from a cache younger than MetadataMinAge
	// (5 s by default): the tests poll leaders and ISRs that move.
	adm := kadm.NewClient(newClusterClient(t, seedsOf(children), kgo.MetadataMinAge(50*time.Millisecond)))
	createClusterTopic(t, ctx, adm, topic, 6, 3)
	return children, adm, ctx
}
