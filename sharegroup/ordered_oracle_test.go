package sharegroup

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// orderedOracle is what an ordered acquisition may deliver now, from the
// records' states and the log's own groups (groups[o], "" for none or an
// offset absent from the log), not from what Classify made of them
// (backoff records count as Acquired, unlike Ranges shows them): among
// the classified offsets [SPSO, known), the first Available record of
// every group with no record Acquired, and every Available record without
// a group, in offset order. While a record beyond known is Acquired (its
// group is not known yet: after a switch from plain mode) only the records
// without a group.
func orderedOracle(p *Partition, groups []string) []int64 {
	first, busy := map[string]int64{}, map[string]bool{}
	blind := false
	var out []int64
	for i := range p.runs {
		st := p.runs[i].meta().state()
		for o := p.runStart(i); o < p.runEnd(i); o++ {
			if o >= p.mg.known {
				blind = blind || st == StateAcquired
				continue
			}
			g := groups[o]
			switch {
			case st == StateAcquired && g != "":
				busy[g] = true
			case st != StateAvailable:
			case g == "":
				out = append(out, o)
			default:
				if _, ok := first[g]; !ok {
					first[g] = o
				}
			}
		}
	}
	for g, o := range first {
		if !busy[g] && !blind {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
}

// Archived gaps (transaction markers, aborted batches, compaction holes,
// absent offsets) are spans without a group that have nothing to deliver:
// they must not keep an ordered fetch walking the window when every group's
// head is in flight.
func TestOrderedArchivedGapsDoNotDefeatTheEarlyReturn(t *testing.T) {
	t.Parallel()
	groups := make([]string, 40)
	for i := range groups {
		groups[i] = fmt.Sprintf("g%d", i%20)
	}
	skip := make([]bool, 5)
	skip[4] = true // offsets 32-39: a control batch (e.g. a commit marker)
	h := newGroupHarness(t, &groupLog{groups: groups, batchSize: 8, skip: skip}, func(c *Config) { c.Groups = GroupsOrdered })
	require.Len(t, offsets(h.acquire("m", 100)), 20) // every group's head in flight
	require.Empty(t, orderedOracle(h.p, groups), "nothing is deliverable")
	require.NotZero(t, h.p.mg.ungrouped, "the marker's span")
	visited := h.p.mg.visited
	require.Empty(t, h.acquire("n", 100))
	require.Equal(t, visited, h.p.mg.visited, "an ordered fetch with nothing to deliver walked the window")
}
