package broker

// DescribeTopicPartitions (key 75, KIP-966), v0: the partitions of the
// named topics (all of them when none is named), their leaders, leader
// epochs, replicas, ISR and offline replicas, as Metadata reports them
// (api_03), paged for topics with many partitions, as Kafka 3.7+ answers
// it and kafka-topics.sh --describe asks it:
//
//   - Topics are answered in name order from the cursor's topic on; the
//     cursor's topic must be among those named (INVALID_REQUEST for every
//     named topic otherwise, as Kafka's error response). Its partition
//     index is where that topic starts.
//   - At most min(ResponsePartitionLimit, 2000) partitions (Kafka's
//     max.request.partition.size.limit default); when more remain,
//     NextCursor names the first one left out.
//   - Authorization: Describe on each topic. A named topic without it is
//     TOPIC_AUTHORIZATION_FAILED with no id (after the others, as Kafka
//     lists them); with no topic named, such topics are left out. An
//     unknown named topic is UNKNOWN_TOPIC_OR_PARTITION. Every described
//     topic carries its authorized operations.
//   - Eligible leader replicas (KIP-966's ELR) do not exist here: empty.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

// maxRequestPartitionSizeLimit is Kafka's
// max.request.partition.size.limit default: the most partitions one
// DescribeTopicPartitions response holds.
const maxRequestPartitionSizeLimit = 2000

func init() { registerSimple(75, 0, 0, handleDescribeTopicPartitions) }

func handleDescribeTopicPartitions(c *conn, req *kmsg.DescribeTopicPartitionsRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	all := len(req.Topics) == 0
	cursorTopic, firstPartition := "", int32(0)
	if req.Cursor != nil {
		cursorTopic, firstPartition = req.Cursor.Topic, max(req.Cursor.Partition, 0)
	}
	var names []string
	if all {
		for _, t := range b.topics.All() {
			if t.Name >= cursorTopic {
				names = append(names, t.Name)
			}
		}
	} else {
		cursorNamed := req.Cursor == nil
		for _, rt := range req.Topics {
			cursorNamed = cursorNamed || rt.Topic == cursorTopic
			if rt.Topic >= cursorTopic && !slices.Contains(names, rt.Topic) {
				names = append(names, rt.Topic)
			}
		}
		if !cursorNamed {
			for _, rt := range req.Topics {
				st := kmsg.NewDescribeTopicPartitionsResponseTopic()
				name := rt.Topic
				st.Topic, st.ErrorCode = &name, kerr.InvalidRequest.Code
				resp.Topics = append(resp.Topics, st)
			}
			return resp
		}
	}
	slices.Sort(names)
	if cursorTopic != "" && !c.mayTopic(acl.Describe, cursorTopic) {
		firstPartition = 0 // as Kafka: the cursor's partition counts only for a topic the caller may see
	}
	limit := int32(maxRequestPartitionSizeLimit)
	if req.ResponsePartitionLimit > 0 {
		limit = min(limit, req.ResponsePartitionLimit)
	}
	var denied []kmsg.DescribeTopicPartitionsResponseTopic
	for _, name := range names {
		if !c.mayTopic(acl.Describe, name) {
			if !all {
				st := kmsg.NewDescribeTopicPartitionsResponseTopic()
				st.Topic, st.ErrorCode = &name, kerr.TopicAuthorizationFailed.Code
				denied = append(denied, st)
			}
			continue
		}
		t := b.topics.Get(name)
		if t == nil {
			if !all {
				st := kmsg.NewDescribeTopicPartitionsResponseTopic()
				st.Topic, st.ErrorCode = &name, kerr.UnknownTopicOrPartition.Code
				if b.clusterHasTopic(name) {
					st.ErrorCode = kerr.LeaderNotAvailable.Code // created, not started here yet
				}
				resp.Topics = append(resp.Topics, st)
			}
			continue
		}
		if limit == 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: 0}
			break
		}
		md := c.metadataTopic(t, false)
		st := kmsg.NewDescribeTopicPartitionsResponseTopic()
		st.Topic, st.TopicID, st.IsInternal = md.Topic, md.TopicID, md.IsInternal
		st.AuthorizedOperations = c.authorizedOps(true, acl.Topic, name)
		start := int32(0)
		if name == cursorTopic {
			start = firstPartition
		}
		for _, mp := range md.Partitions {
			if mp.Partition < start {
				continue
			}
			if limit == 0 {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: mp.Partition}
				break
			}
			sp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			sp.ErrorCode, sp.Partition = mp.ErrorCode, mp.Partition
			sp.LeaderID, sp.LeaderEpoch = mp.Leader, mp.LeaderEpoch
			sp.Replicas, sp.ISR, sp.OfflineReplicas = mp.Replicas, mp.ISR, mp.OfflineReplicas
			sp.EligibleLeaderReplicas, sp.LastKnownELR = []int32{}, []int32{}
			st.Partitions = append(st.Partitions, sp)
			limit--
		}
		resp.Topics = append(resp.Topics, st)
		if resp.NextCursor != nil {
			break
		}
	}
	resp.Topics = append(resp.Topics, denied...)
	return resp
}
