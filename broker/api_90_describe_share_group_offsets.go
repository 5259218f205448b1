package broker

// DescribeShareGroupOffsets (90).
//
// Behavior: for each group, the share-partition start offset (SPSO) of
// the requested partitions, or with Topics null of every share-partition
// that has state (topics deleted since are left out). A partition
// without state answers StartOffset -1 and Lag -1; an unknown topic or
// partition UNKNOWN_TOPIC_OR_PARTITION per partition. Lag (v1, KIP-1226)
// is high watermark - SPSO - records already acknowledged or archived at
// or above the SPSO. LeaderEpoch is 0 (one epoch). A group that is not a
// share group (unknown, or classic/consumer) is GROUP_ID_NOT_FOUND at the
// group level.
//
// Version notes: v0 (Kafka 4.1); v1 adds Lag.
//
// Authorization: Describe on the group (GROUP_AUTHORIZATION_FAILED), then
// on each topic (TOPIC_AUTHORIZATION_FAILED per partition; a describe of
// every share-partition leaves such topics out), as Kafka.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(90, 0, 1, handleDescribeShareGroupOffsets) }

func handleDescribeShareGroupOffsets(c *conn, req *kmsg.DescribeShareGroupOffsetsRequest) kmsg.Response {
	if c.b.authz == nil {
		return c.b.shares.DescribeOffsets(req)
	}
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, g := range req.Groups {
		resp.Groups = append(resp.Groups, c.describeShareOffsets(req, g))
	}
	return resp
}

// describeShareOffsets answers one group, authorized: Describe on the
// group (GROUP_AUTHORIZATION_FAILED), then on each topic: a named one
// is TOPIC_AUTHORIZATION_FAILED per partition, and a describe of every
// share-partition leaves such topics out.
func (c *conn) describeShareOffsets(req *kmsg.DescribeShareGroupOffsetsRequest, g kmsg.DescribeShareGroupOffsetsRequestGroup) kmsg.DescribeShareGroupOffsetsResponseGroup {
	out := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
	out.GroupID = g.GroupID
	if out.ErrorCode = c.groupCode(acl.Describe, g.GroupID); out.ErrorCode != 0 {
		return out
	}
	kept, denied, codes := authzSplit(c, g.Topics, func(t *kmsg.DescribeShareGroupOffsetsRequestGroupTopic) int16 {
		return c.topicCheck(0, acl.Describe, t.Topic, [16]byte{}, false)
	})
	if len(kept) > 0 || len(denied) == 0 {
		one := *req
		g.Topics = kept
		one.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{g}
		out = c.b.shares.DescribeOffsets(&one).(*kmsg.DescribeShareGroupOffsetsResponse).Groups[0]
	}
	if g.Topics == nil {
		all := out.Topics[:0]
		for _, t := range out.Topics {
			if c.visible(acl.Describe, acl.Topic, t.Topic) {
				all = append(all, t)
			}
		}
		out.Topics = all
	}
	for i, t := range denied {
		st := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			sp.Partition, sp.StartOffset, sp.LeaderEpoch, sp.Lag, sp.ErrorCode = p, -1, -1, -1, codes[i]
			st.Partitions = append(st.Partitions, sp)
		}
		out.Topics = append(out.Topics, st)
	}
	return out
}
