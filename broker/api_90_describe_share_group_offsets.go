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

import (
	"bytes"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/sharegroup/store"
)

func init() { registerSimple(90, 0, 1, handleDescribeShareGroupOffsets) }

func handleDescribeShareGroupOffsets(c *conn, req *kmsg.DescribeShareGroupOffsetsRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, rg := range req.Groups {
		resp.Groups = append(resp.Groups, b.describeShareGroupOffsets(rg))
	}
	return resp
}

func (b *Broker) describeShareGroupOffsets(rg kmsg.DescribeShareGroupOffsetsRequestGroup) kmsg.DescribeShareGroupOffsetsResponseGroup {
	sc := b.shares
	out := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
	out.GroupID = rg.GroupID
	if !b.isShareGroup(rg.GroupID) {
		out.ErrorCode = kerr.GroupIDNotFound.Code
		msg := "Group " + rg.GroupID + " is not a share group."
		out.ErrorMessage = &msg
		return out
	}
	st := b.shareSettings(rg.GroupID)
	describe := func(key store.Key, lp *partition) kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition {
		rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
		rp.Partition = key.Partition
		rp.StartOffset, rp.Lag, rp.ErrorCode = sc.describeOffset(key, st, lp)
		return rp
	}
	if rg.Topics == nil {
		keys, err := sc.store.Keys(rg.GroupID)
		if err != nil {
			out.ErrorCode = kerr.KafkaStorageError.Code
			return out
		}
		sort.Slice(keys, func(i, j int) bool { return compareKeys(keys[i], keys[j]) < 0 })
		for _, k := range keys {
			t, lp, code := b.partitionByID(k.TopicID, k.Partition)
			if code != 0 {
				continue
			}
			n := len(out.Topics)
			if n == 0 || !bytes.Equal(out.Topics[n-1].TopicID[:], t.id[:]) {
				rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				rt.Topic, rt.TopicID = t.name, t.id
				out.Topics = append(out.Topics, rt)
				n++
			}
			out.Topics[n-1].Partitions = append(out.Topics[n-1].Partitions, describe(k, lp))
		}
		return out
	}
	for _, rt := range rg.Topics {
		ot := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		ot.Topic = rt.Topic
		t := b.topics.get(rt.Topic)
		if t != nil {
			ot.TopicID = t.id
		}
		for _, p := range rt.Partitions {
			var lp *partition
			if t != nil {
				lp = b.topics.partition(t.name, p)
			}
			if lp == nil {
				rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset = p, -1
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				ot.Partitions = append(ot.Partitions, rp)
				continue
			}
			ot.Partitions = append(ot.Partitions, describe(store.Key{Group: rg.GroupID, TopicID: t.id, Partition: p}, lp))
		}
		out.Topics = append(out.Topics, ot)
	}
	return out
}
