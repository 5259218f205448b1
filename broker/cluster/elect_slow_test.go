package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestElectSkipsSlowPreferred: a preferred election of a replica that is
// in the ISR but cannot catch up (its fsyncs take three election
// timeouts), asked again and again by a client, leaves the leader
// refusing produces for a small part of the time only: raft refuses
// every proposal while a transfer is pending, each try is cancelled
// after transferTicks, and the tries wait longer and longer. The first
// version made a try each election timeout until the request's
// deadline (review: 1,340 to 2,556 refusals in 4 s), the bug
// TestRebalanceSkipsSlowPreferred guards against for the rebalance.
func TestElectSkipsSlowPreferred(t *testing.T) {
	c, name, to := slowPreferredCluster(t, false, time.Hour, true)
	leader := c.nodes[to-1]

	ectx, ecancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer ecancel()
	res := make(chan error, 1)
	var tries atomic.Int32
	go func() {
		for {
			tries.Add(1)
			err := leader.ElectPreferred(ectx, []string{name})[name]
			if !errors.Is(err, ErrPreferredNotAvailable) || ectx.Err() != nil {
				res <- err
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	ok, refused, refusedFor := produceAgainst(t, leader, name, 4*time.Second)
	st, _, _ := leader.Group(name)
	t.Logf("requests %d (last: %v); produces ok %d, refused by the leader %d, for %s in all; still leader %v",
		tries.Load(), <-res, ok, refused, refusedFor.Round(time.Millisecond), st.IsLeader)
	require.Less(t, refusedFor, 400*time.Millisecond, "the leader refused produces for a tenth of the time or more")
	require.True(t, st.IsLeader)
}
