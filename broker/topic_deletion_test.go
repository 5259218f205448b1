package broker

import (
	"encoding/hex"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/meta"
)

// TestTopicRecreatedDuringCleanupKeepsItsOffsets: while a deleted topic's
// group offsets are being removed (by name), a topic of the same name
// cannot be created, so offsets committed for the new topic are never
// removed with the old one's. (Before, the clean-up ran after the
// deletion had released the admin lock: a topic created and committed to
// in between lost its offsets.)
func TestTopicRecreatedDuringCleanupKeepsItsOffsets(t *testing.T) {
	t.Parallel()
	var hook func()
	b := startGroupTest(t, func(c *Config) {
		c.beforeTopicCleanup = func(string) error {
			if h := hook; h != nil {
				hook = nil
				h()
			}
			return nil
		}
	})
	createTopicRaw(t, b, "gone", 1)
	c := dialRaw(t, b)
	require.Equal(t, []int16{0}, c.commit(b, 9, "g", "", -1, commitPart{"gone", 0, 5, -1, ""}))

	created := make(chan error, 1)
	committed := false
	hook = func() {
		go func() {
			_, err := b.topicAdmin.Create("gone", 1, nil, false)
			created <- err
		}()
		select {
		case err := <-created: // the name was free before the old offsets were gone
			require.NoError(t, err)
			require.Equal(t, []int16{0}, c.commit(b, 9, "g", "", -1, commitPart{"gone", 0, 7, -1, ""}))
			committed = true
			created <- nil
		case <-time.After(300 * time.Millisecond):
		}
	}
	require.NoError(t, b.topicAdmin.Delete(b.topics.Get("gone")))
	require.NoError(t, <-created)
	if !committed {
		require.Equal(t, []int16{0}, c.commit(b, 9, "g", "", -1, commitPart{"gone", 0, 7, -1, ""}))
	}
	require.Equal(t, int64(7), c.fetch("g", "gone", 0)[0].Offset, "the new topic's offset")
}

// TestInterruptedTopicDeletionFinishesAtStart: a crash right after a
// topic's record was deleted leaves its group offsets behind; the next
// start-up removes them before serving, so a topic created again under
// the name does not inherit them, and other topics' offsets stay.
func TestInterruptedTopicDeletionFinishesAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *Config) { c.DataDir = dir }
	b := startGroupTest(t, cfg)
	createTopicRaw(t, b, "gone", 1)
	createTopicRaw(t, b, "kept", 1)
	c := dialRaw(t, b)
	require.Equal(t, []int16{0, 0}, c.commit(b, 9, "g", "", -1, commitPart{"gone", 0, 5, -1, ""}, commitPart{"kept", 0, 6, -1, ""}))
	// What a crash after topics.Admin.Delete's first write leaves on
	// disk: the topic record gone, its clean-up recorded as pending (one
	// badger transaction, topics/store.go), nothing else done.
	id := b.topics.Get("gone").ID
	require.NoError(t, b.meta.DB().Update(func(txn *badger.Txn) error {
		if err := txn.Delete([]byte(meta.PrefixTopic + "gone")); err != nil {
			return err
		}
		return txn.Set([]byte(meta.PrefixDeletingTopic+hex.EncodeToString(id[:])), []byte(`"gone"`))
	}))
	require.NoError(t, b.Close())

	b2 := startGroupTest(t, cfg)
	pending, err := b2.topicAdmin.PendingDeletions()
	require.NoError(t, err)
	require.Empty(t, pending, "the clean-up finished and was cleared")
	require.Nil(t, b2.topics.Get("gone"))
	createTopicRaw(t, b2, "gone", 1)
	c2 := dialRaw(t, b2)
	require.Equal(t, int64(-1), c2.fetch("g", "gone", 0)[0].Offset, "the re-created topic starts without offsets")
	require.Equal(t, int64(6), c2.fetch("g", "kept", 0)[0].Offset)
}

// TestFailedTopicCleanupFinishedBeforeNameReuse: a deletion whose
// clean-up fails leaves the topic deleted and the clean-up pending;
// creating the name again finishes it first (the old offsets go), and
// refuses while it still fails.
func TestFailedTopicCleanupFinishedBeforeNameReuse(t *testing.T) {
	t.Parallel()
	var failing atomic.Bool
	b := startGroupTest(t, func(c *Config) {
		c.beforeTopicCleanup = func(string) error {
			if failing.Load() {
				return errors.New("injected clean-up failure")
			}
			return nil
		}
	})
	createTopicRaw(t, b, "gone", 1)
	c := dialRaw(t, b)
	require.Equal(t, []int16{0}, c.commit(b, 9, "g", "", -1, commitPart{"gone", 0, 5, -1, ""}))
	failing.Store(true)
	require.Error(t, b.topicAdmin.Delete(b.topics.Get("gone")))
	require.Nil(t, b.topics.Get("gone"), "the topic itself is deleted")
	pending, err := b.topicAdmin.PendingDeletions()
	require.NoError(t, err)
	require.Len(t, pending, 1)

	_, err = b.topicAdmin.Create("gone", 1, nil, false)
	require.Error(t, err, "the name stays taken while its clean-up fails")
	require.Equal(t, "KAFKA_STORAGE_ERROR", codeName(kafkaerr.Code(err)))

	failing.Store(false)
	createTopicRaw(t, b, "gone", 1)
	require.Equal(t, int64(-1), c.fetch("g", "gone", 0)[0].Offset, "the old topic's offset went first")
	pending, err = b.topicAdmin.PendingDeletions()
	require.NoError(t, err)
	require.Empty(t, pending)
}
