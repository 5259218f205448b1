package broker

// The group side of transactional offset commits (TxnOffsetCommit,
// api_28_txn_offset_commit.go): validating the committer against the
// group, and applying a committed transaction's offsets.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// validateTxnCommit checks a TxnOffsetCommit's member against its group
// (Kafka OffsetMetadataManager.validateTransactionalOffsetCommit). It
// creates nothing.
func (c *groupCoordinator) validateTxnCommit(req *kmsg.TxnOffsetCommitRequest) int16 {
	if c.b.isShareGroup(req.Group) {
		return kerr.GroupIDNotFound.Code
	}
	simple := req.Generation < 0 && req.MemberID == "" && req.InstanceID == nil
	g := c.lockGroup(req.Group, false)
	if g == nil {
		if req.Generation < 0 {
			return 0 // a simple committer may commit to a new group
		}
		return kerr.IllegalGeneration.Code
	}
	defer g.mu.Unlock()
	if simple {
		// v0-v2 carry no member: Kafka accepts them whatever the state.
		return 0
	}
	oc := &kmsg.OffsetCommitRequest{Version: 9, Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID}
	if g.mu.cg != nil {
		code, _ := g.validateConsumerCommitLocked(oc)
		if m := g.mu.cg.members[req.MemberID]; code == 0 && m != nil && req.Generation != m.epoch {
			code = kerr.IllegalGeneration.Code
		}
		if code == kerr.StaleMemberEpoch.Code {
			code = kerr.IllegalGeneration.Code
		}
		return code
	}
	code := g.validateCommitLocked(oc)
	if code == kerr.RebalanceInProgress.Code {
		// Kafka lets a transactional commit through while the group
		// completes a rebalance at the same generation.
		code = 0
	}
	return code
}

// applyTxnOffsets makes a committed transaction's offsets the group's
// committed offsets: durable in badger, then visible. The group is
// created if needed (a simple committer's group).
func (c *groupCoordinator) applyTxnOffsets(group string, offs map[groupTP]offsetCommit) error {
	if len(offs) == 0 {
		return nil
	}
	now := time.Now()
	g := c.lockGroup(group, true)
	defer func() {
		g.dropIfUnusedLocked()
		g.unlock(now)
	}()
	writes := make([]offsetWrite, 0, len(offs))
	for tp, oc := range offs {
		writes = append(writes, offsetWrite{tp: tp, oc: oc})
	}
	if err := c.b.meta.putOffsets(g.name, writes, nil); err != nil {
		return err
	}
	for _, w := range writes {
		g.mu.offsets[w.tp] = w.oc
	}
	return nil
}

// markUnstableOffsets answers UNSTABLE_OFFSET_COMMIT (offset -1) for the
// partitions of an OffsetFetch with RequireStable that an open
// transaction holds an offset for, as Kafka does.
func (b *Broker) markUnstableOffsets(sg *kmsg.OffsetFetchResponseGroup) {
	for i := range sg.Topics {
		st := &sg.Topics[i]
		for j := range st.Partitions {
			sp := &st.Partitions[j]
			if sp.ErrorCode == 0 && b.txns.hasPendingOffset(sg.Group, groupTP{st.Topic, sp.Partition}) {
				sp.ErrorCode = kerr.UnstableOffsetCommit.Code
				sp.Offset, sp.LeaderEpoch = -1, -1
			}
		}
	}
}
