package broker

// OffsetForLeaderEpoch (23).
//
// Behavior: consumers (and followers) ask where a leader epoch ended, to
// detect log truncation (KIP-320). This broker has one epoch, 0, for the
// whole life of every partition, so Kafka's leader-epoch cache here is
// the single entry (epoch 0, start offset 0), and we answer as Kafka's
// cache does:
//
//   - LeaderEpoch 0 (the current epoch): epoch 0 ends at the log end
//     offset;
//   - LeaderEpoch -1 (undefined), or an epoch above 0 (one we never had):
//     leader epoch -1 and end offset -1, without an error;
//   - LeaderEpoch below -1 (older than any epoch we had): that epoch and
//     the start offset of the next epoch, 0, which is the log start
//     offset (Kafka's cache moves the first entry up with the log start).
//
// CurrentLeaderEpoch is the fencing check, as in Fetch: -1 skips it, 0 is
// ours, a newer one gets UNKNOWN_LEADER_EPOCH and an older one
// FENCED_LEADER_EPOCH. An unknown topic or partition gets
// UNKNOWN_TOPIC_OR_PARTITION. ReplicaID (v3+) is -1 for consumers; we
// answer every replica id the same way, since we are always the leader.
//
// Version notes: v0 and v1 are gone from Kafka 4 and not served; v2 adds
// CurrentLeaderEpoch and throttle time; v3 adds ReplicaID; v4 is
// flexible.
//
// Authorization: ClusterAction on the cluster, or else Describe on the
// topic (TOPIC_AUTHORIZATION_FAILED per partition), as Kafka.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(23, 2, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(c *conn, req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	clusterAction := c.visible(acl.ClusterAction, acl.Cluster, acl.ClusterName) // a replica's, for every topic
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		denied := !clusterAction && !c.mayTopic(acl.Describe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			p := b.topics.Partition(rt.Topic, rp.Partition)
			var code int16
			if p != nil && !denied {
				_, code = b.leaderState(p, rp.CurrentLeaderEpoch)
			}
			switch {
			case denied:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case p == nil:
				sp.ErrorCode = b.absentPartitionCode(rt.Topic, rp.Partition)
			case code != 0:
				sp.ErrorCode = code
			case b.cluster != nil:
				// The term cache answers as Kafka's leader-epoch cache.
				if e, off, ok, err := b.cluster.EndOffsetFor(groupName(p), rp.LeaderEpoch); err != nil {
					sp.ErrorCode = kerr.NotLeaderForPartition.Code
				} else if ok && rp.LeaderEpoch >= 0 {
					sp.LeaderEpoch, sp.EndOffset = e, off
				}
			case rp.LeaderEpoch == 0:
				sp.LeaderEpoch, sp.EndOffset = 0, p.Log.LogEndOffset()
			case rp.LeaderEpoch < -1:
				sp.LeaderEpoch, sp.EndOffset = rp.LeaderEpoch, p.Log.LogStartOffset()
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
