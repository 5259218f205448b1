package broker

// AddPartitionsToTxn (24).
//
// Behavior: adds partitions to the producer's transaction, moving it to
// Ongoing (its timeout starts with the first partition). Checks, in
// Kafka's order: an empty TransactionalID is INVALID_REQUEST for every
// partition; an unknown id or another producer id
// INVALID_PRODUCER_ID_MAPPING; another epoch PRODUCER_FENCED
// (INVALID_PRODUCER_EPOCH before v2); a transaction being completed
// CONCURRENT_TRANSACTIONS. An unknown topic or partition gets
// UNKNOWN_TOPIC_OR_PARTITION and every other partition of the request
// OPERATION_NOT_ATTEMPTED, nothing being added. The new partition set is
// durable before the answer (NOT_COORDINATOR if it cannot be written).
// A produce of a transactional batch to a partition not added gets
// INVALID_TXN_STATE (api_00_produce.go).
//
// Version notes: v1 is v0; v2 allows PRODUCER_FENCED; v3 is flexible.
// v4+ (the batched, broker-to-broker verify-only form of KIP-890) and v5
// are not served: clients use v3 and below.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerSimple(24, 0, 3, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(c *conn, req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	now := time.Now()
	codes := make([][]int16, len(req.Topics))
	setAll := func(code int16) {
		for i := range codes {
			for j := range codes[i] {
				codes[i][j] = code
			}
		}
	}
	unknown := false
	for i, rt := range req.Topics {
		codes[i] = make([]int16, len(rt.Partitions))
		for j, p := range rt.Partitions {
			if b.topics.partition(rt.Topic, p) == nil {
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
				unknown = true
			}
		}
	}
	answer := func() kmsg.Response {
		for i, rt := range req.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = rt.Topic
			for j, p := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, codes[i][j]
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	if req.TransactionalID == "" {
		setAll(kerr.InvalidRequest.Code)
		return answer()
	}
	if unknown {
		for i := range codes {
			for j := range codes[i] {
				if codes[i][j] == 0 {
					codes[i][j] = kerr.OperationNotAttempted.Code
				}
			}
		}
		return answer()
	}
	t := b.txns.lock(req.TransactionalID, false)
	if t == nil {
		setAll(kerr.InvalidProducerIDMapping.Code)
		return answer()
	}
	defer t.mu.Unlock()
	if code := t.checkProducerLocked(req.ProducerID, req.ProducerEpoch, req.Version, 2); code != 0 {
		setAll(code)
		return answer()
	}
	switch t.mu.State {
	case txnPrepareCommit, txnPrepareAbort:
		setAll(kerr.ConcurrentTransactions.Code)
		return answer()
	case txnOngoing:
		have := true
		for _, rt := range req.Topics {
			for _, p := range rt.Partitions {
				if _, ok := t.mu.partitions[groupTP{rt.Topic, p}]; !ok {
					have = false
				}
			}
		}
		if have {
			return answer() // nothing new: no write
		}
	}
	snap := t.snapshotLocked()
	t.beginLocked(now)
	for _, rt := range req.Topics {
		for _, p := range rt.Partitions {
			t.mu.partitions[groupTP{rt.Topic, p}] = struct{}{}
		}
	}
	if err := b.txns.persistLocked(t, now); err != nil {
		t.restoreLocked(snap)
		setAll(kerr.NotCoordinator.Code)
	}
	return answer()
}
