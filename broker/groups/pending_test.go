package groups

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Tests of PendingIndex (pending.go): the index of the open
// transactions' pending offsets that deletions, offset expiry and
// OffsetFetch with RequireStable read.

var (
	ptpA = TP{Topic: "a", Partition: 0}
	ptpB = TP{Topic: "a", Partition: 1}
	ptpC = TP{Topic: "b", Partition: 0}
)

// pendingState copies the index's entries (n, live, seq per group and
// partition) under its lock.
func pendingState(x *PendingIndex) map[string]map[TP]pendingTP {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := map[string]map[TP]pendingTP{}
	for g, m := range x.m {
		out[g] = map[TP]pendingTP{}
		for tp, p := range m {
			out[g][tp] = *p
		}
	}
	return out
}

// pendingEntry is group's entry for tp; ok is false if there is none.
func pendingEntry(x *PendingIndex, group string, tp TP) (p pendingTP, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.m[group][tp]; e != nil {
		return *e, true
	}
	return pendingTP{}, false
}

func requireEntry(t *testing.T, x *PendingIndex, group string, tp TP, want pendingTP) {
	t.Helper()
	got, ok := pendingEntry(x, group, tp)
	require.True(t, ok, "no entry for %s %v", group, tp)
	require.Equal(t, want, got, "entry of %s %v", group, tp)
}

func requireNoEntry(t *testing.T, x *PendingIndex, group string, tp TP) {
	t.Helper()
	_, ok := pendingEntry(x, group, tp)
	require.False(t, ok, "entry for %s %v", group, tp)
}

// pendingOp is one step on an index in the table-driven tests.
type pendingOp struct {
	add       bool // Add(g, tp, had, oldSeq), its result checked against seq
	had       bool
	oldSeq    uint64
	seq       uint64
	restore   bool // Restore(g, tp, oldSeq)
	forget    bool // forgetLocked(g, tp, oldSeq), its result checked against done
	done      bool
	supersede bool // supersede(g, [tp])
	atLoad    bool // SupersededAtLoad(g, tp)
}

func runPendingOps(t *testing.T, x *PendingIndex, g string, tp TP, ops []pendingOp) {
	t.Helper()
	for i, op := range ops {
		switch {
		case op.add:
			require.Equal(t, op.seq, x.Add(g, tp, op.had, op.oldSeq), "op %d: Add's pendingSeq", i)
		case op.restore:
			x.Restore(g, tp, op.oldSeq)
		case op.forget:
			x.mu.Lock()
			done := x.forgetLocked(g, tp, op.oldSeq)
			x.mu.Unlock()
			require.Equal(t, op.done, done, "op %d: forgetLocked's result", i)
		case op.supersede:
			x.supersede(g, []TP{tp})
		case op.atLoad:
			x.SupersededAtLoad(g, tp)
		default:
			t.Fatalf("op %d: no operation", i)
		}
	}
}

// TestPendingAdd: a new offset counts (n) and is live; a transaction's
// replacement of its own offset of the current pendingSeq counts
// nothing more; replacing one a deletion superseded (an older
// pendingSeq, or SupersededSeq from load) makes it live again. Add
// returns the partition's deletion count.
func TestPendingAdd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ops  []pendingOp
		want pendingTP
	}{
		{"new", []pendingOp{{add: true, seq: 0}}, pendingTP{n: 1, live: 1, seq: 0}},
		{"two transactions", []pendingOp{
			{add: true, seq: 0},
			{add: true, seq: 0},
		}, pendingTP{n: 2, live: 2, seq: 0}},
		{"replace own current", []pendingOp{
			{add: true, seq: 0},
			{add: true, had: true, oldSeq: 0, seq: 0},
			{add: true, had: true, oldSeq: 0, seq: 0},
		}, pendingTP{n: 1, live: 1, seq: 0}},
		{"new after a deletion", []pendingOp{
			{add: true, seq: 0},
			{supersede: true},
			{add: true, seq: 1},
		}, pendingTP{n: 2, live: 1, seq: 1}},
		{"replace superseded", []pendingOp{
			{add: true, seq: 0},
			{supersede: true},
			{add: true, had: true, oldSeq: 0, seq: 1},
		}, pendingTP{n: 1, live: 1, seq: 1}},
		{"replace superseded, then its replacement", []pendingOp{
			{add: true, seq: 0},
			{supersede: true},
			{add: true, had: true, oldSeq: 0, seq: 1},
			{add: true, had: true, oldSeq: 1, seq: 1},
		}, pendingTP{n: 1, live: 1, seq: 1}},
		{"replace after two deletions", []pendingOp{
			{add: true, seq: 0},
			{supersede: true},
			{supersede: true},
			{add: true, had: true, oldSeq: 0, seq: 2},
		}, pendingTP{n: 1, live: 1, seq: 2}},
		{"replace one superseded at load", []pendingOp{
			{add: true, seq: 0},
			{atLoad: true},
			{add: true, had: true, oldSeq: SupersededSeq, seq: 0},
		}, pendingTP{n: 1, live: 1, seq: 0}},
		{"replace superseded beside a live one", []pendingOp{
			{add: true, seq: 0}, // txn 1
			{supersede: true},
			{add: true, seq: 1},                       // txn 2, live
			{add: true, had: true, oldSeq: 0, seq: 1}, // txn 1 again
		}, pendingTP{n: 2, live: 2, seq: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			x := newPendingIndex()
			runPendingOps(t, x, "g", ptpA, tc.ops)
			requireEntry(t, x, "g", ptpA, tc.want)
			require.Equal(t, tc.want.live > 0, x.unstable("g")[ptpA])
			require.True(t, x.has("g", ptpA))
		})
	}
}

// TestPendingAddSeqPerPartition: the pendingSeq Add returns is the
// partition's own deletion count, in its group: other partitions and
// groups have their own.
func TestPendingAddSeqPerPartition(t *testing.T) {
	t.Parallel()
	x := newPendingIndex()
	require.Equal(t, uint64(0), x.Add("g", ptpA, false, 0))
	require.Equal(t, uint64(0), x.Add("g", ptpB, false, 0))
	require.Equal(t, uint64(0), x.Add("h", ptpA, false, 0))
	x.supersede("g", []TP{ptpA})
	x.supersede("g", []TP{ptpA})
	x.supersede("g", []TP{ptpB})
	require.Equal(t, uint64(2), x.Add("g", ptpA, false, 0))
	require.Equal(t, uint64(1), x.Add("g", ptpB, false, 0))
	require.Equal(t, uint64(0), x.Add("h", ptpA, false, 0))
	require.Equal(t, uint64(0), x.Add("g", ptpC, false, 0))
}

// TestPendingRestore: Restore undoes what the Add of a replacement did
// to live, which it changed only if the replaced offset's pendingSeq
// was not the current one.
func TestPendingRestore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ops  []pendingOp
		want pendingTP
	}{
		{"replaced current", []pendingOp{
			{add: true, seq: 0},
			{add: true, had: true, oldSeq: 0, seq: 0},
			{restore: true, oldSeq: 0},
		}, pendingTP{n: 1, live: 1, seq: 0}},
		{"replaced superseded", []pendingOp{
			{add: true, seq: 0},
			{supersede: true},
			{add: true, had: true, oldSeq: 0, seq: 1},
			{restore: true, oldSeq: 0},
		}, pendingTP{n: 1, live: 0, seq: 1}},
		{"replaced superseded at load", []pendingOp{
			{add: true, seq: 0},
			{atLoad: true},
			{add: true, had: true, oldSeq: SupersededSeq, seq: 0},
			{restore: true, oldSeq: SupersededSeq},
		}, pendingTP{n: 1, live: 0, seq: 0}},
		{"replaced superseded beside a live one", []pendingOp{
			{add: true, seq: 0},
			{supersede: true},
			{add: true, seq: 1},
			{add: true, had: true, oldSeq: 0, seq: 1},
			{restore: true, oldSeq: 0},
		}, pendingTP{n: 2, live: 1, seq: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			x := newPendingIndex()
			runPendingOps(t, x, "g", ptpA, tc.ops)
			requireEntry(t, x, "g", ptpA, tc.want)
			require.Equal(t, tc.want.live > 0, x.unstable("g")[ptpA])
		})
	}
	t.Run("unknown", func(t *testing.T) {
		t.Parallel()
		x := newPendingIndex()
		x.Restore("g", ptpA, 3) // nothing to restore: no entry made
		require.Empty(t, pendingState(x))
		x.Add("g", ptpB, false, 0)
		x.Restore("g", ptpA, 3)
		require.Equal(t, map[string]map[TP]pendingTP{"g": {ptpB: {n: 1, live: 1}}}, pendingState(x))
	})
}

// TestPendingForget: forgetting an offset drops n, and live only if its
// pendingSeq is the partition's current one; the entry, and the group
// with its last one, go when n reaches 0, which forgetLocked reports.
func TestPendingForget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ops  []pendingOp
		want *pendingTP // nil: no entry left
	}{
		{"last", []pendingOp{
			{add: true, seq: 0},
			{forget: true, oldSeq: 0, done: true},
		}, nil},
		{"one of two", []pendingOp{
			{add: true, seq: 0},
			{add: true, seq: 0},
			{forget: true, oldSeq: 0, done: false},
		}, &pendingTP{n: 1, live: 1, seq: 0}},
		{"two of two", []pendingOp{
			{add: true, seq: 0},
			{add: true, seq: 0},
			{forget: true, oldSeq: 0, done: false},
			{forget: true, oldSeq: 0, done: true},
		}, nil},
		{"superseded beside a live one", []pendingOp{
			{add: true, seq: 0},
			{supersede: true},
			{add: true, seq: 1},
			{forget: true, oldSeq: 0, done: false},
		}, &pendingTP{n: 1, live: 1, seq: 1}},
		{"live beside a superseded one", []pendingOp{
			{add: true, seq: 0},
			{supersede: true},
			{add: true, seq: 1},
			{forget: true, oldSeq: 1, done: false},
		}, &pendingTP{n: 1, live: 0, seq: 1}},
		{"superseded at load beside a live one", []pendingOp{
			{add: true, seq: 0},
			{add: true, seq: 0},
			{atLoad: true},
			{forget: true, oldSeq: SupersededSeq, done: false},
		}, &pendingTP{n: 1, live: 1, seq: 0}},
		{"replaced, then forgotten", []pendingOp{
			{add: true, seq: 0},
			{supersede: true},
			{add: true, had: true, oldSeq: 0, seq: 1},
			{forget: true, oldSeq: 1, done: true},
		}, nil},
		{"never added", []pendingOp{
			{forget: true, oldSeq: 0, done: false},
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			x := newPendingIndex()
			runPendingOps(t, x, "g", ptpA, tc.ops)
			if tc.want == nil {
				requireNoEntry(t, x, "g", ptpA)
				require.False(t, x.has("g", ptpA))
				require.False(t, x.hasGroup("g"))
				require.Empty(t, pendingState(x), "the group is gone with its last partition")
				return
			}
			requireEntry(t, x, "g", ptpA, *tc.want)
			require.True(t, x.has("g", ptpA))
		})
	}
}

// TestPendingForgetGroup: a group stays while any of its partitions has
// a pending offset, and other groups are untouched.
func TestPendingForgetGroup(t *testing.T) {
	t.Parallel()
	x := newPendingIndex()
	sa := x.Add("g", ptpA, false, 0)
	sb := x.Add("g", ptpB, false, 0)
	sh := x.Add("h", ptpA, false, 0)
	x.Forget("g", ptpA, sa)
	require.False(t, x.has("g", ptpA))
	require.True(t, x.has("g", ptpB))
	require.True(t, x.hasGroup("g"))
	require.ElementsMatch(t, []TP{ptpB}, x.tps("g"))
	x.Forget("g", ptpB, sb)
	require.False(t, x.hasGroup("g"))
	require.Empty(t, x.tps("g"))
	require.Equal(t, []string{"h"}, x.groups())
	requireEntry(t, x, "h", ptpA, pendingTP{n: 1, live: 1})
	x.Forget("h", ptpA, sh)
	require.Empty(t, pendingState(x))
	require.Empty(t, x.groups())
	// Forgetting what is not there changes nothing.
	x.Forget("h", ptpA, sh)
	require.Empty(t, pendingState(x))
}

// TestPendingForgetAll: a transaction's end forgets all its offsets and
// learns, per group, exactly the partitions nothing is pending for any
// more (their deletion marks may go).
func TestPendingForgetAll(t *testing.T) {
	t.Parallel()
	x := newPendingIndex()
	// Transaction 1: g's A, B, C and h's A. Transaction 2: g's B and
	// k's A.
	t1 := map[string]map[TP]OffsetCommit{"g": {}, "h": {}}
	for _, tp := range []TP{ptpA, ptpB, ptpC} {
		t1["g"][tp] = OffsetCommit{Offset: 1, PendingSeq: x.Add("g", tp, false, 0)}
	}
	t1["h"][ptpA] = OffsetCommit{Offset: 1, PendingSeq: x.Add("h", ptpA, false, 0)}
	t2 := map[string]map[TP]OffsetCommit{
		"g": {ptpB: {Offset: 2, PendingSeq: x.Add("g", ptpB, false, 0)}},
		"k": {ptpA: {Offset: 2, PendingSeq: x.Add("k", ptpA, false, 0)}},
	}
	// A deletion of g's C, then transaction 1 replaces its offset.
	x.supersede("g", []TP{ptpC})
	old := t1["g"][ptpC].PendingSeq
	t1["g"][ptpC] = OffsetCommit{Offset: 3, PendingSeq: x.Add("g", ptpC, true, old)}
	require.Equal(t, uint64(1), t1["g"][ptpC].PendingSeq)

	done := x.ForgetAll(t1)
	require.Len(t, done, 2)
	require.ElementsMatch(t, []TP{ptpA, ptpC}, done["g"])
	require.ElementsMatch(t, []TP{ptpA}, done["h"])
	require.NotContains(t, done, "k")
	require.Equal(t, map[string]map[TP]pendingTP{
		"g": {ptpB: {n: 1, live: 1}},
		"k": {ptpA: {n: 1, live: 1}},
	}, pendingState(x))

	done = x.ForgetAll(t2)
	require.Equal(t, map[string][]TP{"g": {ptpB}, "k": {ptpA}}, done)
	require.Empty(t, pendingState(x))

	// Nothing to forget: an empty answer, not nil.
	done = x.ForgetAll(nil)
	require.NotNil(t, done)
	require.Empty(t, done)
	done = x.ForgetAll(map[string]map[TP]OffsetCommit{"g": {}})
	require.Empty(t, done)
}

// TestPendingForgetAllLive: ForgetAll forgets each offset by its own
// PendingSeq: a superseded one leaves the live count of the others.
func TestPendingForgetAllLive(t *testing.T) {
	t.Parallel()
	x := newPendingIndex()
	s1 := x.Add("g", ptpA, false, 0)
	x.supersede("g", []TP{ptpA})
	s2 := x.Add("g", ptpA, false, 0)
	require.NotEqual(t, s1, s2)
	done := x.ForgetAll(map[string]map[TP]OffsetCommit{"g": {ptpA: {PendingSeq: s1}}})
	require.Empty(t, done)
	requireEntry(t, x, "g", ptpA, pendingTP{n: 1, live: 1, seq: 1})
	require.Equal(t, map[TP]bool{ptpA: true}, x.unstable("g"))
	done = x.ForgetAll(map[string]map[TP]OffsetCommit{"g": {ptpA: {PendingSeq: s2}}})
	require.Equal(t, map[string][]TP{"g": {ptpA}}, done)
	require.Empty(t, pendingState(x))
}

// TestPendingSupersede: a deletion bumps the seq of the partitions it
// names and none is live any more (RequireStable no longer waits for
// them), yet they stay pending: a later deletion must still write a
// mark, and expiry must still leave them alone.
func TestPendingSupersede(t *testing.T) {
	t.Parallel()
	x := newPendingIndex()
	x.Add("g", ptpA, false, 0)
	x.Add("g", ptpA, false, 0)
	x.Add("g", ptpB, false, 0)
	x.Add("g", ptpC, false, 0)
	x.Add("h", ptpA, false, 0)
	require.Equal(t, map[TP]bool{ptpA: true, ptpB: true, ptpC: true}, x.unstable("g"))

	unknown := TP{Topic: "zz", Partition: 9}
	x.supersede("g", []TP{ptpA, ptpB, unknown})
	x.supersede("nogroup", []TP{ptpA})
	require.Equal(t, map[string]map[TP]pendingTP{
		"g": {
			ptpA: {n: 2, live: 0, seq: 1},
			ptpB: {n: 1, live: 0, seq: 1},
			ptpC: {n: 1, live: 1, seq: 0},
		},
		"h": {ptpA: {n: 1, live: 1, seq: 0}},
	}, pendingState(x), "only the named, known partitions change; nothing is made")

	require.Equal(t, map[TP]bool{ptpC: true}, x.unstable("g"))
	require.Equal(t, map[TP]bool{ptpA: true}, x.unstable("h"))
	for _, tp := range []TP{ptpA, ptpB, ptpC} {
		require.True(t, x.has("g", tp), "%v still pending", tp)
	}
	require.False(t, x.has("g", unknown))
	require.True(t, x.hasGroup("g"))
	require.ElementsMatch(t, []TP{ptpA, ptpB, ptpC}, x.tps("g"))
	require.ElementsMatch(t, []string{"g", "h"}, x.groups())

	// The whole group deleted (DeleteGroup supersedes every pending
	// partition): nothing is unstable, everything still pending.
	x.supersede("g", x.tps("g"))
	require.Nil(t, x.unstable("g"))
	require.True(t, x.hasGroup("g"))
	require.ElementsMatch(t, []TP{ptpA, ptpB, ptpC}, x.tps("g"))
	require.Equal(t, map[string]bool{"g": false, "h": true}, x.LiveGroups())
	requireEntry(t, x, "g", ptpA, pendingTP{n: 2, live: 0, seq: 2})
	requireEntry(t, x, "g", ptpC, pendingTP{n: 1, live: 0, seq: 1})

	// A supersede of nothing changes nothing.
	before := pendingState(x)
	x.supersede("g", nil)
	require.Equal(t, before, pendingState(x))
}

// TestPendingSupersededAtLoad: at start, an offset a deletion came
// after stops being live; LiveGroups then reports every group, true
// exactly for those with a live partition (loadGroups).
func TestPendingSupersededAtLoad(t *testing.T) {
	t.Parallel()
	x := newPendingIndex()
	// g: A superseded, B live. h: its only offset superseded. k: A
	// twice, one superseded.
	x.Add("g", ptpA, false, 0)
	x.Add("g", ptpB, false, 0)
	x.Add("h", ptpA, false, 0)
	x.Add("k", ptpA, false, 0)
	x.Add("k", ptpA, false, 0)
	x.SupersededAtLoad("g", ptpA)
	x.SupersededAtLoad("h", ptpA)
	x.SupersededAtLoad("k", ptpA)
	require.Equal(t, map[string]map[TP]pendingTP{
		"g": {ptpA: {n: 1, live: 0}, ptpB: {n: 1, live: 1}},
		"h": {ptpA: {n: 1, live: 0}},
		"k": {ptpA: {n: 2, live: 1}},
	}, pendingState(x))
	require.Equal(t, map[string]bool{"g": true, "h": false, "k": true}, x.LiveGroups())
	require.Equal(t, map[TP]bool{ptpB: true}, x.unstable("g"))
	require.Nil(t, x.unstable("h"))
	require.True(t, x.has("h", ptpA))

	// Forgetting the superseded ones (pendingSeq SupersededSeq) leaves
	// the live counts; the live ones' go.
	x.Forget("k", ptpA, SupersededSeq)
	requireEntry(t, x, "k", ptpA, pendingTP{n: 1, live: 1})
	x.Forget("g", ptpB, 0)
	require.Equal(t, map[string]bool{"g": false, "h": false, "k": true}, x.LiveGroups())
	x.Forget("g", ptpA, SupersededSeq)
	x.Forget("h", ptpA, SupersededSeq)
	x.Forget("k", ptpA, 0)
	require.Empty(t, pendingState(x))
	require.NotNil(t, x.LiveGroups())
	require.Empty(t, x.LiveGroups())
}

// TestPendingLiveGroups: LiveGroups follows Add, supersede and Forget.
func TestPendingLiveGroups(t *testing.T) {
	t.Parallel()
	x := newPendingIndex()
	require.Empty(t, x.LiveGroups())
	sa := x.Add("g", ptpA, false, 0)
	x.Add("g", ptpB, false, 0)
	x.Add("h", ptpA, false, 0)
	require.Equal(t, map[string]bool{"g": true, "h": true}, x.LiveGroups())
	x.supersede("g", []TP{ptpA})
	require.Equal(t, map[string]bool{"g": true, "h": true}, x.LiveGroups(), "g's B still live")
	x.supersede("g", []TP{ptpB})
	require.Equal(t, map[string]bool{"g": false, "h": true}, x.LiveGroups())
	x.Add("g", ptpA, true, sa) // replaces the superseded offset: live again
	require.Equal(t, map[string]bool{"g": true, "h": true}, x.LiveGroups())
}

// TestPendingUnstableNil: unstable is nil when nothing is live: no
// group, an emptied group, only superseded offsets.
func TestPendingUnstableNil(t *testing.T) {
	t.Parallel()
	x := newPendingIndex()
	require.Nil(t, x.unstable("g"))
	s := x.Add("g", ptpA, false, 0)
	require.Equal(t, map[TP]bool{ptpA: true}, x.unstable("g"))
	require.Nil(t, x.unstable("h"))
	x.Forget("g", ptpA, s)
	require.Nil(t, x.unstable("g"))
	x.Add("g", ptpA, false, 0)
	x.Add("g", ptpB, false, 0)
	x.supersede("g", []TP{ptpA, ptpB})
	require.Nil(t, x.unstable("g"))
	x.Add("h", ptpA, false, 0)
	x.SupersededAtLoad("h", ptpA)
	require.Nil(t, x.unstable("h"))
}

// TestPendingReadersEmpty: the readers of an empty index, or of a group
// it does not know, answer nothing (and make nothing).
func TestPendingReadersEmpty(t *testing.T) {
	t.Parallel()
	x := newPendingIndex()
	require.False(t, x.has("g", ptpA))
	require.False(t, x.hasGroup("g"))
	require.NotNil(t, x.tps("g"))
	require.Empty(t, x.tps("g"))
	require.NotNil(t, x.groups())
	require.Empty(t, x.groups())
	require.Nil(t, x.unstable("g"))
	require.Empty(t, x.LiveGroups())
	require.Empty(t, pendingState(x))
}

// TestPendingSupersededSeq: SupersededSeq matches no seq a partition
// has after any number of deletions, so an offset marked with it never
// counts as live when forgotten.
func TestPendingSupersededSeq(t *testing.T) {
	t.Parallel()
	x := newPendingIndex()
	live := x.Add("g", ptpA, false, 0)
	x.Add("g", ptpA, false, 0)
	x.SupersededAtLoad("g", ptpA)
	require.NotEqual(t, uint64(SupersededSeq), live)
	x.Forget("g", ptpA, SupersededSeq)
	requireEntry(t, x, "g", ptpA, pendingTP{n: 1, live: 1})
	x.Forget("g", ptpA, live)
	require.Empty(t, pendingState(x))

	// After many deletions, a new offset's seq is still not it, and one
	// marked with it leaves the live count of a live one alone.
	x.Add("g", ptpA, false, 0)
	for range 1000 {
		x.supersede("g", []TP{ptpA})
	}
	s := x.Add("g", ptpA, false, 0)
	x.Add("g", ptpA, false, 0)
	require.Equal(t, uint64(1000), s)
	require.NotEqual(t, uint64(SupersededSeq), s)
	x.Forget("g", ptpA, SupersededSeq)
	requireEntry(t, x, "g", ptpA, pendingTP{n: 2, live: 2, seq: 1000})
	require.Equal(t, map[TP]bool{ptpA: true}, x.unstable("g"))
	x.Forget("g", ptpA, s)
	x.Forget("g", ptpA, s)
	require.Empty(t, pendingState(x))
}

// TestPendingTransactionLife follows one partition through the calls
// the transactions and groups make: TxnOffsetCommits of two
// transactions, a failed one undone, an OffsetDelete, a replacement,
// and both ends.
func TestPendingTransactionLife(t *testing.T) {
	t.Parallel()
	x := newPendingIndex()
	// Two transactions' offsets, as addPendingOffset keeps them.
	t1 := map[string]map[TP]OffsetCommit{"g": {}}
	t2 := map[string]map[TP]OffsetCommit{"g": {}}
	add := func(offs map[string]map[TP]OffsetCommit, tp TP, offset int64) OffsetCommit {
		old, had := offs["g"][tp]
		oc := OffsetCommit{Offset: offset, PendingSeq: x.Add("g", tp, had, old.PendingSeq)}
		offs["g"][tp] = oc
		return old
	}
	add(t1, ptpA, 1)
	add(t2, ptpA, 2)
	requireEntry(t, x, "g", ptpA, pendingTP{n: 2, live: 2})

	// OffsetDelete of A: both pending offsets are superseded, A stays
	// pending (a mark is written).
	require.True(t, x.has("g", ptpA))
	x.supersede("g", []TP{ptpA})
	require.Nil(t, x.unstable("g"))
	require.True(t, x.has("g", ptpA))

	// t1 commits A again, but its write fails: undone
	// (restorePendingOffsetLocked).
	prev := add(t1, ptpA, 3)
	require.Equal(t, map[TP]bool{ptpA: true}, x.unstable("g"))
	x.Restore("g", ptpA, prev.PendingSeq)
	t1["g"][ptpA] = prev
	require.Nil(t, x.unstable("g"))
	requireEntry(t, x, "g", ptpA, pendingTP{n: 2, live: 0, seq: 1})

	// t1 commits A again, durably: live.
	add(t1, ptpA, 4)
	require.Equal(t, map[TP]bool{ptpA: true}, x.unstable("g"))
	requireEntry(t, x, "g", ptpA, pendingTP{n: 2, live: 1, seq: 1})

	// t2 ends: its superseded offset goes, A still pending and live.
	require.Empty(t, x.ForgetAll(t2))
	requireEntry(t, x, "g", ptpA, pendingTP{n: 1, live: 1, seq: 1})
	// t1 ends: nothing pending for A any more.
	require.Equal(t, map[string][]TP{"g": {ptpA}}, x.ForgetAll(t1))
	require.Empty(t, pendingState(x))
}

// TestPendingConcurrent: transactions add, replace, undo and forget
// offsets of their own and shared partitions while deletions supersede
// them and readers look; every reader sees 0 <= live <= n, and when
// every offset added was forgotten the index is empty. A per-group lock
// stands in for Group.mu, held as handleTxnOffsetCommit holds it from
// an Add to its Restore, and as deletions hold it.
func TestPendingConcurrent(t *testing.T) {
	t.Parallel()
	x := newPendingIndex()
	const (
		writers = 8
		rounds  = 300
	)
	groupNames := []string{"g0", "g1"}
	groupMu := map[string]*sync.Mutex{"g0": {}, "g1": {}}
	shared := []TP{ptpA, ptpB}
	check := func() error {
		x.mu.Lock()
		defer x.mu.Unlock()
		for g, m := range x.m {
			if len(m) == 0 {
				return fmt.Errorf("group %s without partitions", g)
			}
			for tp, p := range m {
				if p.n <= 0 || p.live < 0 || p.live > p.n {
					return fmt.Errorf("%s %v: n %d live %d", g, tp, p.n, p.live)
				}
			}
		}
		return nil
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, writers+4)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := TP{Topic: fmt.Sprintf("own%d", w), Partition: int32(w)}
			for i := range rounds {
				g := groupNames[(w+i)%len(groupNames)]
				mu := groupMu[g]
				tps := []TP{own, shared[i%len(shared)]}
				seqs := map[TP]uint64{}
				mu.Lock()
				for _, tp := range tps {
					seqs[tp] = x.Add(g, tp, false, 0)
				}
				mu.Unlock()
				// Replace each, undoing every third replacement.
				for _, tp := range tps {
					mu.Lock()
					prev := seqs[tp]
					s := x.Add(g, tp, true, prev)
					if i%3 == 0 {
						x.Restore(g, tp, prev)
					} else {
						seqs[tp] = s
					}
					mu.Unlock()
				}
				if i%2 == 0 {
					x.Forget(g, own, seqs[own])
					x.Forget(g, tps[1], seqs[tps[1]])
				} else {
					done := x.ForgetAll(map[string]map[TP]OffsetCommit{g: {
						own:    {PendingSeq: seqs[own]},
						tps[1]: {PendingSeq: seqs[tps[1]]},
					}})
					// Only this writer uses own: it is done with it.
					if !slices.Contains(done[g], own) {
						errs <- fmt.Errorf("writer %d: %v not done", w, own)
						return
					}
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for r := range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, g := range groupNames {
					_ = x.has(g, shared[r%len(shared)])
					_ = x.hasGroup(g)
					for tp := range x.unstable(g) {
						_ = x.has(g, tp)
					}
					_ = x.tps(g)
				}
				_ = x.groups()
				_ = x.LiveGroups()
				if err := check(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Deletions, under the group's lock as deleteOffsetsLocked and
	// DeleteGroup run.
	readers.Add(1)
	go func() {
		defer readers.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			g := groupNames[i%len(groupNames)]
			mu := groupMu[g]
			mu.Lock()
			if i%2 == 0 {
				x.supersede(g, x.tps(g))
			} else {
				x.supersede(g, []TP{shared[i%len(shared)]})
			}
			mu.Unlock()
		}
	}()
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, check())
	require.Empty(t, pendingState(x))
	require.Empty(t, x.groups())
	require.Empty(t, x.LiveGroups())
	for _, g := range groupNames {
		require.False(t, x.hasGroup(g))
		require.Nil(t, x.unstable(g))
	}
}
