package groups

import (
	"math"
	"sync"
)

// PendingIndex indexes, per group and partition, the offsets the open
// transactions hold for it (their TxnOffsetCommits). The transactions
// own the offsets (Txn.mu.offsets, package txn) and keep the index current; the
// group side reads it under the group's lock: a deletion writes a
// deletion mark while anything is pending (so a pending offset never
// overtakes a deletion made after it), offset expiry leaves pending
// partitions alone, and OffsetFetch with RequireStable answers
// UNSTABLE_OFFSET_COMMIT for live ones. mu is a leaf: taken under a
// txn's lock or a group's lock, never held while taking another lock.
type PendingIndex struct {
	mu sync.Mutex
	m  map[string]map[TP]*pendingTP
}

func newPendingIndex() *PendingIndex {
	return &PendingIndex{m: map[string]map[TP]*pendingTP{}}
}

// pendingTP is what the open transactions hold for one partition of a
// group. While they hold any offset for it (n), a deletion of the
// partition writes a deletion mark and offset expiry leaves it alone:
// those offsets must not overtake a deletion made after them when their
// transaction commits. Only those added since the partition's last
// deletion (live) make OffsetFetch with RequireStable answer
// UNSTABLE_OFFSET_COMMIT: in Kafka a deletion's tombstone removes the
// pending offsets before it.
//
// A deletion and a TxnOffsetCommit hold the group's lock (see
// handleTxnOffsetCommit), so every offset pending when a deletion is
// written was stamped before it: a deletion supersedes them all.
type pendingTP struct {
	n    int    // open transactions' offsets for the partition
	live int    // of them, those added since its last deletion
	seq  uint64 // its deletions so far (offsetCommit.pendingSeq)
}

// SupersededSeq is the pendingSeq of an offset found superseded at
// load (it never matches a pendingTP.seq).
const SupersededSeq = math.MaxUint64

// Add counts a pending offset of group's tp that a transaction adds,
// replacing its own earlier one of pendingSeq oldSeq if had, and returns
// the pendingSeq the new one gets.
func (x *PendingIndex) Add(group string, tp TP, had bool, oldSeq uint64) uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	m := x.m[group]
	if m == nil {
		m = map[TP]*pendingTP{}
		x.m[group] = m
	}
	p := m[tp]
	if p == nil {
		p = &pendingTP{}
		m[tp] = p
	}
	switch {
	case !had:
		p.n++
		p.live++
	case oldSeq != p.seq:
		p.live++ // it replaces one a deletion superseded
	}
	return p.seq
}

// Restore undoes an add that replaced an offset of pendingSeq prevSeq,
// which is put back.
func (x *PendingIndex) Restore(group string, tp TP, prevSeq uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if p := x.m[group][tp]; p != nil && prevSeq != p.seq {
		p.live--
	}
}

// Forget takes one pending offset, of pendingSeq seq, out of the index.
func (x *PendingIndex) Forget(group string, tp TP, seq uint64) {
	x.mu.Lock()
	x.forgetLocked(group, tp, seq)
	x.mu.Unlock()
}

// forgetLocked is forget, reporting whether nothing is pending for the
// partition any more. mu held.
func (x *PendingIndex) forgetLocked(group string, tp TP, seq uint64) bool {
	m := x.m[group]
	p := m[tp]
	if p == nil {
		return false
	}
	if seq == p.seq {
		p.live--
	}
	if p.n--; p.n > 0 {
		return false
	}
	delete(m, tp)
	if len(m) == 0 {
		delete(x.m, group)
	}
	return true
}

// ForgetAll forgets the pending offsets of a transaction that ended and
// returns, per group, the partitions nothing is pending for any more.
func (x *PendingIndex) ForgetAll(offsets map[string]map[TP]OffsetCommit) map[string][]TP {
	done := map[string][]TP{}
	x.mu.Lock()
	defer x.mu.Unlock()
	for g, offs := range offsets {
		for tp, oc := range offs {
			if x.forgetLocked(g, tp, oc.PendingSeq) {
				done[g] = append(done[g], tp)
			}
		}
	}
	return done
}

// supersede records a deletion of group's tps (made under the group's
// lock): the offsets pending for them stop counting for RequireStable
// (pendingTP).
func (x *PendingIndex) supersede(group string, tps []TP) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, tp := range tps {
		if p := x.m[group][tp]; p != nil {
			p.seq++
			p.live = 0
		}
	}
}

// SupersededAtLoad counts, at start, one pending offset of group's tp
// that a deletion came after (it stops being live).
func (x *PendingIndex) SupersededAtLoad(group string, tp TP) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.m[group][tp].live--
}

// has reports whether an open transaction holds an offset for group's
// tp (a deletion then writes a deletion mark).
func (x *PendingIndex) has(group string, tp TP) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.m[group][tp] != nil
}

// unstable returns the partitions of group for which an open
// transaction holds an offset that no deletion came after (OffsetFetch
// RequireStable: UNSTABLE_OFFSET_COMMIT), nil if none.
func (x *PendingIndex) unstable(group string) map[TP]bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out map[TP]bool
	for tp, p := range x.m[group] {
		if p.live > 0 {
			if out == nil {
				out = map[TP]bool{}
			}
			out[tp] = true
		}
	}
	return out
}

// hasGroup reports whether an open transaction holds an offset for one
// of group's partitions.
func (x *PendingIndex) hasGroup(group string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.m[group]) > 0
}

// groups lists the groups an open transaction holds an offset for.
func (x *PendingIndex) groups() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]string, 0, len(x.m))
	for g := range x.m {
		out = append(out, g)
	}
	return out
}

// LiveGroups returns every group an open transaction holds an offset
// for, true for those with a live one (no deletion came after it).
func (x *PendingIndex) LiveGroups() map[string]bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make(map[string]bool, len(x.m))
	for g, tps := range x.m {
		live := false
		for _, p := range tps {
			if p.live > 0 {
				live = true
				break
			}
		}
		out[g] = live
	}
	return out
}

// tps lists the partitions of group that an open transaction holds a
// pending offset for.
func (x *PendingIndex) tps(group string) []TP {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]TP, 0, len(x.m[group]))
	for tp := range x.m[group] {
		out = append(out, tp)
	}
	return out
}
