package integration

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestClusterElectLeaders: three broker processes with the automatic
// rebalance off; one is SIGKILLed and its partitions fail over. While
// it is down, a preferred election of them is
// PREFERRED_LEADER_NOT_AVAILABLE. Once it is back, kadm's ElectLeaders
// (kafka-leader-election.sh --election-type PREFERRED) of every
// partition answers the moved ones with success after their preferred
// replica leads (Metadata shows it), and leaves out the others, whose
// election was not needed; asked again, each is ELECTION_NOT_NEEDED.
func TestClusterElectLeaders(t *testing.T) {
	const topic = "elect"
	children, adm, ctx := sixPartitionCluster(t, topic, "--auto-leader-rebalance=false")
	moved := func() (ps []int32) {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return nil
		}
		for _, p := range md.Topics[topic].Partitions {
			if p.Err == nil && len(p.Replicas) > 0 && p.Leader != p.Replicas[0] {
				ps = append(ps, p.Partition)
			}
		}
		return ps
	}
	require.Eventually(t, func() bool {
		md, err := adm.Metadata(ctx, topic)
		return err == nil && len(md.Topics[topic].Partitions) == 6 && len(moved()) == 0
	}, 30*time.Second, 100*time.Millisecond, "a new topic's leaders")

	children[0].kill()
	require.Eventually(t, func() bool { return len(moved()) == 2 }, 30*time.Second, 100*time.Millisecond, "broker 1's two partitions failed over")
	away := moved()
	// Asked before the cluster noticed broker 1 is gone (it is still in
	// the ISR and not fenced), the election is attempted and runs into
	// the request's timeout: ask once the ISR no longer has it.
	require.Eventually(t, func() bool {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		for _, p := range md.Topics[topic].Partitions {
			if slices.Contains(away, p.Partition) && slices.Contains(p.ISR, 1) {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "broker 1 out of the moved partitions' ISR")
	rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {away[0]: {}}})
	require.NoError(t, err)
	require.ErrorIs(t, rs[topic][away[0]].Err, kerr.PreferredLeaderNotAvailable, "%s", rs[topic][away[0]].ErrMessage)

	children[0].start()
	restarted := time.Now()
	time.Sleep(3 * time.Second) // the rebalance is off: nothing moves them back
	require.ElementsMatch(t, away, moved())
	// Broker 1 back in every partition's ISR.
	require.Eventually(t, func() bool {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		for _, p := range md.Topics[topic].Partitions {
			if len(p.ISR) != 3 {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "broker 1 in sync")

	t.Logf("broker 1 in sync %s after its restart", time.Since(restarted).Round(time.Millisecond))
	asked := time.Now()
	rs, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	require.NoError(t, err)
	t.Logf("elected in %s", time.Since(asked).Round(time.Millisecond))
	require.Len(t, rs[topic], len(away), "only the moved partitions answered: %v", rs[topic])
	for _, p := range away {
		require.NoError(t, rs[topic][p].Err, "partition %d: %s", p, rs[topic][p].ErrMessage)
	}
	// The broker that answered saw them lead; the one answering Metadata
	// may apply their reports a moment later.
	require.Eventually(t, func() bool { return len(moved()) == 0 }, 5*time.Second, 20*time.Millisecond, "every partition led by its preferred replica")

	rs, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {away[0]: {}, 9: {}}})
	require.NoError(t, err)
	require.ErrorIs(t, rs[topic][away[0]].Err, kerr.ElectionNotNeeded)
	require.ErrorIs(t, rs[topic][9].Err, kerr.UnknownTopicOrPartition)
	rs, err = adm.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{topic: {away[0]: {}}})
	require.NoError(t, err)
	require.ErrorIs(t, rs[topic][away[0]].Err, kerr.ElectionNotNeeded)
}
