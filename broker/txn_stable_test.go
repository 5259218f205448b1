package broker

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchOffsetAt is one partition's OffsetFetch at version v: by topic
// name up to v9 (in Groups from v8), by topic id at v10, as franz-go
// sends it to a broker that serves v10.
func (r *rawTxn) fetchOffsetAt(v int16, group, topic string, part int32, stable bool) (int64, string) {
	r.c.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = stable
	if v < 8 {
		req.Group = group
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{part}
		req.Topics = append(req.Topics, rt)
		p := r.c.do(req, v).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0]
		return p.Offset, codeName(p.ErrorCode)
	}
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group, rg.MemberEpoch = group, -1
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = topic, []int32{part}
	if v >= 10 {
		tt := r.c.b.topics.Get(topic)
		require.NotNil(r.c.t, tt)
		rt.Topic, rt.TopicID = "", tt.ID
	}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	g := r.c.do(req, v).(*kmsg.OffsetFetchResponse).Groups[0]
	require.Zero(r.c.t, g.ErrorCode)
	p := g.Topics[0].Partitions[0]
	return p.Offset, codeName(p.ErrorCode)
}

// fetchAllOffsets is an OffsetFetch v8+ of every committed offset of
// group: partition → (offset, code).
func (r *rawTxn) fetchAllOffsets(v int16, group string, stable bool) map[int32][2]any {
	r.c.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = stable
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group, rg.MemberEpoch = group, -1
	req.Groups = append(req.Groups, rg)
	out := map[int32][2]any{}
	for _, t := range r.c.do(req, v).(*kmsg.OffsetFetchResponse).Groups[0].Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = [2]any{p.Offset, codeName(p.ErrorCode)}
		}
	}
	return out
}

// completionGate holds a transaction's background completion just
// before it applies its offsets (Config.txnBeforeApply) until released.
type completionGate struct {
	mu      sync.Mutex
	held    chan struct{} // closed when a completion reaches the gate
	release chan struct{}
}

// newCompletionGate returns an armed gate. A test registers its open
// as a clean-up after starting its broker (clean-ups run last first), so
// that a failed test's broker can close.
func newCompletionGate() *completionGate {
	g := &completionGate{}
	g.arm()
	return g
}

// arm makes the next completion stop at the gate.
func (g *completionGate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held, g.release = make(chan struct{}), make(chan struct{})
}

func (g *completionGate) hook(string) {
	g.mu.Lock()
	held, release := g.held, g.release
	g.mu.Unlock()
	close(held)
	<-release
}

func (g *completionGate) wait(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	held := g.held
	g.mu.Unlock()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the completion did not reach the gate")
	}
}

func (g *completionGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.release:
	default:
		close(g.release)
	}
}

// TestOffsetFetchStableWhileCompleting is the regression test of the
// duplicates a consume-transform-produce chain saw after a rebalance
// (issue 26). EndTxn v5 is answered once its decision is durable; its
// markers and offsets are applied after, in the background, as in
// Kafka. Until they are, an OffsetFetch with RequireStable for those
// partitions must answer UNSTABLE_OFFSET_COMMIT, so the member that takes
// the partition over waits for the offsets instead of starting from the
// reset offset. At v10 (topic ids, what franz-go sends) the broker looked
// the pending offsets up under the response's topic name, which is empty
// there, and answered offset -1 with no error: the new owner read the
// committed transaction's input again and produced it a second time.
func TestOffsetFetchStableWhileCompleting(t *testing.T) {
	t.Parallel()
	gate := newCompletionGate()
	b := startTest(t, func(c *Config) { c.txnBeforeApply = gate.hook })
	t.Cleanup(gate.open)
	r := tv2Producer(t, b, "sw", 2)
	for i, v := range []int16{7, 8, 9, 10} {
		off := int64(10 * (i + 1))
		require.Equal(t, "NONE", codeName(r.commitOffsetAt(5, "sw-g", "sw", 0, off)))
		require.Equal(t, "NONE", codeName(r.produceAt(12, "sw", 1, int32(i), "out")))
		resp := r.endAt(5, r.pid, r.epoch, true)
		require.Equal(t, "NONE", codeName(resp.ErrorCode))
		r.epoch = resp.ProducerEpoch
		gate.wait(t)

		got, code := r.fetchOffsetAt(v, "sw-g", "sw", 0, true)
		require.Equal(t, "UNSTABLE_OFFSET_COMMIT", code, "v%d: committed, offsets not applied yet", v)
		require.Equal(t, int64(-1), got)
		last := off - 10 // the last transaction's, applied
		if i == 0 {
			last = -1
		}
		got, code = r.fetchOffsetAt(v, "sw-g", "sw", 0, false)
		require.Equal(t, "NONE", code, "v%d without RequireStable", v)
		require.Equal(t, last, got, "v%d without RequireStable: the last applied offset", v)
		if v >= 8 && i > 0 {
			all := r.fetchAllOffsets(v, "sw-g", true)
			require.Equal(t, map[int32][2]any{0: {int64(-1), "UNSTABLE_OFFSET_COMMIT"}}, all, "v%d, all offsets", v)
		}

		gate.open()
		r.awaitCompleted(t)
		gate.arm()
		got, code = r.fetchOffsetAt(v, "sw-g", "sw", 0, true)
		require.Equal(t, "NONE", code, "v%d: applied", v)
		require.Equal(t, off, got)
		if v >= 8 {
			require.Equal(t, map[int32][2]any{0: {off, "NONE"}}, r.fetchAllOffsets(v, "sw-g", true))
		}
	}
}

// TestOffsetFetchStableRacesCompletion: a completion that applies its
// offsets and stops holding them pending between an OffsetFetch's two
// steps (looking up pending offsets, reading committed ones) must not
// make the fetch answer "no offset": it answers the offset or
// UNSTABLE_OFFSET_COMMIT. The fetch used to read first and look up
// second, so offsets applied in between were in neither.
func TestOffsetFetchStableRacesCompletion(t *testing.T) {
	t.Parallel()
	gate := newCompletionGate()
	fetchHeld, fetchGo := make(chan struct{}), make(chan struct{})
	var once, goOnce sync.Once
	b := startTest(t, func(c *Config) {
		c.txnBeforeApply = gate.hook
		c.offsetFetchAfterStable = func(group string) {
			if group == "sr-g" {
				once.Do(func() { close(fetchHeld); <-fetchGo })
			}
		}
	})
	t.Cleanup(gate.open)
	t.Cleanup(func() { goOnce.Do(func() { close(fetchGo) }) })
	r := tv2Producer(t, b, "sr", 1)
	require.Equal(t, "NONE", codeName(r.commitOffsetAt(5, "sr-g", "sr", 0, 42)))
	resp := r.endAt(5, r.pid, r.epoch, true)
	require.Equal(t, "NONE", codeName(resp.ErrorCode))
	gate.wait(t)

	type answer struct {
		off  int64
		code string
	}
	got := make(chan answer, 1)
	f := &rawTxn{c: dialRaw(t, b)}
	go func() {
		off, code := f.fetchOffsetAt(10, "sr-g", "sr", 0, true)
		got <- answer{off, code}
	}()
	<-fetchHeld
	gate.open()
	r.awaitCompleted(t)
	goOnce.Do(func() { close(fetchGo) })
	a := <-got
	require.Contains(t, []answer{{42, "NONE"}, {-1, "UNSTABLE_OFFSET_COMMIT"}}, a, "never -1 without an error")
	off, code := f.fetchOffsetAt(10, "sr-g", "sr", 0, true)
	require.Equal(t, answer{42, "NONE"}, answer{off, code})
}

// TestOffsetFetchStableCommitDuringFetch: a TxnOffsetCommit that lands
// while an OffsetFetch with RequireStable is between its two steps is
// newer than the fetch; the fetch answers the committed offset with no
// error, at every version. A check of the pending offsets left after the
// read (from before they moved into fetchOffsets) answered
// CONCURRENT_TRANSACTIONS there at v8 and v9, which consumers do not
// retry; found by review.
func TestOffsetFetchStableCommitDuringFetch(t *testing.T) {
	t.Parallel()
	held, release := make(chan struct{}), make(chan struct{})
	var arm sync.Mutex // held while a fetch is to be stopped
	armed := false
	b := startTest(t, func(c *Config) {
		c.offsetFetchAfterStable = func(group string) {
			arm.Lock()
			stop := armed && group == "sc-g"
			armed = false
			arm.Unlock()
			if stop {
				held <- struct{}{}
				<-release
			}
		}
	})
	r := tv2Producer(t, b, "sc", 1)
	require.Equal(t, "NONE", codeName(r.commitOffsetAt(5, "sc-g", "sc", 0, 3)))
	r.endV5(t, true)
	f := &rawTxn{c: dialRaw(t, b)}
	for _, v := range []int16{7, 8, 9, 10} {
		arm.Lock()
		armed = true
		arm.Unlock()
		type answer struct {
			off  int64
			code string
		}
		got := make(chan answer, 1)
		go func() {
			off, code := f.fetchOffsetAt(v, "sc-g", "sc", 0, true)
			got <- answer{off, code}
		}()
		<-held
		require.Equal(t, "NONE", codeName(r.commitOffsetAt(5, "sc-g", "sc", 0, 10+int64(v))), "v%d", v)
		release <- struct{}{}
		require.Equal(t, answer{3, "NONE"}, <-got, "v%d: the committed offset; the commit came after the fetch began", v)
		r.endV5(t, false) // abort: the offset stays 3
	}
}
