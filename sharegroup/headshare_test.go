package sharegroup

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// headShareLog is 100 message groups of two records each, group by group
// round-robin: offsets 0-99 are every group's head.
func headShareLog() *groupLog {
	groups := make([]string, 200)
	for i := range groups {
		groups[i] = fmt.Sprintf("g%d", i%100)
	}
	return &groupLog{groups: groups, batchSize: 50}
}

func TestHeadShare(t *testing.T) {
	t.Parallel()
	ordered := func(c *Config) { c.Groups = GroupsOrdered }

	t.Run("no bound without a hungry waiting member", func(t *testing.T) {
		h := newGroupHarness(t, headShareLog(), ordered)
		require.Len(t, offsets(h.acquire("m1", 50)), 50)
		require.Equal(t, -1, h.p.HeadShare("m1", nil), "nobody waits")
		require.Equal(t, -1, h.p.HeadShare("m1", []string{"m1"}), "only the member itself waits")
		// m2 holds 50 of the 100 heads, its share with m1 and m2
		// contending: it is not hungry.
		require.Len(t, offsets(h.acquire("m2", 50)), 50)
		require.Equal(t, -1, h.p.HeadShare("m1", []string{"m2"}))
	})

	t.Run("a hungry waiting member bounds the others", func(t *testing.T) {
		h := newGroupHarness(t, headShareLog(), ordered)
		require.Len(t, offsets(h.acquire("m1", 60)), 60)
		// Contenders m1 (holding 60) and m2: a share of 50, which m1
		// already exceeds.
		require.Equal(t, 0, h.p.HeadShare("m1", []string{"m2"}))
		// m3 asks while m2 waits: m1, m2, m3 contend, ceil(100/3) = 34.
		require.Equal(t, 34, h.p.HeadShare("m3", []string{"m2"}))
		// Duplicates and the member itself in the list change nothing.
		require.Equal(t, 34, h.p.HeadShare("m3", []string{"m2", "m3"}))
		// m1 acknowledges 50 of its records: it holds 10 and may take up
		// to the share of 50 again, i.e. 40 (nothing is available beyond
		// the 50 heads it freed and the 40 nobody took).
		for o := int64(0); o < 50; o++ {
			h.ack("m1", o, o, AckAccept)
		}
		require.Equal(t, 40, h.p.HeadShare("m1", []string{"m2"}))
		// The harness's acquire has no bound: the broker passes the
		// share as maxRecords.
		got := offsets(h.acquire("m1", 40))
		require.Len(t, got, 40)
		require.Equal(t, 0, h.p.HeadShare("m1", []string{"m2"}))
		// What is left goes to m2.
		require.Equal(t, -1, h.p.HeadShare("m2", nil))
		rest := offsets(h.acquire("m2", 500))
		require.Len(t, rest, 50, "the 50 heads m1 left")
	})

	t.Run("records held by the redelivery backoff are no member's", func(t *testing.T) {
		h := newGroupHarness(t, headShareLog(), ordered, func(c *Config) {
			c.RedeliveryBackoff = time.Minute
			c.RedeliveryBackoffMax = time.Minute
		})
		require.Len(t, offsets(h.acquire("m1", 60)), 60)
		for o := int64(0); o < 60; o++ {
			h.ack("m1", o, o, AckRelease) // now backing off, held internally
		}
		// The 60 released heads still count as live groups, but nobody
		// holds records: contenders m1 and m2, share 50.
		require.Equal(t, 50, h.p.HeadShare("m1", []string{"m2"}))
	})

	t.Run("only ordered mode is bounded", func(t *testing.T) {
		for _, mode := range []GroupMode{GroupsNone, GroupsFair} {
			h := newGroupHarness(t, headShareLog(), func(c *Config) { c.Groups = mode })
			require.Equal(t, -1, h.p.HeadShare("m1", []string{"m2"}), "mode %v", mode)
		}
	})
}
