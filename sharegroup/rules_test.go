package sharegroup

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// One test per KIP-932 rule; each quotes the sentence of
// docs/kip932.md it checks.

func newTestPartition(t *testing.T, mut ...func(*Config)) *Partition {
	t.Helper()
	cfg := DefaultConfig()
	for _, m := range mut {
		m(&cfg)
	}
	p, eff, err := New(cfg, 0, 0)
	require.NoError(t, err)
	require.Len(t, eff.Records, 1)
	require.Equal(t, KindSnapshot, eff.Records[0].Kind)
	return p
}

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func batch(first, last int64) []LogBatch { return []LogBatch{{First: first, Last: last}} }

func ack(first, last int64, t ...AckType) AckBatch {
	return AckBatch{First: first, Last: last, Types: t}
}

func mustAck(t *testing.T, p *Partition, now time.Time, member string, acks ...AckBatch) Effects {
	t.Helper()
	eff, err := p.Acknowledge(now, member, acks)
	require.NoError(t, err)
	return eff
}

// "Delivery count is incremented on acquisition: the first delivery reports
// DeliveryCount 1." (§3)
func TestRuleDeliveryCountIncrementsOnAcquisition(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	got, eff := p.Acquire(at(0), "a", batch(0, 9), 500, BatchOptimized)
	require.Equal(t, []Acquired{{0, 9, 1}}, got)
	require.Empty(t, eff.Records, "acquisitions are never persisted")
	require.WithinDuration(t, at(30), eff.NextDeadline, 0)
	mustAck(t, p, at(1), "a", ack(0, 9, AckRelease))
	got, _ = p.Acquire(at(2), "b", batch(0, 9), 500, BatchOptimized)
	require.Equal(t, []Acquired{{0, 9, 2}}, got)
}

// "RELEASE or lock timeout on delivery N >= share.delivery.count.limit (5) →
// ARCHIVED: at most limit deliveries." (§3)
func TestRuleDeliveryLimitArchives(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	for n := int16(1); n <= 5; n++ {
		got, _ := p.Acquire(at(int(n)*100), "a", batch(0, 0), 1, BatchOptimized)
		require.Equal(t, []Acquired{{0, 0, n}}, got)
		if n%2 == 0 {
			p.ExpireLocks(at(int(n)*100 + 30))
		} else {
			mustAck(t, p, at(int(n)*100+1), "a", ack(0, 0, AckRelease))
		}
	}
	require.Equal(t, int64(1), p.SPSO(), "archived after the fifth delivery")
	got, _ := p.Acquire(at(1000), "a", batch(0, 0), 1, BatchOptimized)
	require.Empty(t, got)
}

// "REJECT → ARCHIVED at once, whatever the count." (§3)
func TestRuleRejectArchives(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	p.Acquire(at(0), "a", batch(0, 4), 10, BatchOptimized)
	eff := mustAck(t, p, at(1), "a", ack(1, 1, AckReject))
	require.Equal(t, []StateBatch{{1, 1, StateArchived, 1}}, eff.Records[0].Batches)
}

// "GAP → ARCHIVED" (ACK_TYPE_TO_RECORD_STATE, §3; pitfall 23).
func TestRuleGapArchives(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	p.Acquire(at(0), "a", batch(0, 4), 10, BatchOptimized)
	eff := mustAck(t, p, at(1), "a", ack(0, 4, AckGap))
	require.Equal(t, int64(5), eff.Records[0].StartOffset)
}

// "Release because the share session closed / connection dropped uses
// DECREASE: back to AVAILABLE, count decremented ('fetched but not
// delivered'), never archived by this path." (§3, pitfall 21)
func TestRuleSessionCloseDecrementsCount(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t, func(c *Config) { c.DeliveryCountLimit = 2 })
	p.Acquire(at(0), "a", batch(0, 0), 1, BatchOptimized)
	mustAck(t, p, at(1), "a", ack(0, 0, AckRelease))
	got, _ := p.Acquire(at(2), "a", batch(0, 0), 1, BatchOptimized)
	require.Equal(t, []Acquired{{0, 0, 2}}, got, "at the limit")
	eff := p.ReleaseMember(at(3), "a")
	require.Empty(t, eff.Records, "the durable view (available, count 1) did not change")
	require.Equal(t, []StateRange{{First: 0, Last: 0, State: StateAvailable, DeliveryCount: 1}}, p.Ranges())
}

// "A late ack for an expired record → INVALID_RECORD_STATE (it may
// meanwhile be re-acquired by anyone, the same member included)." (§3)
func TestRuleLateAckAfterExpiry(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	p.Acquire(at(0), "a", batch(0, 4), 10, BatchOptimized)
	eff, err := p.Acknowledge(at(30), "a", []AckBatch{ack(0, 4, AckAccept)})
	require.ErrorIs(t, err, ErrInvalidRecordState)
	require.Len(t, eff.Records, 1, "the expiry itself must still be persisted")
	p.Acquire(at(31), "a", batch(0, 4), 10, BatchOptimized)
	mustAck(t, p, at(32), "a", ack(0, 4, AckAccept))
}

// "Batch entirely < SPSO: ignored (success)." / "Acks below SPSO succeed
// silently" (§3, pitfall 18)
func TestRuleAcksBelowSPSOSucceed(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	p.Acquire(at(0), "a", batch(0, 4), 10, BatchOptimized)
	mustAck(t, p, at(1), "a", ack(0, 4, AckAccept))
	eff := mustAck(t, p, at(2), "a", ack(0, 4, AckReject))
	require.Empty(t, eff.Records)
}

// "First or last offset past the last cached offset → INVALID_REQUEST." (§3)
func TestRuleAckPastWindowIsInvalidRequest(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	p.Acquire(at(0), "a", batch(0, 4), 10, BatchOptimized)
	_, err := p.Acknowledge(at(1), "a", []AckBatch{ack(3, 5, AckAccept)})
	require.ErrorIs(t, err, ErrInvalidRequest)
}

// "All-or-nothing per partition ... any error in the partition ... rolls
// all of it back and returns the error." (§3, pitfall 17)
func TestRuleAllOrNothing(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	p.Acquire(at(0), "a", batch(0, 4), 10, BatchOptimized)
	p.Acquire(at(0), "b", batch(5, 9), 10, BatchOptimized)
	before := p.Ranges()
	_, err := p.Acknowledge(at(1), "a", []AckBatch{ack(0, 1, AckAccept), ack(4, 5, AckAccept)})
	require.ErrorIs(t, err, ErrInvalidRecordState)
	require.Equal(t, before, p.Ranges())
}

// "Every touched offset must be ACQUIRED, owned by memberId ... else
// INVALID_RECORD_STATE (another member's, already acked, ...)." (§3)
func TestRuleOnlyOwnerAcknowledges(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	p.Acquire(at(0), "a", batch(0, 4), 10, BatchOptimized)
	_, err := p.Acknowledge(at(1), "b", []AckBatch{ack(0, 0, AckAccept)})
	require.ErrorIs(t, err, ErrInvalidRecordState)
	mustAck(t, p, at(1), "a", ack(1, 1, AckAccept))
	_, err = p.Acknowledge(at(1), "a", []AckBatch{ack(1, 1, AckAccept)})
	require.ErrorIs(t, err, ErrInvalidRecordState, "duplicate ack")
}

// "AcknowledgeTypes: one entry for the range or exactly last-first+1"; type
// outside 0..4 and non-ascending batches → INVALID_REQUEST (§3, §4).
func TestRuleMalformedAcks(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	p.Acquire(at(0), "a", batch(0, 4), 10, BatchOptimized)
	for name, acks := range map[string][]AckBatch{
		"first > last":   {ack(3, 2, AckAccept)},
		"negative":       {ack(-1, 2, AckAccept)},
		"no types":       {{First: 0, Last: 1}},
		"types mismatch": {ack(0, 2, AckAccept, AckAccept)},
		"bad type":       {ack(0, 0, 5)},
		"overlapping":    {ack(0, 2, AckAccept), ack(2, 3, AckAccept)},
		"descending":     {ack(3, 4, AckAccept), ack(0, 1, AckAccept)},
	} {
		_, err := p.Acknowledge(at(1), "a", acks)
		require.ErrorIs(t, err, ErrInvalidRequest, name)
	}
	mustAck(t, p, at(1), "a", ack(0, 4, AckAccept, AckRelease, AckReject, AckGap, AckRenew))
}

// "The limit is on the window SPEO−SPSO+1, not on the count of ACQUIRED
// records: one stuck record at SPSO stops new acquisitions once the window
// is full, while records released inside the window can still be
// re-acquired." (§3, pitfall 24)
func TestRuleWindowLimit(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t, func(c *Config) { c.MaxInFlight = 100 })
	got, _ := p.Acquire(at(0), "a", batch(0, 199), 500, BatchOptimized)
	require.Equal(t, []Acquired{{0, 99, 1}}, got)
	mustAck(t, p, at(1), "a", ack(1, 98, AckAccept), ack(99, 99, AckRelease))
	require.True(t, p.CanAcquire())
	require.Equal(t, int64(99), p.NextFetchOffset())
	got, _ = p.Acquire(at(2), "b", batch(0, 199), 500, BatchOptimized)
	require.Equal(t, []Acquired{{99, 99, 2}}, got, "re-acquired inside the full window, nothing new")
	require.False(t, p.CanAcquire())
}

// "RENEW only the member's ACQUIRED records ... cancels the timer and
// starts a fresh full-duration one; nothing persisted; count unchanged."
// (§9, pitfall 22)
func TestRuleRenew(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	p.Acquire(at(0), "a", batch(0, 4), 10, BatchOptimized)
	eff := mustAck(t, p, at(20), "a", ack(0, 4, AckRenew))
	require.Empty(t, eff.Records)
	require.WithinDuration(t, at(50), eff.NextDeadline, 0)
	p.ExpireLocks(at(49))
	mustAck(t, p, at(49), "a", ack(0, 4, AckAccept))
	p.Acquire(at(50), "a", batch(5, 5), 10, BatchOptimized)
	_, err := p.Acknowledge(at(51), "b", []AckBatch{ack(5, 5, AckRenew)})
	require.ErrorIs(t, err, ErrInvalidRecordState)
}

// "acquisitions, RENEW | never: ACQUIRED is transient; after a crash an
// in-flight record reloads AVAILABLE with its last persisted count" and "an
// acked record is never redelivered after restart" (§5)
func TestRuleRecovery(t *testing.T) {
	t.Parallel()
	p, eff, err := New(DefaultConfig(), 0, 0)
	require.NoError(t, err)
	persisted := eff.Records
	keep := func(e Effects) { persisted = append(persisted, e.Records...) }
	_, e := p.Acquire(at(0), "a", batch(0, 9), 10, BatchOptimized)
	keep(e)
	keep(mustAck(t, p, at(1), "a", ack(2, 3, AckAccept), ack(5, 5, AckRelease)))
	_, e = p.Acquire(at(2), "b", batch(5, 5), 10, BatchOptimized)
	keep(e)
	q, err := Recover(DefaultConfig(), persisted)
	require.NoError(t, err)
	require.Equal(t, []StateRange{
		{First: 0, Last: 1, State: StateAvailable, DeliveryCount: 0},
		{First: 2, Last: 3, State: StateAcknowledged, DeliveryCount: 1},
		{First: 4, Last: 4, State: StateAvailable, DeliveryCount: 0},
		{First: 5, Last: 5, State: StateAvailable, DeliveryCount: 1},
	}, q.Ranges())
	got, _ := q.Acquire(at(3), "c", batch(0, 9), 100, BatchOptimized)
	require.Equal(t, []Acquired{{0, 1, 1}, {4, 4, 1}, {5, 5, 2}, {6, 9, 1}}, got)
}

// "Records acquired before SPSO moved (log start offset advanced) are
// archived instead of released." (§3)
func TestRuleLogStartArchivesAcquired(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	p.Acquire(at(0), "a", batch(0, 9), 10, BatchOptimized)
	eff := p.AdvanceLogStart(5)
	require.Equal(t, int64(5), eff.Records[0].StartOffset)
	mustAck(t, p, at(1), "a", ack(0, 4, AckRelease))
	require.Equal(t, int64(10), p.NextFetchOffset(), "released records below the log start stay gone")
}

// "ARCHIVING 3 | ARCHIVED | non-terminal; DLQ write pending" (§3, §8)
func TestRuleArchivingBlocksSPSO(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t, func(c *Config) { c.DeadLetter = true })
	p.Acquire(at(0), "a", batch(0, 1), 10, BatchOptimized)
	mustAck(t, p, at(1), "a", ack(0, 0, AckReject), ack(1, 1, AckAccept))
	require.Equal(t, int64(0), p.SPSO())
	require.Equal(t, []StateRange{{First: 0, Last: 0, State: StateArchiving, DeliveryCount: 1}}, p.Archiving())
	eff := p.CompleteArchiving(0, 0)
	require.Equal(t, int64(2), eff.Records[0].StartOffset)
}

// "Lag: lag = partitionEndOffset − SPSO − deliveryCompleteCount" (KIP-1226, §3)
func TestRuleLag(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	p.Acquire(at(0), "a", batch(0, 9), 10, BatchOptimized)
	mustAck(t, p, at(1), "a", ack(5, 9, AckAccept))
	require.Equal(t, int64(5), p.DeliveryCompleteCount())
	require.Equal(t, int64(15), p.Lag(20))
}

// Effects.Expired and Effects.Archived count what one operation did, for
// the broker's metrics: lock expiries (whichever operation ran them) and
// records that became Archived.
func TestEffectsCountExpiriesAndArchives(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t, func(c *Config) { c.DeliveryCountLimit = 2 })
	_, eff := p.Acquire(at(0), "a", batch(0, 9), 10, BatchOptimized)
	require.Zero(t, eff.Expired)
	eff = p.ExpireLocks(at(30))
	require.Equal(t, int64(10), eff.Expired)
	require.Zero(t, eff.Archived)
	// Second delivery: the limit. Reject 2, let the other 8 expire inside
	// the next Acquire: all 10 end Archived.
	p.Acquire(at(31), "a", batch(0, 9), 10, BatchOptimized)
	eff = mustAck(t, p, at(32), "a", ack(0, 1, AckReject))
	require.Equal(t, int64(2), eff.Archived)
	require.Zero(t, eff.Expired)
	_, eff = p.Acquire(at(100), "b", batch(10, 10), 10, BatchOptimized)
	require.Equal(t, int64(8), eff.Expired)
	require.Equal(t, int64(8), eff.Archived)
	// A member leaving releases without an expiry.
	eff = p.ReleaseMember(at(101), "b")
	require.Zero(t, eff.Expired)
}
