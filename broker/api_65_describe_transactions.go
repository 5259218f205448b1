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
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerSimple(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(c *conn, req *kmsg.DescribeTransactionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		ts := kmsg.NewDescribeTransactionsResponseTransactionState()
		ts.TransactionalID = id
		t := c.b.txns.lock(id, false)
		if t == nil || t.mu.ProducerID < 0 {
			if t != nil {
				t.mu.Unlock()
			}
			ts.ErrorCode = kerr.TransactionalIDNotFound.Code
			ts.ProducerID, ts.ProducerEpoch, ts.StartTimestamp = -1, -1, -1
			resp.TransactionStates = append(resp.TransactionStates, ts)
			continue
		}
		ts.State = t.mu.State.String()
		ts.TimeoutMillis = t.mu.TimeoutMs
		ts.StartTimestamp = t.mu.StartMs
		ts.ProducerID, ts.ProducerEpoch = t.mu.ProducerID, t.mu.Epoch
		byTopic := map[string][]int32{}
		for tp := range t.mu.partitions {
			byTopic[tp.topic] = append(byTopic[tp.topic], tp.partition)
		}
		t.mu.Unlock()
		names := make([]string, 0, len(byTopic))
		for n := range byTopic {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			tt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			tt.Topic = n
			tt.Partitions = byTopic[n]
			sort.Slice(tt.Partitions, func(i, j int) bool { return tt.Partitions[i] < tt.Partitions[j] })
			ts.Topics = append(ts.Topics, tt)
		}
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp
}
