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
//
// Authorization: Delete on the group (a top-level
// GROUP_AUTHORIZATION_FAILED), then Read on each topic
// (TOPIC_AUTHORIZATION_FAILED for its partitions, whose offsets stay).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(47, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(c *conn, req *kmsg.OffsetDeleteRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode = c.groupCode(acl.Delete, req.Group); resp.ErrorCode != 0 {
		return resp
	}
	kept, denied, codes := authzSplit(c, req.Topics, func(rt *kmsg.OffsetDeleteRequestTopic) int16 {
		return c.topicCheck(0, acl.Read, rt.Topic, [16]byte{}, false)
	})
	if len(denied) > 0 {
		r := *req
		r.Topics, req = kept, &r
	}
	if len(kept) > 0 || len(denied) == 0 {
		c.b.groups.DeleteOffsets(req, resp)
	}
	for i, rt := range denied {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, codes[i]
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
