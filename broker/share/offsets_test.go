package share

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestShareOffsetResetAfterTopicDeletionWritesNothing: an
// AlterShareGroupOffsets that found its topic, then runs after the topic
// was deleted (and its share state with it), answers
// UNKNOWN_TOPIC_OR_PARTITION and leaves no share state for the dead
// topic id.
func TestShareOffsetResetAfterTopicDeletionWritesNothing(t *testing.T) {
	t.Parallel()
	h := newTestShare(t, "")
	tp := h.createTopic("sgone", 1, nil)
	lp := h.topics.Partition("sgone", 0)
	key := shareKey("sg", shareTP{topicID: tp.ID, partition: 0})
	require.NoError(t, h.admin.Delete(tp))
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, h.c.resetOffset(key, h.c.shareSettings("sg"), lp, 0))
	keys, err := h.c.store.Keys("sg")
	require.NoError(t, err)
	require.Empty(t, keys)
}
