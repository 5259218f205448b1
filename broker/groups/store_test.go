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
