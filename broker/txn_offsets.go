package broker

// The group side of transactional offset commits (TxnOffsetCommit,
// api_28_txn_offset_commit.go): validating the committer against the
// group, and applying a committed transaction's offsets.

import (
	"bytes"
	"time"

	"github.com/dgraph-io/badger/v4"

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
// committed offsets: durable in badger, then visible. As in Kafka, which
// keeps the most recent of transactional and plain commits by the
// position of their records in its offsets log, an offset is skipped if
// its partition holds a commit made after it (a plain OffsetCommit, or
// another transaction's TxnOffsetCommit, with a later stamp), or was
// deleted after the decision (the write at version decided), which in
// Kafka's log follows the marker. So a completion redone, at start or
// after a failure, never moves a group back. The group is created if
// needed (a simple committer's group).
func (c *groupCoordinator) applyTxnOffsets(group string, offs map[groupTP]offsetCommit, decided uint64) error {
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
	err := c.b.meta.db.View(func(btx *badger.Txn) error {
		for tp, oc := range offs {
			later, err := laterOffsetWrite(btx, offsetKey(group, tp), oc.stamp, decided)
			if err != nil {
				return err
			}
			if !later {
				writes = append(writes, offsetWrite{tp: tp, oc: oc})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := c.b.meta.putOffsets(g.name, writes, nil); err != nil {
		return err
	}
	for _, w := range writes {
		g.mu.offsets[w.tp] = w.oc
	}
	return nil
}

// laterOffsetWrite reports whether the newest write of an offset key
// supersedes a transactional commit with stamp whose decision was
// written at version decided: a commit whose stamp (a plain commit's is
// its own version) is not below stamp, or a deletion after the decision.
// Badger keeps a deletion's version until compaction drops it, after
// which the key reads as never written. A zero stamp (none known) is
// superseded by nothing.
func laterOffsetWrite(btx *badger.Txn, key []byte, stamp, decided uint64) (bool, error) {
	it := btx.NewIterator(badger.IteratorOptions{Prefix: key, AllVersions: true})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if !bytes.Equal(item.Key(), key) {
			continue // a longer key (partition 1 and 10)
		}
		if item.IsDeletedOrExpired() {
			return item.Version() > decided, nil
		}
		if stamp == 0 {
			return false, nil
		}
		existing := item.Version()
		err := item.Value(func(v []byte) error {
			oc, err := decodeOffset(v)
			if oc.stamp != 0 {
				existing = oc.stamp
			}
			return err
		})
		return existing >= stamp, err
	}
	return false, nil
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
