package broker

// CreatePartitions (37).
//
// Behavior: grows a topic to Count partitions: the new count is persisted
// first, then the new partition logs are created (topics.Admin.AddPartitions).
// Partitions never shrink. Checks, with Kafka's codes and wording:
//
//   - a topic named twice in one request: INVALID_REQUEST "Duplicate
//     topic name.", answered once;
//   - an unknown topic: UNKNOWN_TOPIC_OR_PARTITION (an invalid name is
//     unknown too);
//   - Count equal to the current count: INVALID_PARTITIONS "Topic already
//     has N partition(s)."; below it: INVALID_PARTITIONS "Topic currently
//     has N partitions, which is higher than the requested M.";
//   - a manual Assignment must have one entry per new partition; on a
//     single node each must be exactly our node id, in a cluster
//     registered brokers, each once, as many as the topic's replication
//     factor (INVALID_REPLICA_ASSIGNMENT otherwise);
//   - more than 10000 new partitions in one request: POLICY_VIOLATION for
//     every topic, as Kafka's controller answers.
//
// ValidateOnly checks and creates nothing. The partitions added count
// against the client's controller_mutation_rate (quota_mutation.go):
// THROTTLING_QUOTA_EXCEEDED in reject mode from v3, else throttled.
//
// Version notes: v1 is the same as v0 (throttling after the response);
// v2 is flexible; v3 is the same as v2.
//
// Authorization: Alter on the topic (TOPIC_AUTHORIZATION_FAILED, whether or
// not it exists).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
)

func init() { registerSimple(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(c *conn, req *kmsg.CreatePartitionsRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	count := map[string]int{}
	total := int64(0)
	for _, rt := range req.Topics {
		count[rt.Topic]++
		if t := b.topics.Get(rt.Topic); t != nil {
			if add := int64(rt.Count) - int64(b.topics.PartitionCount(t)); add > 0 {
				total += add
			}
		}
	}
	answered := map[string]bool{}
	for i := range req.Topics {
		rt := &req.Topics[i]
		if answered[rt.Topic] {
			continue
		}
		answered[rt.Topic] = true
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		switch {
		case count[rt.Topic] > 1:
			err = kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Duplicate topic name.")
		case total > maxPartitionsPerRequest:
			err = kafkaerr.Refuse(kafkaerr.ErrPolicyViolation, "Excessively large number of partitions per request.")
		case !c.mayTopic(acl.Alter, rt.Topic):
			err = kafkaerr.Refuse(kafkaerr.ErrTopicAuthorization, "Authorization failed.")
		default:
			// controller_mutation_rate (quota_mutation.go), v3+ may refuse.
			if err = c.mutationAllowed(req.Version >= 3, req.ValidateOnly); err != nil {
				break
			}
			before := 0
			if t := b.topics.Get(rt.Topic); t != nil {
				before = int(b.topics.PartitionCount(t)) // in a cluster, not only the partitions hosted here
			}
			err = b.createPartitions(rt, req.ValidateOnly)
			if err == nil && !req.ValidateOnly {
				c.mutationCharge(req.Version >= 3, int(rt.Count)-before)
			}
		}
		st.ErrorCode = kafkaerr.Code(err)
		st.ErrorMessage = kafkaerr.Message(err)
		if st.ErrorCode == kerr.KafkaStorageError.Code {
			b.lg.Error("create partitions failed", zapErr(err))
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (b *Broker) createPartitions(rt *kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
	t := b.topics.Get(rt.Topic)
	if t == nil {
		return kafkaerr.Refuse(kafkaerr.ErrUnknownTopic, "The topic '%s' does not exist.", rt.Topic)
	}
	cur := b.topics.PartitionCount(t)
	switch {
	case rt.Count == cur:
		return kafkaerr.Refuse(kafkaerr.ErrInvalidPartitions, "Topic already has %d partition(s).", cur)
	case rt.Count < cur:
		return kafkaerr.Refuse(kafkaerr.ErrInvalidPartitions, "Topic currently has %d partitions, which is higher than the requested %d.", cur, rt.Count)
	}
	if t.Replicated() && b.cluster != nil {
		return b.growClusterTopic(t, rt, cur, validateOnly)
	}
	if rt.Assignment != nil {
		if add := rt.Count - cur; int32(len(rt.Assignment)) != add {
			return kafkaerr.Refuse(kafkaerr.ErrInvalidReplicaAssignment, "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", add, len(rt.Assignment))
		}
		for _, a := range rt.Assignment {
			if err := b.checkReplicas(a.Replicas); err != nil {
				return err
			}
		}
	}
	if err := b.topicAdmin.AddPartitions(t, rt.Count, validateOnly); err != nil {
		// AddPartitions re-checks the count under its lock; losing that
		// race to a concurrent CreatePartitions is still a count error.
		if now, _ := b.topics.Snapshot(t); int32(len(now)) >= rt.Count {
			return kafkaerr.Refuse(kafkaerr.ErrInvalidPartitions, "%v", err)
		}
		return fmt.Errorf("broker: add partitions to %s: %w", t.Name, err)
	}
	return nil
}
