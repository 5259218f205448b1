package sharegroup

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// What an SQS queue needs of the core: a lock per receive (LockNext),
// a lock per message while held (RENEW with AckBatch.Lock), a delivery
// identity an acknowledgement must match (AckBatch.DeliveryCount) and no
// delivery limit (DeliveryCountLimit 0).

func TestLockNextLocksOneAcquisition(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	p.LockNext(2 * time.Hour)
	got, eff := p.Acquire(at(0), "a", batch(0, 4), 2, RecordLimit)
	require.Equal(t, []Acquired{{0, 1, 1}}, got)
	require.WithinDuration(t, at(0).Add(2*time.Hour), eff.NextDeadline, 0)
	// The next call is back to RecordLockDuration (30 s).
	got, _ = p.Acquire(at(1), "a", batch(0, 4), 2, RecordLimit)
	require.Equal(t, []Acquired{{2, 3, 1}}, got)
	eff = p.ExpireLocks(at(32))
	require.Equal(t, int64(2), eff.Expired, "the default lock expired")
	require.WithinDuration(t, at(0).Add(2*time.Hour), eff.NextDeadline, 0, "the long one still holds")

	// Clamped to MaxLock; 0 is visible again at the next operation.
	p.LockNext(100 * time.Hour)
	_, eff = p.Acquire(at(40), "b", batch(0, 4), 1, RecordLimit)
	require.WithinDuration(t, at(0).Add(2*time.Hour), eff.NextDeadline, 0)
	require.WithinDuration(t, at(40).Add(MaxLock), p.Ranges()[len(p.Ranges())-2].Deadline, 0)
	p.LockNext(0)
	got, _ = p.Acquire(at(41), "b", batch(0, 4), 1, RecordLimit)
	require.Equal(t, []Acquired{{3, 3, 2}}, got)
	got, _ = p.Acquire(at(41), "c", batch(0, 4), 1, RecordLimit)
	require.Equal(t, []Acquired{{3, 3, 3}}, got, "a lock of 0 expires at the next operation")
}

func TestLockNextInOrderedMode(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t, func(c *Config) { c.Groups = GroupsOrdered })
	p.Classify([]LogBatch{{First: 0, Last: 1, Groups: []GroupSpan{{First: 0, Last: 0, ID: "g"}, {First: 1, Last: 1, ID: "h"}}}})
	p.LockNext(time.Hour)
	got, eff := p.AcquireGroups(at(0), "a", 10)
	require.Equal(t, []Acquired{{0, 1, 1}}, got)
	require.WithinDuration(t, at(0).Add(time.Hour), eff.NextDeadline, 0)
}

func TestRenewWithLockAndStaleDeliveries(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	p.Acquire(at(0), "sqs", batch(0, 0), 1, RecordLimit)
	// A RENEW of 10 minutes: ChangeMessageVisibility.
	eff := mustAck(t, p, at(1), "sqs", AckBatch{First: 0, Last: 0, Types: []AckType{AckRenew}, Lock: 10 * time.Minute, DeliveryCount: 1})
	require.WithinDuration(t, at(1).Add(10*time.Minute), eff.NextDeadline, 0)
	// Released and received again by the same member: the first
	// delivery's acknowledgement is stale and refused, the second's is
	// taken.
	mustAck(t, p, at(2), "sqs", AckBatch{First: 0, Last: 0, Types: []AckType{AckRelease}, DeliveryCount: 1})
	got, _ := p.Acquire(at(3), "sqs", batch(0, 0), 1, RecordLimit)
	require.Equal(t, []Acquired{{0, 0, 2}}, got)
	_, err := p.Acknowledge(at(4), "sqs", []AckBatch{{First: 0, Last: 0, Types: []AckType{AckAccept}, DeliveryCount: 1}})
	require.True(t, errors.Is(err, ErrInvalidRecordState), "%v", err)
	mustAck(t, p, at(4), "sqs", AckBatch{First: 0, Last: 0, Types: []AckType{AckAccept}, DeliveryCount: 2})
	require.Equal(t, int64(1), p.SPSO())
	_, err = p.Acknowledge(at(5), "sqs", []AckBatch{{First: 0, Last: 0, Types: []AckType{AckRenew}, DeliveryCount: 2}})
	require.True(t, errors.Is(err, ErrInvalidRecordState), "a finished delivery below the SPSO: %v", err)
}

func TestNoDeliveryLimit(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t, func(c *Config) { c.DeliveryCountLimit = 0 })
	for n := 1; n <= maxStoredCount+5; n++ {
		got, _ := p.Acquire(at(n), "a", batch(0, 0), 1, RecordLimit)
		require.Len(t, got, 1, "delivery %d", n)
		require.Equal(t, int16(min(n, maxStoredCount+1)), got[0].DeliveryCount, "stored counts saturate at 1,023")
		mustAck(t, p, at(n), "a", AckBatch{First: 0, Last: 0, Types: []AckType{AckRelease}, DeliveryCount: got[0].DeliveryCount})
	}
	require.Equal(t, StateAvailable, p.Ranges()[0].State)
	cfg := DefaultConfig()
	cfg.DeliveryCountLimit = 1 // an SQS maxReceiveCount of 1
	require.NoError(t, cfg.Validate())
	cfg.DeliveryCountLimit = 1000 // SQS's largest maxReceiveCount
	require.NoError(t, cfg.Validate())
	cfg.DeliveryCountLimit = maxStoredCount + 1 // counts saturate at 1,023
	require.Error(t, cfg.Validate())
}

func TestDeferHoldsWithoutCountingADelivery(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t)
	got, _ := p.Acquire(at(0), "sqs", batch(0, 3), 4, RecordLimit)
	require.Equal(t, []Acquired{{0, 3, 1}}, got)
	require.Empty(t, p.Defer(at(0), "sqs", 1, 2, 2, at(10)).Records, "another delivery's: left alone")
	require.Equal(t, []StateRange{{First: 0, Last: 3, State: StateAcquired, DeliveryCount: 1, Member: "sqs", Deadline: p.Ranges()[0].Deadline}}, p.Ranges())
	eff := p.Defer(at(0), "sqs", 1, 2, 1, at(10)) // rounded up to within a second after
	require.Empty(t, eff.Records, "nothing durable changes")
	// Not acquirable before then, and not acknowledgeable by the member.
	got, _ = p.Acquire(at(5), "other", batch(0, 3), 4, RecordLimit)
	require.Empty(t, got)
	_, err := p.Acknowledge(at(5), "sqs", []AckBatch{ack(1, 1, AckAccept)})
	require.True(t, errors.Is(err, ErrInvalidRecordState))
	// At until they are Available with the count they had before.
	got, _ = p.Acquire(at(12), "other", batch(0, 3), 4, RecordLimit)
	require.Equal(t, []Acquired{{1, 2, 1}}, got, "the deferred acquisition was not a delivery")
	// A restart: the durable view never saw the deferral.
	rec, err := Recover(p.Config(), []Record{p.Snapshot()})
	require.NoError(t, err)
	got, _ = rec.Acquire(at(13), "x", batch(0, 3), 4, RecordLimit)
	require.Equal(t, []Acquired{{0, 3, 1}}, got)
}

// TestOrderedBatch: in ordered mode with OrderedBatch, one acquisition
// takes up to that many consecutive records of a group, and the group's
// next ones wait for all of them.
func TestOrderedBatch(t *testing.T) {
	t.Parallel()
	p := newTestPartition(t, func(c *Config) { c.Groups, c.OrderedBatch = GroupsOrdered, 3 })
	p.Classify([]LogBatch{{First: 0, Last: 6, Groups: []GroupSpan{
		{First: 0, Last: 1, ID: "g"}, {First: 2, Last: 2, ID: "h"}, {First: 3, Last: 4, ID: "g"}, {First: 5, Last: 6, ID: "h"}}}})
	got, _ := p.AcquireGroups(at(0), "a", 10)
	require.Equal(t, []Acquired{{0, 3, 1}, {5, 6, 1}}, got, "g: 0, 1, 3; h: 2, 5, 6")
	got, _ = p.AcquireGroups(at(0), "b", 10)
	require.Empty(t, got, "g's 4 waits for 0, 1 and 3")
	mustAck(t, p, at(1), "a", ack(0, 1, AckAccept))
	got, _ = p.AcquireGroups(at(1), "b", 10)
	require.Empty(t, got, "3 still held")
	mustAck(t, p, at(1), "a", ack(3, 3, AckAccept))
	got, _ = p.AcquireGroups(at(1), "b", 10)
	require.Equal(t, []Acquired{{4, 4, 1}}, got)
	// The limit of a call still holds.
	q := newTestPartition(t, func(c *Config) { c.Groups, c.OrderedBatch = GroupsOrdered, 10 })
	q.Classify([]LogBatch{{First: 0, Last: 9, Groups: []GroupSpan{{First: 0, Last: 9, ID: "g"}}}})
	got, _ = q.AcquireGroups(at(0), "a", 4)
	require.Equal(t, []Acquired{{0, 3, 1}}, got)
}
