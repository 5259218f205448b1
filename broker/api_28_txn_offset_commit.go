package broker

// TxnOffsetCommit (28).
//
// Behavior: adds offsets to the producer's transaction. They stay
// pending, stored with the transaction in badger (durable before the
// answer), and become the group's committed offsets only when the
// transaction commits (EndTxn, or the completion after a restart); an
// abort drops them. As in Kafka, a commit or deletion made after this
// one (a plain OffsetCommit, another transaction's TxnOffsetCommit,
// OffsetDelete, DeleteGroups, deleting the topic) wins: the
// transaction's offset is then not applied (groups/txn_offsets.go). While they
// are pending, OffsetFetch with
// RequireStable answers UNSTABLE_OFFSET_COMMIT for those partitions
// (until a deletion of the partition, which removes them in Kafka).
//
// Checks: an empty TransactionalID is INVALID_REQUEST and an empty group
// INVALID_GROUP_ID for every partition; an unknown transactional id or
// another producer id INVALID_PRODUCER_ID_MAPPING; another epoch
// INVALID_PRODUCER_EPOCH (what Kafka's offsets log answers a fenced
// producer); a group not added with AddOffsetsToTxn, or no Ongoing
// transaction, INVALID_TXN_STATE. The group is then checked as Kafka's
// coordinator checks a transactional commit: a group that does not exist
// is accepted only from a "simple" committer (generation -1, which v0-v2
// always are), and created as Kafka creates it (an empty classic group
// without protocol type, kept while a transaction holds offsets for it,
// and after a restart), and otherwise gets ILLEGAL_GENERATION; a classic group
// needs a current member and generation (UNKNOWN_MEMBER_ID,
// ILLEGAL_GENERATION, FENCED_INSTANCE_ID) unless the commit is simple; a
// KIP-848 group needs the member's current epoch (ILLEGAL_GENERATION
// otherwise). Per partition: UNKNOWN_TOPIC_OR_PARTITION,
// OFFSET_METADATA_TOO_LARGE. Nothing is stored when any check fails.
//
// The group is locked from its check until the offsets are pending,
// durable and stamped. Offset expiry and deletions look at a group's
// pending offsets under that lock, so none of them falls between the
// two: a deletion chosen without this commit's offset but written after
// it would win over it at the commit. The partitions are checked under
// the lock too: a topic deleted before gets UNKNOWN_TOPIC_OR_PARTITION,
// as in Kafka; one deleted after finds the offsets pending, and its
// deletion removes them (dropTopicOffsets).
//
// Version notes: v1 is v0; v2 adds the committed leader epoch; v3 adds
// generation, member id and instance id (KIP-447) and is flexible; v4
// only allows TRANSACTION_ABORTABLE, never returned. v5 is KIP-890 part
// 2: the group is added to the transaction by the commit itself (no
// AddOffsetsToTxn), starting the transaction if none is open, and
// CONCURRENT_TRANSACTIONS while the previous one is being completed; the
// addition is durable with the offsets. v6 (topic ids) is not served.
//
// Authorization: Write on the transactional id (every partition
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Read on the group (every
// partition GROUP_AUTHORIZATION_FAILED), then Read on each topic
// (TOPIC_AUTHORIZATION_FAILED for its partitions; the others are still
// committed, as Kafka).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(28, 0, 5, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(c *conn, req *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	code := int16(0)
	switch {
	case !c.mayTxn(acl.Write, req.TransactionalID):
		code = kerr.TransactionalIDAuthorizationFailed.Code
	case !c.mayGroup(acl.Read, req.Group):
		code = kerr.GroupAuthorizationFailed.Code
	}
	kept, denied, codes := authzSplit(c, req.Topics, func(rt *kmsg.TxnOffsetCommitRequestTopic) int16 {
		return c.topicCheck(code, acl.Read, rt.Topic, [16]byte{}, false)
	})
	if len(denied) == 0 && code == 0 {
		return c.b.txns.TxnOffsetCommit(req)
	}
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	if len(kept) > 0 {
		r := *req
		r.Topics = kept
		resp = c.b.txns.TxnOffsetCommit(&r).(*kmsg.TxnOffsetCommitResponse)
	}
	for i, rt := range denied {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, codes[i]
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
