package groups

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOffsetValueStamp: a transaction's committed offset keeps its stamp
// through badger (value version 2); a plain one is stored as before
// (version 1, no stamp).
func TestOffsetValueStamp(t *testing.T) {
	t.Parallel()
	for _, oc := range []OffsetCommit{
		{Offset: 7, LeaderEpoch: 3, Metadata: "m", CommitTime: time.UnixMilli(1234)},
		{Offset: 7, LeaderEpoch: -1, Metadata: "meta", CommitTime: time.UnixMilli(99), Stamp: 42},
		{Offset: 0, LeaderEpoch: 0, CommitTime: time.UnixMilli(5), expireTime: time.UnixMilli(6), Stamp: 1},
	} {
		b := encodeOffset(oc)
		require.Equal(t, byte(1)+byte(min(oc.Stamp, 1)), b[0])
		got, err := decodeOffset(b)
		require.NoError(t, err)
		require.Equal(t, oc, got)
	}
	_, err := decodeOffset([]byte{2, 0, 0})
	require.Error(t, err)
}

// TestTargetsOutsideReach: after a restart, a member whose target names
// a topic that is gone, or that its regex may no longer reach (an ACL
// revoked), makes the next metadata check bump the epoch.
func TestTargetsOutsideReach(t *testing.T) {
	tid := [16]byte{1}
	allowed := true
	m := &consumerMember{id: "m", regex: "t.*", re: compileSubscription("t.*"), target: partSet{}, assigned: partSet{},
		describable: func(string) bool { return allowed }}
	m.target.add(tid, 0, 0)
	cg := newConsumerGroup()
	cg.members["m"] = m
	require.True(t, cg.targetsOutsideReach(), "the topic is not resolved (gone)")
	cg.resolved["t1"] = resolvedTopic{id: tid, partitions: 1}
	require.False(t, cg.targetsOutsideReach())
	allowed = false
	require.True(t, cg.targetsOutsideReach(), "the member may no longer describe it")
}
