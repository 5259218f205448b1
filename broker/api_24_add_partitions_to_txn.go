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
// v4+ needs ClusterAction on the cluster (a top-level
// CLUSTER_AUTHORIZATION_FAILED), and nothing else: it is a broker's
// request, as in Kafka.
//
// Authorization (v0-v3): Write on the transactional id (every partition
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then Write on each topic: a
// denied topic's partitions get TOPIC_AUTHORIZATION_FAILED, the others
// UNKNOWN_TOPIC_OR_PARTITION or OPERATION_NOT_ATTEMPTED, nothing added.
//
// Version notes: v1 is v0; v2 allows PRODUCER_FENCED; v3 is flexible; v4
// batches transactions and adds VerifyOnly; v5 allows
// TRANSACTION_ABORTABLE.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/txn"
)

func init() { registerSimple(24, 0, 5, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(c *conn, req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		topics := make([]txn.TopicParts, len(req.Topics))
		for i, rt := range req.Topics {
			topics[i] = txn.TopicParts{Topic: rt.Topic, Partitions: rt.Partitions}
		}
		codes := c.addPartitionsDenied(req.TransactionalID, topics)
		if codes == nil {
			codes = c.b.txns.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, topics, req.Version, false)
		}
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
	if !c.mayCluster(acl.ClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	for _, tx := range req.Transactions {
		topics := make([]txn.TopicParts, len(tx.Topics))
		for i, rt := range tx.Topics {
			topics[i] = txn.TopicParts{Topic: rt.Topic, Partitions: rt.Partitions}
		}
		codes := c.b.txns.AddPartitions(tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, topics, req.Version, tx.VerifyOnly)
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

// addPartitionsDenied is the answer to an AddPartitionsToTxn the caller
// is not allowed (per topic, per partition), or nil when it is.
func (c *conn) addPartitionsDenied(id string, topics []txn.TopicParts) [][]int16 {
	if c.b.authz == nil {
		return nil
	}
	codes := make([][]int16, len(topics))
	fill := func(i int, code int16) {
		codes[i] = make([]int16, len(topics[i].Partitions))
		for j := range codes[i] {
			codes[i][j] = code
		}
	}
	if !c.mayTxn(acl.Write, id) {
		for i := range topics {
			fill(i, kerr.TransactionalIDAuthorizationFailed.Code)
		}
		return codes
	}
	denied := false
	for i, t := range topics {
		if !c.mayTopic(acl.Write, t.Topic) {
			fill(i, kerr.TopicAuthorizationFailed.Code)
			denied = true
		}
	}
	if !denied {
		return nil
	}
	for i, t := range topics {
		if codes[i] != nil {
			continue
		}
		codes[i] = make([]int16, len(t.Partitions))
		for j, p := range t.Partitions {
			codes[i][j] = kerr.OperationNotAttempted.Code
			if c.b.topics.Partition(t.Topic, p) == nil {
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
			}
		}
	}
	return codes
}
