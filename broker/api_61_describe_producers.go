package broker

// DescribeProducers (61).
//
// Behavior: per partition, the idempotent producers the log remembers
// (the same state that deduplicates retried batches and survives
// restarts): producer id, epoch, last sequence, last batch timestamp.
// CoordinatorEpoch and CurrentTxnStartOffset are -1: transactions are not
// served yet. Producers idle longer than producer.id.expiration.ms are
// forgotten by retention, as in Kafka. An unknown topic or partition gets
// UNKNOWN_TOPIC_OR_PARTITION.
//
// Version notes: v0 is the only version; it is flexible.
//
// Authorization: Read on the topic (TOPIC_AUTHORIZATION_FAILED per
// partition), as Kafka.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(61, 0, 0, handleDescribeProducers) }

func handleDescribeProducers(c *conn, req *kmsg.DescribeProducersRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		denied := !c.mayTopic(acl.Read, rt.Topic)
		for _, idx := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = idx
			if denied {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			p := b.topics.Partition(rt.Topic, idx)
			if p == nil {
				sp.ErrorCode = b.absentPartitionCode(rt.Topic, idx)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, pi := range p.Log.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID = pi.ProducerID
				ap.ProducerEpoch = int32(pi.Epoch)
				ap.LastSequence = pi.LastSequence
				ap.LastTimestamp = pi.LastTimestamp
				ap.CoordinatorEpoch = pi.CoordinatorEpoch
				ap.CurrentTxnStartOffset = pi.CurrentTxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
