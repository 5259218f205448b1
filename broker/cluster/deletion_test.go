package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/broker/clustertest"
	"github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/protocol"
)

// TestDeleteTopicAndCreateAgain: a topic deleted through one broker is
// gone from every broker's image, groups and disk; a topic created again
// under its name starts empty; a broker that was down through both
// applies them in order when it returns, and ends with the new topic's
// log only; a broker restarted after both keeps the new topic's log.
func TestDeleteTopicAndCreateAgain(t *testing.T) {
	c := newTestCluster(t, 3)
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 20*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "t", 2, 3, nil))
	require.Eventually(t, func() bool {
		for _, nd := range c.nodes {
			for _, p := range []string{"t-0", "t-1"} {
				if _, _, ok := nd.Group(p); !ok {
					return false
				}
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond)
	old := c.nodes[0].Image().Topics["t"].ID
	for seq := range int32(10) {
		c.produce("t-0", seq)
	}
	c.stop(2) // misses the deletion and the new topic

	require.NoError(t, c.nodes[1].DeleteTopic(ctx, "t", old))
	require.ErrorIs(t, c.nodes[0].DeleteTopic(ctx, "t", old), ErrUnknownTopic)
	require.Eventually(t, func() bool {
		for _, i := range []int{0, 1} {
			nd := c.nodes[i]
			if nd.HasTopic("t") {
				return false
			}
			for _, p := range []string{"t-0", "t-1"} {
				if _, _, ok := nd.Group(p); ok {
					return false
				}
				if _, ok := nd.PartitionState(p); ok {
					return false
				}
				if _, err := os.Stat(filepath.Join(c.dirs[i], p)); !os.IsNotExist(err) {
					return false
				}
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "the topic is not gone everywhere")

	require.NoError(t, c.nodes[0].CreateTopic(ctx, "t", 2, 3, nil))
	cur := c.nodes[0].Image().Topics["t"].ID
	require.NotEqual(t, old, cur)
	for seq := range int32(3) {
		require.Less(t, c.produce("t-0", 100+seq), int64(5), "the new topic starts empty")
	}

	c.start(2)
	// It applies the old creation (its old replicas start again), the
	// deletion, then the new topic, whose replicas catch up.
	all := []uint64{1, 2, 3}
	committedOf(t, c, all, "t-0")

	// A hosting broker restarted: the old creation is skipped, the
	// deletion leaves the new topic's directory alone.
	c.stop(0)
	c.start(0)
	want := committedOf(t, c, all, "t-0")
	n := 0
	for b := want; len(b) > 0; n++ {
		hd, err := protocol.ParseBatchHeader(b)
		require.NoError(t, err)
		require.GreaterOrEqual(t, hd.BaseSequence, int32(100), "a batch of the deleted topic")
		b = b[hd.Size():]
	}
	require.Equal(t, 3, n)
	require.Eventually(t, func() bool {
		for _, i := range all {
			if ps, ok := c.nodes[i-1].PartitionState("t-0"); !ok || ps.TopicID != cur {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "partition state of the new topic")
}

// onlyBatch checks that the replicas on hosts hold one committed batch
// of partition, the one produced with sequence seq: a topic created
// again starts empty (raft's own entries, one a term, take offsets
// too, so the batch's offset says nothing of that).
func onlyBatch(t *testing.T, c *testCluster, hosts []uint64, partition string, seq int32) {
	t.Helper()
	b := committedOf(t, c, hosts, partition)
	h, err := protocol.ParseBatchHeader(b)
	require.NoError(t, err)
	require.Equal(t, seq, h.BaseSequence, "a batch of the deleted incarnation in %s", partition)
	require.Equal(t, int64(len(b)), h.Size(), "more than the one batch produced in %s", partition)
}

// committedOf waits until the replicas on hosts hold the same committed
// batches of partition and returns them.
func committedOf(t *testing.T, c *testCluster, hosts []uint64, partition string) []byte {
	t.Helper()
	var want []byte
	var last string
	defer func() {
		if t.Failed() {
			t.Log("last seen:", last)
		}
	}()
	require.Eventually(t, func() bool {
		last = describe(c, hosts, partition)
		var logs [][]byte
		for _, id := range hosts {
			_, p, ok := c.nodes[id-1].Group(partition)
			if !ok {
				return false
			}
			b, err := readCommitted(p)
			if err != nil || len(b) == 0 {
				return false
			}
			logs = append(logs, b)
		}
		for _, b := range logs[1:] {
			if !bytes.Equal(b, logs[0]) {
				return false
			}
		}
		want = logs[0]
		return true
	}, 20*time.Second, 20*time.Millisecond, "replicas of %s never converged", partition)
	return want
}

// TestWireNames: a partition group's name on the peer network carries
// its topic's id; a message for another incarnation is not delivered.
func TestWireNames(t *testing.T) {
	id := [16]byte{1, 2, 3}
	require.Equal(t, "t-0@01020300000000000000000000000000", wireName("t-0", id))
	require.Equal(t, "version: 0\ntopic_id: AQIDAAAAAAAAAAAAAAAAAA\n", partitionMetadata(id))
}

func describe(c *testCluster, hosts []uint64, partition string) string {
	out := ""
	for _, id := range hosts {
		st, p, ok := c.nodes[id-1].Group(partition)
		if !ok {
			out += fmt.Sprintf(" %d: no group;", id)
			continue
		}
		b, err := readCommitted(p)
		out += fmt.Sprintf(" %d: %+v hw %d leo %d bytes %d err %v;", id, st, p.HighWatermark(), p.LogEndOffset(), len(b), err)
	}
	return out
}

// TestNoProduceBeforeCaughtUp: a broker that was down through a topic's
// deletion and comes back while it cannot reach the metadata quorum
// replays the topic's creation (its persisted commit index covers it)
// and restarts the deleted incarnation's group, which for a partition it
// is the only replica of elects it. It must acknowledge no produce
// there: those records would be destroyed once it catches up and
// applies the deletion. Until the metadata group answered a ReadIndex
// and applied up to it, every produce is NOT_LEADER_OR_FOLLOWER (found
// by review).
func TestNoProduceBeforeCaughtUp(t *testing.T) {
	c := newTestCluster(t, 3)
	require.Eventually(t, func() bool {
		for _, nd := range c.nodes {
			if len(nd.Image().Brokers) != 3 || nd.MetadataLeader() == 0 {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond)
	// Node 3 must follow, so that a later election changes its term
	// (raft.state, with the commit index, is written on a term change).
	if c.nodes[0].MetadataLeader() == 3 {
		c.stop(2)
		require.Eventually(t, func() bool { l := c.nodes[0].MetadataLeader(); return l != 0 && l != 3 }, 20*time.Second, 10*time.Millisecond)
		c.start(2)
	}
	name := ""
	for i := 0; name == ""; i++ { // a topic whose only replica is node 3
		cand := fmt.Sprintf("t%d", i)
		if p, _ := place([]uint64{1, 2, 3}, cand, 1, 1); p[0][0] == 3 {
			name = cand
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[0].CreateTopic(ctx, name, 1, 1, nil))
	part := PartitionName(name, 0)
	c.produce(part, 1)
	id := c.nodes[0].Image().Topics[name].ID

	// A metadata election node 3 takes part in: it persists its commit.
	l := int(c.nodes[2].MetadataLeader()) - 1
	c.stop(l)
	require.Eventually(t, func() bool {
		nl := c.nodes[2].MetadataLeader()
		return nl != 0 && int(nl)-1 != l
	}, 20*time.Second, 10*time.Millisecond)
	c.start(l)
	require.Eventually(t, func() bool { return c.nodes[l].HasTopic(name) }, 20*time.Second, 10*time.Millisecond)

	c.stop(2) // down through the deletion
	require.NoError(t, c.nodes[0].DeleteTopic(ctx, name, id))
	require.Eventually(t, func() bool { return !c.nodes[1].HasTopic(name) }, 20*time.Second, 10*time.Millisecond)
	c.stop(0)
	c.stop(1)

	c.start(2) // back alone: no metadata quorum
	require.Eventually(t, func() bool {
		st, _, ok := c.nodes[2].Group(part)
		return ok && st.IsLeader
	}, 20*time.Second, 10*time.Millisecond, "the deleted topic's group did not come back (the scenario did not arise)")
	pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer pcancel()
	require.False(t, c.nodes[2].CaughtUp())
	res, err := c.nodes[2].Produce(pctx, part, clustertest.Batch(2))
	var nl *ErrNotLeader
	require.ErrorAs(t, err, &nl, "a produce to topic %s, deleted cluster-wide, was acknowledged at offset %d; it is lost once the broker catches up", name, res.BaseOffset)

	// Back with a quorum, it catches up, applies the deletion and drops
	// the group.
	c.start(0)
	require.Eventually(t, func() bool { return c.nodes[2].CaughtUp() && !c.nodes[2].HasTopic(name) }, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { _, _, ok := c.nodes[2].Group(part); return !ok }, 20*time.Second, 10*time.Millisecond)
}

// TestMetadataTopicRefused: no topic may be named __cluster_metadata,
// whose partition 0 would be the metadata group (found by review: its
// log was handed out as the topic's partition, and deleting the topic
// removed the metadata log's files on every broker). CreateTopic
// refuses it, and so does the image for a record proposed anyway.
func TestMetadataTopicRefused(t *testing.T) {
	c := newTestCluster(t, 3)
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 20*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.ErrorIs(t, c.nodes[0].CreateTopic(ctx, MetadataTopic, 1, 3, nil), ErrReservedTopic)
	outcome, err := c.nodes[0].propose(ctx, record{Op: "create_topic", Topic: &Topic{Name: MetadataTopic, ID: [16]byte{1},
		Partitions: [][]uint64{{1, 2, 3}}}})
	require.NoError(t, err)
	require.Equal(t, errBadRecord, outcome)
	require.False(t, c.nodes[0].HasTopic(MetadataTopic))
	// The metadata group still works.
	require.NoError(t, c.nodes[1].CreateTopic(ctx, "after", 1, 3, nil))
	for i := range c.nodes {
		_, err := os.Stat(filepath.Join(c.dirs[i], MetadataGroup, "raft.state"))
		require.NoError(t, err)
	}
}

// TestSingleVoterCatchesUp: a one-broker cluster catches up at start and
// again after a restart (ReadIndex on a singleton; review).
func TestSingleVoterCatchesUp(t *testing.T) {
	c := newTestCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[0].WaitCaughtUp(ctx))
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 1 }, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "t", 1, 1, nil))
	c.produce("t-0", 1)
	c.stop(0)
	c.start(0)
	require.NoError(t, c.nodes[0].WaitCaughtUp(ctx))
	c.produce("t-0", 2)
}

// bigParts is the partition count of bigTopicCluster's topic.
const bigParts = 40

// bigTopicCluster starts three nodes on fsys, with topic "big" of
// bigParts RF 3 partitions holding a batch each, and returns its id.
func bigTopicCluster(t *testing.T, fsys log.FS) (*testCluster, [16]byte) {
	c := newTestClusterFS(t, 3, testTick, fsys)
	require.Eventually(t, func() bool {
		for _, nd := range c.nodes {
			if len(nd.Image().Brokers) != 3 || !nd.CaughtUp() {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "big", bigParts, 3, nil))
	for i := range bigParts {
		c.produce(PartitionName("big", int32(i)), 1)
	}
	return c, c.nodes[0].Image().Topics["big"].ID
}

// slowDirFS makes each SyncDir take delay once armed: a disk whose
// directory fsyncs are slow, as removing a partition's directory is.
type slowDirFS struct {
	log.FS
	delay atomic.Int64 // nanoseconds
}

func (f *slowDirFS) SyncDir(dir string) error {
	time.Sleep(time.Duration(f.delay.Load()))
	return f.FS.SyncDir(dir)
}

// TestDeletionDoesNotStallMetadata: a deleted topic's directories are
// removed off the metadata group's goroutine, so another metadata change
// is not held up by the fsyncs of a large topic's deletion (found by
// review: 600 partitions held the whole metadata group for 4 to 7 s,
// every broker applying the deletion at once). The topic created again
// at once under the name opens each partition once the old directory is
// gone, and starts empty.
func TestDeletionDoesNotStallMetadata(t *testing.T) {
	fsys := &slowDirFS{FS: log.OSFS()}
	c, id := bigTopicCluster(t, fsys)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// 40 partitions, two directory fsyncs each to remove, at 25 ms: 2 s
	// of a blocked metadata group if that ran on its goroutine.
	fsys.delay.Store(int64(25 * time.Millisecond))
	deleted := make(chan error, 1)
	go func() { deleted <- c.nodes[0].DeleteTopic(ctx, "big", id) }()
	require.Eventually(t, func() bool { return !c.nodes[1].HasTopic("big") }, 20*time.Second, time.Millisecond)
	began := time.Now()
	require.NoError(t, c.nodes[1].CreateTopic(ctx, "small", 1, 3, nil))
	took := time.Since(began)
	require.NoError(t, <-deleted)
	require.Less(t, took, 2*time.Second, "a metadata change waited %v for another topic's deletion", took) // 4.8 s when it did

	// Created again at once: each partition waits for its old directory.
	require.NoError(t, c.nodes[2].CreateTopic(ctx, "big", bigParts, 3, nil))
	fsys.delay.Store(0)
	for i := range bigParts {
		part := PartitionName("big", int32(i))
		c.produce(part, 100)
		onlyBatch(t, c, []uint64{1, 2, 3}, part, 100)
	}
}

// slowRemoveFS makes each RemoveAll take delay once armed: removing a
// deleted partition's files is slow, creating one is not.
type slowRemoveFS struct {
	log.FS
	delay atomic.Int64
}

func (f *slowRemoveFS) RemoveAll(p string) error {
	time.Sleep(time.Duration(f.delay.Load()))
	return f.FS.RemoveAll(p)
}

// TestRecreateDoesNotStallMetadata: a topic created again at once after
// its deletion does not wait for its old directories' removal, nor does
// the metadata group: they were moved aside (found by review: opening
// the new partitions waited there for each old directory's removal,
// holding the whole metadata group as long, on every broker hosting
// them). The new incarnation starts empty.
func TestRecreateDoesNotStallMetadata(t *testing.T) {
	fsys := &slowRemoveFS{FS: log.OSFS()}
	c, id := bigTopicCluster(t, fsys)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fsys.delay.Store(int64(25 * time.Millisecond))
	require.NoError(t, c.nodes[0].DeleteTopic(ctx, "big", id))
	recreated := make(chan error, 1)
	go func() { recreated <- c.nodes[0].CreateTopic(ctx, "big", bigParts, 3, nil) }()
	require.Eventually(t, func() bool { return c.nodes[1].HasTopic("big") }, 20*time.Second, time.Millisecond)
	began := time.Now()
	require.NoError(t, c.nodes[1].CreateTopic(ctx, "small", 1, 3, nil))
	took := time.Since(began)
	require.NoError(t, <-recreated)
	// Opening 40 partitions takes its time too (under -race about 1 s);
	// waiting for the removals took 8.5 s.
	require.Less(t, took, 3*time.Second, "a metadata change waited %v behind a re-created topic's wait for its old directories", took)
	fsys.delay.Store(0)
	for i := range bigParts {
		part := PartitionName("big", int32(i))
		c.produce(part, 100)
		onlyBatch(t, c, []uint64{1, 2, 3}, part, 100)
	}
	// The moved directories are gone once their removal ran.
	require.Eventually(t, func() bool {
		for _, d := range c.dirs {
			names, err := os.ReadDir(d)
			require.NoError(t, err)
			for _, e := range names {
				if strings.HasSuffix(e.Name(), deleteSuffix) {
					return false
				}
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond)
}

// TestLeftMovedRemovedAtStart: a partition directory a deletion moved
// aside and a crash left before its removal is deleted when the broker
// starts again.
func TestLeftMovedRemovedAtStart(t *testing.T) {
	c := newTestCluster(t, 1)
	c.stop(0)
	left := filepath.Join(c.dirs[0], "gone-0.00112233445566778899aabbccddeeff"+deleteSuffix)
	require.NoError(t, os.MkdirAll(left, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(left, "00000000000000000000.log"), []byte("old"), 0o644))
	keep := filepath.Join(c.dirs[0], "kept-delete-0") // a partition of topic "kept-delete"
	require.NoError(t, os.MkdirAll(keep, 0o755))
	c.start(0)
	require.Eventually(t, func() bool { _, err := os.Stat(left); return os.IsNotExist(err) }, 10*time.Second, 10*time.Millisecond)
	_, err := os.Stat(keep)
	require.NoError(t, err)
}

// TestLeftDirectoryOfDeletedTopicMoved: a partition directory a deletion
// failed to move aside (it still names the deleted topic's id) is moved
// aside, and then removed, when the topic is created again under the
// name; the new incarnation opens a directory of its own.
func TestLeftDirectoryOfDeletedTopicMoved(t *testing.T) {
	c := newTestCluster(t, 1)
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 1 && c.nodes[0].CaughtUp() }, 20*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "t", 1, 1, nil))
	old := c.nodes[0].Image().Topics["t"].ID
	require.NoError(t, c.nodes[0].DeleteTopic(ctx, "t", old))
	dir := filepath.Join(c.dirs[0], "t-0")
	require.Eventually(t, func() bool { _, err := os.Stat(dir); return os.IsNotExist(err) }, 10*time.Second, 10*time.Millisecond)
	// As if moving it aside had failed: the old incarnation's directory.
	require.NoError(t, claimDir(log.OSFS(), dir, old))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), []byte("old"), 0o644))

	require.NoError(t, c.nodes[0].CreateTopic(ctx, "t", 1, 1, nil))
	cur := c.nodes[0].Image().Topics["t"].ID
	require.Eventually(t, func() bool {
		have, ok, err := dirTopic(log.OSFS(), dir)
		return err == nil && ok && have == cur
	}, 10*time.Second, 10*time.Millisecond, "the new incarnation's directory")
	c.produce("t-0", 100)
	onlyBatch(t, c, []uint64{1}, "t-0", 100)
	require.Eventually(t, func() bool {
		names, err := os.ReadDir(c.dirs[0])
		require.NoError(t, err)
		for _, e := range names {
			if strings.HasSuffix(e.Name(), deleteSuffix) {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the moved directory removed")
}
