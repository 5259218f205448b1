package broker

// AlterShareGroupOffsets (91).
//
// Behavior: restarts the given share-partitions at StartOffset, discarding
// all their in-flight state (delivery counts, acknowledgements) under a
// new state epoch, and bumps the group epoch. The group must have no
// members (NON_EMPTY_GROUP); a missing share group is created, as Kafka
// does; a classic or consumer group id is GROUP_ID_NOT_FOUND. An unknown
// topic or partition is UNKNOWN_TOPIC_OR_PARTITION per partition.
// StartOffset -1 means the high watermark and -2 the log start (other
// negative values are INVALID_REQUEST); offsets outside
// [log start, high watermark] are clamped into it. Each reset is durable
// before the answer.
//
// Version notes: v0 only.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerSimple(91, 0, 0, handleAlterShareGroupOffsets) }

func handleAlterShareGroupOffsets(c *conn, req *kmsg.AlterShareGroupOffsetsRequest) kmsg.Response {
	return c.b.shares.AlterOffsets(req)
}
