package groups

// The group side of transactional offset commits (TxnOffsetCommit,
// api_28_txn_offset_commit.go): validating the committer against the
// group, and applying a committed transaction's offsets.

import (
	"bytes"
	"errors"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LockTxnCommit returns a TxnOffsetCommit's group locked, once its member
// passed Kafka's checks (OffsetMetadataManager.validateTransactionalOffsetCommit),
// or nil and the error code. A group that does not exist is created for
// a "simple" committer (generation -1), as Kafka does; otherwise it is
// ILLEGAL_GENERATION. The caller adds its pending offsets under the lock:
// offset expiry and deletions read them under it, so they see a
// TxnOffsetCommit whole or not at all (see handleTxnOffsetCommit).
func (c *Coordinator) LockTxnCommit(req *kmsg.TxnOffsetCommitRequest) (*Group, int16) {
	if c.o.IsShareGroup(req.Group) {
		return nil, kerr.GroupIDNotFound.Code
	}
	simple := req.Generation < 0 && req.MemberID == "" && req.InstanceID == nil
	g := c.lockGroup(req.Group, req.Generation < 0)
	if g == nil {
		return nil, kerr.IllegalGeneration.Code
	}
	var code int16
	oc := &kmsg.OffsetCommitRequest{Version: 9, Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID}
	switch {
	case simple:
		// v0-v2 carry no member: Kafka accepts them whatever the state.
	case g.mu.cg != nil:
		code, _ = g.validateConsumerCommitLocked(oc)
		if m := g.mu.cg.members[req.MemberID]; code == 0 && m != nil && req.Generation != m.epoch {
			code = kerr.IllegalGeneration.Code
		}
		if code == kerr.StaleMemberEpoch.Code {
			code = kerr.IllegalGeneration.Code
		}
	default:
		code = g.validateCommitLocked(oc)
		if code == kerr.RebalanceInProgress.Code {
			// Kafka lets a transactional commit through while the group
			// completes a rebalance at the same generation.
			code = 0
		}
	}
	if code != 0 {
		g.dropIfUnusedLocked()
		g.unlock(time.Now())
		return nil, code
	}
	return g, 0
}

// ApplyTxnOffsets makes a committed transaction's offsets the group's
// committed offsets: durable in badger, then visible. As in Kafka, which
// orders transactional and plain commits and deletions by the position
// of their records in its offsets log, an offset is skipped if its
// partition's newest write came after its TxnOffsetCommit (its stamp): a
// plain OffsetCommit, another transaction's TxnOffsetCommit, or a
// deletion (OffsetDelete, DeleteGroups, a deleted topic: for a
// partition an open transaction holds an offset for, these write a
// deletion mark, which compaction keeps, and offset expiry skips those
// partitions). So a completion redone, at start or after a failure,
// never moves a group back. The TxnOffsetCommit made the group; if it
// is gone (DeleteGroups, whose deletion then came after every offset
// here), it is made again only if an offset is applied.
func (c *Coordinator) ApplyTxnOffsets(group string, offs map[TP]OffsetCommit) error {
	if len(offs) == 0 {
		return nil
	}
	now := time.Now()
	g, created := c.lockGroupCreated(group, true)
	var writes, applied []offsetWrite // applied: by an earlier try of this completion
	defer func() {
		if created && len(writes)+len(applied) == 0 {
			g.removeLocked()
		} else {
			g.dropIfUnusedLocked()
		}
		g.unlock(now)
	}()
	err := c.store.DB().View(func(btx *badger.Txn) error {
		for tp, oc := range offs {
			oc.PendingSeq = 0 // an index field of pending offsets only
			switch newest, err := newestOffsetWrite(btx, OffsetKey(group, tp)); {
			case err != nil:
				return err
			case oc.Stamp == 0 || newest == 0 || newest < oc.Stamp:
				writes = append(writes, offsetWrite{tp: tp, oc: oc})
			case newest == oc.Stamp:
				// Its own write: every write has a version of its own.
				applied = append(applied, offsetWrite{tp: tp, oc: oc})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := c.store.putOffsets(g.name, writes, nil, nil); err != nil {
		return err
	}
	for _, w := range append(writes, applied...) {
		g.mu.offsets[w.tp] = w.oc
	}
	return nil
}

// newestOffsetWrite returns the stamp of an offset key's newest write: a
// committed offset's stamp (a plain commit's is its own version), or a
// deletion's version (a deletion mark's, or a badger deletion's until
// compaction drops it). Zero: never written.
func newestOffsetWrite(btx *badger.Txn, key []byte) (stamp uint64, err error) {
	err = keyVersions(btx, key, func(item *badger.Item) (bool, error) {
		stamp = item.Version()
		if item.IsDeletedOrExpired() {
			return false, nil
		}
		err := item.Value(func(v []byte) error {
			oc, err := decodeOffset(v)
			if oc.Stamp != 0 {
				stamp = oc.Stamp
			}
			return err
		})
		if errors.Is(err, errOffsetDeleted) {
			err = nil // a deletion mark: its version
		}
		return false, err
	})
	return stamp, err
}

// keyVersions calls fn with key's versions, newest first (deletions
// included), until fn reports false or an error.
func keyVersions(btx *badger.Txn, key []byte, fn func(*badger.Item) (bool, error)) error {
	it := btx.NewIterator(badger.IteratorOptions{Prefix: key, AllVersions: true})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if !bytes.Equal(item.Key(), key) {
			return nil // a longer key (partition 10 after 1): ours are done
		}
		if more, err := fn(item); err != nil || !more {
			return err
		}
	}
	return nil
}

// isDeletionMark reports whether item holds a deletion mark.
func isDeletionMark(item *badger.Item) (mark bool, err error) {
	err = item.Value(func(v []byte) error { mark = bytes.Equal(v, deletionMark); return nil })
	return mark, err
}

// DropDeletionMarks drops the deletion marks of group's tps, left
// without pending offsets by a transaction's end (clearPending). It
// holds the group's lock, under which a TxnOffsetCommit adds its offsets
// and a deletion decides to write a mark: a tp that got a pending offset
// since keeps its mark (that offset's commit comes after it, and a
// badger deletion of the mark, newer than the offset's stamp, would win
// over it); a mark written since for a tp still without one is dropped.
// A group that does not exist (DeleteGroups) is held by name the same
// way, then forgotten.
func (c *Coordinator) DropDeletionMarks(group string, tps []TP) {
	_, release := c.holdGroupName(group)
	defer release()
	free := tps[:0]
	for _, tp := range tps {
		if !c.Pending.has(group, tp) {
			free = append(free, tp)
		}
	}
	c.store.dropDeletionMarks(group, free, !c.Pending.hasGroup(group))
}

// DeletedSince reports whether an offset key was deleted (a deletion
// mark, or a badger deletion) after stamp, as far as badger still keeps
// the versions written since.
func DeletedSince(btx *badger.Txn, key []byte, stamp uint64) (deleted bool, err error) {
	err = keyVersions(btx, key, func(item *badger.Item) (bool, error) {
		if item.Version() <= stamp {
			return false, nil // versions come newest first
		}
		if item.IsDeletedOrExpired() {
			deleted = true
			return false, nil
		}
		mark, err := isDeletionMark(item)
		deleted = mark
		return !mark, err
	})
	return deleted, err
}

// ReleaseTxnCommit ends what lockTxnCommit began: the group is dropped
// if the commit left nothing in it, re-armed and unlocked.
func (g *Group) ReleaseTxnCommit(now time.Time) {
	g.dropIfUnusedLocked()
	g.unlock(now)
}

// MetadataMaxBytes is offset.metadata.max.bytes, which a commit's
// metadata (counted as metadataLen does) must not exceed.
func (c *Coordinator) MetadataMaxBytes() int { return c.settings().metadataMaxBytes }
