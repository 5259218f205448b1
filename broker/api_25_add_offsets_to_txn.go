package broker

// AddOffsetsToTxn (25).
//
// Behavior: ties a consumer group to the producer's transaction, so that
// TxnOffsetCommit may add offsets for it; moves the transaction to
// Ongoing like AddPartitionsToTxn (Kafka adds the group's
// __consumer_offsets partition; Shoal keeps offsets in badger and records
// the group). Errors as AddPartitionsToTxn: INVALID_REQUEST for an empty
// TransactionalID, INVALID_GROUP_ID for an empty group,
// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
// before v2), CONCURRENT_TRANSACTIONS, NOT_COORDINATOR when the new state
// cannot be written (it is durable before the answer).
//
// Version notes: v1 is v0; v2 allows PRODUCER_FENCED; v3 is flexible;
// v4 only allows TRANSACTION_ABORTABLE (KIP-890 part 1), which we never
// return.
//
// Authorization: Write on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then Read on the group
// (GROUP_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(25, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(c *conn, req *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !c.mayTxn(acl.Write, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case !c.mayGroup(acl.Read, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
	default:
		return c.b.txns.AddOffsets(req)
	}
	return resp
}
