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
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/sharegroup/store"
)

func init() { registerSimple(91, 0, 0, handleAlterShareGroupOffsets) }

func handleAlterShareGroupOffsets(c *conn, req *kmsg.AlterShareGroupOffsetsRequest) kmsg.Response {
	b := c.b
	sc := b.shares
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	fail := func(code int16, msg string) kmsg.Response {
		resp.ErrorCode = code
		resp.ErrorMessage = &msg
		return resp
	}
	if req.GroupID == "" {
		return fail(kerr.InvalidRequest.Code, "GroupId must be set.")
	}
	if b.classicGroupExists(req.GroupID) {
		return fail(kerr.GroupIDNotFound.Code, "Group "+req.GroupID+" is not a share group.")
	}
	g, err := sc.lockGroup(req.GroupID, true)
	if err != nil {
		sc.lg.Error("creating share group failed", zapErr(err))
		return fail(kerr.CoordinatorNotAvailable.Code, err.Error())
	}
	defer g.mu.Unlock()
	if len(g.mu.members) > 0 {
		return fail(kerr.NonEmptyGroup.Code, "The group is not empty.")
	}
	st := b.shareSettings(req.GroupID)
	for _, rt := range req.Topics {
		ot := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t := b.topics.get(rt.Topic)
		if t != nil {
			ot.TopicID = t.id
		}
		for _, rp := range rt.Partitions {
			op := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			var lp *partition
			if t != nil {
				lp = b.topics.partition(t.name, rp.Partition)
			}
			if lp == nil {
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				op.ErrorCode = sc.resetOffset(store.Key{Group: req.GroupID, TopicID: t.id, Partition: rp.Partition}, st, lp, rp.StartOffset)
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	g.bumpLocked()
	return resp
}
