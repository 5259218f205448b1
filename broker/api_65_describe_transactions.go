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

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerSimple(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(c *conn, req *kmsg.DescribeTransactionsRequest) kmsg.Response {
	return c.b.txns.Describe(req)
}
