package broker

// EndTxn (26).
//
// Behavior: commits or aborts the producer's Ongoing transaction (see
// package txn): PrepareCommit/PrepareAbort is written to badger, a marker is
// appended to every partition of the transaction and fsynced, a commit's
// offsets become visible to their groups, CompleteCommit/CompleteAbort is
// written, and then the answer goes out (v5: once the decision is
// written, the rest following in the background). Kafka's rules: an
// empty TransactionalID is INVALID_REQUEST; an unknown id or another
// producer id INVALID_PRODUCER_ID_MAPPING; another epoch PRODUCER_FENCED
// (INVALID_PRODUCER_EPOCH before v2); no transaction (Empty) or the
// opposite outcome of the one just completed INVALID_TXN_STATE; a retry
// of the outcome just completed succeeds; a transaction still completing
// CONCURRENT_TRANSACTIONS for the same outcome and INVALID_TXN_STATE for
// the other. Nothing changes on an error. A decision that is durable but
// whose markers could not all be written is answered with success (the
// decision stands) and completed by the background retry.
//
// Version notes: v1 is v0; v2 allows PRODUCER_FENCED; v3 is flexible;
// v4 only allows TRANSACTION_ABORTABLE, which we never return. v5 is
// KIP-890 part 2: every EndTxn moves the producer to its next epoch (a
// new producer id at epoch 0 once the epoch is exhausted), which the
// markers carry and the answer returns (ProducerID, ProducerEpoch). So a
// retry arrives with the epoch just left: it succeeds (with the current
// id and epoch) when it asks for the outcome just completed, gets
// CONCURRENT_TRANSACTIONS while that outcome is still being completed,
// and INVALID_TXN_STATE for the other one; a commit at the current epoch
// with nothing open is INVALID_TXN_STATE. An abort with no transaction
// open succeeds and moves the epoch too (franz-go sends one to clear a
// transaction whose produces all failed). A v5 decision is answered once
// it is durable; its markers and offsets follow in the background
// (package txn).
//
// Authorization: Write on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(26, 0, 5, handleEndTxn) }

func handleEndTxn(c *conn, req *kmsg.EndTxnRequest) kmsg.Response {
	if !c.mayTxn(acl.Write, req.TransactionalID) {
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp
	}
	return c.b.txns.EndTxn(req)
}
