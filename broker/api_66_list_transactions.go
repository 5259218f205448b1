package broker

// ListTransactions (66).
//
// Behavior: lists every transactional id with its producer id and state,
// filtered by StateFilters (Kafka's state names; names we do not know are
// returned in UnknownStateFilters and match nothing), ProducerIDFilters,
// DurationFilterMillis (v1+, KIP-994: only transactions open longer than
// that; -1 or less: no filter) and TransactionalIDPattern (v2+,
// KIP-1152: an RE2 regular expression the whole id must match; empty or
// null: no filter; an invalid one is INVALID_REGULAR_EXPRESSION). Ids
// that only ever got as far as a failed InitProducerId are not listed.
//
// Version notes: v0; v1 adds the duration filter; v2 the id pattern.
//
// Authorization: only the transactional ids the caller may Describe are
// listed.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(66, 0, 2, handleListTransactions) }

func handleListTransactions(c *conn, req *kmsg.ListTransactionsRequest) kmsg.Response {
	resp := c.b.txns.List(req).(*kmsg.ListTransactionsResponse)
	if c.b.authz != nil {
		kept := resp.TransactionStates[:0]
		for _, ts := range resp.TransactionStates {
			if c.visible(acl.Describe, acl.TransactionalID, ts.TransactionalID) {
				kept = append(kept, ts)
			}
		}
		resp.TransactionStates = kept
	}
	return resp
}
