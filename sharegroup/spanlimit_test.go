package sharegroup

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClassifyCutsAWideBatch: one log batch may span up to 2^31-1 offsets
// (a compressed batch's LastOffsetDelta is not inspected), more than a
// relative run start holds. A group mode's window takes such a batch only
// up to maxSpan/2 past the SPSO and the rest once the SPSO moves, with
// every record of both message groups where it belongs.
func TestClassifyCutsAWideBatch(t *testing.T) {
	t.Parallel()
	const (
		half = maxSpan / 2
		last = 1<<31 - 2
	)
	wide := []LogBatch{{First: 0, Last: last, Groups: []GroupSpan{
		{First: 0, Last: half - 2, ID: "a"},
		{First: half - 1, Last: last, ID: "b"},
	}}}
	for _, mode := range []GroupMode{GroupsOrdered, GroupsFair} {
		t.Run(mode.String(), func(t *testing.T) {
			p := newTestPartition(t, func(c *Config) { c.Groups = mode })
			p.Classify(wide)
			require.Equal(t, int64(half), p.SPEO())
			require.Equal(t, int64(half), p.ClassifyOffset())
			require.False(t, p.CanClassify(), "the window is at its span limit")
			require.NoError(t, checkInternal(p))

			got, _ := p.AcquireGroups(at(0), "m", 2)
			require.Equal(t, []Acquired{{0, 0, 1}, {half - 1, half - 1, 1}}, got)
			mustAck(t, p, at(1), "m", ack(0, 0, AckAccept))
			require.Equal(t, int64(1), p.SPSO())
			require.True(t, p.CanClassify())

			p.Classify(wide) // the broker reads the same batch again
			require.Equal(t, int64(half+1), p.SPEO())
			require.NoError(t, checkInternal(p))
			rs := p.Ranges()
			require.Equal(t, []StateRange{
				{First: 1, Last: half - 2, State: StateAvailable},
				{First: half - 1, Last: half - 1, State: StateAcquired, DeliveryCount: 1, Member: "m", Deadline: rs[1].Deadline},
				{First: half, Last: half, State: StateAvailable},
			}, rs)
			// Offset half is b's: in ordered mode it waits behind half-1,
			// in fair mode it goes out before a's next.
			got, _ = p.AcquireGroups(at(1), "m", 1)
			if mode == GroupsOrdered {
				require.Equal(t, []Acquired{{1, 1, 1}}, got)
			} else {
				require.Len(t, got, 1)
			}
			require.NoError(t, checkInternal(p))
		})
	}
}

// TestAcquisitionHandlesLast: a group mode's window is bounded by cost,
// not MaxInFlight, and it stays when the mode is switched off, where plain
// Acquire re-acquires Available records inside the window whatever
// MaxInFlight is. Live acquisition handles are bounded by the records
// Acquired, and those by MaxMaxInFlight, so single-record acquisitions
// from a window twice the handle space stop there and never exhaust the
// 21-bit handles.
func TestAcquisitionHandlesLast(t *testing.T) {
	if testing.Short() {
		t.Skip("a million acquisitions")
	}
	t.Parallel()
	const n = 2 * maxAcqHandle
	p := newTestPartition(t, func(c *Config) {
		c.Groups = GroupsFair
		c.DeliveryCountLimit = 0
	})
	p.Classify(batch(0, n-1))
	require.Equal(t, int64(n), p.SPEO())
	cfg := p.Config()
	cfg.Groups = GroupsNone
	require.NoError(t, p.SetConfig(cfg))
	acquired := 0
	require.NotPanics(t, func() {
		for {
			got, _ := p.Acquire(at(0), "a", batch(0, n-1), 1, RecordLimit)
			if len(got) == 0 {
				break
			}
			acquired++
		}
	})
	require.Equal(t, MaxMaxInFlight, acquired)
}
