package broker

// DeleteRecords (21).
//
// Behavior: per partition, moves the log start offset up to Offset (-1
// means the high watermark) and answers the new low watermark (the log
// start offset). The log persists the new start offset before returning
// and then deletes the segments wholly below it; records below it are no
// longer served, and ListOffsets earliest answers it. An offset at or
// below the current log start changes nothing and answers the current
// one. An offset above the high watermark, or negative other than -1,
// gets OFFSET_OUT_OF_RANGE; an unknown topic or partition
// UNKNOWN_TOPIC_OR_PARTITION; a partition listed twice INVALID_REQUEST;
// one of a topic with cleanup.policy=compact (without delete)
// POLICY_VIOLATION, as Kafka.
// Failed partitions answer low watermark -1, as Kafka does. Long polls on
// a changed partition are woken, so a consumer below the new start learns
// of it at once.
//
// Version notes: v1 is the same as v0 (throttling after the response);
// v2 is flexible.
//
// Authorization: Delete on the topic (TOPIC_AUTHORIZATION_FAILED per
// partition).
//
// In a cluster the partition's leader answers (NOT_LEADER_OR_FOLLOWER
// elsewhere): the new log start offset goes through the partition's raft
// log, every replica moving to it as it applies the entry, and the
// answer waits for the leader's apply (within TimeoutMillis, else
// REQUEST_TIMED_OUT): deleted records stay deleted whichever replica
// leads next (cluster.Node.DeleteRecords).

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/topics"
)

func init() { registerSimple(21, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(c *conn, req *kmsg.DeleteRecordsRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	seen := map[tpKey]int{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			seen[tpKey{rt.Topic, rp.Partition}]++
		}
	}
	// In a cluster every partition's deletion waits for its raft commit:
	// they all run at once, under the request's one timeout, as Kafka
	// waits for them together.
	type pending struct {
		ti, pi int
		p      *topics.Partition
		offset int64
	}
	var cluster []pending
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		denied := !c.mayTopic(acl.Delete, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			p := b.topics.Partition(rt.Topic, rp.Partition)
			switch {
			case denied:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case seen[tpKey{rt.Topic, rp.Partition}] > 1:
				sp.ErrorCode = kerr.InvalidRequest.Code
			case p == nil:
				sp.ErrorCode = b.absentPartitionCode(rt.Topic, rp.Partition)
			case !p.Log.Config().Cleanup.Deletes():
				// cleanup.policy=compact: Kafka's "Records of partition
				// ... can not be deleted due to the configured policy".
				sp.ErrorCode = kerr.PolicyViolation.Code
			case b.cluster != nil:
				cluster = append(cluster, pending{len(resp.Topics), len(st.Partitions), p, rp.Offset})
			default:
				before := p.Log.LogStartOffset()
				low, err := p.Log.DeleteRecordsBefore(rp.Offset)
				if err != nil {
					sp.ErrorCode = kafkaerr.Code(err)
					if sp.ErrorCode == kerr.KafkaStorageError.Code {
						b.lg.Error("delete records failed", zapPartition(p), zapErr(err))
					}
					break
				}
				sp.LowWatermark = low
				b.deletedRecords(p, before, low)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(cluster) > 0 {
		timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
		if timeout <= 0 {
			timeout = 30 * time.Second
		}
		ctx, cancel := context.WithTimeout(b.ctx, timeout)
		defer cancel()
		var wg sync.WaitGroup
		for _, pd := range cluster {
			sp := &resp.Topics[pd.ti].Partitions[pd.pi]
			wg.Go(func() { sp.LowWatermark, sp.ErrorCode = b.clusterDeleteRecords(ctx, pd.p, pd.offset) })
		}
		wg.Wait()
	}
	return resp
}

// clusterDeleteRecords is DeleteRecords on a replicated partition
// (cluster.Node.DeleteRecords): the low watermark and the error code.
func (b *Broker) clusterDeleteRecords(ctx context.Context, p *topics.Partition, offset int64) (int64, int16) {
	before := p.Log.LogStartOffset()
	low, err := b.cluster.DeleteRecords(ctx, groupName(p), offset)
	if err != nil {
		code := clusterCode(err)
		if code == kerr.KafkaStorageError.Code {
			b.lg.Error("delete records failed", zapPartition(p), zapErr(err))
		}
		return -1, code
	}
	b.deletedRecords(p, before, low)
	return low, 0
}

// deletedRecords logs a log start offset moved from before to low and
// wakes p's long polls, so a consumer below it learns of it at once.
func (b *Broker) deletedRecords(p *topics.Partition, before, low int64) {
	if low > before {
		b.lg.Info("deleted records", zapPartition(p), zap.Int64("log_start_offset", low))
		p.Notify()
	}
}
