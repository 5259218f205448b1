package share

import (
	"github.com/shoal-mq/shoal/sharegroup/store"
)

// Read-outs and seams for the root's tests, which drive share groups
// through real clients and need to see, or hold, what no client can.
// Each is named for what it reads or simulates; none changes state a
// client could not change.

// Sessions is the number of open share sessions.
func (c *Coordinator) Sessions() int { return c.sessions.count() }

// StoredPartitions returns the share-partitions of group with durable
// state, as the state store lists them.
func (c *Coordinator) StoredPartitions(group string) ([]store.Key, error) { return c.store.Keys(group) }

// SPSO is the share-partition start offset of k, or -1 if its state is
// not in memory (never used, or not loaded since a restart).
func (c *Coordinator) SPSO(k store.Key) int64 {
	sp := c.part(k)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.mu.p == nil {
		return -1
	}
	return sp.mu.p.SPSO()
}

// DLQRunning reports whether a dead-letter writer owns k's work now.
func (c *Coordinator) DLQRunning(k store.Key) bool {
	sp := c.part(k)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.mu.dlq.running
}

// PendingAcks is the number of k's acknowledgement writes submitted and
// not yet finished (durable or failed).
func (c *Coordinator) PendingAcks(k store.Key) int {
	sp := c.part(k)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.mu.acking)
}

// HoldPartition takes k's share-partition lock and returns its release:
// the share-partition is busy, as during a log read, a load or its own
// write.
func (c *Coordinator) HoldPartition(k store.Key) (release func()) {
	sp := c.part(k)
	sp.mu.Lock()
	return sp.mu.Unlock
}

// HoldMap takes the coordinator's own lock (the map of share groups and
// share-partitions) and returns its release: every caller that needs it
// (IsShareGroup, DeleteTopicState, the first use of a share-partition)
// waits meanwhile.
func (c *Coordinator) HoldMap() (release func()) {
	c.mu.Lock()
	return c.mu.Unlock
}

// ResetOffset moves k's start offset as AlterShareGroupOffsets does
// (-1: the high watermark, -2: the log start), without its check that
// the group is empty, and returns the error code.
func (c *Coordinator) ResetOffset(k store.Key, offset int64) int16 {
	_, lp, code := c.o.Topics.PartitionByID(k.TopicID, k.Partition)
	if code != 0 {
		return code
	}
	return c.resetOffset(k, c.shareSettings(k.Group), lp, offset)
}

// DLQIntent is the stored record of a dead-letter write in progress and
// DLQRange one of its ranges; DLQIntentKey is its key in the metadata
// store. Exported so that a test can write the state a crash leaves.
type (
	DLQIntent = dlqIntent
	DLQRange  = dlqRange
)

// DLQIntentKey is the metadata-store key of k's dead-letter intent.
func DLQIntentKey(k store.Key) []byte { return dlqIntentKey(k) }
