package broker

// OffsetFetch (9).
//
// Behavior: returns committed offsets with their leader epoch and
// metadata (package groups, offsets.go). A partition without a committed offset,
// or of an unknown group, gets offset -1, leader epoch -1 and metadata
// "", with no error, as in Kafka; a null topic list (v2+) asks for every
// committed offset of the group (none for an unknown group). An empty
// group id is INVALID_GROUP_ID. With RequireStable (v7+), a partition
// for which an open transaction holds a pending offset (TxnOffsetCommit)
// gets UNSTABLE_OFFSET_COMMIT, which clients retry, as in Kafka; a
// partition whose offset was deleted since (OffsetDelete, DeleteGroups, a
// deleted topic) does not, as Kafka's deletion removes the pending
// offset (groups.PendingIndex). The member id and epoch
// of v9 are checked for KIP-848 consumer groups: a fetch naming a member
// must come from a current member (UNKNOWN_MEMBER_ID) at its current
// epoch (STALE_MEMBER_EPOCH); an admin fetch (no member id, epoch < 0)
// always passes. Classic groups ignore them, as in Kafka.
//
// Version notes: v1 is v0 served from the store (Kafka 4 removed v0,
// which read ZooKeeper); v2 a null topic list for all and a top-level
// error; v3 throttling; v5 leader epochs; v6 flexible; v7 RequireStable;
// v8 batches groups (one answer per group, errors per group); v9 member
// id and epoch; v10 topic ids instead of names (an unknown id gets
// UNKNOWN_TOPIC_ID; offsets of deleted topics are left out of a fetch of
// all offsets).
//
// Authorization: Describe on the group, then on each topic
// (fetchOffsets).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(9, 1, 10, handleOffsetFetch) }

func handleOffsetFetch(c *conn, req *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for i := range req.Groups {
			resp.Groups = append(resp.Groups, c.fetchOffsets(&req.Groups[i], req.Version, req.RequireStable))
		}
		return resp
	}
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = req.Group
	if req.Topics != nil {
		rg.Topics = make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetFetchRequestGroupTopic()
			rt.Topic, rt.Partitions = t.Topic, t.Partitions
			rg.Topics = append(rg.Topics, rt)
		}
	}
	sg := c.fetchOffsets(&rg, req.Version, req.RequireStable)
	resp.ErrorCode = sg.ErrorCode
	for _, t := range sg.Topics {
		st := kmsg.NewOffsetFetchResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
			if req.Version < 2 && sg.ErrorCode != 0 {
				sp.ErrorCode = sg.ErrorCode // v1 has no top-level error
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// fetchOffsets answers one group, authorized: Describe on the group
// (GROUP_AUTHORIZATION_FAILED for the group and no partitions, as
// Kafka; v1, which has no group error, gets it on each partition asked
// for), then
// Describe on each topic: a named one is TOPIC_AUTHORIZATION_FAILED per
// partition, and a fetch of all offsets leaves such topics out.
func (c *conn) fetchOffsets(rg *kmsg.OffsetFetchRequestGroup, version int16, requireStable bool) kmsg.OffsetFetchResponseGroup {
	byID := version >= 10
	deniedTopic := func(rt kmsg.OffsetFetchRequestGroupTopic, code int16) kmsg.OffsetFetchResponseGroupTopic {
		st := kmsg.NewOffsetFetchResponseGroupTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, p := range rt.Partitions {
			sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			sp.Partition, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = p, -1, -1, code
			st.Partitions = append(st.Partitions, sp)
		}
		return st
	}
	if gc := c.groupCode(acl.Describe, rg.Group); gc != 0 {
		sg := kmsg.NewOffsetFetchResponseGroup()
		sg.Group, sg.ErrorCode = rg.Group, gc
		if version < 2 { // no group error to carry it: each partition does
			for _, rt := range rg.Topics {
				sg.Topics = append(sg.Topics, deniedTopic(rt, gc))
			}
		}
		return sg
	}
	if rg.Topics == nil { // every committed offset: leave out what the caller may not see
		sg := c.b.groups.FetchOffsets(rg, version, requireStable)
		if c.b.authz != nil {
			kept := sg.Topics[:0]
			for _, st := range sg.Topics {
				name, known := st.Topic, true
				if name == "" {
					name, known = c.topicName(st.Topic, st.TopicID, byID)
				}
				if !known || c.visible(acl.Describe, acl.Topic, name) {
					kept = append(kept, st)
				}
			}
			sg.Topics = kept
		}
		return sg
	}
	kept, denied, codes := authzSplit(c, rg.Topics, func(rt *kmsg.OffsetFetchRequestGroupTopic) int16 {
		return c.topicCheck(0, acl.Describe, rt.Topic, rt.TopicID, byID)
	})
	var sg kmsg.OffsetFetchResponseGroup
	if len(kept) > 0 || len(denied) == 0 {
		r := *rg
		r.Topics = kept
		sg = c.b.groups.FetchOffsets(&r, version, requireStable)
	} else {
		sg = kmsg.NewOffsetFetchResponseGroup()
		sg.Group = rg.Group
	}
	for i, rt := range denied {
		sg.Topics = append(sg.Topics, deniedTopic(rt, codes[i]))
	}
	return sg
}
