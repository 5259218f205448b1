package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// electCluster is three brokers, automatic rebalancing off, with topic
// "el" of three RF 3 partitions, each led by its preferred replica.
func electCluster(t *testing.T) (*testCluster, [][]uint64) {
	c := newTestCluster(t, 3)
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 20*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "el", 3, 3, nil))
	replicas := c.nodes[0].Image().Topics["el"].Partitions
	for i, rs := range replicas {
		// A new partition's preferred replica campaigns first, but on a
		// loaded machine (-race, other tests) another can win the first
		// election: then it is moved by hand.
		moveLeader(t, c, PartitionName("el", int32(i)), rs[0])
	}
	return c, replicas
}

// moveLeader hands partition name's leadership to replica to, and
// waits for every broker's metadata to show it, with every replica in
// the ISR. Asked again every half second of whichever broker leads
// then: raft gives a transfer one election timeout (100 ms here), which
// a slow run (-race) can miss, and an election a transfer set off can
// be won by the third replica.
func moveLeader(t *testing.T, c *testCluster, name string, to uint64) {
	var asked time.Time
	require.Eventually(t, func() bool {
		if time.Since(asked) > 500*time.Millisecond {
			transferByHand(t, c, c.leaderOf(name), name, to)
			asked = time.Now()
		}
		for _, nd := range c.nodes { // every broker's image (the asker's too)
			if nd == nil {
				continue
			}
			if ps, ok := nd.PartitionState(name); !ok || ps.Leader != to || len(ps.ISR) != 3 {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "%s moved to %d", name, to)
}

// TestElectPreferred: ElectPreferred makes a partition's preferred
// replica its leader again (raft's leadership transfer, asked of the
// current leader through the metadata log), asked of any broker; a
// partition whose preferred replica leads needs no election; an unknown
// one is refused; a fenced preferred replica is not available.
func TestElectPreferred(t *testing.T) {
	c, replicas := electCluster(t)
	p0 := PartitionName("el", 0)
	pref, other := replicas[0][0], replicas[0][1]

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := c.nodes[2].ElectPreferred(ctx, []string{p0, "el-7", "nope-0"})
	require.ErrorIs(t, out[p0], ErrElectionNotNeeded)
	require.ErrorIs(t, out["el-7"], ErrUnknownPartition)
	require.ErrorIs(t, out["nope-0"], ErrUnknownPartition)

	moveLeader(t, c, p0, other)
	// Asked of a broker that neither leads it nor is its preferred
	// replica, where there is one.
	asker := c.nodes[0]
	for _, id := range []uint64{1, 2, 3} {
		if id != pref && id != other {
			asker = c.nodes[id-1]
		}
	}
	out = asker.ElectPreferred(ctx, []string{p0, PartitionName("el", 1)})
	require.NoError(t, out[p0])
	require.ErrorIs(t, out[PartitionName("el", 1)], ErrElectionNotNeeded)
	st, _, ok := c.nodes[pref-1].Group(p0)
	require.True(t, ok)
	require.True(t, st.IsLeader, "the preferred replica leads")

	// The preferred replica down: fenced, not available.
	moveLeader(t, c, p0, other)
	c.stop(int(pref - 1))
	require.Eventually(t, func() bool { return c.nodes[other-1].Fenced(pref) }, 20*time.Second, 10*time.Millisecond)
	out = c.nodes[other-1].ElectPreferred(ctx, []string{p0})
	require.ErrorIs(t, out[p0], ErrPreferredNotAvailable)
}

// TestElectNotActedOnLate: an elect_preferred record applied past its
// request's deadline (a broker applying it late, or replaying its log)
// moves no leader: a leader handed back by a user's old request would
// be a surprise.
func TestElectNotActedOnLate(t *testing.T) {
	c, replicas := electCluster(t)
	p0 := PartitionName("el", 0)
	pref, other := replicas[0][0], replicas[0][1]
	moveLeader(t, c, p0, other)

	var id [16]byte
	copy(id[:], c.nodes[0].Image().Topics["el"].ID[:])
	c.nodes[other-1].applyElect(&electRequest{Partitions: []electPartition{{Name: p0, TopicID: id}},
		Until: time.Now().Add(-time.Second).UnixMilli()})
	time.Sleep(300 * time.Millisecond) // thirty ticks
	st, _, _ := c.nodes[other-1].Group(p0)
	require.True(t, st.IsLeader, "moved by a late request")

	// The same within its deadline moves it.
	c.nodes[other-1].applyElect(&electRequest{Partitions: []electPartition{{Name: p0, TopicID: id}},
		Until: time.Now().Add(time.Minute).UnixMilli()})
	require.Eventually(t, func() bool {
		st, _, _ := c.nodes[pref-1].Group(p0)
		return st.IsLeader
	}, 20*time.Second, 10*time.Millisecond)
}

// TestElectTimesOut: a leader that cannot hand over (its preferred
// replica refuses: here, one that is stopped after the request was
// checked) leaves the request to its deadline: ctx's error.
func TestElectTimesOut(t *testing.T) {
	c, replicas := electCluster(t)
	p0 := PartitionName("el", 0)
	pref, other := replicas[0][0], replicas[0][1]
	moveLeader(t, c, p0, other)
	// Cut the preferred replica off from the others: the image still
	// shows it in the ISR for a moment, and no transfer can reach it.
	c.nodes[pref-1].tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	out := c.nodes[other-1].ElectPreferred(ctx, []string{p0})
	err := out[p0]
	require.Error(t, err)
	require.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrPreferredNotAvailable), "%v", err)
}

// TestISRSteadyWhenIdle: an idle cluster's published ISRs stay whole,
// and the metadata log quiet: a follower dropped from the ISR for a
// moment each election timeout (raft's CheckQuorum clears its activity
// flags; replica.TestISRSteadyAcrossCheckQuorum) cost two metadata
// records per partition each time, and Metadata showed the flaps.
func TestISRSteadyWhenIdle(t *testing.T) {
	c, replicas := electCluster(t)
	time.Sleep(300 * time.Millisecond) // settled
	before := c.nodes[0].Image().Applied
	deadline := time.Now().Add(2 * time.Second) // twenty election timeouts
	for time.Now().Before(deadline) {
		for i := range replicas {
			ps, ok := c.nodes[0].PartitionState(PartitionName("el", int32(i)))
			require.True(t, ok)
			require.Len(t, ps.ISR, 3, "el-%d's ISR", i)
		}
		time.Sleep(2 * time.Millisecond)
	}
	require.Less(t, c.nodes[0].Image().Applied-before, uint64(5), "metadata records while idle")
}
