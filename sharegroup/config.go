package sharegroup

import (
	"fmt"
	"time"
)

const (
	// MaxLock is the longest acquisition lock LockNext and AckBatch.Lock
	// accept: SQS's largest visibility timeout, 12 hours.
	MaxLock = 12 * time.Hour
	// DefaultMaxInFlight is Shoal's default in-flight window
	// (Kafka: share.partition.max.record.locks, default 2000 there).
	DefaultMaxInFlight = 120_000
	// MaxMaxInFlight is the largest MaxInFlight we accept, and the most
	// records Acquired at once in any mode (see Acquire).
	MaxMaxInFlight = 1_000_000
)

// Config is the per share-partition configuration. The broker derives it
// from the group configs (falling back to broker group.share.* defaults) and
// may change it at any time with SetConfig.
type Config struct {
	// RecordLockDuration is share.record.lock.duration.ms: how long an
	// acquisition (or a RENEW) locks records. Must be > 0.
	RecordLockDuration time.Duration
	// DeliveryCountLimit is share.delivery.count.limit: a record delivered
	// this many times is archived instead of released: 1 to 1,023 (Kafka's
	// configs: 2 to 25), or 0 for no limit (an SQS queue without a redrive policy: a record is released
	// however often it was delivered).
	DeliveryCountLimit int
	// MaxInFlight is share.partition.max.record.locks: the largest window
	// SPEO-SPSO (Kafka's SPEO-SPSO+1 with its inclusive SPEO). 1..1,000,000.
	// Lowering it below the current window only stops new acquisitions.
	MaxInFlight int
	// RenewDisabled is share.renew.acknowledge.enable=false: RENEW acks fail
	// with ErrInvalidRecordState.
	RenewDisabled bool
	// DeadLetter is set when the group has a dead-letter topic (KIP-1191):
	// rejected records and records at the delivery limit go to Archiving
	// instead of Archived, and the broker completes them with
	// CompleteArchiving once the dead-letter write is durable.
	DeadLetter bool
	// Groups is the message-group delivery mode (share.message.group.fair,
	// share.message.group.ordered; GroupsNone when
	// share.message.group.source=none). In a group mode the broker passes
	// log batches with their group ids to Classify and acquires with
	// AcquireGroups; see doc.go.
	Groups GroupMode
	// OrderedBatch is, in ordered mode, how many consecutive records of
	// one message group one acquisition may take (locked together; the
	// group's next ones wait for all of them). 0 or 1: one, Kafka's
	// ordered mode; an SQS FIFO queue takes up to 10 per receive.
	OrderedBatch int
	// RedeliveryBackoff is share.redelivery.backoff.ms: a record released
	// or whose lock expired becomes Available again only after
	// RedeliveryBackoff * 2^(deliveries-1), capped at RedeliveryBackoffMax
	// (share.redelivery.backoff.max.ms). Zero disables it. The delay is
	// transient: after a restart such records are Available at once.
	RedeliveryBackoff, RedeliveryBackoffMax time.Duration
}

// GroupMode is how records of different message groups are delivered.
type GroupMode uint8

const (
	// GroupsNone ignores message groups: offset order (Kafka's behaviour).
	GroupsNone GroupMode = iota
	// GroupsFair interleaves message groups round-robin, so a group with
	// many records cannot delay the others.
	GroupsFair
	// GroupsOrdered delivers each message group's records strictly in
	// offset order, one acquired record per group at a time (SQS FIFO);
	// different groups proceed in parallel, interleaved fairly.
	GroupsOrdered
)

func (m GroupMode) String() string {
	switch m {
	case GroupsNone:
		return "none"
	case GroupsFair:
		return "fair"
	case GroupsOrdered:
		return "ordered"
	}
	return fmt.Sprintf("GroupMode(%d)", uint8(m))
}

// DefaultConfig returns Kafka's defaults with Shoal's larger window.
func DefaultConfig() Config {
	return Config{
		RecordLockDuration: 30 * time.Second,
		DeliveryCountLimit: 5,
		MaxInFlight:        DefaultMaxInFlight,
	}
}

// Validate reports the first out-of-bounds field, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.RecordLockDuration <= 0:
		return fmt.Errorf("%w: record lock duration %v must be positive", ErrInvalidConfig, c.RecordLockDuration)
	case c.DeliveryCountLimit < 0 || c.DeliveryCountLimit > maxStoredCount:
		// Kafka's configs allow 2 to 25 (the broker checks them); an SQS
		// queue's maxReceiveCount may be 1. Stored counts saturate above.
		return fmt.Errorf("%w: delivery count limit %d outside [1, %d] (or 0: none)", ErrInvalidConfig, c.DeliveryCountLimit, maxStoredCount)
	case c.MaxInFlight < 1 || c.MaxInFlight > MaxMaxInFlight:
		return fmt.Errorf("%w: max in-flight %d outside [1, %d]", ErrInvalidConfig, c.MaxInFlight, MaxMaxInFlight)
	case c.OrderedBatch < 0 || c.OrderedBatch > 1000:
		return fmt.Errorf("%w: ordered batch %d", ErrInvalidConfig, c.OrderedBatch)
	case c.Groups > GroupsOrdered:
		return fmt.Errorf("%w: message group mode %v", ErrInvalidConfig, c.Groups)
	case c.RedeliveryBackoff < 0 || c.RedeliveryBackoffMax < 0:
		return fmt.Errorf("%w: negative redelivery backoff", ErrInvalidConfig)
	}
	return nil
}
