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

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerSimple(25, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(c *conn, req *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	return c.b.txns.AddOffsets(req)
}
