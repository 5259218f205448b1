package sharegroup

import "sort"

// A run is a maximal stretch of consecutive offsets with the same state,
// delivery count and acquisition. Runs cover the window [SPSO, SPEO)
// contiguously, so a run stores only where it starts; it ends where the
// next one starts (the last one at SPEO).
//
// 8 bytes per run, one word: the start relative to Partition.base (the
// low startBits) and meta above it, packing state (3 bits), delivery
// count (10 bits, saturating at 1,023: SQS's maxReceiveCount goes to
// 1,000) and acquisition handle (21 bits; 0 = none). The member and lock
// deadline of an Acquired run live once per acquisition in the
// acquisitions table.
type run uint64

type meta uint64

const (
	startBits = 30
	stateBits = 3
	countBits = 10
	acqBits   = 64 - startBits - stateBits - countBits

	maxStoredCount = 1<<countBits - 1
	// maxAcqHandle bounds the live acquisitions: every live one holds at
	// least one Acquired record, and no acquisition starts while
	// MaxMaxInFlight records are Acquired (Acquire, AcquireGroups).
	maxAcqHandle = 1<<acqBits - 1

	// maxSpan bounds SPEO-base so relative starts fit in startBits;
	// exceeding it triggers a rebase to the SPSO. Windows stay below it:
	// MaxInFlight in plain mode, maxSpan/2 in a group mode (Classify,
	// archiveAbsent), maxSpan-1 from a persisted state (Replay).
	maxSpan = 1 << startBits
)

func mkRun(start uint32, m meta) run { return run(uint64(start) | uint64(m)<<startBits) }

func (r run) start() uint32 { return uint32(r & (1<<startBits - 1)) }
func (r run) meta() meta    { return meta(r >> startBits) }

func pack(s RecordState, count int, acq uint32) meta {
	if count > maxStoredCount {
		count = maxStoredCount
	}
	if count < 0 {
		count = 0
	}
	return meta(uint64(s) | uint64(count)<<stateBits | uint64(acq)<<(stateBits+countBits))
}

func (m meta) state() RecordState { return RecordState(m & (1<<stateBits - 1)) }
func (m meta) count() int         { return int(m>>stateBits) & maxStoredCount }
func (m meta) acq() uint32        { return uint32(m >> (stateBits + countBits)) }

// availableZero is the implicit state of never-fetched offsets.
var availableZero = pack(StateAvailable, 0, 0)

func (p *Partition) runStart(i int) int64 { return p.base + int64(p.runs[i].start()) }

func (p *Partition) runEnd(i int) int64 { // exclusive
	if i+1 < len(p.runs) {
		return p.base + int64(p.runs[i+1].start())
	}
	return p.speo
}

// find returns the index of the run containing off; spso <= off < speo.
func (p *Partition) find(off int64) int {
	rel := uint32(off - p.base)
	return sort.Search(len(p.runs), func(i int) bool { return p.runs[i].start() > rel }) - 1
}

// pieces calls fn for each run overlapping [lo, hi] (clipped to it and to
// the window), in order, until fn returns false. Read-only.
func (p *Partition) pieces(lo, hi int64, fn func(lo, hi int64, m meta) bool) {
	lo = max(lo, p.spso)
	hi = min(hi, p.speo-1)
	if lo > hi {
		return
	}
	for i := p.find(lo); i < len(p.runs); i++ {
		s, e := p.runStart(i), p.runEnd(i)-1
		if s > hi {
			return
		}
		if !fn(max(s, lo), min(e, hi), p.runs[i].meta()) {
			return
		}
	}
}

// emitter builds the replacement runs of a rewrite, merging neighbours with
// equal meta and accounting every change of state.
type emitter struct {
	p    *Partition
	out  []run
	old  meta  // meta of the piece being rewritten
	next int64 // next offset the callback must emit
}

func (e *emitter) keep(start int64, m meta) {
	if n := len(e.out); n > 0 && e.out[n-1].meta() == m {
		return
	}
	e.out = append(e.out, mkRun(uint32(start-e.p.base), m))
}

// emit sets [lo, hi] (the next offsets of the current piece) to m.
func (e *emitter) emit(lo, hi int64, m meta) {
	if lo != e.next || hi < lo {
		panic("sharegroup: emitter out of order") // programming error
	}
	e.p.account(e.old, m, lo, hi)
	e.keep(lo, m)
	e.next = hi + 1
}

// rewrite replaces the state of [lo, hi] (spso <= lo <= hi < speo): fn is
// called for every run piece inside the range and must emit, in order,
// metas covering exactly that piece. The runs are then spliced once.
func (p *Partition) rewrite(lo, hi int64, fn func(e *emitter, lo, hi int64, old meta)) {
	i, j := p.find(lo), p.find(hi)
	i0, j1 := max(i-1, 0), min(j+2, len(p.runs))
	// The emitter lives in p: one allocated per rewrite (it escapes to
	// fn) was a tenth of an ordered acquisition's cost.
	e := &p.em
	if e.p != nil {
		panic("sharegroup: rewrite inside a rewrite") // programming error
	}
	*e = emitter{p: p, out: p.scratch[:0]}
	defer func() { *e = emitter{} }()
	for k := i0; k < j1; k++ {
		s, end, m := p.runStart(k), p.runEnd(k)-1, p.runs[k].meta()
		if end < lo || s > hi { // untouched neighbour, kept for merging
			e.keep(s, m)
			continue
		}
		if s < lo {
			e.keep(s, m)
		}
		ps, pe := max(s, lo), min(end, hi)
		e.old, e.next = m, ps
		fn(e, ps, pe, m)
		if e.next != pe+1 {
			panic("sharegroup: rewrite callback did not cover its piece")
		}
		if end > hi {
			e.keep(hi+1, m)
		}
	}
	p.splice(i0, j1, e.out)
	if cap(e.out) <= 4096 { // keep a small scratch buffer, drop big ones
		p.scratch = e.out[:0]
	} else {
		p.scratch = nil
	}
}

// splice replaces runs[i:j] with repl, growing by 1/8 (not 2x) so slack
// stays small at 120,000+ runs.
func (p *Partition) splice(i, j int, repl []run) {
	old := len(p.runs)
	n := old - (j - i) + len(repl)
	if n > cap(p.runs) {
		grown := make([]run, n, n+n/8+16)
		copy(grown, p.runs[:i])
		copy(grown[i+len(repl):], p.runs[j:])
		p.runs = grown
	} else if len(repl) != j-i {
		p.runs = p.runs[:max(n, old)]
		copy(p.runs[i+len(repl):], p.runs[j:old])
		p.runs = p.runs[:n]
	}
	copy(p.runs[i:], repl)
}

// extendTo grows the window to end (exclusive) with never-fetched
// (Available, count 0) offsets.
func (p *Partition) extendTo(end int64) {
	if end <= p.speo {
		return
	}
	if len(p.runs) == 0 {
		p.base = p.spso
	}
	if end-p.base >= maxSpan {
		p.rebase()
		if end-p.base >= maxSpan { // callers bound the window below maxSpan
			panic("sharegroup: window past the span limit") // programming error
		}
	}
	if n := len(p.runs); n == 0 || p.runs[n-1].meta() != availableZero {
		p.splice(n, n, []run{mkRun(uint32(p.speo-p.base), availableZero)})
	}
	p.available += end - p.speo
	p.availHint = min(p.availHint, p.speo)
	p.speo = end
}

// rebase moves base up to the SPSO so relative starts stay small.
func (p *Partition) rebase() {
	d := uint32(p.spso - p.base)
	for i := range p.runs {
		p.runs[i] -= run(d) // the start is the low bits, and d <= start
	}
	p.base = p.spso
}

// account updates the counters and acquisition references for [lo, hi]
// changing from old to new.
func (p *Partition) account(old, new meta, lo, hi int64) {
	if old == new {
		return
	}
	if os, ns := old.state(), new.state(); os != ns && !p.administrative && !os.canBecome(ns) {
		panic("sharegroup: illegal transition " + os.String() + " -> " + ns.String()) // programming error
	}
	if os, oc := old.view(); true {
		if ns, nc := new.view(); os != ns || oc != nc {
			p.touch(lo, hi)
		}
	}
	if os, ns := old.state(), new.state(); os.outstanding() && !ns.outstanding() && p.mg.ending != 0 {
		// Ended by an Acknowledge (AcquiredAfter): records whose group
		// is not known (plain mode; past Classify's reach) are noted
		// for every group.
		m := &p.mg
		m.endedMax = m.ending
		if !p.groupMode() || hi >= m.known {
			m.endedBlind = m.ending
		}
	}
	if p.groupMode() {
		os, ns := old.state(), new.state()
		dOpen := int64(b2i(ns.outstanding()) - b2i(os.outstanding()))
		dHeld := p.heldIn(ns) - p.heldIn(os)
		if dOpen != 0 || dHeld != 0 {
			p.groupsCount(lo, hi, dOpen, dHeld)
		}
	}
	n := hi - lo + 1
	if new.state() == StateArchived && old.state() != StateArchived {
		p.archived += n
	}
	p.forget(old, n)
	switch s := new.state(); {
	case s == StateAcquired:
		p.acquired += n
		p.acqs.ref(new.acq(), n)
		p.acqs.cover(new.acq(), lo, hi)
	case s == StateAvailable:
		p.available += n
		p.availHint = min(p.availHint, lo)
	case s.Terminal():
		p.complete += n
	}
}

// forget removes n offsets in state m from the counters.
func (p *Partition) forget(m meta, n int64) {
	switch s := m.state(); {
	case s == StateAcquired:
		p.acquired -= n
		if p.acqs.unref(m.acq(), n) {
			p.members.unref(p.acqs.free(m.acq()))
		}
	case s == StateAvailable:
		p.available -= n
	case s.Terminal():
		p.complete -= n
	}
}

// dropBelow discards every offset below off (SPSO jump: log start moved,
// replayed StartOffset); off may be past SPEO.
func (p *Partition) dropBelow(off int64) {
	if off <= p.spso {
		return
	}
	if p.groupMode() { // the dropped records leave their groups
		p.pieces(p.spso, off-1, func(lo, hi int64, mt meta) bool {
			if st := mt.state(); st.outstanding() {
				p.groupsCount(lo, hi, -1, -p.heldIn(st))
			}
			return true
		})
	}
	k := 0
	for ; k < len(p.runs); k++ {
		s, e := p.runStart(k), p.runEnd(k)
		if e <= off {
			p.forget(p.runs[k].meta(), e-s)
			continue
		}
		if s < off {
			p.forget(p.runs[k].meta(), off-s)
		}
		break
	}
	p.dropRuns(k)
	if len(p.runs) > 0 {
		p.runs[0] = mkRun(uint32(off-p.base), p.runs[0].meta())
		p.spso = off
	} else {
		p.spso = max(off, p.speo)
		p.speo = p.spso
		p.base = p.spso
	}
	p.availHint = max(p.availHint, p.spso)
}

// advance moves the SPSO past the longest terminal prefix (KIP-932 window
// advance) and drops those runs.
func (p *Partition) advance() {
	k := 0
	for ; k < len(p.runs) && p.runs[k].meta().state().Terminal(); k++ {
		p.complete -= p.runEnd(k) - p.runStart(k)
	}
	if k == 0 {
		return
	}
	p.dropRuns(k)
	if len(p.runs) == 0 {
		p.spso = p.speo
		p.base = p.spso
	} else {
		p.spso = p.runStart(0)
	}
	p.availHint = max(p.availHint, p.spso)
}

// dropRuns removes the first k runs without moving the others when cheap;
// a backing array much larger than needed is reallocated.
func (p *Partition) dropRuns(k int) {
	p.runs = p.runs[k:]
	if c := cap(p.runs); c > 256 && c > 4*len(p.runs) {
		p.runs = append(make([]run, 0, len(p.runs)+len(p.runs)/8+16), p.runs...)
	}
}
