package broker

// OffsetDelete (47).
//
// Behavior: deletes committed offsets of a group (KIP-496), durably,
// before answering. Group-level errors: INVALID_GROUP_ID, GROUP_ID_NOT_FOUND,
// NON_EMPTY_GROUP for a group with members that does not use the
// "consumer" protocol type. Per partition: UNKNOWN_TOPIC_OR_PARTITION for
// an unknown topic or partition, GROUP_SUBSCRIBED_TO_TOPIC when a member
// of a non-empty "consumer" group subscribes to the topic (classic: parsed
// from the members' subscription metadata, and if it cannot be parsed
// every topic counts as subscribed, as in Kafka; KIP-848: the members'
// resolved topic names and regexes). Deleting an offset that does not
// exist succeeds.
//
// Version notes: only v0.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { registerSimple(47, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(c *conn, req *kmsg.OffsetDeleteRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	c.b.groups.DeleteOffsets(req, resp)
	return resp
}
