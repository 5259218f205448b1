package sharegroup

import (
	"container/heap"
	"strings"
)

// An acquisition is one grant of records to one member with one lock
// deadline: every Acquire call and every RENEW creates one. Runs point to it
// by a small handle, so the member id and the deadline are stored once per
// acquisition instead of once per run.
type acquisition struct {
	deadline    int64  // lock deadline, Unix nanoseconds
	first, last int64  // bounds of every offset ever acquired under it (for expiry scans)
	member      uint32 // member handle
	refs        uint32 // offsets still StateAcquired under this handle; freed at 0
	heapIndex   int32  // position in acquisitions.byDeadline
}

// acquisitions is the handle table plus a min-heap by deadline.
type acquisitions struct {
	entries    []acquisition // index = handle; 0 is never used
	freeList   []uint32
	byDeadline []uint32 // heap of live handles
}

func (a *acquisitions) alloc(member uint32, deadline int64) uint32 {
	var h uint32
	if n := len(a.freeList); n > 0 {
		h = a.freeList[n-1]
		a.freeList = a.freeList[:n-1]
	} else {
		if len(a.entries) == 0 {
			a.entries = append(a.entries, acquisition{}) // handle 0 = none
		}
		if len(a.entries) > maxAcqHandle {
			// Cannot happen: live acquisitions <= in-flight records <= 1,000,000.
			panic("sharegroup: acquisition handles exhausted")
		}
		h = uint32(len(a.entries))
		a.entries = append(a.entries, acquisition{})
	}
	a.entries[h] = acquisition{deadline: deadline, member: member, first: -1, last: -1}
	heap.Push((*deadlineHeap)(a), h)
	return h
}

// cover widens the bounds of h to include [lo, hi].
func (a *acquisitions) cover(h uint32, lo, hi int64) {
	e := &a.entries[h]
	if e.first < 0 || lo < e.first {
		e.first = lo
	}
	if hi > e.last {
		e.last = hi
	}
}

func (a *acquisitions) ref(h uint32, n int64) { a.entries[h].refs += uint32(n) }

// unref reports whether h dropped to zero references.
func (a *acquisitions) unref(h uint32, n int64) bool {
	e := &a.entries[h]
	e.refs -= uint32(n)
	return e.refs == 0
}

// free releases h and returns its member handle.
func (a *acquisitions) free(h uint32) uint32 {
	e := &a.entries[h]
	if e.heapIndex >= 0 {
		heap.Remove((*deadlineHeap)(a), int(e.heapIndex))
	}
	m := e.member
	*e = acquisition{heapIndex: -1}
	a.freeList = append(a.freeList, h)
	return m
}

// earliest returns the handle with the smallest deadline, or 0.
func (a *acquisitions) earliest() uint32 {
	if len(a.byDeadline) == 0 {
		return 0
	}
	return a.byDeadline[0]
}

func (a *acquisitions) live() int { return len(a.byDeadline) }

// locked returns the offsets held by live acquisitions (O(acquisitions)).
func (a *acquisitions) locked() int64 {
	var n int64
	for _, h := range a.byDeadline {
		n += int64(a.entries[h].refs)
	}
	return n
}

type deadlineHeap acquisitions

func (h *deadlineHeap) Len() int { return len(h.byDeadline) }
func (h *deadlineHeap) Less(i, j int) bool {
	a, b := h.byDeadline[i], h.byDeadline[j]
	da, db := h.entries[a].deadline, h.entries[b].deadline
	return da < db || (da == db && a < b)
}
func (h *deadlineHeap) Swap(i, j int) {
	h.byDeadline[i], h.byDeadline[j] = h.byDeadline[j], h.byDeadline[i]
	h.entries[h.byDeadline[i]].heapIndex = int32(i)
	h.entries[h.byDeadline[j]].heapIndex = int32(j)
}
func (h *deadlineHeap) Push(x any) {
	v := x.(uint32)
	h.entries[v].heapIndex = int32(len(h.byDeadline))
	h.byDeadline = append(h.byDeadline, v)
}
func (h *deadlineHeap) Pop() any {
	n := len(h.byDeadline) - 1
	v := h.byDeadline[n]
	h.byDeadline = h.byDeadline[:n]
	h.entries[v].heapIndex = -1
	return v
}

// interned maps string ids to small handles so runs, acquisitions and
// group spans never hold strings; a handle lives while it is referenced.
// Member ids (referenced by live acquisitions) and message-group ids
// (referenced by group spans) use it. Handle 0 is never given out.
type interned struct {
	ids      map[string]uint32
	names    []string // index = handle; 0 unused
	refs     []uint32 // references per handle
	freeList []uint32
}

func (m *interned) lookup(id string) (uint32, bool) {
	h, ok := m.ids[id]
	return h, ok
}

// intern returns id's handle, adding it if new. id may alias memory that
// changes after the call (Classify's group ids point into the broker's
// read buffer): what is kept is a copy.
func (m *interned) intern(id string) uint32 {
	if h, ok := m.ids[id]; ok {
		return h
	}
	id = strings.Clone(id)
	if m.ids == nil {
		m.ids = make(map[string]uint32)
		m.names = []string{""}
		m.refs = []uint32{0}
	}
	var h uint32
	if n := len(m.freeList); n > 0 {
		h = m.freeList[n-1]
		m.freeList = m.freeList[:n-1]
		m.names[h] = id
	} else {
		h = uint32(len(m.names))
		m.names = append(m.names, id)
		m.refs = append(m.refs, 0)
	}
	m.ids[id] = h
	return h
}

func (m *interned) ref(h uint32) { m.refs[h]++ }

func (m *interned) unref(h uint32) {
	m.refs[h]--
	if m.refs[h] == 0 {
		delete(m.ids, m.names[h])
		m.names[h] = ""
		m.freeList = append(m.freeList, h)
	}
}
