package broker

// DescribeTransactions (65).
//
// Behavior: for each transactional id, its state (Kafka's names: Empty,
// Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort),
// timeout, start time of the open transaction (-1 when none), producer id
// and epoch, and the partitions of the transaction by topic (in Prepare*,
// those still waiting for their marker). An unknown id gets
// TRANSACTIONAL_ID_NOT_FOUND, as in Kafka.
//
// Version notes: v0 only.
//
// Authorization: Describe on each transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it); the partitions of topics
// the caller may not Describe are left out of its answer, as Kafka.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(c *conn, req *kmsg.DescribeTransactionsRequest) kmsg.Response {
	resp := c.b.txns.Describe(req).(*kmsg.DescribeTransactionsResponse)
	if c.b.authz == nil {
		return resp
	}
	for i := range resp.TransactionStates {
		ts := &resp.TransactionStates[i]
		if !c.mayTxn(acl.Describe, ts.TransactionalID) {
			denied := kmsg.NewDescribeTransactionsResponseTransactionState()
			denied.TransactionalID, denied.ErrorCode = ts.TransactionalID, kerr.TransactionalIDAuthorizationFailed.Code
			*ts = denied
			continue
		}
		kept := ts.Topics[:0]
		for _, t := range ts.Topics {
			if c.visible(acl.Describe, acl.Topic, t.Topic) {
				kept = append(kept, t)
			}
		}
		ts.Topics = kept
	}
	return resp
}
