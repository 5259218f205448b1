package broker

// ListOffsets (2).
//
// Behavior: per partition, by Timestamp:
//
//   - -1 (latest): for consumers (ReplicaID -1), the high watermark under
//     read_uncommitted and the last stable offset (below any open
//     transaction) under read_committed (IsolationLevel 1, v2+). Under the
//     default fsync policy both cover only fsynced data. Other replica ids
//     (debugging tools) get the log end offset, as in Kafka.
//   - -2 (earliest) and -4 (earliest local, KIP-405): the log start
//     offset; nothing is tiered, so the two are the same.
//   - -3 (max timestamp, KIP-734): the offset and timestamp of the record
//     with the largest timestamp (inside a compressed batch, the batch's
//     first offset); -1/-1 for an empty log or while that record is above
//     the high watermark, as Kafka answers.
//   - -5 (latest tiered, KIP-1005): -1/-1, nothing is tiered, as Kafka
//     answers without remote storage.
//   - >= 0: the first offset below the high watermark whose record
//     timestamp is >= Timestamp, with that record's timestamp; -1/-1 when
//     there is none.
//
// Special timestamps sent below the version that introduced them, and
// other negative timestamps, get UNSUPPORTED_VERSION for that partition;
// a partition listed twice gets INVALID_REQUEST for each entry; an
// unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION. A
// CurrentLeaderEpoch (v4+) other than -1 or 0 (our only epoch) gets
// UNKNOWN_LEADER_EPOCH when newer and FENCED_LEADER_EPOCH when older, as
// in Fetch. Answers carry leader epoch 0, or -1 with no offset.
// Authorization: Describe on each topic (TOPIC_AUTHORIZATION_FAILED per
// partition, before any other check).
//
// Version notes: v0 (OldStyleOffsets) is gone from Kafka 4 and not
// served; v1 returns one offset and its timestamp; v2 adds
// IsolationLevel; v3 is the same as v2; v4 adds leader epochs; v5 is the
// same as v4 (it only allows OFFSET_NOT_AVAILABLE, which a single replica
// never needs); v6 is flexible; v7 allows -3; v8 allows -4; v9 allows -5;
// v10 adds TimeoutMillis, which only bounds remote-storage lookups and so
// changes nothing here. v11 (-6, earliest pending upload) is not served.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/topics"
)

func init() { registerSimple(2, 1, 10, handleListOffsets) }

// listOffsetsMinVersion is the first request version allowed to use each
// special timestamp.
var listOffsetsMinVersion = map[int64]int16{-1: 1, -2: 1, -3: 7, -4: 8, -5: 9}

func handleListOffsets(c *conn, req *kmsg.ListOffsetsRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	seen := map[tpKey]int{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			seen[tpKey{rt.Topic, rp.Partition}]++
		}
	}
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		denied := !c.mayTopic(acl.Describe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			minVersion, special := listOffsetsMinVersion[rp.Timestamp]
			var p *topics.Partition
			var epoch int32
			switch {
			case denied:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case seen[tpKey{rt.Topic, rp.Partition}] > 1:
				sp.ErrorCode = kerr.InvalidRequest.Code
			case rp.Timestamp < 0 && (!special || req.Version < minVersion):
				sp.ErrorCode = kerr.UnsupportedVersion.Code
			default:
				if p = b.topics.Partition(rt.Topic, rp.Partition); p == nil {
					sp.ErrorCode = b.absentPartitionCode(rt.Topic, rp.Partition)
				} else {
					epoch, sp.ErrorCode = b.leaderState(p, rp.CurrentLeaderEpoch)
				}
			}
			if sp.ErrorCode == 0 {
				sp.Offset, sp.Timestamp = listOffset(p, rp.Timestamp, req.ReplicaID == -1, req.IsolationLevel == 1)
				if sp.Offset >= 0 {
					sp.LeaderEpoch = epoch // the current one (Kafka gives the found record's)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// listOffset answers one partition: offset and timestamp, -1 for none.
func listOffset(p *topics.Partition, ts int64, consumer, readCommitted bool) (offset, timestamp int64) {
	switch ts {
	case -1:
		if !consumer {
			return p.Log.LogEndOffset(), -1
		}
		if readCommitted {
			return p.Log.LastStableOffset(), -1
		}
		return p.Log.HighWatermark(), -1
	case -2, -4:
		return p.Log.LogStartOffset(), -1
	case -3:
		off, t := p.Log.MaxTimestamp()
		if off < 0 || off >= p.Log.HighWatermark() {
			return -1, -1
		}
		return off, t
	case -5:
		return -1, -1
	default:
		off, t, found := p.Log.OffsetForTimestamp(ts)
		if !found {
			return -1, -1
		}
		return off, t
	}
}
