package broker

// DeleteShareGroupOffsets (92).
//
// Behavior: deletes the share-partition state of each given topic for
// the group; the next fetch re-initializes it from
// share.auto.offset.reset. The group must exist as a share group
// (GROUP_ID_NOT_FOUND otherwise) and have no members (NON_EMPTY_GROUP).
// An unknown topic is UNKNOWN_TOPIC_OR_PARTITION at the topic level.
// Deletions are durable before the answer.
//
// Version notes: v0 only.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerSimple(92, 0, 0, handleDeleteShareGroupOffsets) }

func handleDeleteShareGroupOffsets(c *conn, req *kmsg.DeleteShareGroupOffsetsRequest) kmsg.Response {
	return c.b.shares.DeleteOffsets(req)
}
