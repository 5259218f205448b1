//go:build linux

package integration

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Ordered share crash test parameters: ordered mode delivers at most one
// record per message group at a time, each after the previous one's end is
// durable (an fsync per step of a group), so it drains far slower than the
// plain test; 6,000 records in 60 groups (100 per group) keep it well under
// a minute on two cores under -race with CI's kill count.
const (
	shareOrderedCrashRecords = 6000
	shareOrderedCrashGroups  = 60 // a multiple of shareCrashPartitions
)

// TestShareOrderedCrashRecovery is TestShareCrashRecovery in ordered mode
// (share.message.group.source=key, share.message.group.ordered=true), with
// records keyed "g<id%60>" (a group's records all in partition id%3), half
// as many kills (at least 3), and the same accepts, releases, rejects and
// poison records. On top of all of TestShareCrashRecovery's checks, after
// every restart and at the end:
//
//   - for every message group, its deliveries ordered by when the client
//     decoded them never go back in offset: the broker hands out a group's
//     next record only once the end of the previous one (accept, reject,
//     release at the limit, or lock expiry at the limit) is durable, so a
//     crash may deliver a record again only if no later record of its group
//     was delivered before; a release or a lock expiry below the limit
//     delivers the same record again first;
//   - no ShareFetch response holds two records of one message group.
//
// The same caveat as TestShareCrashRecovery's applies: a response of an
// earlier broker run decoded only after a later run delivered the group's
// next record would be misread as going back.
//
// Not parallel, like TestShareCrashRecovery, so kill timing and lock expiry
// are not at the mercy of other brokers competing for two cores.
func TestShareOrderedCrashRecovery(t *testing.T) {
	runShareCrash(t, shareCrashConfig{
		name:    "share-ordered-crash",
		cycles:  max(crashCycles(t)/2, 3),
		records: shareOrderedCrashRecords,
		groups:  shareOrderedCrashGroups,
		drain:   30 * time.Second,
	})
}

// groupOrderViolations checks the ordered-mode promises (see
// TestShareOrderedCrashRecovery) on the history: a message group's
// deliveries, ordered by decode time, never go back in offset, and no
// response (one decode time of one consumer) holds two of its records.
// It reports at most the first backward step of each group. mu must be
// held.
func (h *shareCrashHistory) groupOrderViolations() []string {
	type groupDelivery struct {
		id     int
		offset int64
		d      shareDelivery
	}
	byGroup := make([][]groupDelivery, h.groups)
	for id, ds := range h.deliveries {
		g := id % h.groups
		for _, d := range ds {
			byGroup[g] = append(byGroup[g], groupDelivery{id, h.where[id].offset, d})
		}
	}
	var out []string
	describe := func(x groupDelivery) string {
		return fmt.Sprintf("record %d (%d/%d) count %d to consumer %d at %s",
			x.id, h.where[x.id].partition, x.offset, x.d.count, x.d.consumer, h.stamp(x.d.at))
	}
	for g, ds := range byGroup {
		// Equal decode times are one response: its records in offset
		// order, so that they are not misread as going back.
		sort.SliceStable(ds, func(i, j int) bool {
			if !ds[i].d.at.Equal(ds[j].d.at) {
				return ds[i].d.at.Before(ds[j].d.at)
			}
			return ds[i].offset < ds[j].offset
		})
		high := -1 // index in ds of the highest offset delivered so far
		reported := false
		for i, x := range ds {
			if i > 0 {
				prev := ds[i-1]
				if prev.d.at.Equal(x.d.at) && prev.d.consumer == x.d.consumer && prev.offset != x.offset {
					out = append(out, fmt.Sprintf("message group g%d: one response held two of its records: %s and %s",
						g, describe(prev), describe(x)))
				}
			}
			if high >= 0 && x.offset < ds[high].offset && !reported {
				out = append(out, fmt.Sprintf("message group g%d went back: %s was delivered after %s",
					g, describe(x), describe(ds[high])))
				reported = true
			}
			if high < 0 || x.offset > ds[high].offset {
				high = i
			}
		}
	}
	return out
}

// TestShareOrderedCrashChecker proves groupOrderViolations catches what it
// is for, on synthetic histories: a crash that delivers a record again
// after its group's next record was delivered (the barrier broken), and a
// response with two records of one group; and that releases, lock
// expiries, redeliveries after a crash before the next record, and other
// groups' interleaving pass.
func TestShareOrderedCrashChecker(t *testing.T) {
	t.Parallel()
	const groups = 6
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	newHistory := func() *shareCrashHistory {
		h := newShareCrashHistory(1, 60, groups)
		// Record id at partition id%3, offset id/3: group g's records
		// g, g+6, g+12, ... have increasing offsets in partition g%3.
		for id := range h.where {
			h.where[id] = shareOffset{int32(id % shareCrashPartitions), int64(id / shareCrashPartitions)}
		}
		h.runs = []brokerRun{{started: ms(0), ready: ms(10)}, {started: ms(1000), ready: ms(1010)}}
		return h
	}
	deliver := func(h *shareCrashHistory, id int, count int32, at time.Time, consumer int) {
		h.deliveries[id] = append(h.deliveries[id], shareDelivery{count: count, at: at, consumer: consumer, action: kgo.AckAccept})
	}

	// Allowed: group 1 (records 1, 7, 13, 19) with a release of 7 (count
	// 2 next), a crash that redelivers 13 before 19 was ever delivered,
	// the lock of 19 expiring; group 2 interleaved, and groups 1 and 2 in
	// one response.
	ok := newHistory()
	deliver(ok, 1, 1, ms(100), 0)
	deliver(ok, 2, 1, ms(100), 0)
	deliver(ok, 7, 1, ms(200), 1)
	deliver(ok, 8, 1, ms(250), 1)
	deliver(ok, 7, 2, ms(300), 2)
	deliver(ok, 13, 1, ms(400), 0)
	deliver(ok, 13, 1, ms(1100), 3) // after the crash: its accept was not durable
	deliver(ok, 19, 1, ms(1200), 3)
	deliver(ok, 19, 2, ms(4300), 1) // lock expiry
	deliver(ok, 14, 1, ms(4300), 1)
	require.Empty(t, ok.groupOrderViolations())

	// Broken barrier: 13 is delivered after 19 was.
	back := newHistory()
	deliver(back, 1, 1, ms(100), 0)
	deliver(back, 7, 1, ms(200), 1)
	deliver(back, 13, 1, ms(300), 2)
	deliver(back, 19, 1, ms(400), 0) // handed out before 13's accept was durable
	deliver(back, 13, 1, ms(1100), 1)
	deliver(back, 25, 1, ms(1200), 1)
	v := back.groupOrderViolations()
	require.Len(t, v, 1, "%v", v)
	require.True(t, strings.HasPrefix(v[0], "message group g1 went back: record 13 (1/4) count 1 to consumer 1"), v[0])
	require.Contains(t, v[0], "after record 19 (1/6) count 1 to consumer 0")

	// Two records of group 4 in one response.
	two := newHistory()
	deliver(two, 4, 1, ms(100), 2)
	deliver(two, 10, 1, ms(100), 2)
	v = two.groupOrderViolations()
	require.Len(t, v, 1, "%v", v)
	require.Contains(t, v[0], "message group g4: one response held two of its records")
}
