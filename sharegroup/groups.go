package sharegroup

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"time"
)

// GroupSpan names the message group of offsets [First, Last] of a LogBatch.
// Offsets of a batch not covered by any span have no group: each such
// record is a group of its own. ID may point into a buffer the caller
// reuses once Classify returns: the Partition keeps copies.
type GroupSpan struct {
	First, Last int64
	ID          string
}

// gspan starts a stretch of offsets of one message group; it ends where the
// next one starts (the last one at msgGroups.known).
type gspan struct {
	start int64
	g     uint32 // group handle; 0 = no group (every record its own)
}

// msgGroups is the message-group state of a Partition in a group mode: the
// group of every offset in [SPSO, known), as compacted spans. Group ids
// never change, states do, so the spans are kept beside the runs instead of
// widening them; plain mode leaves this empty.
type msgGroups struct {
	spans     []gspan
	known     int64    // first offset whose group is not known yet
	groups    interned // message-group ids, referenced by spans
	ungrouped int      // spans of records without a group (handle 0)

	cursor int64 // fair mode: the next acquisition starts at the span here

	// open counts, per group handle, the group's records in [SPSO, known)
	// that are Available or Acquired (RecordState.outstanding), and openGroups
	// the groups with any: those with a record to deliver or in flight
	// (HeadShare). In ordered mode held counts the Acquired ones among
	// them, and ready the groups with open records none of which is held:
	// exactly the groups whose head ordered mode would deliver now, so a
	// fetch finding none need not walk the window (other modes leave held
	// at zero: counting it costs every acquisition a search of the spans).
	// Kept by addSpan, account (groupsCount), dropBelow and, on a switch
	// into or out of ordered mode, recountHeld.
	open       []int64
	held       []int64
	openGroups int
	ready      int
	// loose counts the records without a group in [SPSO, known) that are
	// Available or Acquired, and in ordered mode looseHeld the Acquired
	// ones; heldAll is every Acquired record counted (held plus looseHeld).
	// Ordered mode delivers loose records without order, and Partition's
	// acquired above heldAll means records in flight whose group is not
	// known yet (after a switch from plain mode, until Classify reaches
	// them).
	loose, looseHeld, heldAll int64
	visited                   int64 // spans the ordered walk looked at (tests)

	// endedAt is, per group handle, the AckSeq of the latest Acknowledge
	// that ended one of its records (made it terminal or Archiving), or
	// for a group new to the window endedMax, the latest that ended any
	// record; endedBlind is the latest that ended a record whose group
	// was not known (in plain mode, or past known), which every ordered
	// acquisition counts. ending is the running Acknowledge's AckSeq
	// (else 0). endedMax and endedBlind are kept across resetGroups. See
	// Partition.AcquiredAfter.
	endedAt              []uint64
	endedMax, endedBlind uint64
	ending               uint64

	hint int // groupsCount: the span its last call started in (may be stale)

	taken []int64  // scratch: records taken (or "head seen") per handle
	dirty []uint32 // scratch: handles with taken != 0
}

func (m *msgGroups) intern(id string) uint32 {
	if id == "" {
		return 0
	}
	if h, ok := m.groups.lookup(id); ok {
		return h
	}
	// A group new to the window may have had a record ended a moment
	// ago (since when its handle was freed, or the groups were reset):
	// its records wait for the latest Acknowledge that ended any.
	h := m.groups.intern(id)
	m.grow(h)
	m.endedAt[h] = m.endedMax
	return h
}

// grow makes the per-handle counts cover handle g.
func (m *msgGroups) grow(g uint32) {
	if int(g) >= len(m.open) {
		m.open = append(m.open, make([]int64, int(g)+1-len(m.open))...)
		m.held = append(m.held, make([]int64, int(g)+1-len(m.held))...)
		m.endedAt = append(m.endedAt, make([]uint64, int(g)+1-len(m.endedAt))...)
	}
}

func (m *msgGroups) ref(g uint32) {
	if g == 0 {
		m.ungrouped++
	} else {
		m.groups.ref(g)
	}
}

func (m *msgGroups) unref(g uint32) {
	if g == 0 {
		m.ungrouped--
	} else {
		m.groups.unref(g)
	}
}

// addCounts adds dOpen to group g's count of records not terminal and
// dHeld to its count of Acquired ones.
func (m *msgGroups) addCounts(g uint32, dOpen, dHeld int64) {
	m.heldAll += dHeld
	if g == 0 {
		m.loose += dOpen
		m.looseHeld += dHeld
		return
	}
	if dOpen == 0 && dHeld == 0 {
		return
	}
	m.grow(g)
	if dOpen < 0 && m.ending != 0 {
		m.endedAt[g] = m.ending
	}
	wasOpen, wasReady := m.open[g] > 0, m.isReady(g)
	m.open[g] += dOpen
	m.held[g] += dHeld
	isOpen, isReady := m.open[g] > 0, m.isReady(g)
	m.openGroups += b2i(isOpen) - b2i(wasOpen)
	m.ready += b2i(isReady) - b2i(wasReady)
}

// isReady reports whether group g has records to deliver and none in
// flight.
func (m *msgGroups) isReady(g uint32) bool {
	return int(g) < len(m.open) && m.open[g] > 0 && m.held[g] == 0
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// groupsCount adds dOpen and dHeld per offset of [lo, hi] to the counts of
// the groups those offsets belong to (offsets past known have none yet:
// addSpan counts them).
func (p *Partition) groupsCount(lo, hi, dOpen, dHeld int64) {
	m := &p.mg
	lo, hi = max(lo, p.spso), min(hi, m.known-1)
	if lo > hi || len(m.spans) == 0 {
		return
	}
	// Consecutive calls mostly touch the same or the next span (an
	// ordered acquisition rewrites record after record): try where the
	// last one started before searching all of them.
	i := m.hint
	switch {
	case i < len(m.spans) && m.spans[i].start <= lo && (i+1 == len(m.spans) || m.spans[i+1].start > lo):
	case i+1 < len(m.spans) && m.spans[i+1].start <= lo && (i+2 == len(m.spans) || m.spans[i+2].start > lo):
		i++
	default:
		i = max(sort.Search(len(m.spans), func(i int) bool { return m.spans[i].start > lo })-1, 0)
	}
	m.hint = i
	for ; i < len(m.spans) && m.spans[i].start <= hi; i++ {
		if s, e := max(m.spans[i].start, lo), min(p.spanEnd(i)-1, hi); s <= e {
			m.addCounts(m.spans[i].g, dOpen*(e-s+1), dHeld*(e-s+1))
		}
	}
}

// heldIn is 1 if a record in state s counts as held (msgGroups.held), 0
// if not: Acquired, and only in ordered mode, the one that reads the
// counts.
func (p *Partition) heldIn(s RecordState) int64 {
	return int64(b2i(s == StateAcquired && p.cfg.Groups == GroupsOrdered))
}

// countsIn counts the offsets of [lo, hi] in the window that are
// Available or Acquired, and those that count as held (heldIn).
func (p *Partition) countsIn(lo, hi int64) (open, held int64) {
	p.pieces(lo, hi, func(lo, hi int64, mt meta) bool {
		if st := mt.state(); st.outstanding() {
			open += hi - lo + 1
			held += (hi - lo + 1) * p.heldIn(st)
		}
		return true
	})
	return open, held
}

// recountHeld sets the held counts for the mode now configured: counted
// in ordered mode, zero in the others (SetConfig, on a switch between
// group modes: a switch into or out of plain mode rebuilds everything).
func (p *Partition) recountHeld() {
	m := &p.mg
	clear(m.held)
	m.looseHeld, m.heldAll = 0, 0
	if p.cfg.Groups == GroupsOrdered { // else nothing counts as held
		for i, s := range m.spans {
			_, held := p.countsIn(s.start, p.spanEnd(i)-1)
			switch {
			case held == 0:
			case s.g == 0:
				m.looseHeld += held
			default:
				m.held[s.g] += held // held records are open: counted, so g < len(m.held)
			}
			m.heldAll += held
		}
	}
	m.ready = 0
	for g := range m.open {
		m.ready += b2i(m.isReady(uint32(g)))
	}
}

// live is the number of message groups with spans in the window.
func (m *msgGroups) live() int { return len(m.groups.ids) }

// groupMode reports whether message groups are tracked.
func (p *Partition) groupMode() bool { return p.cfg.Groups != GroupsNone }

// resetGroups forgets every known group (tracking switched on or off):
// the broker classifies the window again from the SPSO.
func (p *Partition) resetGroups() {
	p.mg = msgGroups{known: p.spso, endedMax: p.mg.endedMax, endedBlind: p.mg.endedBlind}
}

// spanEnd returns the exclusive end of spans[i].
func (p *Partition) spanEnd(i int) int64 {
	if i+1 < len(p.mg.spans) {
		return p.mg.spans[i+1].start
	}
	return p.mg.known
}

// addSpan records that [lo, hi] (starting at known) belong to group g.
func (p *Partition) addSpan(lo, hi int64, g uint32) {
	m := &p.mg
	lo = max(lo, m.known, p.spso)
	if hi < lo {
		return
	}
	if n := len(m.spans); n == 0 || m.spans[n-1].g != g {
		m.spans = append(m.spans, gspan{start: lo, g: g})
		m.ref(g)
	}
	open, held := p.countsIn(lo, hi)
	m.addCounts(g, open, held)
	m.known = hi + 1
}

// trimGroups drops the spans below the SPSO.
func (p *Partition) trimGroups() {
	m := &p.mg
	if m.known < p.spso {
		m.known = p.spso
	}
	k := 0
	for k < len(m.spans) && p.spanEnd(k) <= p.spso {
		m.unref(m.spans[k].g)
		k++
	}
	if k > 0 {
		m.spans = m.spans[k:]
		if c := cap(m.spans); c > 256 && c > 4*len(m.spans) {
			m.spans = append(make([]gspan, 0, len(m.spans)+len(m.spans)/8+16), m.spans...)
		}
	}
	if len(m.spans) > 0 && m.spans[0].start < p.spso {
		m.spans[0].start = p.spso
	}
}

// ClassifyOffset is where the broker reads the log for Classify in a group
// mode: the first offset whose message group is not known yet.
func (p *Partition) ClassifyOffset() int64 { return max(p.mg.known, p.spso) }

// CanClassify reports whether Classify would accept more records: offsets
// inside the window whose group is unknown (after a restart or a mode
// change), or room to extend the window. In a group mode the window is
// bounded by what it costs — runs plus group spans up to MaxInFlight — not
// by SPEO-SPSO, so a message group blocked at the SPSO with any number of
// records behind it cannot stop other groups' records from entering.
func (p *Partition) CanClassify() bool {
	if !p.groupMode() {
		return false
	}
	if p.ClassifyOffset() < p.speo {
		return true
	}
	return len(p.runs)+len(p.mg.spans) < p.cfg.MaxInFlight && p.speo-p.spso < maxSpan/2
}

// Classify takes log batches read from ClassifyOffset(), in log order, with
// their message-group ids, and makes their records known to a group mode:
// offsets beyond SPEO join the window as never delivered (Available, count
// 0), offsets inside it get their group. Offsets absent from the log (gaps
// before or between batches) and Skip batches are archived, as Acquire
// does. It stops at the first batch that would overrun the cost limit (see
// CanClassify) or is malformed. Effects carry the archived offsets.
func (p *Partition) Classify(batches []LogBatch) Effects {
	start := p.begin()
	if p.groupMode() {
		p.trimGroups()
		p.classify(batches)
	}
	return p.finish(start)
}

func (p *Partition) classify(batches []LogBatch) {
	cursor, prev := p.ClassifyOffset(), int64(-1)
	for _, b := range batches {
		if b.First > b.Last || b.First <= prev || b.First < 0 {
			return
		}
		prev = b.Last
		if b.Last < cursor {
			continue
		}
		if b.Last >= p.speo && !p.CanClassify() {
			return
		}
		lo := max(b.First, cursor)
		if lo > cursor {
			if !p.archiveAbsent(cursor, lo-1) {
				return
			}
			p.addSpan(cursor, lo-1, 0)
		}
		if b.Skip {
			if !p.archiveAbsent(lo, b.Last) {
				return
			}
			p.addSpan(lo, b.Last, 0)
			cursor = b.Last + 1
			continue
		}
		// The window takes the batch only up to maxSpan/2 past the SPSO
		// (offsets already inside it are classified whatever their
		// distance): one batch may span up to 2^31-1 offsets, and relative
		// run starts must stay below maxSpan. The rest of a cut batch is
		// read again from ClassifyOffset once the SPSO moves.
		last := min(b.Last, max(p.speo-1, p.spso+maxSpan/2-1))
		if last < lo {
			return
		}
		p.extendTo(last + 1)
		at := lo
		for _, gs := range b.Groups {
			f, l := max(gs.First, at), min(gs.Last, last)
			if l < f {
				continue
			}
			if f > at {
				p.addSpan(at, f-1, 0)
			}
			p.addSpan(f, l, p.mg.intern(gs.ID))
			at = l + 1
		}
		p.addSpan(at, last, 0)
		if last < b.Last {
			return
		}
		cursor = b.Last + 1
	}
}

// AcquireGroups is Acquire for a group mode: it hands member up to
// maxRecords Available records whose group is known (see Classify), never
// more than maxRecords (maxRecords <= 0: no limit).
//
// GroupsOrdered takes, per message group, only the group's lowest offset
// that is neither terminal nor Archiving, and only if it is Available: a
// group's next record waits until the previous one is acknowledged,
// archived or dead-lettered, and a released or expired record is the
// group's next delivery again. Records without a group are not ordered.
//
// GroupsFair visits the groups round-robin from where the previous
// acquisition stopped, giving each at most a fair share of maxRecords
// (raised in further passes while records are left), so a group with
// 100x the records of the others takes no more than they do.
func (p *Partition) AcquireGroups(now time.Time, member string, maxRecords int) ([]Acquired, Effects) {
	return p.AcquireGroupsLimited(now, member, maxRecords, nil)
}

// GroupLimiter grants up to want records of message group id now (a
// per-message-group delivery rate limit kept by the broker); what it
// grants is taken. It is not asked for records without a group.
type GroupLimiter func(id string, want int64) int64

// AcquireGroupsLimited is AcquireGroups with each message group's
// acquisitions bounded by limit (nil: unlimited). A group the limiter
// refuses is skipped for this call; in ordered mode its head simply
// waits.
func (p *Partition) AcquireGroupsLimited(now time.Time, member string, maxRecords int, limit GroupLimiter) ([]Acquired, Effects) {
	start := p.begin()
	nowNS := clockNanos(now)
	lock := p.takeLock()
	p.expire(nowNS)
	p.acqAfter = 0
	if maxRecords <= 0 {
		maxRecords = math.MaxInt
	}
	// share.partition.max.record.locks still bounds the records locked at
	// once (the window itself is bounded by cost in a group mode).
	maxRecords = int(min(int64(maxRecords), int64(p.cfg.MaxInFlight)-p.acqs.locked()))
	var out []Acquired
	// Fragmentation guard: a group mode's window may hold far more records
	// than MaxInFlight (one huge group costs one run); acknowledging them
	// one by one could split the runs without bound, so acquisitions pause
	// while the runs alone exceed twice the budget, until the SPSO moves.
	// With nothing in flight nothing else would move it: then one record
	// at a time goes out (ordered mode takes the SPSO's own record first,
	// fair mode reaches its group in turn).
	guarded := len(p.runs) >= 2*p.cfg.MaxInFlight
	if guarded && p.acquired == 0 {
		guarded, maxRecords = false, min(maxRecords, 1)
	}
	if p.groupMode() && p.available > 0 && maxRecords > 0 && !guarded {
		p.trimGroups()
		a := &groupAcquirer{p: p, member: member, nowNS: nowNS, lock: lock, max: int64(maxRecords), limit: limit}
		if p.cfg.Groups == GroupsOrdered {
			// A range per record, mostly: sized once, not regrown.
			a.out = make([]Acquired, 0, min(maxRecords, p.mg.ready+int(min(p.mg.loose, 64)), 1024))
			a.ordered()
			if len(a.out) > 0 {
				p.acqAfter = max(a.after, p.mg.endedBlind)
			}
		} else {
			a.fair()
		}
		a.reset()
		out = a.out
		slices.SortFunc(out, func(x, y Acquired) int { return cmp.Compare(x.First, y.First) })
		out = mergeAcquired(out)
	}
	return out, p.finish(start)
}

// AckSeq is the number of Acknowledge calls made on p: the first is 1.
func (p *Partition) AckSeq() uint64 { return p.ackSeq }

// AcquiredAfter is, for the last AcquireGroups call in ordered mode, the
// latest Acknowledge (its AckSeq) that ended a record of a message group
// whose next record the call acquired; 0: none did. A broker persisting
// an Acknowledge's records after letting go of the Partition hands those
// records out only once they are durable: were it to crash before, the
// ended record would come back after its successor had been delivered.
// A record whose group was not known when it ended (in plain mode before
// a switch to ordered mode, or not classified yet) counts for every
// group. Fair mode and records ended otherwise (lock expiry, dead-letter
// completion, persisted before anything else happens) never count.
func (p *Partition) AcquiredAfter() uint64 { return p.acqAfter }

func mergeAcquired(in []Acquired) []Acquired {
	out := in[:0]
	for _, a := range in {
		if n := len(out); n > 0 && out[n-1].Last+1 == a.First && out[n-1].DeliveryCount == a.DeliveryCount {
			out[n-1].Last = a.Last
			continue
		}
		out = append(out, a)
	}
	return out
}

// groupAcquirer is one AcquireGroups call.
type groupAcquirer struct {
	p      *Partition
	member string
	nowNS  int64
	lock   time.Duration // of the acquisition (LockNext)
	max    int64
	got    int64
	handle uint32
	picks  []span
	out    []Acquired
	limit  GroupLimiter
	after  uint64 // ordered: the latest endedAt of the groups acquired from
}

// limited marks a group whose rate limit is spent for the rest of the
// call (its quota is filled so later passes skip it).
const limited = math.MaxInt32

// grant asks the limiter for n records of group g.
func (a *groupAcquirer) grant(g uint32, n int64) int64 {
	if a.limit == nil || g == 0 {
		return n
	}
	return max(min(a.limit(a.p.mg.groups.names[g], n), n), 0)
}

func (a *groupAcquirer) mark(g uint32, n int64) {
	m := &a.p.mg
	if n := len(m.groups.names); len(m.taken) < n {
		m.taken = append(m.taken, make([]int64, n-len(m.taken))...)
	}
	if m.taken[g] == 0 {
		m.dirty = append(m.dirty, g)
	}
	m.taken[g] += n
}

func (a *groupAcquirer) taken(g uint32) int64 {
	if m := &a.p.mg; int(g) < len(m.taken) {
		return m.taken[g]
	}
	return 0
}

func (a *groupAcquirer) reset() {
	m := &a.p.mg
	for _, g := range m.dirty {
		m.taken[g] = 0
	}
	m.dirty = m.dirty[:0]
}

// pick notes [lo, hi] (Available) for acquisition, extending the last
// pick when it ends right before lo: an ordered acquisition mostly takes
// consecutive records (the heads of groups produced round-robin), which
// one rewrite then acquires.
func (a *groupAcquirer) pick(lo, hi int64) {
	if n := len(a.picks); n > 0 && a.picks[n-1].hi+1 == lo {
		a.picks[n-1].hi = hi
	} else {
		a.picks = append(a.picks, span{lo, hi})
	}
	a.got += hi - lo + 1
}

// apply acquires the picked ranges; called between span visits so the runs
// are never rewritten while pieces() walks them.
func (a *groupAcquirer) apply() {
	p := a.p
	for _, pk := range a.picks {
		p.rewrite(pk.lo, pk.hi, func(e *emitter, ps, pe int64, old meta) {
			if old.state() != StateAvailable {
				panic("sharegroup: picked a record that is not available") // programming error
			}
			if a.handle == 0 {
				mh := p.members.intern(a.member)
				p.members.ref(mh)
				a.handle = p.acqs.alloc(mh, a.nowNS+int64(a.lock))
			}
			c := old.count() + 1
			e.emit(ps, pe, pack(StateAcquired, c, a.handle))
			a.out = append(a.out, Acquired{First: ps, Last: pe, DeliveryCount: int16(c)})
		})
	}
	a.picks = a.picks[:0]
}

func (a *groupAcquirer) ordered() {
	p, m := a.p, &a.p.mg
	// Records in flight whose group is not known yet may belong to any
	// group: the groups wait for Classify to reach them.
	blind := p.acquired > m.heldAll
	loose := m.loose > m.looseHeld // records without a group to deliver
	if (m.ready == 0 || blind) && !loose {
		return // every group with records to deliver has one in flight
	}
	ready, found := m.ready, 0 // acquiring below lowers m.ready
	if blind {
		ready = 0
	}
	// batch is how many consecutive records of one group a call may take
	// (Config.OrderedBatch); a group stops at its first record in flight.
	batch := int64(max(p.cfg.OrderedBatch, 1))
	var stopped map[uint32]bool // groups that cannot take more in this call
	for i := 0; i < len(m.spans) && a.got < a.max; i++ {
		m.visited++
		g := m.spans[i].g
		if g == 0 && m.loose == m.looseHeld {
			continue // no record without a group left to deliver
		}
		cont := g != 0 && a.taken(g) != 0 // its head taken in this call
		if cont && (batch == 1 || a.taken(g) >= batch || stopped[g]) {
			continue
		}
		if g != 0 && !cont && (blind || !m.isReady(g)) {
			// The group's head is further back, the group has nothing
			// to deliver, or it has a record in flight (or backing
			// off): it waits for that one.
			continue
		}
		p.pieces(m.spans[i].start, p.spanEnd(i)-1, func(lo, hi int64, mt meta) bool {
			if mt.state() != StateAvailable {
				if a.taken(g) != 0 && mt.state() == StateAcquired {
					stopped = stopAt(stopped, g) // in flight: what follows waits for it
					return false
				}
				return true // terminal or Archiving: the group's next record decides
			}
			if g == 0 { // no group: no order to keep
				a.pick(lo, lo+min(hi-lo, a.max-a.got-1)) // no overflow with max = MaxInt64
				return a.got < a.max
			}
			head := a.taken(g) == 0
			want := min(hi-lo+1, batch-a.taken(g), a.max-a.got)
			n := a.grant(g, want) // else rate-limited: the rest waits
			if n > 0 {
				a.pick(lo, lo+n-1)
				if head && int(g) < len(m.endedAt) {
					a.after = max(a.after, m.endedAt[g])
				}
			}
			if head {
				a.mark(g, max(n, 1))
				found++
			} else {
				a.mark(g, n)
			}
			if n < hi-lo+1 || a.taken(g) >= batch {
				stopped = stopAt(stopped, g)
				return false
			}
			return true // this piece taken whole: the group's next one
		})
		if g == 0 {
			// Now, so m.looseHeld counts them. A group's head waits
			// for the end: the spans visited later lie past it, and
			// a.taken, not m, stops a second pick of its group.
			a.apply()
		}
		if batch == 1 && found == ready && m.loose == m.looseHeld {
			break // every ready group's head found, no record without a group left
		}
	}
	a.apply()
}

func stopAt(m map[uint32]bool, g uint32) map[uint32]bool {
	if m == nil {
		m = map[uint32]bool{}
	}
	m[g] = true
	return m
}

func (a *groupAcquirer) fair() {
	p, m := a.p, &a.p.mg
	n := len(m.spans)
	if n == 0 {
		return
	}
	first, _ := slices.BinarySearchFunc(m.spans, m.cursor, func(s gspan, c int64) int { return cmp.Compare(s.start, c) })
	if first >= n {
		first = 0
	}
	slots := int64(m.live())
	if m.ungrouped > 0 {
		slots++
	}
	quota := ceilDiv(a.max, max(slots, 1))
	last := first
	for pass := 0; pass < 8 && a.got < a.max; pass++ {
		capped := int64(0)
		for k := 0; k < n && a.got < a.max; k++ {
			i := (first + k) % n
			g := m.spans[i].g
			room := a.max - a.got
			if g != 0 {
				room = min(room, quota-a.taken(g))
			}
			more := false
			p.pieces(m.spans[i].start, p.spanEnd(i)-1, func(lo, hi int64, mt meta) bool {
				if mt.state() != StateAvailable {
					return true
				}
				if room <= 0 {
					more = a.taken(g) < limited
					return false
				}
				take := a.grant(g, min(hi-lo+1, room))
				if take == 0 { // rate limit spent: skip the group this call
					a.mark(g, limited-a.taken(g))
					return false
				}
				a.pick(lo, lo+take-1)
				room -= take
				if g != 0 {
					a.mark(g, take)
				}
				if lo+take-1 < hi {
					more = true
					return false
				}
				return true
			})
			a.apply()
			last = i
			if more && g != 0 {
				capped++
			}
		}
		if capped == 0 {
			break
		}
		quota += ceilDiv(a.max-a.got, capped)
	}
	m.cursor = p.spanEnd(last) // the next acquisition starts with the next group
}

func ceilDiv(a, b int64) int64 {
	if a >= math.MaxInt64-b {
		return a / b
	}
	return (a + b - 1) / b
}

// AcquisitionLock identifies the acquisition holding offset (its lock
// deadline), for Unacquire; ok is false when offset is not Acquired.
func (p *Partition) AcquisitionLock(offset int64) (lock int64, ok bool) {
	if offset < p.spso || offset >= p.speo {
		return 0, false
	}
	m := p.runs[p.find(offset)].meta()
	if m.state() != StateAcquired {
		return 0, false
	}
	return p.acqs.entries[m.acq()].deadline, true
}

// Unacquire gives back records member just acquired that the broker could
// not send (the response reached its size limit): Acquired → Available
// with the delivery count decremented, as if never fetched. Only records
// still held by that acquisition (lock, from AcquisitionLock) change: the
// broker reads the log between acquiring and giving back, and meanwhile
// the member's records may have been released and acquired anew (a
// session closed, a new fetch), which must keep them. Their durable view
// does not change, so the Effects carry no record.
func (p *Partition) Unacquire(member string, ranges []Acquired, lock int64) Effects {
	start := p.begin()
	if h, ok := p.members.lookup(member); ok {
		for _, r := range ranges {
			lo, hi := max(r.First, p.spso), min(r.Last, p.speo-1)
			if lo > hi {
				continue
			}
			p.rewrite(lo, hi, func(e *emitter, ps, pe int64, old meta) {
				if old.state() == StateAcquired && p.acqs.entries[old.acq()].member == h && p.acqs.entries[old.acq()].deadline == lock {
					e.emit(ps, pe, pack(StateAvailable, old.count()-1, 0))
				} else {
					e.emit(ps, pe, old)
				}
			})
		}
	}
	return p.finish(start)
}

// HeldUntil reports whether member has records acquired here, and the
// earliest lock deadline among them (it may have passed if no operation
// has expired it yet). In ordered mode a long poll by such a member should
// not wait long: its own pending acknowledgements are what releases its
// groups' next records, the client sends them with its next request, and
// they must arrive before that deadline.
func (p *Partition) HeldUntil(member string) (deadline time.Time, ok bool) {
	m, ok := p.members.lookup(member)
	if !ok {
		return time.Time{}, false
	}
	first := int64(math.MaxInt64)
	for _, h := range p.acqs.byDeadline {
		if e := &p.acqs.entries[h]; e.member == m && e.deadline < first {
			first = e.deadline
		}
	}
	if first == math.MaxInt64 {
		return time.Time{}, false
	}
	return clockTime(first), true
}

// HeadShare bounds what member may acquire next in ordered mode so that
// the message groups' heads are spread over the members that want them.
// In ordered mode at most one record per group is in flight, so the
// groups' heads are all there is to hand out; a member acknowledging its
// records would otherwise take the heads it freed straight back (its next
// fetch carries the acknowledgements) and members that asked later would
// get nothing for as long as it keeps up. waiting lists the members whose
// fetches are waiting for records of this share-partition now, in any
// order and with repeats; member itself may be among them.
//
// With C contenders (member, the distinct waiting members and every member
// holding records) each may hold ceil(H / C) records, H being the groups
// with a record in the window to deliver or in flight (Available or
// Acquired: msgGroups.openGroups; a group whose records there are all
// acknowledged stays live until the SPSO passes it, but is not counted,
// nor is one whose records wait for their dead-letter write).
// A group whose next record waits out a redelivery backoff still counts.
// Records without a group count as records held.
// HeadShare returns how many more records member may take under that
// share, or -1 (no bound) outside ordered mode or when no other waiting
// member holds fewer than the share: heads nobody waits for are not left
// idle. The caller expires due locks first (ExpireLocks), or records whose
// locks ran out count as held.
func (p *Partition) HeadShare(member string, waiting []string) int {
	if p.cfg.Groups != GroupsOrdered || len(waiting) == 0 {
		return -1
	}
	heads := int64(p.mg.openGroups)
	if heads == 0 {
		return -1
	}
	backoff, _ := p.members.lookup(backoffMember) // 0 (no member) if unused
	held := map[uint32]int64{}                    // records held per member handle
	for _, h := range p.acqs.byDeadline {
		if e := &p.acqs.entries[h]; e.member != backoff && e.refs > 0 {
			held[e.member] += int64(e.refs)
		}
	}
	heldBy := func(m string) int64 {
		if h, ok := p.members.lookup(m); ok {
			return held[h]
		}
		return 0
	}
	contenders := int64(len(held))
	if heldBy(member) == 0 {
		contenders++
	}
	var others []string // distinct waiting members other than member
	var theirs []int64  // the records each of them holds
	for _, w := range waiting {
		if w == member || w == backoffMember || slices.Contains(others, w) {
			continue
		}
		n := heldBy(w)
		if n == 0 {
			contenders++
		}
		others, theirs = append(others, w), append(theirs, n)
	}
	share := (heads + contenders - 1) / contenders
	if !slices.ContainsFunc(theirs, func(n int64) bool { return n < share }) {
		return -1
	}
	return int(max(share-heldBy(member), 0))
}
