package broker

// EndTxn (26).
//
// Behavior: commits or aborts the producer's Ongoing transaction (see
// txn.go): PrepareCommit/PrepareAbort is written to badger, a marker is
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
// (txn.go).

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerSimple(26, 0, 5, handleEndTxn) }

func handleEndTxn(c *conn, req *kmsg.EndTxnRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	t := b.txns.lock(req.TransactionalID, false)
	if t == nil {
		resp.ErrorCode = kerr.InvalidProducerIDMapping.Code
		return resp
	}
	defer t.mu.Unlock()
	bump := req.Version >= 5
	same := func(st txnState) int16 {
		if (st == txnPrepareCommit || st == txnCompleteCommit) == req.Commit {
			return 0
		}
		return kerr.InvalidTxnState.Code
	}
	answer := func() kmsg.Response {
		if bump && resp.ErrorCode == 0 {
			resp.ProducerID, resp.ProducerEpoch = t.mu.ProducerID, t.mu.Epoch
			if n := t.mu.Next; n != nil {
				resp.ProducerID, resp.ProducerEpoch = n.ProducerID, n.Epoch
			}
		}
		return resp
	}
	st := t.mu.State
	if bump && t.mu.LastEnd && req.ProducerID == t.mu.LastProducerID && req.ProducerEpoch == t.mu.LastEpoch {
		// A retry of the EndTxn that moved the epoch.
		switch st {
		case txnCompleteCommit, txnCompleteAbort:
			resp.ErrorCode = same(st)
			return answer()
		case txnPrepareCommit, txnPrepareAbort:
			if resp.ErrorCode = same(st); resp.ErrorCode == 0 {
				resp.ErrorCode = kerr.ConcurrentTransactions.Code
			}
			return answer()
		}
	}
	if resp.ErrorCode = t.checkProducerLocked(req.ProducerID, req.ProducerEpoch, req.Version, 2); resp.ErrorCode != 0 {
		return resp
	}
	switch st {
	case txnOngoing:
		if err := b.txns.endTxnLocked(t, req.Commit, bump, time.Now()); err != nil {
			resp.ErrorCode = kerr.NotCoordinator.Code
		}
	case txnCompleteCommit, txnCompleteAbort, txnEmpty:
		switch {
		case bump && !req.Commit:
			// Nothing open: an empty abort, moving the epoch.
			if err := b.txns.endTxnLocked(t, false, true, time.Now()); err != nil {
				resp.ErrorCode = kerr.NotCoordinator.Code
			}
		case bump:
			// A retry comes with the epoch just left (above); at the
			// current one there is nothing to commit.
			resp.ErrorCode = kerr.InvalidTxnState.Code
		case st == txnEmpty:
			resp.ErrorCode = kerr.InvalidTxnState.Code
		default:
			resp.ErrorCode = same(st)
		}
	case txnPrepareCommit, txnPrepareAbort:
		if resp.ErrorCode = same(st); resp.ErrorCode == 0 {
			resp.ErrorCode = kerr.ConcurrentTransactions.Code
		}
	default:
		resp.ErrorCode = kerr.InvalidTxnState.Code
	}
	return answer()
}
