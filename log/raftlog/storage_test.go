package raftlog

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/protocol"
)

const testDir = "/data/t-0"

func openReplica(t *testing.T, fsys log.FS) (*log.Partition, *Storage) {
	t.Helper()
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = 2048
	cfg.IndexIntervalBytes = 128
	cfg.Replica = true
	p, err := log.Open(fsys, testDir, cfg, nil)
	require.NoError(t, err)
	s, err := Open(fsys, testDir, p)
	require.NoError(t, err)
	return p, s
}

// drive runs a single-voter RawNode over s until it has nothing to do,
// as a replica does without asynchronous writes.
func drive(t *testing.T, rn *raft.RawNode, p *log.Partition, s *Storage) {
	t.Helper()
	for rn.HasReady() {
		rd := rn.Ready()
		require.NoError(t, s.Append(rd.Entries, time.Now()))
		if len(rd.Entries) > 0 {
			_, err := p.Sync()
			require.NoError(t, err)
		}
		if !raft.IsEmptyHardState(rd.HardState) {
			require.NoError(t, s.SetHardState(rd.HardState))
		}
		for _, e := range rd.CommittedEntries {
			if e.GetType() == raftpb.EntryConfChangeV2 {
				var cc raftpb.ConfChangeV2
				require.NoError(t, proto.Unmarshal(e.Data, &cc))
				require.NoError(t, s.SetConfState(rn.ApplyConfChange(&cc), e.GetIndex()))
			}
		}
		rn.Advance(rd)
		if n := len(rd.CommittedEntries); n > 0 {
			require.NoError(t, s.SetApplied(rd.CommittedEntries[n-1].GetIndex()))
		}
	}
}

// TestStorageSingleVoter: etcd raft runs on the partition log, commits
// prepared batches as entries (the high watermark follows the commit
// index), and comes back after a restart with its term, vote and log.
func TestStorageSingleVoter(t *testing.T) {
	fsys := log.NewMemFS()
	p, s := openReplica(t, fsys)
	require.NoError(t, s.SetConfState(&raftpb.ConfState{Voters: []uint64{1}}, 0))
	rn, err := raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: s,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256})
	require.NoError(t, err)
	require.NoError(t, rn.Campaign())
	drive(t, rn, p, s)
	require.Equal(t, raft.StateLeader, rn.Status().RaftState)
	term := rn.Status().GetTerm()

	var want [][]byte
	for range 30 {
		b := dataBatch(0, 0)
		_, err := p.Prepare(b, time.Now())
		require.NoError(t, err)
		protocol.SetPartitionLeaderEpoch(b, int32(term))
		require.NoError(t, rn.Propose(b))
		drive(t, rn, p, s)
		want = append(want, append([]byte(nil), b...))
	}
	require.Equal(t, int64(32), p.NextOrdinal()) // the term's empty entry, then 30 batches
	require.Equal(t, p.LogEndOffset(), p.HighWatermark())
	require.NoError(t, p.Close())

	p, s = openReplica(t, fsys)
	hs, cs, err := s.InitialState()
	require.NoError(t, err)
	require.Equal(t, term, hs.GetTerm())
	require.Equal(t, uint64(1), hs.GetVote())
	require.Equal(t, []uint64{1}, cs.Voters)
	ents, err := s.Entries(2, 32, 1<<30)
	require.NoError(t, err)
	require.Len(t, ents, 30)
	for i, e := range ents {
		require.Equal(t, want[i], e.Data)
		require.Equal(t, term, e.GetTerm())
	}
	got, err := s.Term(1)
	require.NoError(t, err)
	require.Equal(t, term, got)
	got, err = s.Term(0)
	require.NoError(t, err)
	require.Zero(t, got)
	rn, err = raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: s,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, Applied: hs.GetCommit()})
	require.NoError(t, err)
	require.NoError(t, rn.Campaign())
	drive(t, rn, p, s)
	require.Equal(t, raft.StateLeader, rn.Status().RaftState)
	require.Greater(t, rn.Status().GetTerm(), term)
	require.Equal(t, p.LogEndOffset(), p.HighWatermark())
	require.NoError(t, p.Close())
}

// TestApplySnapshotCrashAtEveryStep: power lost before any file
// operation of a snapshot's install leaves, after Open, either the old
// log or the installed snapshot (empty log from the snapshot's offset
// and next entry, its term for the entry before), never anything else.
func TestApplySnapshotCrashAtEveryStep(t *testing.T) {
	build := func() (*log.MemFS, int64) {
		fsys := log.NewMemFS()
		p, s := openReplica(t, fsys)
		require.NoError(t, s.SetConfState(&raftpb.ConfState{Voters: []uint64{1, 2, 3}}, 0))
		var ents []*raftpb.Entry
		for i := range 40 {
			b := dataBatch(int64(i), 2)
			ents = append(ents, entry(raftpb.EntryNormal, 2, uint64(i+1), b))
		}
		require.NoError(t, s.Append(ents, time.Now()))
		_, err := p.Sync()
		require.NoError(t, err)
		require.NoError(t, s.SetHardState(&raftpb.HardState{Term: proto.Uint64(2), Commit: proto.Uint64(10)}))
		return fsys, p.LogEndOffset()
	}
	snap := &raftpb.Snapshot{
		Data:     binary.BigEndian.AppendUint64([]byte(snapshotMagic), 500),
		Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(300), Term: proto.Uint64(4), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}},
	}
	installed, old := 0, 0
	for k := 1; ; k++ {
		fsys, leo := build()
		p, s := openReplica(t, fsys)
		fsys.SetCrashPoint(k, nil)
		err := s.ApplySnapshot(snap, time.Now())
		crashed := fsys.Crashed()
		if err == nil && crashed == nil {
			require.Greater(t, installed, 0, "every crash point was before the install finished")
			break
		}
		require.ErrorIs(t, err, log.ErrPowerLost)
		_ = p
		p2, s2 := openReplica(t, crashed)
		first, _ := s2.FirstIndex()
		last, _ := s2.LastIndex()
		switch {
		case first == 301 && last == 300:
			term, err := s2.Term(300)
			require.NoError(t, err)
			require.Equal(t, uint64(4), term)
			require.Equal(t, int64(500), p2.LogEndOffset())
			st := s2.State()
			require.Equal(t, uint64(300), st.ConfIndex)
			installed++
		case first == 1 && last == 40:
			require.Equal(t, leo, p2.LogEndOffset())
			old++
		default:
			t.Fatalf("crash at operation %d: log of entries [%d, %d]", k, first, last)
		}
		require.NoError(t, p2.Close())
	}
	t.Logf("%d crash points: %d found the old log, %d the snapshot", installed+old, old, installed)
}
