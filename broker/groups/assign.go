package groups

import (
	"slices"
	"sort"
	"time"
)

// KIP-848 target assignments: the server-side assignors (uniform, the
// default, and range), the partition sets they work on, and each
// member's reconciliation towards its target.

// partSet is a set of partitions by topic id; each partition maps to the
// member epoch at which it was assigned (KIP-1251; unused for targets and
// revocations).
type partSet map[[16]byte]map[int32]int32

func (s partSet) has(id [16]byte, p int32) bool { _, ok := s[id][p]; return ok }

func (s partSet) add(id [16]byte, p, epoch int32) {
	if s[id] == nil {
		s[id] = map[int32]int32{}
	}
	s[id][p] = epoch
}

func (s partSet) count() int {
	n := 0
	for _, ps := range s {
		n += len(ps)
	}
	return n
}

func (s partSet) clone() partSet {
	out := make(partSet, len(s))
	for id, ps := range s {
		m := make(map[int32]int32, len(ps))
		for p, e := range ps {
			m[p] = e
		}
		out[id] = m
	}
	return out
}

// sameParts compares the partitions, not their epochs.
func (s partSet) sameParts(o partSet) bool {
	if s.count() != o.count() {
		return false
	}
	for id, ps := range s {
		for p := range ps {
			if !o.has(id, p) {
				return false
			}
		}
	}
	return true
}

// sorted lists the set by topic id and partition.
func (s partSet) sorted() []idParts {
	out := make([]idParts, 0, len(s))
	for id, ps := range s {
		if len(ps) == 0 {
			continue
		}
		ip := idParts{id: id}
		for p := range ps {
			ip.parts = append(ip.parts, p)
		}
		slices.Sort(ip.parts)
		out = append(out, ip)
	}
	sort.Slice(out, func(i, j int) bool { return string(out[i].id[:]) < string(out[j].id[:]) })
	return out
}

// pickAssignor selects the server assignor most members prefer (ties:
// the earlier in serverAssignors); when no member says, the group keeps
// the one it has (initially the default).
func pickAssignor(cg *consumerGroup) string {
	votes := map[string]int{}
	for _, m := range cg.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best, n := cg.assignor, 0
	for _, a := range serverAssignors {
		if votes[a] > n {
			best, n = a, votes[a]
		}
	}
	return best
}

// computeTarget recomputes every member's target assignment.
func computeTarget(cg *consumerGroup) {
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	names := make([]string, 0, len(cg.resolved))
	for n := range cg.resolved {
		names = append(names, n)
	}
	sort.Strings(names)
	targets := make(map[string]partSet, len(ids))
	for _, id := range ids {
		targets[id] = partSet{}
	}
	if cg.assignor == "range" {
		assignRange(cg, ids, names, targets)
	} else {
		assignUniform(cg, ids, names, targets)
	}
	for _, id := range ids {
		cg.members[id].target = targets[id]
	}
}

// assignRange: per topic, the subscribed members (by member id) get
// contiguous ranges, the first ones one partition more when it does not
// divide evenly.
func assignRange(cg *consumerGroup, ids, names []string, targets map[string]partSet) {
	for _, name := range names {
		rt := cg.resolved[name]
		var subs []string
		for _, id := range ids {
			if cg.members[id].subscribes(name) {
				subs = append(subs, id)
			}
		}
		if len(subs) == 0 {
			continue
		}
		per, extra := int(rt.partitions)/len(subs), int(rt.partitions)%len(subs)
		p := int32(0)
		for i, id := range subs {
			n := per
			if i < extra {
				n++
			}
			for j := 0; j < n; j++ {
				targets[id].add(rt.id, p, 0)
				p++
			}
		}
	}
}

// assignUniform spreads partitions evenly over the members subscribed to
// their topics, keeping each partition where its previous target put it
// when that stays balanced (sticky): keep what is still valid, give the
// rest to the least loaded eligible member, then move partitions from a
// member to an eligible one with at least two fewer until none can move.
func assignUniform(cg *consumerGroup, ids, names []string, targets map[string]partSet) {
	owner := map[topicPart]string{}
	load := map[string]int{}
	var all []topicPart
	eligible := map[string][]string{}
	for _, name := range names {
		rt := cg.resolved[name]
		for _, id := range ids {
			if cg.members[id].subscribes(name) {
				eligible[name] = append(eligible[name], id)
			}
		}
		if len(eligible[name]) == 0 {
			continue
		}
		for p := int32(0); p < rt.partitions; p++ {
			all = append(all, topicPart{rt.id, p})
		}
	}
	topicOf := map[[16]byte]string{}
	for _, name := range names {
		topicOf[cg.resolved[name].id] = name
	}
	for _, id := range ids {
		m := cg.members[id]
		for tid, ps := range m.target {
			name, ok := topicOf[tid]
			if !ok || !m.subscribes(name) {
				continue
			}
			for p := range ps {
				if p < cg.resolved[name].partitions {
					owner[topicPart{tid, p}] = id
					load[id]++
				}
			}
		}
	}
	leastLoaded := func(cands []string) string {
		best := ""
		for _, id := range cands {
			if best == "" || load[id] < load[best] {
				best = id
			}
		}
		return best
	}
	for _, tp := range all {
		if _, ok := owner[tp]; !ok {
			id := leastLoaded(eligible[topicOf[tp.id]])
			owner[tp] = id
			load[id]++
		}
	}
	for moved, rounds := true, 0; moved && rounds < len(all)+1; rounds++ {
		moved = false
		for _, tp := range all {
			from := owner[tp]
			to := leastLoaded(eligible[topicOf[tp.id]])
			if load[from]-load[to] > 1 {
				owner[tp] = to
				load[from]--
				load[to]++
				moved = true
			}
		}
	}
	for tp, id := range owner {
		targets[id].add(tp.id, tp.p, 0)
	}
}

// reconcileLocked moves m one step towards its target (Kafka's
// CurrentAssignmentBuilder): revoke first, then assign what is free.
func (g *Group) reconcileLocked(m *consumerMember, owned partSet, now time.Time) {
	cg := g.mu.cg
	if m.epoch == StaticLeaveEpoch {
		return
	}
	switch m.state {
	case memberStable:
		if m.epoch == cg.assignmentEpoch {
			return
		}
		g.nextAssignmentLocked(m, m.epoch, owned, now)
	case memberUnrevoked:
		if ownsAny(owned, m.pendingRevoke) {
			return
		}
		g.nextAssignmentLocked(m, m.epoch+1, owned, now)
	case memberUnreleased:
		g.nextAssignmentLocked(m, m.epoch, owned, now)
	}
}

func (g *Group) nextAssignmentLocked(m *consumerMember, epoch int32, owned partSet, now time.Time) {
	cg := g.mu.cg
	kept, revoke, adding := partSet{}, partSet{}, partSet{}
	unreleased := false
	for id, ps := range m.assigned {
		for p, e := range ps {
			if m.target.has(id, p) {
				kept.add(id, p, e)
			} else {
				revoke.add(id, p, 0)
			}
		}
	}
	for id, ps := range m.target {
		for p := range ps {
			if kept.has(id, p) {
				continue
			}
			if o, held := cg.owners[topicPart{id, p}]; held && o != m.id {
				unreleased = true
				continue
			}
			adding.add(id, p, 0)
		}
	}
	setEpoch := func(e int32) {
		if e != m.epoch {
			m.prevEpoch, m.epoch = m.epoch, e
		}
	}
	switch {
	case revoke.count() > 0 && ownsAny(owned, revoke):
		m.state = memberUnrevoked
		setEpoch(epoch)
		m.assigned, m.pendingRevoke = kept, revoke
		m.revokeDeadline = now.Add(m.rebalanceTimeout)
	default:
		for id, ps := range adding {
			for p := range ps {
				kept.add(id, p, cg.assignmentEpoch)
			}
		}
		m.state = memberStable
		if unreleased {
			m.state = memberUnreleased
		}
		setEpoch(cg.assignmentEpoch)
		m.assigned, m.pendingRevoke = kept, partSet{}
		m.revokeDeadline = time.Time{}
	}
	cg.setOwners(m)
}
