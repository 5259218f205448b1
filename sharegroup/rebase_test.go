package sharegroup

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRebaseKeepsRuns: a window that never drains moves past maxSpan
// offsets from its base, so the runs' relative starts are rebased (the
// start is the low bits of a run's word: a rebase must not reach the
// meta above it); every run keeps its state, delivery count and lock.
func TestRebaseKeepsRuns(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t, func(c *Config) { c.MaxInFlight = MaxMaxInFlight; c.DeliveryCountLimit = 0 })
	const step = MaxMaxInFlight / 2
	rebased := false
	for i := 0; !rebased || i < 3; i++ {
		lo, base := p.SPEO(), p.base
		got, _ := p.Acquire(at(i), "a", batch(lo, lo+step-1), step, RecordLimit)
		require.Equal(t, []Acquired{{lo, lo + step - 1, 1}}, got)
		// Release the first half and redeliver it, so runs of delivery
		// counts 1 and 2, held and not, straddle every rebase.
		mustAck(t, p, at(i), "a", AckBatch{First: lo, Last: lo + step/2 - 1, Types: []AckType{AckRelease}, DeliveryCount: 1})
		got, _ = p.Acquire(at(i), "b", batch(lo, lo+step/2-1), step, RecordLimit)
		require.Equal(t, []Acquired{{lo, lo + step/2 - 1, 2}}, got)
		p.AdvanceLogStart(lo + step/4) // the window keeps the rest
		require.NoError(t, checkInternal(p))
		rebased = rebased || p.base != base
		rs := p.Ranges()
		require.Len(t, rs, 2)
		require.Equal(t, StateRange{First: lo + step/4, Last: lo + step/2 - 1, State: StateAcquired, DeliveryCount: 2, Member: "b", Deadline: rs[0].Deadline}, rs[0])
		require.Equal(t, StateRange{First: lo + step/2, Last: lo + step - 1, State: StateAcquired, DeliveryCount: 1, Member: "a", Deadline: rs[1].Deadline}, rs[1])
		if i > 4*maxSpan/step {
			t.Fatal("never rebased")
		}
	}
}
