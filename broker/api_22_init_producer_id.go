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
// With a TransactionalID (Kafka's TransactionCoordinator, see txn.go):
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

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
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
	case req.TransactionalID != nil:
		resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode = b.txns.initProducerID(req, time.Now())
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

// initProducerID serves InitProducerId with a transactional id.
func (c *txnCoordinator) initProducerID(req *kmsg.InitProducerIDRequest, now time.Time) (int64, int16, int16) {
	timeout := req.TransactionTimeoutMillis
	if timeout <= 0 || int64(timeout) > c.b.txnSetting("transaction.max.timeout.ms") {
		return -1, -1, kerr.InvalidTransactionTimeout.Code
	}
	t := c.lock(*req.TransactionalID, true)
	defer t.mu.Unlock()
	fresh := t.mu.ProducerID < 0
	retry := false
	if req.Version >= 3 && req.ProducerID >= 0 && !fresh {
		switch {
		case t.nextPendingLocked(req.ProducerID, req.ProducerEpoch):
			return -1, -1, kerr.ConcurrentTransactions.Code // the decision that answered it is still completing
		case req.ProducerID == t.mu.ProducerID && req.ProducerEpoch == t.mu.Epoch:
		case req.ProducerID == t.mu.LastProducerID && req.ProducerEpoch == t.mu.LastEpoch && t.mu.State != txnOngoing:
			retry = true // the answer to the previous bump was lost
		default:
			return -1, -1, fencedCode(req.Version, 4)
		}
	}
	switch t.mu.State {
	case txnPrepareCommit, txnPrepareAbort:
		return -1, -1, kerr.ConcurrentTransactions.Code
	case txnOngoing:
		if err := c.abortFencingLocked(t, now); err != nil {
			c.lg.Warn("aborting the open transaction of a re-initialised producer failed", zap.String("transactional_id", t.id), zap.Error(err))
			return -1, -1, kerr.ConcurrentTransactions.Code
		}
	}
	if retry {
		return t.mu.ProducerID, t.mu.Epoch, 0
	}
	snap := t.snapshotLocked()
	if err := c.bumpEpochLocked(t); err != nil {
		t.restoreLocked(snap)
		return -1, -1, kerr.NotCoordinator.Code
	}
	if req.Version < 3 || req.ProducerID < 0 {
		// A producer starting (no producer id named) takes the
		// transactional id over: as in Kafka (lastProducerEpoch =
		// NO_PRODUCER_EPOCH), no earlier epoch may pass as a retry of a
		// bump after this one, so a zombie's KIP-360 bump with the epoch
		// just left is fenced instead of joining the new producer's
		// epoch.
		t.mu.LastProducerID, t.mu.LastEpoch = -1, -1
	}
	t.mu.TimeoutMs = timeout
	t.mu.State = txnEmpty
	t.mu.StartMs = -1
	if err := c.persistLocked(t, now); err != nil {
		t.restoreLocked(snap)
		return -1, -1, kerr.NotCoordinator.Code
	}
	return t.mu.ProducerID, t.mu.Epoch, 0
}
