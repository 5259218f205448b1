package broker

// CreateTopics (19).
//
// Behavior: each topic is checked, then persisted to the metadata store,
// then its partition logs are created, then it is answered (topics.Admin.Create).
// Checks, with Kafka's codes and wording:
//
//   - a name given twice in one request: INVALID_REQUEST "Duplicate topic
//     name.", answered once for that name, as Kafka does;
//   - an invalid name (validTopicName): INVALID_TOPIC_EXCEPTION; a name
//     that differs from an existing topic only by '.' versus '_' also
//     gets INVALID_TOPIC_EXCEPTION, because Kafka's metric names would
//     collide (we keep Kafka's rule so topics stay portable);
//   - an existing topic: TOPIC_ALREADY_EXISTS; __cluster_metadata:
//     INVALID_REQUEST "Creation of internal topic __cluster_metadata is
//     prohibited." (topics.Reserved);
//   - NumPartitions -1 means num.partitions (Config.DefaultPartitions);
//     0 or below -1 is INVALID_PARTITIONS;
//   - ReplicationFactor -1 or 1 is accepted; 0 or below -1, or above 1
//     (we are the only broker), is INVALID_REPLICATION_FACTOR;
//   - a manual ReplicaAssignment requires NumPartitions and
//     ReplicationFactor to be -1 (else INVALID_REQUEST); its partitions
//     must be 0..n-1, each with exactly our node id as the replica list
//     (else INVALID_REPLICA_ASSIGNMENT);
//   - configs must be in the topic config table with valid values, and
//     not null: INVALID_CONFIG with a message otherwise;
//   - more than 10000 partitions in one request: every topic gets
//     POLICY_VIOLATION, as Kafka's controller answers.
//
// ValidateOnly runs every check and creates nothing. From v5 a successful
// answer (validate-only too) carries the partition count, replication
// factor 1 and every topic config with its value and source; failures
// carry -1 for both counts and no configs. The partitions created count
// against the client's controller_mutation_rate (quota_mutation.go):
// THROTTLING_QUOTA_EXCEEDED in reject mode from v6, else throttled.
//
// Version notes: v0 and v1 are gone from Kafka 4 and not served; v2 and
// v3 are the same (v3 only means throttling after the response); v4
// allows -1 for NumPartitions and ReplicationFactor (we accept it from
// v2, harmlessly); v5 is flexible and returns the configs; v6 is the
// same as v5; v7 returns the topic id (zero for ValidateOnly).
//
// Authorization: Create on the cluster or on the topic
// (TOPIC_AUTHORIZATION_FAILED); the configs in the answer need
// DescribeConfigs on the topic (else ConfigErrorCode is
// TOPIC_AUTHORIZATION_FAILED and no configs are listed).

import (
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/topics"
)

func init() { registerSimple(19, 2, 7, handleCreateTopics) }

// maxPartitionsPerRequest bounds the partitions one CreateTopics or
// CreatePartitions request may create (Kafka's controller uses the same
// limit, MAX_PARTITIONS_PER_BATCH), so one request cannot make the broker
// create millions of directories.
const maxPartitionsPerRequest = 10000

func handleCreateTopics(c *conn, req *kmsg.CreateTopicsRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	count := map[string]int{}
	total := int64(0)
	for _, rt := range req.Topics {
		count[rt.Topic]++
		switch {
		case len(rt.ReplicaAssignment) > 0:
			total += int64(len(rt.ReplicaAssignment))
		case rt.NumPartitions == -1:
			total += int64(b.cfg.DefaultPartitions)
		case rt.NumPartitions > 0:
			total += int64(rt.NumPartitions)
		}
	}
	answered := map[string]bool{}
	clusterCreate := c.visible(acl.Create, acl.Cluster, acl.ClusterName)
	for i := range req.Topics {
		rt := &req.Topics[i]
		if answered[rt.Topic] {
			continue // a duplicate, answered once
		}
		answered[rt.Topic] = true
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		var err error
		switch {
		case count[rt.Topic] > 1:
			err = kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Duplicate topic name.")
		case total > maxPartitionsPerRequest:
			err = kafkaerr.Refuse(kafkaerr.ErrPolicyViolation, "Excessively large number of partitions per request.")
		default:
			var t *topics.Topic
			var partitions int32
			if !clusterCreate && !c.mayTopic(acl.Create, rt.Topic) {
				err = kafkaerr.Refuse(kafkaerr.ErrTopicAuthorization, "Authorization failed.")
				break
			}
			// controller_mutation_rate (quota_mutation.go): refused while
			// over it in reject mode (v6+), else charged once created.
			if err = c.mutationAllowed(req.Version >= 6, req.ValidateOnly); err != nil {
				break
			}
			t, partitions, err = b.createTopicFromRequest(rt, req.ValidateOnly)
			if err == nil && !req.ValidateOnly {
				c.mutationCharge(req.Version >= 6, int(partitions))
			}
			if err == nil {
				st.NumPartitions = partitions
				st.ReplicationFactor = 1
				if b.cluster != nil {
					st.ReplicationFactor = b.clusterReplicationFactor(rt.Topic, rt.ReplicationFactor)
				}
				st.TopicID = t.ID
				if !c.visible(acl.DescribeConfigs, acl.Topic, rt.Topic) {
					st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
					break
				}
				_, overrides := b.topics.Snapshot(t)
				for _, e := range b.topicConfigEntries(overrides) {
					st.Configs = append(st.Configs, e.CreateTopicsConfig())
				}
			}
		}
		st.ErrorCode = kafkaerr.Code(err)
		st.ErrorMessage = kafkaerr.Message(err)
		if st.ErrorCode == kerr.KafkaStorageError.Code {
			b.lg.Error("create topic failed", zapErr(err))
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// createTopicFromRequest checks one requested topic and creates it
// (unless validateOnly). It returns the topic, whose configs are its
// overrides and whose id is zero under validateOnly, and its partition
// count.
func (b *Broker) createTopicFromRequest(rt *kmsg.CreateTopicsRequestTopic, validateOnly bool) (*topics.Topic, int32, error) {
	name := rt.Topic
	if err := topics.ValidName(name); err != nil {
		return nil, 0, err
	}
	if b.topics.Get(name) != nil {
		return nil, 0, kafkaerr.Refuse(kafkaerr.ErrTopicExists, "Topic '%s' already exists.", name)
	}
	if other := b.collidingTopic(name); other != "" {
		return nil, 0, kafkaerr.Refuse(kafkaerr.ErrInvalidTopic, "Topic '%s' collides with existing topic: %s", name, other)
	}
	partitions, err := b.createPartitionCount(rt)
	if err != nil {
		return nil, 0, err
	}
	configs := make(map[string]string, len(rt.Configs))
	for _, cfg := range rt.Configs {
		if cfg.Value == nil {
			return nil, 0, kafkaerr.Refuse(kafkaerr.ErrInvalidConfig, "Null value not supported for topic configs: %s", cfg.Name)
		}
		if err := b.checkTopicConfig(cfg.Name, *cfg.Value); err != nil {
			return nil, 0, kafkaerr.Refuse(kafkaerr.ErrInvalidConfig, "%v", err)
		}
		configs[cfg.Name] = *cfg.Value
	}
	if b.cluster != nil {
		return b.createClusterTopic(name, partitions, rt.ReplicationFactor, configs, validateOnly)
	}
	t, err := b.topicAdmin.Create(name, partitions, configs, validateOnly)
	if errors.Is(err, kafkaerr.ErrTopicExists) {
		err = kafkaerr.Refuse(kafkaerr.ErrTopicExists, "Topic '%s' already exists.", name)
	}
	if err != nil {
		return nil, 0, err
	}
	return t, partitions, nil
}

// createPartitionCount checks the partition count, replication factor
// and manual assignment of a requested topic and returns the count.
func (b *Broker) createPartitionCount(rt *kmsg.CreateTopicsRequestTopic) (int32, error) {
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 {
			return 0, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1.")
		}
		if rt.ReplicationFactor != -1 {
			return 0, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "A manual partition assignment was specified, but replicationFactor was not set to -1.")
		}
		n := int32(len(rt.ReplicaAssignment))
		seen := make([]bool, n)
		for _, a := range rt.ReplicaAssignment {
			if a.Partition < 0 || a.Partition >= n || seen[a.Partition] {
				return 0, kafkaerr.Refuse(kafkaerr.ErrInvalidReplicaAssignment, "Partitions should be a consecutive 0-based integer sequence.")
			}
			seen[a.Partition] = true
			if err := b.checkReplicas(a.Replicas); err != nil {
				return 0, err
			}
		}
		return n, nil
	}
	n := rt.NumPartitions
	switch {
	case n == -1:
		n = b.cfg.DefaultPartitions
	case n <= 0:
		return 0, kafkaerr.Refuse(kafkaerr.ErrInvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
	}
	switch rf := rt.ReplicationFactor; {
	case b.cluster != nil: // createClusterTopic checks it
	case rf == -1 || rf == 1:
	case rf <= 0:
		return 0, kafkaerr.Refuse(kafkaerr.ErrInvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
	default:
		return 0, kafkaerr.Refuse(kafkaerr.ErrInvalidReplicationFactor, "Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only 1 broker(s) are registered.", rf, rf)
	}
	return n, nil
}

// checkReplicas accepts a manual replica list only if it is exactly our
// node, the one broker there is.
func (b *Broker) checkReplicas(replicas []int32) error {
	if len(replicas) == 0 {
		return kafkaerr.Refuse(kafkaerr.ErrInvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
	}
	for i, r := range replicas {
		if r != b.cfg.NodeID {
			return kafkaerr.Refuse(kafkaerr.ErrInvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no broker with that ID is registered.", r)
		}
		if i > 0 {
			return kafkaerr.Refuse(kafkaerr.ErrInvalidReplicaAssignment, "The manual partition assignment includes the broker %d more than once.", r)
		}
	}
	return nil
}

// collidingTopic returns an existing topic whose name equals name once
// '.' and '_' are identified, or "".
func (b *Broker) collidingTopic(name string) string {
	if !strings.ContainsAny(name, "._") {
		return ""
	}
	key := strings.ReplaceAll(name, ".", "_")
	for _, t := range b.topics.All() {
		if t.Name != name && strings.ReplaceAll(t.Name, ".", "_") == key {
			return t.Name
		}
	}
	return ""
}
