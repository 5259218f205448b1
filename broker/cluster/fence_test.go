package cluster

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFencing: a broker that stops is fenced on every other broker's
// image once the metadata leader has not heard from it for the session
// timeout, whichever broker it was (the metadata leader itself too: the
// next leader fences it), and is no longer fenced once it is back.
func TestFencing(t *testing.T) {
	c := newTestCluster(t, 3)
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 20*time.Second, 10*time.Millisecond)
	fenced := func(want ...uint64) func() bool {
		return func() bool {
			for _, nd := range c.nodes {
				if nd == nil {
					continue
				}
				if im := nd.Image(); !slices.Equal(im.FencedIDs(), want) {
					return false
				}
			}
			return true
		}
	}
	// Nobody is fenced while all are up, for longer than the timeout.
	time.Sleep(2 * testSessionTimeout)
	require.True(t, fenced()(), "fenced with every broker up")

	for _, victim := range []int{c.leaderOf(MetadataGroup), (c.leaderOf(MetadataGroup) + 1) % 3} {
		c.stop(victim)
		require.Eventually(t, fenced(uint64(victim+1)), 20*time.Second, 10*time.Millisecond, "broker %d never fenced", victim+1)
		require.True(t, c.nodes[(victim+1)%3].Fenced(uint64(victim+1)))
		c.start(victim)
		require.Eventually(t, fenced(), 20*time.Second, 10*time.Millisecond, "broker %d still fenced after its restart", victim+1)
	}
}
