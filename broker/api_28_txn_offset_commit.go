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
// transaction's offset is then not applied (txn_offsets.go). While they
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

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerSimple(28, 0, 5, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(c *conn, req *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	now := time.Now()
	st := b.groups.settings()
	codes := make([][]int16, len(req.Topics))
	for i, rt := range req.Topics {
		codes[i] = make([]int16, len(rt.Partitions))
	}
	setAll := func(code int16) {
		for i := range codes {
			for j := range codes[i] {
				if codes[i][j] == 0 {
					codes[i][j] = code
				}
			}
		}
	}
	answer := func() kmsg.Response {
		for i, rt := range req.Topics {
			t := kmsg.NewTxnOffsetCommitResponseTopic()
			t.Topic = rt.Topic
			for j, p := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, codes[i][j]
				t.Partitions = append(t.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	}
	switch {
	case req.TransactionalID == "":
		setAll(kerr.InvalidRequest.Code)
		return answer()
	case req.Group == "":
		setAll(kerr.InvalidGroupID.Code)
		return answer()
	}
	t := b.txns.lock(req.TransactionalID, false)
	if t == nil {
		setAll(kerr.InvalidProducerIDMapping.Code)
		return answer()
	}
	defer t.mu.Unlock()
	code := t.checkProducerLocked(req.ProducerID, req.ProducerEpoch, req.Version, 0)
	if code == kerr.ProducerFenced.Code {
		code = kerr.InvalidProducerEpoch.Code
	}
	implicit := false // the group joins the transaction with these offsets (v5+)
	if code == 0 {
		_, added := t.mu.groups[req.Group]
		switch {
		case added && t.mu.State == txnOngoing:
		case req.Version < 5:
			code = kerr.InvalidTxnState.Code
		case t.mu.State == txnPrepareCommit || t.mu.State == txnPrepareAbort:
			code = kerr.ConcurrentTransactions.Code
		default:
			implicit = true
		}
	}
	if code == 0 {
		// The last transaction's completion may still be applying its
		// offsets, which takes group locks: it is waited for (as the
		// write below would) before ours is taken.
		if err := b.txns.settleLocked(t, now); err != nil {
			code = kerr.NotCoordinator.Code
		}
	}
	var g *group
	if code == 0 {
		if h := b.cfg.txnOffsetBeforeLock; h != nil {
			h(req.Group)
		}
		g, code = b.groups.lockTxnCommit(req)
	}
	if code != 0 {
		setAll(code)
		return answer()
	}
	// The group stays locked until the offsets are pending, durable and
	// stamped: offset expiry and deletions (OffsetDelete, DeleteGroups,
	// a deleted topic) read the pending offsets under this lock, so none
	// of them can decide on a partition without this commit and write
	// its deletion after it.
	defer func() {
		g.dropIfUnusedLocked()
		g.unlock(now)
	}()
	snap := t.snapshotLocked()
	if implicit {
		t.beginLocked(now)
		t.mu.groups[req.Group] = struct{}{}
	}
	type cand struct {
		tp groupTP
		oc offsetCommit
	}
	var cands []cand
	for i, rt := range req.Topics {
		for j, p := range rt.Partitions {
			switch {
			case !b.partitionExists(rt.Topic, p.Partition):
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
			case p.Metadata != nil && utf16Len(*p.Metadata) > st.metadataMaxBytes:
				codes[i][j] = kerr.OffsetMetadataTooLarge.Code
			default:
				oc := offsetCommit{offset: p.Offset, leaderEpoch: -1, commitTime: now}
				if req.Version >= 2 {
					oc.leaderEpoch = p.LeaderEpoch
				}
				if p.Metadata != nil {
					oc.metadata = *p.Metadata
				}
				cands = append(cands, cand{groupTP{rt.Topic, p.Partition}, oc})
			}
		}
	}
	if len(cands) == 0 {
		t.restoreLocked(snap)
		return answer()
	}
	// A partition named twice counts once, its last entry winning (Kafka
	// turns the request into a map); the undo below needs one entry each.
	idx := make(map[groupTP]int, len(cands))
	uniq := cands[:0]
	for _, cd := range cands {
		if i, ok := idx[cd.tp]; ok {
			uniq[i] = cd
			continue
		}
		idx[cd.tp] = len(uniq)
		uniq = append(uniq, cd)
	}
	cands = uniq
	if h := b.cfg.txnOffsetBeforeAdd; h != nil {
		h(req.Group)
	}
	prev := map[groupTP]offsetCommit{} // the pending offsets replaced
	tps := make([]groupTP, len(cands))
	for i, cd := range cands {
		if oc, ok := t.mu.offsets[req.Group][cd.tp]; ok {
			prev[cd.tp] = oc
		}
		b.txns.addPendingOffset(t, req.Group, cd.tp, cd.oc)
		tps[i] = cd.tp
	}
	if err := b.txns.persistStampedLocked(t, now); err != nil {
		// Undo: restore replaced offsets, drop new ones.
		for _, tp := range tps {
			if oc, ok := prev[tp]; ok {
				b.txns.restorePendingOffsetLocked(t, req.Group, tp, oc)
			} else {
				b.txns.dropPendingOffsetLocked(t, req.Group, tp)
			}
		}
		t.restoreLocked(snap)
		setAll(kerr.NotCoordinator.Code)
		return answer()
	}
	b.txns.stampLocked(t, req.Group, tps)
	return answer()
}
