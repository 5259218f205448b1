package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/broker/clustertest"
)

// TestElectDoneStaysDone: after a preferred election that succeeded, the
// preferred replica dies within the request's deadline: the new leader
// does not hand leadership back to it (the election is over once it
// led), and refuses no produce. Found by review: the first version kept
// the request alive to its deadline and counted a dead replica in sync
// in a new term's first election timeout, so the new leader transferred
// to it and refused 79 to 159 produces.
func TestElectDoneStaysDone(t *testing.T) {
	for _, elect := range []bool{false, true} {
		t.Run(map[bool]string{false: "baseline", true: "elect"}[elect], func(t *testing.T) {
			c, replicas := electCluster(t)
			p0 := PartitionName("el", 0)
			pref, other := replicas[0][0], replicas[0][1]
			moveLeader(t, c, p0, other)
			if elect {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				require.NoError(t, c.nodes[other-1].ElectPreferred(ctx, []string{p0})[p0])
			} else {
				moveLeader(t, c, p0, pref)
			}
			c.stop(int(pref - 1))
			var refused, ok int
			deadline := time.Now().Add(3 * time.Second)
			seq := int32(0)
			for time.Now().Before(deadline) {
				for i, nd := range c.nodes {
					if nd == nil {
						continue
					}
					st, _, _ := nd.Group(p0)
					if !st.IsLeader {
						continue
					}
					pctx, pcancel := context.WithTimeout(context.Background(), time.Second)
					_, err := nd.Produce(pctx, p0, clustertest.Batch(seq))
					pcancel()
					var nl *ErrNotLeader
					if err == nil {
						ok++
						seq++
					} else if errors.As(err, &nl) {
						if st, _, _ := nd.Group(p0); st.IsLeader {
							refused++
							t.Logf("refused by leader %d, %v before the end: %v", i+1, time.Until(deadline), err)
						}
					}
				}
				time.Sleep(time.Millisecond)
			}
			t.Logf("ok %d refused-by-leader %d", ok, refused)
			require.Zero(t, refused, "produces refused by a leader")
			require.NotZero(t, ok)
		})
	}
}
