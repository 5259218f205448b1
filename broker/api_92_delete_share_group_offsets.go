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
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerSimple(92, 0, 0, handleDeleteShareGroupOffsets) }

func handleDeleteShareGroupOffsets(c *conn, req *kmsg.DeleteShareGroupOffsetsRequest) kmsg.Response {
	b := c.b
	sc := b.shares
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	fail := func(code int16, msg string) kmsg.Response {
		resp.ErrorCode = code
		resp.ErrorMessage = &msg
		return resp
	}
	g, _ := sc.lockGroup(req.GroupID, false)
	if g == nil {
		return fail(kerr.GroupIDNotFound.Code, "Group "+req.GroupID+" is not a share group.")
	}
	defer g.mu.Unlock()
	if len(g.mu.members) > 0 {
		return fail(kerr.NonEmptyGroup.Code, "The group is not empty.")
	}
	for _, rt := range req.Topics {
		ot := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t := b.topics.get(rt.Topic)
		if t == nil {
			ot.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, ot)
			continue
		}
		ot.TopicID = t.id
		if err := sc.deleteState(req.GroupID, map[[16]byte]bool{t.id: true}); err != nil {
			sc.lg.Error("deleting share-partition state failed", zapErr(err))
			ot.ErrorCode = kerr.KafkaStorageError.Code
			msg := err.Error()
			ot.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp
}
