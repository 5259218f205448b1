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
		// Duplicates and the member itself in the list change nothing.
		require.Equal(t, 34, h.p.HeadShare("m3", []string{"m2"}))
		require.Equal(t, 34, h.p.HeadShare("m3", []string{"m2", "m3", "m2"}))
		// m1 accepts 50 of its records: it holds 10 and may take up to
		// the share of 50 again, i.e. 40.
		h.ack("m1", 0, 49, AckAccept)
		require.Equal(t, 40, h.p.HeadShare("m1", []string{"m2"}))
		// The harness's acquire has no bound: the broker passes the
		// share as maxRecords.
		require.Len(t, offsets(h.acquire("m1", 40)), 40)
		require.Equal(t, 0, h.p.HeadShare("m1", []string{"m2"}))
		require.Len(t, offsets(h.acquire("m2", 500)), 50, "the heads m1 left")
	})

	t.Run("finished groups are not counted", func(t *testing.T) {
		// Offsets 0-99: the heads of g0..g99; 100-399: a hundred more
		// records each of g0, g1, g2, a backlog behind their heads.
		groups := make([]string, 0, 400)
		for i := range 100 {
			groups = append(groups, fmt.Sprintf("g%d", i))
		}
		for i := range 300 {
			groups = append(groups, fmt.Sprintf("g%d", i%3))
		}
		h := newGroupHarness(t, &groupLog{groups: groups, batchSize: 50}, ordered)
		require.Len(t, offsets(h.acquire("m1", 100)), 100)
		// All but offset 0 accepted: the SPSO stays at 0, and g3..g99,
		// finished, stay live until it passes them. Three groups have
		// records left: g0 (its head held by m1), g1 and g2. With m1 and
		// m2, share 2, so m1 may take one more.
		h.ack("m1", 1, 99, AckAccept)
		require.Equal(t, 100, h.p.mg.live())
		require.Equal(t, 1, h.p.HeadShare("m1", []string{"m2"}))
	})

	t.Run("records without a group count as records held", func(t *testing.T) {
		// Offsets 0-49: no group; 50-59: the heads of g0..g9.
		groups := make([]string, 60)
		for i := 50; i < 60; i++ {
			groups[i] = fmt.Sprintf("g%d", i-50)
		}
		h := newGroupHarness(t, &groupLog{groups: groups, batchSize: 60}, ordered)
		require.Equal(t, int64(49), offsets(h.acquire("m2", 50))[49], "m2 took the 50 records without a group")
		// m2 waits, busy with them: not hungry.
		require.Equal(t, -1, h.p.HeadShare("m1", []string{"m2"}))
		// m1 waits with nothing: m2 is past its share of ceil(10/2).
		require.Equal(t, 0, h.p.HeadShare("m2", []string{"m1"}))
	})

	t.Run("locks that ran out are held by nobody once expired", func(t *testing.T) {
		h := newGroupHarness(t, headShareLog(), ordered)
		require.Len(t, offsets(h.acquire("m1", 60)), 60)
		h.now = h.now.Add(h.p.Config().RecordLockDuration + time.Second)
		require.Equal(t, 0, h.p.HeadShare("m1", []string{"m2"}), "not expired yet")
		h.keep(h.p.ExpireLocks(h.now)) // as the broker does before asking
		require.Equal(t, 50, h.p.HeadShare("m1", []string{"m2"}))
	})

	t.Run("records held by the redelivery backoff are no member's", func(t *testing.T) {
		h := newGroupHarness(t, headShareLog(), ordered, func(c *Config) {
			c.RedeliveryBackoff = time.Minute
			c.RedeliveryBackoffMax = time.Minute
		})
		require.Len(t, offsets(h.acquire("m1", 60)), 60)
		h.ack("m1", 0, 59, AckRelease) // now backing off, held internally
		// Nobody holds records; the 60 groups backing off still count
		// (their next record is not terminal), so m1 and m2 contend for
		// 100: share 50. Only 40 heads are Available meanwhile.
		require.Equal(t, 50, h.p.HeadShare("m1", []string{"m2"}))
	})

	t.Run("only ordered mode is bounded", func(t *testing.T) {
		for _, mode := range []GroupMode{GroupsNone, GroupsFair} {
			h := newGroupHarness(t, headShareLog(), func(c *Config) { c.Groups = mode })
			require.Equal(t, -1, h.p.HeadShare("m1", []string{"m2"}), "mode %v", mode)
		}
	})
}

// The groups' open-record counts (msgGroups.open) follow records that
// leave the window below a new log start without becoming terminal.
func TestGroupsOpenAfterLogStartMoves(t *testing.T) {
	t.Parallel()
	h := newGroupHarness(t, headShareLog(), func(c *Config) { c.Groups = GroupsOrdered })
	require.Len(t, offsets(h.acquire("m", 50)), 50)
	require.Equal(t, 100, h.p.mg.openGroups)
	h.keep(h.p.AdvanceLogStart(150)) // keep checks the counts (checkGroups)
	require.Equal(t, 50, h.p.mg.openGroups, "g50..g99 keep their second records")
}
