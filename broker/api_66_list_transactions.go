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

import (
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerSimple(66, 0, 2, handleListTransactions) }

func handleListTransactions(c *conn, req *kmsg.ListTransactionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var re *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		var err error
		if re, err = regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$"); err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp
		}
	}
	states := map[txnState]bool{}
	for _, name := range req.StateFilters {
		if st, ok := parseTxnState(name); ok {
			states[st] = true
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	pids := map[int64]bool{}
	for _, id := range req.ProducerIDFilters {
		pids[id] = true
	}
	now := time.Now().UnixMilli()
	for _, t := range c.b.txns.all() {
		t.mu.Lock()
		pid, st, start := t.mu.ProducerID, t.mu.State, t.mu.StartMs
		t.mu.Unlock()
		switch {
		case pid < 0:
			continue
		case len(req.StateFilters) > 0 && !states[st]:
			continue
		case len(pids) > 0 && !pids[pid]:
			continue
		case req.Version >= 1 && req.DurationFilterMillis >= 0 && (start < 0 || now-start <= req.DurationFilterMillis):
			continue
		case re != nil && !re.MatchString(t.id):
			continue
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = t.id, pid, st.String()
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp
}
