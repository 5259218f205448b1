package broker

// AddPartitionsToTxn (24).
//
// Behavior: adds partitions to the producer's transaction, moving it to
// Ongoing (its timeout starts with the first partition). Checks, in
// Kafka's order: an empty TransactionalID is INVALID_REQUEST for every
// partition; an unknown topic or partition gets
// UNKNOWN_TOPIC_OR_PARTITION and every other partition of that
// transaction OPERATION_NOT_ATTEMPTED, nothing being added; an unknown id
// or another producer id INVALID_PRODUCER_ID_MAPPING; another epoch
// PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2); a transaction being
// completed CONCURRENT_TRANSACTIONS. Partitions already in the Ongoing
// transaction need no write; otherwise the new partition set is durable
// before the answer (NOT_COORDINATOR if it cannot be written). A produce
// of a transactional batch to a partition not added gets
// INVALID_TXN_STATE (api_00_produce.go).
//
// v4+ is the batched form brokers use (KIP-890 part 1): several
// transactions per request, each answered separately, each either an add
// as above or, with VerifyOnly, a check that changes nothing: with the
// same id, producer and state checks, a partition in the transaction gets
// NONE and one not in it TRANSACTION_ABORTABLE, as Kafka's
// TransactionCoordinator.handleVerifyPartitionsInTransaction answers.
// Kafka requires CLUSTER_ACTION for v4+; Shoal has no ACLs, so any client
// may send it.
//
// Version notes: v1 is v0; v2 allows PRODUCER_FENCED; v3 is flexible; v4
// batches transactions and adds VerifyOnly; v5 allows
// TRANSACTION_ABORTABLE.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerSimple(24, 0, 5, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(c *conn, req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		topics := make([]txnTopicParts, len(req.Topics))
		for i, rt := range req.Topics {
			topics[i] = txnTopicParts{rt.Topic, rt.Partitions}
		}
		codes := c.b.txns.addPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, topics, req.Version, false)
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
	for _, tx := range req.Transactions {
		topics := make([]txnTopicParts, len(tx.Topics))
		for i, rt := range tx.Topics {
			topics[i] = txnTopicParts{rt.Topic, rt.Partitions}
		}
		codes := c.b.txns.addPartitions(tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, topics, req.Version, tx.VerifyOnly)
		rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtx.TransactionalID = tx.TransactionalID
		for i, rt := range tx.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			st.Topic = rt.Topic
			for j, p := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				sp.Partition, sp.ErrorCode = p, codes[i][j]
				st.Partitions = append(st.Partitions, sp)
			}
			rtx.Topics = append(rtx.Topics, st)
		}
		resp.Transactions = append(resp.Transactions, rtx)
	}
	return resp
}

// txnTopicParts is one topic's partitions in an AddPartitionsToTxn.
type txnTopicParts struct {
	topic      string
	partitions []int32
}

// addPartitions serves one transaction of an AddPartitionsToTxn: an add,
// or with verifyOnly a check. It returns a code per partition, in the
// request's order.
func (c *txnCoordinator) addPartitions(id string, pid int64, epoch int16, topics []txnTopicParts, version int16, verifyOnly bool) [][]int16 {
	b := c.b
	now := time.Now()
	codes := make([][]int16, len(topics))
	setAll := func(code int16) [][]int16 {
		for i := range codes {
			for j := range codes[i] {
				if codes[i][j] == 0 {
					codes[i][j] = code
				}
			}
		}
		return codes
	}
	unknown := false
	for i, rt := range topics {
		codes[i] = make([]int16, len(rt.partitions))
		for j, p := range rt.partitions {
			if b.topics.partition(rt.topic, p) == nil {
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
				unknown = true
			}
		}
	}
	switch {
	case unknown:
		return setAll(kerr.OperationNotAttempted.Code)
	case id == "":
		return setAll(kerr.InvalidRequest.Code)
	}
	t, code := c.lockChecked(id, pid, epoch, version, 2)
	if t == nil {
		return setAll(code)
	}
	defer t.mu.Unlock()
	switch t.mu.State {
	case txnPrepareCommit, txnPrepareAbort:
		return setAll(kerr.ConcurrentTransactions.Code)
	}
	if verifyOnly {
		for i, rt := range topics {
			for j, p := range rt.partitions {
				if _, ok := t.mu.partitions[groupTP{rt.topic, p}]; !ok {
					codes[i][j] = kerr.TransactionAbortable.Code
				}
			}
		}
		return codes
	}
	if t.mu.State == txnOngoing {
		have := true
		for _, rt := range topics {
			for _, p := range rt.partitions {
				if _, ok := t.mu.partitions[groupTP{rt.topic, p}]; !ok {
					have = false
				}
			}
		}
		if have {
			return codes // nothing new: no write
		}
	}
	snap := t.snapshotLocked()
	t.beginLocked(now)
	for _, rt := range topics {
		for _, p := range rt.partitions {
			t.mu.partitions[groupTP{rt.topic, p}] = struct{}{}
		}
	}
	if err := c.persistLocked(t, now); err != nil {
		t.restoreLocked(snap)
		return setAll(kerr.NotCoordinator.Code)
	}
	return codes
}
