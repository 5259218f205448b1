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
//
// Authorization: Read on the group (a top-level GROUP_AUTHORIZATION_FAILED),
// then Read on each topic (TOPIC_AUTHORIZATION_FAILED per partition; the
// others are still reset), as Kafka.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(91, 0, 0, handleAlterShareGroupOffsets) }

func handleAlterShareGroupOffsets(c *conn, req *kmsg.AlterShareGroupOffsetsRequest) kmsg.Response {
	if code := c.groupCode(acl.Read, req.GroupID); code != 0 {
		resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr("Authorization failed.")
		return resp
	}
	kept, denied, codes := authzSplit(c, req.Topics, func(t *kmsg.AlterShareGroupOffsetsRequestTopic) int16 {
		return c.topicCheck(0, acl.Read, t.Topic, [16]byte{}, false)
	})
	if len(denied) == 0 {
		return c.b.shares.AlterOffsets(req)
	}
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if len(kept) > 0 {
		r := *req
		r.Topics = kept
		resp = c.b.shares.AlterOffsets(&r).(*kmsg.AlterShareGroupOffsetsResponse)
	}
	for i, t := range denied {
		st := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, codes[i]
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
