// Package raftlog is the storage of one replica of a raft group
// (issue 29; ../shared/docs/cluster.md §3.2 and docs/CLUSTER.md): etcd
// raft's Storage over the partition's own log, so that a raft entry is
// a record batch in the segment files, the raft term the batch's
// partition leader epoch, and the commit index the high watermark.
//
// Storage (storage.go) is raft's Storage over the log; beside the log
// a replica persists raft's HardState (term, vote, commit) and ConfState (voters and
// learners), in the partition directory's raft.state file. Written only
// when the term or the vote changes (the commit index is allowed to go
// back after a restart: raft re-learns it), atomically, and durable
// before the write returns, because a vote forgotten by a crash could
// be cast twice in one term.
//
// Only this package and the replica package may import
// go.etcd.io/raft/v3 (scripts/check-layering.sh): consensus comes from
// the library, and nothing else of Shoal votes or computes commit.
//
// # raft.state
//
//	offset size field
//	     0    4 magic "SHRS"
//	     4    1 version (1)
//	     5    3 reserved, zero
//	     8    8 ConfIndex: the entry whose apply produced the ConfState
//	    16    4 length h of the HardState (protobuf, deterministic)
//	    20    h HardState
//	  20+h    4 length c of the ConfState (protobuf, deterministic)
//	  24+h    c ConfState
//	24+h+c    4 CRC-32C of every byte before it
//
// Written as raft.state.tmp, fsynced, renamed over raft.state, and the
// directory fsynced. A leftover .tmp is an interrupted write: ignored,
// and overwritten by the next write. A raft.state that fails its checks is
// an error, never an empty state: starting over would forget the vote.
// So is one with protobuf fields this version does not know.
//
// # raft.terms
//
// The term cache's checkpoint (terms.go has the layout). It must never
// say more than the log holds: a truncation is checkpointed durably
// before entries are written over the truncated ones, so a checkpoint
// that survives a crash never names a term the log no longer has.
package raftlog
