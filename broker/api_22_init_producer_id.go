package broker

// InitProducerId (22).
//
// Behavior: serves idempotent producers: a null TransactionalID gets a
// fresh producer id with epoch 0. Ids come from a durable badger sequence
// (meta.Store.NextProducerID), so an id is never handed out twice, even
// across restarts. As in Kafka, a request without a transactional id is
// always given a new id: an idempotent producer that sends its current
// id and epoch to bump the epoch (KIP-360, v3+) simply gets a new id,
// whose sequences start from 0 on every partition. A ProducerID without
// an epoch, or the reverse, is INVALID_REQUEST, and an empty
// TransactionalID is INVALID_REQUEST, as in Kafka.
//
// With a TransactionalID (Kafka's TransactionCoordinator, see package txn):
// TransactionTimeoutMillis must be in (0, transaction.max.timeout.ms],
// else INVALID_TRANSACTION_TIMEOUT. A new id gets a fresh producer id at
// epoch 0; a known one gets its epoch bumped (a fresh producer id at
// epoch 0 once the epoch is exhausted), which fences the previous
// producer: its requests now get PRODUCER_FENCED and its batches
// INVALID_PRODUCER_EPOCH. An Ongoing transaction is aborted first (its
// markers carry a bumped epoch, so the old producer's late writes are
// refused). A transaction still completing (Prepare*, only after a
// marker write failed) gets CONCURRENT_TRANSACTIONS, which clients retry.
// v3+ with ProducerID/ProducerEpoch (KIP-360): the pair must be the
// current one, which is bumped, or the one the last such bump left (a
// retried bump, which gets the current pair again); otherwise
// PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4). A request naming
// no producer id, and a timeout's fence, leave no pair a retry may name,
// as Kafka's TransactionMetadata does: after a new producer took the id
// over, or the coordinator fenced a timed-out one, the old producer's
// bump is fenced. The new state is durable before the answer; a storage
// failure is NOT_COORDINATOR (retriable).
//
// Version notes: v1 is the same as v0 (throttling after the response);
// v2 is flexible; v3 adds ProducerID/ProducerEpoch for the epoch bump;
// v4 adds PRODUCER_FENCED for transactional producers; v5 (KIP-890)
// changes nothing for idempotent producers.
//
// Authorization: Write on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs
// IdempotentWrite on the cluster or, as since Kafka 3.0 (KIP-679), Write
// on some topic (CLUSTER_AUTHORIZATION_FAILED).

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(c *conn, req *kmsg.InitProducerIDRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case req.Version >= 3 && (req.ProducerID == -1) != (req.ProducerEpoch == -1):
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.TransactionalID != nil && *req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.TransactionalID != nil && !c.mayTxn(acl.Write, *req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case req.TransactionalID == nil && !c.mayCluster(acl.IdempotentWrite) && !c.mayAnyOf(acl.Write, acl.Topic):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	case req.TransactionalID != nil:
		resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode = b.txns.InitProducerID(req, time.Now())
	default:
		id, err := b.meta.NextProducerID()
		if err != nil {
			b.lg.Error("allocating a producer id failed", zap.Error(err))
			resp.ErrorCode = kerr.KafkaStorageError.Code
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
	}
	return resp
}
