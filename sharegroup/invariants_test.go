package sharegroup

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkInternal verifies the bookkeeping of p against a recount of its runs.
func checkInternal(p *Partition) error {
	if p.spso > p.speo || p.base > p.spso {
		return fmt.Errorf("spso %d speo %d base %d", p.spso, p.speo, p.base)
	}
	if (len(p.runs) == 0) != (p.spso == p.speo) {
		return fmt.Errorf("%d runs for window %d-%d", len(p.runs), p.spso, p.speo)
	}
	if len(p.runs) > 0 && p.runStart(0) != p.spso {
		return fmt.Errorf("first run starts at %d, spso %d", p.runStart(0), p.spso)
	}
	if len(p.runs) > 0 && p.runs[0].meta().state().Terminal() {
		return fmt.Errorf("terminal run at spso %d not advanced", p.spso)
	}
	var avail, complete, acquired int64
	refs := map[uint32]int64{}
	for i := range p.runs {
		m := p.runs[i].meta()
		n := p.runEnd(i) - p.runStart(i)
		if n <= 0 {
			return fmt.Errorf("run %d empty or unordered", i)
		}
		if i > 0 && p.runs[i-1].meta() == m {
			return fmt.Errorf("runs %d and %d not merged", i-1, i)
		}
		if m.state() >= numStates {
			return fmt.Errorf("run %d state %d", i, m.state())
		}
		if (m.state() == StateAcquired) != (m.acq() != 0) {
			return fmt.Errorf("run %d state %v acq %d", i, m.state(), m.acq())
		}
		switch s := m.state(); {
		case s == StateAvailable:
			avail += n
		case s == StateAcquired:
			acquired += n
			refs[m.acq()] += n
			a := p.acqs.entries[m.acq()]
			if a.first > p.runStart(i) || a.last < p.runEnd(i)-1 {
				return fmt.Errorf("acquisition %d bounds %d-%d miss run %d-%d", m.acq(), a.first, a.last, p.runStart(i), p.runEnd(i)-1)
			}
		case s.Terminal():
			complete += n
		}
	}
	if avail != p.available || complete != p.complete || acquired != p.acquired {
		return fmt.Errorf("available %d/%d complete %d/%d acquired %d/%d", avail, p.available, complete, p.complete, acquired, p.acquired)
	}
	if len(refs) != p.acqs.live() {
		return fmt.Errorf("%d referenced acquisitions, %d live", len(refs), p.acqs.live())
	}
	memberRefs := map[uint32]uint32{}
	for i, h := range p.acqs.byDeadline {
		a := p.acqs.entries[h]
		if int(a.heapIndex) != i || int64(a.refs) != refs[h] {
			return fmt.Errorf("acquisition %d heap %d/%d refs %d/%d", h, a.heapIndex, i, a.refs, refs[h])
		}
		memberRefs[a.member]++
	}
	if len(memberRefs) != len(p.members.ids) {
		return fmt.Errorf("%d members with acquisitions, %d interned", len(memberRefs), len(p.members.ids))
	}
	for id, h := range p.members.ids {
		if p.members.names[h] != id || p.members.refs[h] != memberRefs[h] {
			return fmt.Errorf("member %q handle %d refs %d/%d", id, h, p.members.refs[h], memberRefs[h])
		}
	}
	if err := checkGroups(p); err != nil {
		return err
	}
	if p.available > 0 && !p.groupMode() {
		if off := p.NextFetchOffset(); p.runs[p.find(off)].meta().state() != StateAvailable {
			return fmt.Errorf("next fetch offset %d not available", off)
		}
	}
	return nil
}

// checkRecovery verifies the durability contract: replaying every record
// persisted so far yields exactly the persisted view of p, and each record
// survives its binary encoding.
func checkRecovery(t testing.TB, p *Partition, persisted []Record) {
	t.Helper()
	for _, r := range persisted {
		b, err := r.AppendBinary(nil)
		require.NoError(t, err)
		d, err := DecodeRecord(b)
		require.NoError(t, err)
		require.Equal(t, normalize(r), normalize(d))
	}
	q, err := Recover(p.cfg, persisted)
	require.NoError(t, err)
	require.NoError(t, checkInternal(q))
	require.Equal(t, p.Snapshot(), q.Snapshot(), "recovered state differs from the persisted view")
	require.Equal(t, p.spso, q.spso)
}

func normalize(r Record) Record {
	if len(r.Batches) == 0 {
		r.Batches = nil
	}
	return r
}

// checkGroups verifies the message-group spans: ascending, covering
// [SPSO, known) when any exist, reference counts matching.
func checkGroups(p *Partition) error {
	m := &p.mg
	if !p.groupMode() {
		if len(m.spans) != 0 {
			return fmt.Errorf("%d group spans in plain mode", len(m.spans))
		}
		return nil
	}
	if len(m.spans) > 0 && m.spans[0].start != p.spso {
		return fmt.Errorf("first group span at %d, spso %d", m.spans[0].start, p.spso)
	}
	if m.known > p.speo {
		return fmt.Errorf("groups known to %d past speo %d", m.known, p.speo)
	}
	refs := map[uint32]uint32{}
	for i, s := range m.spans {
		if p.spanEnd(i) <= s.start {
			return fmt.Errorf("group span %d empty or unordered", i)
		}
		if i > 0 && m.spans[i-1].g == s.g {
			return fmt.Errorf("group spans %d and %d not merged", i-1, i)
		}
		refs[s.g]++
	}
	if int(refs[0]) != m.ungrouped {
		return fmt.Errorf("%d spans without a group, counted %d", refs[0], m.ungrouped)
	}
	delete(refs, 0)
	for g, n := range refs {
		if m.groups.refs[g] != n || m.groups.ids[m.groups.names[g]] != g {
			return fmt.Errorf("group %d (%q) refs %d, spans %d", g, m.groups.names[g], m.groups.refs[g], n)
		}
	}
	if len(refs) != m.live() {
		return fmt.Errorf("live groups %d, counted %d", m.live(), len(refs))
	}
	open := map[uint32]int64{} // records not terminal per group, recounted
	held := map[uint32]int64{} // Acquired records per group, recounted
	var loose, looseHeld int64 // the same for records without a group
	r := 0                     // spans and runs walked together
	for i, s := range m.spans {
		lo, hi := max(s.start, p.spso), min(p.spanEnd(i), m.known)-1
		if lo > hi {
			continue
		}
		for r < len(p.runs) && p.runEnd(r) <= lo {
			r++
		}
		for k := r; k < len(p.runs) && p.runStart(k) <= hi; k++ {
			if st := p.runs[k].meta().state(); st.outstanding() {
				n := min(p.runEnd(k)-1, hi) - max(p.runStart(k), lo) + 1
				isHeld := st == StateAcquired && p.cfg.Groups == GroupsOrdered
				if s.g == 0 {
					loose += n
					if isHeld {
						looseHeld += n
					}
					continue
				}
				open[s.g] += n
				if isHeld {
					held[s.g] += n
				}
			}
		}
	}
	if loose != m.loose || looseHeld != m.looseHeld {
		return fmt.Errorf("records without a group: %d open, %d held, counted %d and %d", loose, looseHeld, m.loose, m.looseHeld)
	}
	heldAll := looseHeld
	for _, n := range held {
		heldAll += n
	}
	if heldAll != m.heldAll {
		return fmt.Errorf("%d records held, counted %d", heldAll, m.heldAll)
	}
	openGroups, ready := 0, 0
	if len(m.held) != len(m.open) {
		return fmt.Errorf("held counts for %d groups, open counts for %d", len(m.held), len(m.open))
	}
	for g := range m.open {
		if m.open[g] != open[uint32(g)] {
			return fmt.Errorf("group %d: %d records open, counted %d", g, open[uint32(g)], m.open[g])
		}
		if m.held[g] != held[uint32(g)] {
			return fmt.Errorf("group %d: %d records held, counted %d", g, held[uint32(g)], m.held[g])
		}
		if m.open[g] > 0 {
			openGroups++
			if m.held[g] == 0 {
				ready++
			}
		}
	}
	for g, n := range open {
		if n > 0 && (int(g) >= len(m.open) || m.open[g] != n) {
			return fmt.Errorf("group %d: %d records open, not counted", g, n)
		}
	}
	if openGroups != m.openGroups {
		return fmt.Errorf("%d groups open, counted %d", openGroups, m.openGroups)
	}
	if ready != m.ready {
		return fmt.Errorf("%d groups ready, counted %d", ready, m.ready)
	}
	return nil
}
