package sharegroup

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func subs(n int, topics ...string) []MemberSubscription {
	var ms []MemberSubscription
	for i := range n {
		ms = append(ms, MemberSubscription{MemberID: fmt.Sprintf("m%02d", i), Topics: topics})
	}
	return ms
}

// checkBalanced verifies the simple assignor's shape for one homogeneous
// pool: every partition shared by 1..⌈M/P⌉ members, member counts within
// one of each other, no member holding a partition twice.
func checkBalanced(t *testing.T, got map[string][]TopicPartition, m, p int) {
	t.Helper()
	sharing := (m + p - 1) / p
	holders := map[TopicPartition]int{}
	lo, hi := 1<<30, 0
	for id, tps := range got {
		require.True(t, slices.IsSortedFunc(tps, compareTP), id)
		require.Len(t, slices.Compact(slices.Clone(tps)), len(tps), "%s holds a partition twice", id)
		for _, tp := range tps {
			holders[tp]++
		}
		lo, hi = min(lo, len(tps)), max(hi, len(tps))
	}
	require.Len(t, holders, p, "every partition assigned")
	for tp, n := range holders {
		require.LessOrEqual(t, n, sharing, "%v", tp)
	}
	require.LessOrEqual(t, hi-lo, 1, "balanced: %d..%d", lo, hi)
}

// "M ≤ P behaves like a consumer group; M > P shares each partition among
// ⌈M/P⌉ members." (kip932.md §2)
func TestAssignSimpleShapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ m, p int }{{1, 1}, {1, 6}, {3, 6}, {4, 6}, {6, 6}, {7, 6}, {8, 1}, {8, 3}, {13, 5}, {200, 7}} {
		t.Run(fmt.Sprintf("M=%d,P=%d", tc.m, tc.p), func(t *testing.T) {
			got := AssignSimple(subs(tc.m, "t"), map[string]TopicInfo{"t": {Partitions: int32(tc.p)}})
			require.Len(t, got, tc.m)
			checkBalanced(t, got, tc.m, tc.p)
			if tc.m <= tc.p {
				n := 0
				for _, tps := range got {
					n += len(tps)
				}
				require.Equal(t, tc.p, n, "each partition exactly once")
			}
			if tc.m%tc.p == 0 {
				for _, tps := range got {
					require.Len(t, tps, tc.m/tc.p*tc.p/tc.m)
				}
			}
		})
	}
}

// "Balance first, stickiness second."
func TestAssignSimpleSticky(t *testing.T) {
	t.Parallel()
	topics := map[string]TopicInfo{"a": {Partitions: 6}, "b": {Partitions: 6}}
	ms := subs(3, "a", "b")
	first := AssignSimple(ms, topics)
	for i := range ms {
		ms[i].Assigned = first[ms[i].MemberID]
	}
	// Same input: nothing moves.
	require.Equal(t, first, AssignSimple(ms, topics))
	// A fourth member joins: only what it needs moves.
	ms = append(ms, MemberSubscription{MemberID: "m03", Topics: []string{"a", "b"}})
	second := AssignSimple(ms, topics)
	checkBalanced(t, second, 4, 12)
	for _, m := range ms[:3] {
		kept := 0
		for _, tp := range second[m.MemberID] {
			if slices.Contains(m.Assigned, tp) {
				kept++
			}
		}
		require.Equal(t, 3, kept, "%s keeps 3 of its 4 partitions", m.MemberID)
	}
	// A member leaves: its partitions are spread, the others keep theirs.
	for i := range ms {
		ms[i].Assigned = second[ms[i].MemberID]
	}
	third := AssignSimple(ms[1:], topics)
	for _, m := range ms[1:] {
		for _, tp := range m.Assigned {
			require.Contains(t, third[m.MemberID], tp)
		}
	}
}

func TestAssignSimpleHeterogeneous(t *testing.T) {
	t.Parallel()
	topics := map[string]TopicInfo{"a": {Partitions: 2}, "b": {Partitions: 3}, "empty": {}}
	got := AssignSimple([]MemberSubscription{
		{MemberID: "y", Topics: []string{"a", "b", "missing", "empty"}},
		{MemberID: "x", Topics: []string{"a"}},
		{MemberID: "z", Topics: nil},
	}, topics)
	require.Equal(t, map[string][]TopicPartition{
		"x": {{"a", 0}},
		"y": {{"a", 1}, {"b", 0}, {"b", 1}, {"b", 2}},
		"z": {},
	}, got)
}

func TestAssignSimpleDeterministic(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	topics := map[string]TopicInfo{"a": {Partitions: 5}, "b": {Partitions: 2}, "c": {Partitions: 9}}
	names := []string{"a", "b", "c"}
	for range 200 {
		var ms []MemberSubscription
		for i := range 1 + rng.IntN(12) {
			m := MemberSubscription{MemberID: fmt.Sprint("m", i)}
			for _, n := range names {
				if rng.IntN(2) == 0 {
					m.Topics = append(m.Topics, n)
				}
			}
			for range rng.IntN(4) {
				m.Assigned = append(m.Assigned, TopicPartition{names[rng.IntN(3)], int32(rng.IntN(10))})
			}
			ms = append(ms, m)
		}
		want := AssignSimple(ms, topics)
		rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
		require.Equal(t, want, AssignSimple(ms, topics))
		// Every subscribed topic's partitions are all assigned, only to subscribers.
		for _, m := range ms {
			for _, tp := range want[m.MemberID] {
				require.Contains(t, m.Topics, tp.Topic)
			}
		}
		for _, n := range names {
			subscribed := false
			for _, m := range ms {
				subscribed = subscribed || slices.Contains(m.Topics, n)
			}
			seen := map[int32]bool{}
			for _, tps := range want {
				for _, tp := range tps {
					if tp.Topic == n {
						seen[tp.Partition] = true
					}
				}
			}
			if subscribed {
				require.Len(t, seen, int(topics[n].Partitions), n)
			} else {
				require.Empty(t, seen, n)
			}
		}
	}
}
