package broker

// OffsetCommit (8).
//
// Behavior: stores committed offsets (with their metadata string and
// leader epoch) durably in the metadata store before answering
// (package groups: offsets.go, store.go). Checks, in Kafka's order:
//   - per partition, an unknown topic or partition gets
//     UNKNOWN_TOPIC_OR_PARTITION (v10: an unknown topic id,
//     UNKNOWN_TOPIC_ID); the other partitions are still committed;
//   - the group: INVALID_GROUP_ID for an empty id. A commit with
//     generation -1 to an empty or unknown group is a "simple" commit
//     (admin clients, consumers assigning partitions themselves) and
//     creates the group if needed. Otherwise the member must be a current
//     member at the current generation: UNKNOWN_MEMBER_ID,
//     FENCED_INSTANCE_ID, ILLEGAL_GENERATION; REBALANCE_IN_PROGRESS
//     while the group completes a rebalance. A non-negative generation
//     for an unknown group is ILLEGAL_GENERATION, from v9
//     GROUP_ID_NOT_FOUND;
//   - for a KIP-848 consumer group, Generation is the member epoch: a
//     member's commit needs v9+ (UNSUPPORTED_VERSION), a known member
//     (UNKNOWN_MEMBER_ID) and an epoch no newer than the member's
//     (STALE_MEMBER_EPOCH); a partition assigned to the member at a newer
//     epoch than the commit's gets STALE_MEMBER_EPOCH on its own
//     (KIP-1251). Generation -1 commits to an empty group pass;
//   - per partition, metadata longer than offset.metadata.max.bytes
//     (default 4096) gets OFFSET_METADATA_TOO_LARGE.
//
// A member's commit also counts as a heartbeat while the group is Stable
// or rebalancing. A failed write changes nothing and answers
// NOT_COORDINATOR. Answers list topics and partitions in request order
// (topics refused by authorization last).
//
// Authorization: Read on the group (GROUP_AUTHORIZATION_FAILED for every
// partition), then Read on each topic (TOPIC_AUTHORIZATION_FAILED for
// its partitions, which are not committed).
//
// Version notes: v1 member id and generation, and a commit timestamp we
// ignore (Kafka dropped it); v2-v4 a retention time (-1: the broker's
// rules; otherwise the offset expires that long after the commit); v3
// throttling; v5 drops the retention time; v6 leader epochs; v7
// group.instance.id; v8 flexible; v9 GROUP_ID_NOT_FOUND and KIP-848
// member epochs; v10 topic ids instead of names. v0 and v1 are not
// served (Kafka 4 removed them; v0 committed to ZooKeeper).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(8, 2, 10, handleOffsetCommit) }

func handleOffsetCommit(c *conn, req *kmsg.OffsetCommitRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	gc := c.groupCode(acl.Read, req.Group)
	kept, denied, codes := authzSplit(c, req.Topics, func(rt *kmsg.OffsetCommitRequestTopic) int16 {
		return c.topicCheck(gc, acl.Read, rt.Topic, rt.TopicID, req.Version >= 10)
	})
	if len(denied) > 0 {
		r := *req
		r.Topics, req = kept, &r
	}
	if gc == 0 && (len(kept) > 0 || len(denied) == 0) {
		c.b.groups.Commit(req, resp)
	}
	for i, rt := range denied {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, codes[i]
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
