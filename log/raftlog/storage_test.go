package raftlog

import (
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
