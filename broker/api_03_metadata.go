package broker

// Metadata (3).
//
// Behavior: a single node is the only broker, the controller, and the
// leader (epoch 0) of every partition, with itself as the sole replica
// and ISR. In a cluster (cluster.go) the brokers are those registered in
// the metadata log, the controller the metadata group's leader, and
// every partition is listed, hosted here or not: its leader and epoch
// raft's as this broker knows them, or as the leader of a partition
// hosted elsewhere published them (during an election the last leader
// known, as Kafka names a failed leader until a new one is chosen: by
// this broker, or, just after it started, by the metadata log;
// LEADER_NOT_AVAILABLE before the first); its ISR as its leader
// published it (every replica until it has), and as offline the replicas
// on fenced brokers (not heard from for broker.session.timeout.ms).
// A null topic list (an empty one at v0) asks for every topic. Topics
// may be named or, from v10, given by topic id. Unknown topics are
// created with num.partitions when auto-creation is on and the request
// allows it (always before v4), as Kafka does; an invalid name gets
// INVALID_TOPIC_EXCEPTION, an unknown id UNKNOWN_TOPIC_ID.
//
// Version notes: v1 adds controller and rack; v2 cluster id; v5 offline
// replicas; v7 leader epochs; v8-v10 authorized operations (we have no
// ACLs, so we report "not requested" as Kafka does when not asked, and
// every operation when asked); v9 flexible; v10 topic ids; v11 drops
// cluster operations; v12 allows a null topic name with an id.

import (
	"errors"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/topics"
)

func init() { registerSimple(3, 0, 12, handleMetadata) }

func handleMetadata(c *conn, req *kmsg.MetadataRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	cid := b.clusterID
	resp.ClusterID = &cid
	if b.cluster != nil {
		resp.Brokers, resp.ControllerID = b.clusterBrokers()
	} else {
		br := kmsg.NewMetadataResponseBroker()
		br.NodeID, br.Host, br.Port = b.cfg.NodeID, c.ln.advHost, c.ln.advPort
		resp.Brokers = append(resp.Brokers, br)
		resp.ControllerID = b.cfg.NodeID
	}
	resp.AuthorizedOperations = c.clusterOps(req.IncludeClusterAuthorizedOperations && req.Version <= 10)
	withOps := req.IncludeTopicAuthorizedOperations

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		ts := b.topics.All()
		sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
		for _, t := range ts {
			if c.visible(acl.Describe, acl.Topic, t.Name) {
				resp.Topics = append(resp.Topics, c.metadataTopic(t, withOps))
			}
		}
		return resp
	}
	autoCreate := b.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		var t *topics.Topic
		if rt.Topic == nil || *rt.Topic == "" {
			if rt.TopicID == [16]byte{} {
				st := kmsg.NewMetadataResponseTopic()
				st.ErrorCode = kerr.InvalidTopicException.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			t = b.topics.GetID(rt.TopicID)
			if t == nil {
				st := kmsg.NewMetadataResponseTopic()
				st.TopicID = rt.TopicID
				st.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			if !c.mayTopic(acl.Describe, t.Name) {
				st := kmsg.NewMetadataResponseTopic()
				st.TopicID = rt.TopicID
				st.ErrorCode = kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			resp.Topics = append(resp.Topics, c.metadataTopic(t, withOps))
			continue
		}
		name := *rt.Topic
		if !c.mayTopic(acl.Describe, name) {
			st := kmsg.NewMetadataResponseTopic()
			st.Topic = &name
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		t = b.topics.Get(name)
		if t == nil {
			st := kmsg.NewMetadataResponseTopic()
			st.Topic = &name
			if err := topics.ValidName(name); err != nil {
				st.ErrorCode = kerr.InvalidTopicException.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			if b.clusterHasTopic(name) {
				// Created, and not started here yet (this broker applies
				// the metadata log a moment later): a retriable answer.
				st.ErrorCode = kerr.LeaderNotAvailable.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			if !autoCreate {
				st.ErrorCode = kerr.UnknownTopicOrPartition.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			if !c.visible(acl.Create, acl.Cluster, acl.ClusterName) && !c.mayTopic(acl.Create, name) {
				st.ErrorCode = kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			var err error
			if b.cluster != nil {
				t, _, err = b.createClusterTopic(name, b.cfg.DefaultPartitions, -1, nil, false)
			} else {
				t, err = b.topicAdmin.Create(name, b.cfg.DefaultPartitions, nil, false)
			}
			if errors.Is(err, kafkaerr.ErrTopicExists) {
				if t = b.topics.Get(name); t == nil && b.cluster != nil {
					st.ErrorCode = kerr.LeaderNotAvailable.Code // created elsewhere, starting here
					resp.Topics = append(resp.Topics, st)
					continue
				}
			}
			if t == nil {
				st.ErrorCode = kafkaerr.Code(err)
				if errors.Is(err, kafkaerr.ErrInvalidReplicationFactor) && b.cluster != nil &&
					int(b.clusterReplicationFactor("", -1)) <= b.cluster.VoterCount() {
					// Brokers are still registering: retriable, as Kafka's
					// asynchronous auto-creation answers while it creates.
					st.ErrorCode = kerr.LeaderNotAvailable.Code
				}
				if err == nil {
					st.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
				resp.Topics = append(resp.Topics, st)
				continue
			}
		}
		resp.Topics = append(resp.Topics, c.metadataTopic(t, withOps))
	}
	return resp
}

func (c *conn) metadataTopic(t *topics.Topic, withOps bool) kmsg.MetadataResponseTopic {
	b := c.b
	st := kmsg.NewMetadataResponseTopic()
	name := t.Name
	st.Topic = &name
	st.TopicID = t.ID
	st.AuthorizedOperations = c.authorizedOps(withOps, acl.Topic, t.Name)
	if b.cluster != nil {
		// Every partition, hosted here or not (cluster.go).
		for i := range b.topics.PartitionCount(t) {
			sp := kmsg.NewMetadataResponseTopicPartition()
			sp.Partition = i
			sp.OfflineReplicas = []int32{}
			b.clusterPartitionMetadata(t.Name, i, &sp)
			st.Partitions = append(st.Partitions, sp)
		}
		return st
	}
	parts, _ := b.topics.Snapshot(t)
	for _, p := range parts {
		sp := kmsg.NewMetadataResponseTopicPartition()
		sp.Partition = p.Index
		sp.Leader = b.cfg.NodeID
		sp.LeaderEpoch = 0
		sp.Replicas = []int32{b.cfg.NodeID}
		sp.ISR = []int32{b.cfg.NodeID}
		sp.OfflineReplicas = []int32{}
		st.Partitions = append(st.Partitions, sp)
	}
	return st
}
