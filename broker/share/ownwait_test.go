package share

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOwnGroupsWait: the first blocked fetch of a run is answered at once,
// later ones wait a quarter of the run's age (1 ms at least, MaxWait at
// most) and a quarter of the time left until the member's earliest lock
// deadline at most; acknowledgements start a new run, a fetch that is not
// blocked ends it.
func TestOwnGroupsWait(t *testing.T) {
	t.Parallel()
	var s shareSession
	t0 := time.Unix(1000, 0)
	far := t0.Add(time.Hour)
	const maxWait = 500 * time.Millisecond
	wait := func(at time.Duration, blocked, acked bool, deadline time.Time) time.Duration {
		return s.ownGroupsWait(t0.Add(at), blocked, acked, maxWait, deadline)
	}
	require.Equal(t, time.Duration(0), wait(0, true, false, far), "first of a run")
	require.Equal(t, time.Millisecond, wait(time.Millisecond, true, false, far), "at least 1 ms")
	require.Equal(t, 25*time.Millisecond, wait(100*time.Millisecond, true, false, far))
	require.Equal(t, maxWait, wait(10*time.Second, true, false, far), "at most MaxWait")
	require.Equal(t, 100*time.Millisecond, wait(10*time.Second, true, false, t0.Add(10*time.Second+400*time.Millisecond)),
		"a quarter of the time left until the lock deadline")
	require.Equal(t, 100*time.Microsecond, wait(10*time.Second, true, false, t0.Add(10*time.Second+400*time.Microsecond)),
		"even under 1 ms")
	require.Equal(t, time.Duration(0), wait(10*time.Second, true, false, t0.Add(9*time.Second)), "the deadline passed")
	require.Equal(t, time.Duration(0), wait(11*time.Second, true, true, far), "acknowledgements: a new run")
	require.Equal(t, 25*time.Millisecond, wait(11*time.Second+100*time.Millisecond, true, false, far))
	require.Equal(t, maxWait, wait(12*time.Second, false, false, time.Time{}), "not blocked: the full long poll")
	require.Equal(t, time.Duration(0), wait(13*time.Second, true, false, far), "the run ended")
	require.Equal(t, time.Millisecond, wait(13*time.Second+time.Millisecond, true, false, far))
	s.ackedLocked()
	require.Equal(t, time.Duration(0), wait(14*time.Second, true, false, far), "a ShareAcknowledge: a new run")
}
