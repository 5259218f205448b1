package sharegroup

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCanBecome checks every pair of states against KIP-932's table (§3):
// AVAILABLE → ACQUIRED; ACQUIRED → AVAILABLE, ACKNOWLEDGED, ARCHIVED,
// ARCHIVING; ARCHIVING → ARCHIVED; ACKNOWLEDGED and ARCHIVED are terminal.
func TestCanBecome(t *testing.T) {
	t.Parallel()
	legal := map[[2]RecordState]bool{
		{StateAvailable, StateAcquired}:    true,
		{StateAcquired, StateAvailable}:    true,
		{StateAcquired, StateAcknowledged}: true,
		{StateAcquired, StateArchived}:     true,
		{StateAcquired, StateArchiving}:    true,
		{StateArchiving, StateArchived}:    true,
	}
	for from := RecordState(0); from <= numStates; from++ { // includes one invalid state
		for to := RecordState(0); to <= numStates; to++ {
			require.Equal(t, legal[[2]RecordState{from, to}], from.canBecome(to), "%v -> %v", from, to)
		}
	}
	for s := RecordState(0); s < numStates; s++ {
		require.Equal(t, s == StateAcknowledged || s == StateArchived, s.Terminal(), "%v", s)
		require.Equal(t, s != StateAcquired, s.persistable(), "%v", s)
	}
	// Persisted ids are the wire's DeliveryState values and must not move.
	require.Equal(t, []RecordState{0, 1, 2, 3, 4}, []RecordState{StateAvailable, StateAcquired, StateAcknowledged, StateArchiving, StateArchived})
	require.Equal(t, "state(9)", RecordState(9).String())
}

func TestMetaPacking(t *testing.T) {
	t.Parallel()
	for _, s := range []RecordState{StateAvailable, StateAcquired, StateArchived} {
		for _, c := range []int{0, 1, 25, 63, 64, 1000, maxStoredCount} {
			for _, a := range []uint32{0, 1, 12345, MaxMaxInFlight, maxAcqHandle} {
				m := pack(s, c, a)
				require.Equal(t, s, m.state())
				require.Equal(t, c, m.count())
				require.Equal(t, a, m.acq())
				for _, start := range []uint32{0, 1, 1 << 20, maxSpan - 1} {
					r := mkRun(start, m)
					require.Equal(t, start, r.start())
					require.Equal(t, m, r.meta())
				}
			}
		}
	}
	require.Equal(t, maxStoredCount, pack(StateAvailable, 5000, 0).count(), "counts saturate")
	require.Greater(t, maxAcqHandle, MaxMaxInFlight, "a handle for every record locked")
	require.Equal(t, 8, int(unsafeSizeofRun()))
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, DefaultConfig().Validate())
	for _, mut := range []func(*Config){
		func(c *Config) { c.RecordLockDuration = 0 },
		func(c *Config) { c.DeliveryCountLimit = -1 },
		func(c *Config) { c.DeliveryCountLimit = maxStoredCount + 1 },
		func(c *Config) { c.MaxInFlight = 0 },
		func(c *Config) { c.MaxInFlight = MaxMaxInFlight + 1 },
	} {
		c := DefaultConfig()
		mut(&c)
		require.ErrorIs(t, c.Validate(), ErrInvalidConfig)
	}
	c := DefaultConfig()
	c.MaxInFlight = MaxMaxInFlight
	require.NoError(t, c.Validate())
}
