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
//
// Authorization: Delete on the group (a top-level GROUP_AUTHORIZATION_FAILED),
// then Read on each topic (TOPIC_AUTHORIZATION_FAILED for it; the others
// are still deleted), as Kafka.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(92, 0, 0, handleDeleteShareGroupOffsets) }

func handleDeleteShareGroupOffsets(c *conn, req *kmsg.DeleteShareGroupOffsetsRequest) kmsg.Response {
	if code := c.groupCode(acl.Delete, req.GroupID); code != 0 {
		resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr("Authorization failed.")
		return resp
	}
	kept, denied, codes := authzSplit(c, req.Topics, func(t *kmsg.DeleteShareGroupOffsetsRequestTopic) int16 {
		return c.topicCheck(0, acl.Read, t.Topic, [16]byte{}, false)
	})
	if len(denied) == 0 {
		return c.b.shares.DeleteOffsets(req)
	}
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if len(kept) > 0 {
		r := *req
		r.Topics = kept
		resp = c.b.shares.DeleteOffsets(&r).(*kmsg.DeleteShareGroupOffsetsResponse)
	}
	for i, t := range denied {
		st := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		st.Topic, st.ErrorCode, st.ErrorMessage = t.Topic, codes[i], kmsg.StringPtr("Authorization failed.")
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
