package sharegroup

import (
	"cmp"
	"slices"
)

// TopicPartition names one partition for the assignor.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// MemberSubscription is one share-group member as the assignor sees it.
type MemberSubscription struct {
	MemberID string
	// Topics the member subscribes to.
	Topics []string
	// Assigned is the member's current assignment; the assignor keeps as
	// much of it as balance allows (stickiness).
	Assigned []TopicPartition
}

// TopicInfo describes a topic's assignable partitions 0..Partitions-1
// (only initialized share-partitions are assignable, kip932.md §2).
type TopicInfo struct {
	Partitions int32
}

// AssignSimple is Kafka's "simple" share-group assignor (kip932.md §2;
// SimpleHomogeneousAssignmentBuilder / SimpleHeterogeneousAssignmentBuilder):
// with M members and P partitions each partition is shared by
// desiredSharing = ⌈M/P⌉ members and every member gets ⌊S·P/M⌋ or ⌈S·P/M⌉
// partitions. M ≤ P behaves like a consumer group; M > P shares partitions.
// Balance first, stickiness second: each member keeps as many of its
// current partitions as its quota and the sharing limit allow; the rest are
// handed round-robin to under-filled members, never twice to one member.
//
// Identical subscriptions are balanced over all partitions at once;
// otherwise each topic is balanced among its own subscribers. Every member
// appears in the result, with a non-nil (possibly empty) sorted list. The
// result is deterministic and does not depend on the order of members.
func AssignSimple(members []MemberSubscription, topics map[string]TopicInfo) map[string][]TopicPartition {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b MemberSubscription) int { return cmp.Compare(a.MemberID, b.MemberID) })
	ms = slices.CompactFunc(ms, func(a, b MemberSubscription) bool { return a.MemberID == b.MemberID })

	out := make(map[string][]TopicPartition, len(ms))
	subs := make([][]string, len(ms)) // valid subscribed topics, sorted
	for i, m := range ms {
		out[m.MemberID] = []TopicPartition{}
		for _, t := range m.Topics {
			if topics[t].Partitions > 0 {
				subs[i] = append(subs[i], t)
			}
		}
		slices.Sort(subs[i])
		subs[i] = slices.Compact(subs[i])
	}
	homogeneous := true
	for i := range subs {
		homogeneous = homogeneous && slices.Equal(subs[i], subs[0])
	}
	var poolTopics [][]string // topics balanced together
	if homogeneous && len(ms) > 0 {
		poolTopics = [][]string{subs[0]}
	} else {
		var all []string
		for _, s := range subs {
			all = append(all, s...)
		}
		slices.Sort(all)
		for _, t := range slices.Compact(all) {
			poolTopics = append(poolTopics, []string{t})
		}
	}
	for _, ts := range poolTopics {
		var pool []int
		for i := range ms {
			if containsAll(subs[i], ts) {
				pool = append(pool, i)
			}
		}
		var parts []TopicPartition
		for _, t := range ts {
			for p := range topics[t].Partitions {
				parts = append(parts, TopicPartition{t, p})
			}
		}
		assignPool(ms, pool, parts, out)
	}
	for id := range out {
		slices.SortFunc(out[id], compareTP)
	}
	return out
}

func compareTP(a, b TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

func containsAll(sorted, want []string) bool {
	for _, w := range want {
		if _, ok := slices.BinarySearch(sorted, w); !ok {
			return false
		}
	}
	return true
}

// assignPool assigns parts among ms[pool] and appends to out.
func assignPool(ms []MemberSubscription, pool []int, parts []TopicPartition, out map[string][]TopicPartition) {
	m, p := len(pool), len(parts)
	if m == 0 || p == 0 {
		return
	}
	sharing := (m + p - 1) / p
	total := sharing * p
	index := make(map[TopicPartition]int, p)
	for i, tp := range parts {
		index[tp] = i
	}
	// Current partitions of this pool per member, in partition order.
	current := make([][]int, m)
	for k, i := range pool {
		for _, tp := range ms[i].Assigned {
			if j, ok := index[tp]; ok {
				current[k] = append(current[k], j)
			}
		}
		slices.Sort(current[k])
		current[k] = slices.Compact(current[k])
	}
	// Quotas: total/M each, one more for the first total%M members ranked by
	// how much they already hold, so the larger quotas keep the most.
	rank := make([]int, m)
	for k := range rank {
		rank[k] = k
	}
	slices.SortStableFunc(rank, func(a, b int) int { return cmp.Compare(len(current[b]), len(current[a])) })
	quota := make([]int, m)
	for r, k := range rank {
		quota[k] = total / m
		if r < total%m {
			quota[k]++
		}
	}
	holders := make([]int, p)
	held := make([]map[int]bool, m)
	give := func(k, j int) {
		held[k][j] = true
		holders[j]++
		out[ms[pool[k]].MemberID] = append(out[ms[pool[k]].MemberID], parts[j])
	}
	// Stickiness: keep current partitions within quota and sharing limits
	// (this revokes from over-filled members and over-shared partitions).
	for _, k := range rank {
		held[k] = make(map[int]bool)
		for _, j := range current[k] {
			if len(held[k]) < quota[k] && holders[j] < sharing {
				give(k, j)
			}
		}
	}
	// Balance: hand under-shared partitions round-robin to under-filled
	// members that do not hold them yet.
	next := 0
	for j := range parts {
		for holders[j] < sharing {
			found := false
			for n := 0; n < m; n++ {
				k := (next + n) % m
				if len(held[k]) < quota[k] && !held[k][j] {
					give(k, j)
					next = (k + 1) % m
					found = true
					break
				}
			}
			if !found {
				break // every member with room already shares it; stays under-shared
			}
		}
	}
}
