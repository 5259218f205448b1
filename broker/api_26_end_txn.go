package broker

// EndTxn (26).
//
// Behavior: commits or aborts the producer's Ongoing transaction (see
// txn.go): PrepareCommit/PrepareAbort is written to badger, a marker is
// appended to every partition of the transaction and fsynced, a commit's
// offsets become visible to their groups, CompleteCommit/CompleteAbort is
// written, and then the answer goes out. Kafka's rules otherwise: an
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
// v4 only allows TRANSACTION_ABORTABLE, which we never return. v5
// (KIP-890 part 2, an epoch bump per transaction) is not served.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerSimple(26, 0, 4, handleEndTxn) }

func handleEndTxn(c *conn, req *kmsg.EndTxnRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	t, code := b.txns.lockChecked(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Version, 2)
	if t == nil {
		resp.ErrorCode = code
		return resp
	}
	defer t.mu.Unlock()
	same := func(commitState txnState) int16 {
		if (commitState == txnPrepareCommit || commitState == txnCompleteCommit) == req.Commit {
			return 0
		}
		return kerr.InvalidTxnState.Code
	}
	switch st := t.mu.State; st {
	case txnOngoing:
		if err := b.txns.endTxnLocked(t, req.Commit, time.Now()); err != nil {
			resp.ErrorCode = kerr.NotCoordinator.Code
		}
	case txnCompleteCommit, txnCompleteAbort:
		resp.ErrorCode = same(st)
	case txnPrepareCommit, txnPrepareAbort:
		if resp.ErrorCode = same(st); resp.ErrorCode == 0 {
			resp.ErrorCode = kerr.ConcurrentTransactions.Code
		}
	default: // Empty: no transaction
		resp.ErrorCode = kerr.InvalidTxnState.Code
	}
	return resp
}
