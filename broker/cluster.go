package broker

// Cluster mode (issue 29, docs/CLUSTER.md): with controller.quorum.voters
// set, topics are created through the metadata group (package cluster)
// and every partition is a raft group over its log in <data>/cluster;
// the handlers ask leaderState who leads a partition and route produces
// to its group. What is not replicated yet (consumer groups, offsets,
// transactions, share groups: their coordinators stay on each broker)
// is listed in docs/CLUSTER.md.

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/cluster"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/raftnet"
	"github.com/shoal-mq/shoal/broker/replica"
	"github.com/shoal-mq/shoal/broker/security"
	"github.com/shoal-mq/shoal/broker/topics"
	slog "github.com/shoal-mq/shoal/log"
)

// clusterIDOf is a cluster's id, the same on every broker: derived from
// the voters' ids (22 characters of URL-safe base64, like Kafka's).
func clusterIDOf(voters map[uint64]string) string {
	ids := make([]uint64, 0, len(voters))
	for id := range voters {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	h := sha256.New()
	for _, id := range ids {
		fmt.Fprintf(h, "%d,", id)
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

// startCluster joins the cluster: the metadata group, then the
// partitions it places here, adopted into the topic registry as their
// groups start. The first listener's advertised endpoint is the one
// registered for Metadata.
func (b *Broker) startCluster() error {
	voters, err := ParseVoters(b.cfg.Voters)
	if err != nil {
		return err
	}
	peer := b.cfg.PeerListen
	if peer == "" {
		peer = voters[uint64(b.cfg.NodeID)]
	}
	replica.SetRaftLogger(b.lg)
	peerTLS, err := b.peerTLS()
	if err != nil {
		return err
	}
	ln := b.listeners[0]
	node, err := cluster.Start(cluster.Config{
		NodeID: uint64(b.cfg.NodeID), ClusterID: b.clusterID, DataDir: filepath.Join(b.cfg.DataDir, "cluster"),
		FS: b.fs, PeerListen: peer, PeerTLS: peerTLS, Voters: voters, Host: ln.advHost, Port: ln.advPort,
		Log: b.logConfig(nil), LogConfig: b.logConfig, Logger: b.lg, SessionTimeout: b.cfg.BrokerSessionTimeout,
		AutoLeaderRebalance: b.cfg.AutoLeaderRebalance, LeaderImbalancePercentage: b.cfg.LeaderImbalancePercentage,
		LeaderImbalanceCheckInterval: b.cfg.LeaderImbalanceCheckInterval, ReplicaLagMax: b.cfg.ReplicaLagMax,
		OnTopic: func(t *cluster.Topic, hosted map[int32]*slog.Partition) {
			b.topicAdmin.Adopt(t.Name, t.ID, int32(len(t.Partitions)), t.Configs, hosted)
		},
		OnTopicConfigs: func(t *cluster.Topic) { b.topicAdmin.AdoptConfigs(t.Name, t.Configs) },
		OnTopicDeleted: func(t *cluster.Topic) { b.topicAdmin.AdoptDeletion(t.Name, t.ID) },
		OnHighWatermark: func(name string) {
			if p := b.clusterPartition(name); p != nil {
				p.Notify()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("broker: cluster: %w", err)
	}
	b.cluster = node
	// Serve once the metadata log is applied (its topics known here), as
	// a Kafka broker catches up before it serves; without a quorum for
	// that long, serve anyway: reads, and produces once it caught up
	// (until then they are NOT_LEADER_OR_FOLLOWER).
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if err := node.WaitCaughtUp(ctx); err != nil {
		b.lg.Warn("serving before the metadata log caught up (no quorum?)", zap.Error(err))
	}
	b.lg.Info("joined the cluster", zap.String("voters", b.cfg.Voters), zap.String("peer_listener", peer),
		zap.Bool("peer_tls", peerTLS != nil))
	return nil
}

// peerTLS is the peer network's mutual TLS (shoal.peer.security.protocol
// SSL), nil for PLAINTEXT: the peer listener's certificate and
// truststore (listener.name.peer.ssl.* over ssl.*, re-read when the
// files change), client certificates required, and on both ends of a
// connection the other's principal must be its node's in
// shoal.peer.principals or, without that, among super.users (one of the
// two checked non-empty at start).
func (b *Broker) peerTLS() (*raftnet.TLSConfig, error) {
	if !security.PeerTLS(b.cfg.Security) {
		return nil, nil
	}
	warn := func(msg string, err error) { b.lg.Warn(msg, zap.String("listener", "peer"), zap.Error(err)) }
	st, err := security.NewServerTLS(security.PeerSettings(b.cfg.Security), security.PeerListener, warn)
	if err != nil {
		return nil, fmt.Errorf("broker: %s=SSL: %w", security.PeerSecurityProtocol, err)
	}
	principals, _ := security.ParsePeerPrincipals(security.Settings(b.cfg.Security).For("", security.PeerPrincipals)) // checked by Validate
	return &raftnet.TLSConfig{
		Server: st.Config(),
		Client: st.ClientConfig,
		Verify: func(cs tls.ConnectionState, node uint64) error {
			p, err := st.Principal(cs)
			if err != nil {
				return err
			}
			switch {
			case p == security.Anonymous:
				return errors.New("peer presented no verified certificate")
			case len(principals) > 0 && p != principals[node]:
				return fmt.Errorf("peer certificate's principal %s is not node %d's (%s)", p, node, principals[node])
			case len(principals) == 0 && !b.superUsers[p]:
				return fmt.Errorf("peer certificate's principal %s is not among super.users", p)
			}
			return nil
		},
	}, nil
}

// clusterPartition finds the registry's partition of a group name
// (<topic>-<index>).
func (b *Broker) clusterPartition(name string) *topics.Partition {
	for i := len(name) - 1; i > 0; i-- {
		if name[i] == '-' {
			idx, err := strconv.Atoi(name[i+1:])
			if err != nil {
				return nil
			}
			return b.topics.Partition(name[:i], int32(idx))
		}
	}
	return nil
}

func groupName(p *topics.Partition) string { return cluster.PartitionName(p.Topic, p.Index) }

// leaderState says whether this broker may serve p as its leader, and
// with which leader epoch: a single node always leads at epoch 0. A
// request's current leader epoch other than -1 must be this one: a newer
// one is UNKNOWN_LEADER_EPOCH (this broker has not caught up), an older
// one FENCED_LEADER_EPOCH (the client has). Not the leader:
// NOT_LEADER_OR_FOLLOWER.
func (b *Broker) leaderState(p *topics.Partition, current int32) (epoch int32, code int16) {
	if b.cluster != nil {
		st, _, ok := b.cluster.Group(groupName(p))
		if !ok || !st.IsLeader {
			return -1, kerr.NotLeaderForPartition.Code
		}
		epoch = int32(st.Term)
	}
	switch {
	case current == -1 || current == epoch:
		return epoch, 0
	case current > epoch:
		return epoch, kerr.UnknownLeaderEpoch.Code
	}
	return epoch, kerr.FencedLeaderEpoch.Code
}

// clusterProduce hands a produce's batches to the partition's raft group
// and returns a channel that yields the outcome once they committed, and
// one closed once the group has taken records (cluster.ProduceAsync):
// the handler must not return before, as the request's buffer is reused
// for the next request once it has. Not copying the batches here saves
// a copy of every produced byte: raft copies each proposed entry itself.
func (b *Broker) clusterProduce(p *topics.Partition, records []byte, minInSync int) (result <-chan clusterResult, released <-chan struct{}) {
	ch := make(chan clusterResult, 1)
	released = b.cluster.ProduceAsync(groupName(p), records, minInSync, func(res slog.AppendResult, err error) { ch <- clusterResult{res, err} })
	return ch, released
}

// createClusterTopic creates a topic through the metadata group and
// returns it once this broker serves it. rf -1 is
// default.replication.factor (every voter when that is 0); replicas
// are placed over the registered brokers (cluster.place), so a factor
// above their count is INVALID_REPLICATION_FACTOR, as in Kafka: just
// after a cluster starts, until every broker has registered, a topic
// asking for every broker is refused rather than created with fewer
// replicas than it asked for.
// The configs (validated by the caller) go into the metadata log with
// the topic: every broker's replicas take them.
func (b *Broker) createClusterTopic(name string, partitions int32, rf int16, configs map[string]string, validateOnly bool) (*topics.Topic, int32, error) {
	if err := topics.Reserved(name); err != nil {
		return nil, 0, err
	}
	brokers := len(b.cluster.Brokers().Brokers)
	if rf == -1 {
		rf = b.clusterReplicationFactor("", -1)
	}
	switch {
	case rf <= 0:
		return nil, 0, kafkaerr.Refuse(kafkaerr.ErrInvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
	case int(rf) > brokers:
		return nil, 0, kafkaerr.Refuse(kafkaerr.ErrInvalidReplicationFactor,
			"Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.", rf, rf, brokers)
	}
	if validateOnly {
		return &topics.Topic{Name: name}, partitions, nil
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := b.cluster.CreateTopic(ctx, name, int(partitions), int(rf), configs); err != nil {
		if strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
			return nil, 0, kafkaerr.Refuse(kafkaerr.ErrTopicExists, "Topic '%s' already exists.", name)
		}
		return nil, 0, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "%v", err)
	}
	t := b.topics.Get(name)
	if t == nil {
		return nil, 0, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Topic '%s' was created but its partitions did not start here.", name)
	}
	return t, partitions, nil
}

// growClusterTopic adds partitions to a replicated topic through the
// metadata log (CreatePartitions in a cluster): each new partition with
// the topic's replication factor, placed by the cluster or as the
// request's Assignment gives (registered brokers, each once, as many as
// the topic's replication factor). It returns once this broker applied
// the change.
func (b *Broker) growClusterTopic(t *topics.Topic, rt *kmsg.CreatePartitionsRequestTopic, cur int32, validateOnly bool) error {
	var assign [][]uint64
	if rt.Assignment != nil {
		if add := rt.Count - cur; int32(len(rt.Assignment)) != add {
			return kafkaerr.Refuse(kafkaerr.ErrInvalidReplicaAssignment, "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", add, len(rt.Assignment))
		}
		rf := len(b.cluster.Replicas(t.Name, 0))
		brokers := b.cluster.Brokers().Brokers
		for _, a := range rt.Assignment {
			if len(a.Replicas) != rf {
				return kafkaerr.Refuse(kafkaerr.ErrInvalidReplicaAssignment, "The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).", len(a.Replicas), rf)
			}
			var ids []uint64
			for _, r := range a.Replicas {
				if _, ok := brokers[uint64(r)]; !ok || r < 0 {
					return kafkaerr.Refuse(kafkaerr.ErrInvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no broker with that ID is registered.", r)
				}
				if slices.Contains(ids, uint64(r)) {
					return kafkaerr.Refuse(kafkaerr.ErrInvalidReplicaAssignment, "The manual partition assignment includes the broker %d more than once.", r)
				}
				ids = append(ids, uint64(r))
			}
			assign = append(assign, ids)
		}
	}
	if validateOnly {
		return nil
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	err := b.cluster.CreatePartitions(ctx, t.Name, int(rt.Count), assign)
	switch {
	case err == nil:
	case errors.Is(err, cluster.ErrUnknownTopic):
		return kafkaerr.Refuse(kafkaerr.ErrUnknownTopic, "The topic '%s' does not exist.", t.Name)
	case errors.Is(err, cluster.ErrPartitionsConflict), errors.Is(err, cluster.ErrNotMorePartitions):
		return kafkaerr.Refuse(kafkaerr.ErrInvalidPartitions, "The partition count of topic '%s' changed meanwhile; describe it and retry.", t.Name)
	case ctx.Err() != nil:
		return kafkaerr.Refuse(kafkaerr.ErrRequestTimedOut, "Adding partitions to topic '%s' was not applied in time (no metadata quorum?).", t.Name)
	case err != nil:
		return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "%v", err)
	}
	return nil
}

// replicateTopicDelete deletes a replicated topic through the metadata
// log (topics.Options.ReplicateDelete): every broker deletes its
// replicas of the topic's partitions and drops its offsets and
// share-group state as it applies the deletion; this one has when it
// returns.
func (b *Broker) replicateTopicDelete(t *topics.Topic) error {
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	err := b.cluster.DeleteTopic(ctx, t.Name, t.ID)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cluster.ErrUnknownTopic):
		return kafkaerr.ErrUnknownTopic // deleted meanwhile
	case ctx.Err() != nil:
		return kafkaerr.Refuse(kafkaerr.ErrRequestTimedOut, "The deletion of topic '%s' was not applied in time (no metadata quorum?).", t.Name)
	default:
		return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "%v", err)
	}
}

// replicateTopicConfigs changes a replicated topic's configs through the
// metadata log (topics.Options.ReplicateConfigs): read, update, and
// propose the result for the version read; when another broker's change
// came first, again from what it left.
func (b *Broker) replicateTopicConfigs(t *topics.Topic, validateOnly bool, update func(cur map[string]string) (map[string]string, error)) error {
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	for {
		cur, version, ok := b.cluster.TopicConfigs(t.Name)
		if !ok {
			return kafkaerr.Refuse(kafkaerr.ErrUnknownTopic, "The topic '%s' does not exist.", t.Name)
		}
		mine := maps.Clone(cur)
		if mine == nil {
			mine = map[string]string{}
		}
		next, err := update(mine)
		if err != nil || validateOnly {
			return err
		}
		err = b.cluster.AlterTopicConfigs(ctx, t.Name, version, next)
		switch {
		case errors.Is(err, cluster.ErrConfigConflict):
			continue
		case errors.Is(err, cluster.ErrUnknownTopic):
			return kafkaerr.Refuse(kafkaerr.ErrUnknownTopic, "The topic '%s' does not exist.", t.Name)
		case ctx.Err() != nil:
			return kafkaerr.Refuse(kafkaerr.ErrRequestTimedOut, "The change of the configs of topic '%s' was not applied in time (no metadata quorum?).", t.Name)
		case err != nil:
			return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "%v", err)
		}
		return nil
	}
}

// clusterReplicationFactor is the replication factor of topic as
// created (its first partition's replicas), or, for a topic not
// created, the one a CreateTopics asking rf gets: -1 is
// default.replication.factor, every voter (controller.quorum.voters)
// when that is 0: not every registered broker, which a topic created
// while the others are still registering would take for fewer.
func (b *Broker) clusterReplicationFactor(topic string, rf int16) int16 {
	if rs := b.cluster.Replicas(topic, 0); len(rs) > 0 {
		return int16(len(rs))
	}
	if rf != -1 {
		return rf
	}
	if b.cfg.DefaultReplicationFactor > 0 {
		return b.cfg.DefaultReplicationFactor
	}
	return int16(b.cluster.VoterCount())
}

// clusterBrokers lists the registered brokers for Metadata, and the
// controller (the metadata group's leader; -1 while there is none).
func (b *Broker) clusterBrokers() ([]kmsg.MetadataResponseBroker, int32) {
	im := b.cluster.Brokers()
	var out []kmsg.MetadataResponseBroker
	for _, id := range im.BrokerIDs() {
		rb := im.Brokers[id]
		br := kmsg.NewMetadataResponseBroker()
		br.NodeID, br.Host, br.Port = int32(id), rb.Host, rb.Port
		if rb.Rack != "" {
			rack := rb.Rack
			br.Rack = &rack
		}
		out = append(out, br)
	}
	controller := int32(b.cluster.MetadataLeader())
	if controller == 0 {
		controller = -1
	}
	return out, controller
}

// clusterPartitionMetadata fills partition index of topic's leader,
// epoch, replicas and ISR: from its raft group when this broker hosts
// it, otherwise from the state its leader published; its offline
// replicas are those on fenced brokers.
func (b *Broker) clusterPartitionMetadata(topic string, index int32, sp *kmsg.MetadataResponseTopicPartition) {
	name := cluster.PartitionName(topic, index)
	sp.Replicas, sp.ISR = nil, nil
	for _, id := range b.cluster.Replicas(topic, index) {
		sp.Replicas = append(sp.Replicas, int32(id))
	}
	sp.OfflineReplicas = sp.OfflineReplicas[:0]
	for _, id := range sp.Replicas {
		if b.cluster.Fenced(uint64(id)) {
			sp.OfflineReplicas = append(sp.OfflineReplicas, id) // its broker is fenced
		}
	}
	st, _ := b.cluster.Leadership(name)
	sp.Leader, sp.LeaderEpoch = int32(st.Leader), int32(st.Term)
	switch {
	case st.Leader != 0:
	case st.LastLeader != 0:
		// An election is under way: the last leader is named, as Kafka's
		// metadata names a failed leader until a new one is chosen;
		// clients find it gone or no longer leading, and ask again.
		sp.Leader, sp.LeaderEpoch = int32(st.LastLeader), int32(st.LastTerm)
	default:
		// No leader known at all: a new partition before its first
		// election, or a broker back from a restart that has heard from
		// none while its metadata log holds no state for the partition.
		// A replica stands in, with an unknown epoch: asked, it answers
		// NOT_LEADER_OR_FOLLOWER, which every client retries after a
		// refresh, where a leader of -1 (LEADER_NOT_AVAILABLE) makes
		// kafka-go's Writer fail the write at once ("topic partition has
		// no leader"). Kafka's metadata names no leader only when none of
		// the in-sync replicas is alive, which here the raft group would
		// learn first; until then it is a guess, as a stale leader is.
		sp.Leader, sp.LeaderEpoch = b.clusterStandIn(sp.Replicas, sp.OfflineReplicas), -1
		if sp.Leader < 0 {
			sp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
	}
	sp.ISR = clusterISR(b.cluster, name, uint64(sp.LeaderEpoch), sp.Replicas)
}

// clusterStandIn is the replica Metadata names for a partition with no
// leader known (clusterPartitionMetadata): this broker when it is one,
// else the first replica not offline, else the first; -1 if none.
func (b *Broker) clusterStandIn(replicas, offline []int32) int32 {
	self := int32(b.cfg.NodeID)
	if slices.Contains(replicas, self) {
		return self
	}
	for _, id := range replicas {
		if !slices.Contains(offline, id) {
			return id
		}
	}
	if len(replicas) > 0 {
		return replicas[0]
	}
	return -1
}

// clusterISR is a partition's in-sync replicas as its leader last
// published them for term (cluster.PartitionState), in replica order;
// until it has published for this term, every replica.
func clusterISR(c *cluster.Node, name string, term uint64, replicas []int32) []int32 {
	ps, ok := c.PartitionState(name)
	if !ok || ps.Term != term || term == 0 {
		return replicas
	}
	var isr []int32
	for _, id := range replicas {
		if slices.Contains(ps.ISR, uint64(id)) {
			isr = append(isr, id)
		}
	}
	return isr
}

// clusterHasTopic reports whether the metadata log holds topic name
// (false on a single node).
func (b *Broker) clusterHasTopic(name string) bool {
	return b.cluster != nil && b.cluster.HasTopic(name)
}

// clusterCoordinator is the broker that coordinates key (a group, a
// transactional id) in a cluster: coordinator state is not replicated
// yet, so each key lives on one broker, picked by a hash of the key over
// the registered brokers, the same answer on every broker. -1: none
// registered.
func (b *Broker) clusterCoordinator(key string) (int32, string, int32) {
	im := b.cluster.Brokers()
	ids := im.BrokerIDs()
	if len(ids) == 0 {
		return -1, "", -1
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	br := im.Brokers[ids[h.Sum32()%uint32(len(ids))]]
	return int32(br.ID), br.Host, br.Port
}

// clusterLeaderHints fills KIP-951's hints into a Produce response of
// version 10 or later: each NOT_LEADER_OR_FOLLOWER partition gets the
// leader and epoch this broker knows (-1 and -1 during an election), and
// the response each named leader's endpoint.
func (b *Broker) clusterLeaderHints(version int16, resp *kmsg.ProduceResponse) {
	if b.cluster == nil || version < 10 {
		return
	}
	var im *cluster.Image
	named := map[int32]bool{}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			sp := &rt.Partitions[j]
			if sp.ErrorCode != kerr.NotLeaderForPartition.Code {
				continue
			}
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
			st, ok := b.cluster.Leadership(cluster.PartitionName(rt.Topic, sp.Partition))
			if !ok || st.Leader == 0 || st.IsLeader {
				continue
			}
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = int32(st.Leader), int32(st.Term)
			if named[int32(st.Leader)] {
				continue
			}
			if im == nil {
				c := b.cluster.Brokers()
				im = &c
			}
			br, ok := im.Brokers[st.Leader]
			if !ok {
				continue
			}
			named[int32(st.Leader)] = true
			rb := kmsg.NewProduceResponseBroker()
			rb.NodeID, rb.Host, rb.Port = int32(br.ID), br.Host, br.Port
			if br.Rack != "" {
				rack := br.Rack
				rb.Rack = &rack
			}
			resp.Brokers = append(resp.Brokers, rb)
		}
	}
}

// absentPartitionCode answers a request for partition index of topic
// that this broker has no log of: in a cluster, a partition that exists
// on other brokers only is NOT_LEADER_OR_FOLLOWER (the client finds its
// leader in Metadata); anything else UNKNOWN_TOPIC_OR_PARTITION.
func (b *Broker) absentPartitionCode(topic string, index int32) int16 {
	if b.cluster != nil && b.topics.HasPartition(topic, index) {
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.UnknownTopicOrPartition.Code
}

// clusterCode is the Kafka error code of a cluster produce's failure.
func clusterCode(err error) int16 {
	var nl *cluster.ErrNotLeader
	switch {
	case errors.As(err, &nl), errors.Is(err, cluster.ErrUnknownPartition), errors.Is(err, replica.ErrStopped):
		return kerr.NotLeaderForPartition.Code // stopped: this broker is shutting down
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, replica.ErrNotEnoughReplicas):
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, replica.ErrNotEnoughReplicasAfterAppend):
		return kerr.NotEnoughReplicasAfterAppend.Code
	}
	return kafkaerr.Code(err)
}

type clusterResult struct {
	res slog.AppendResult
	err error
}
