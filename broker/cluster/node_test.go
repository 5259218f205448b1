package cluster

import (
	"bytes"
	"context"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/clustertest"
	"github.com/shoal-mq/shoal/broker/replica"
	"github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/protocol"
)

func TestMain(m *testing.M) {
	replica.SetRaftLogger(zap.NewNop())
	os.Exit(m.Run())
}

// testCluster is n brokers in this process, on 127.0.0.1, with their
// data in temporary directories (real files, real fsync).
type testCluster struct {
	t      *testing.T
	dirs   []string
	addrs  map[uint64]string
	nodes  []*Node
	logger *zap.Logger
	tick   time.Duration
	fs     log.FS // nil: log.OSFS()
	// tune, when set, changes each node's config before it starts.
	tune func(*Config)
}

func newTestCluster(t *testing.T, n int) *testCluster { return newTestClusterTick(t, n, testTick) }

// newTestClusterTick is newTestCluster with a raft tick of its own.
func newTestClusterTick(t *testing.T, n int, tick time.Duration) *testCluster {
	return newTestClusterFS(t, n, tick, nil)
}

// newTestClusterFS is newTestClusterTick on a file system of its own
// (nil: log.OSFS()).
func newTestClusterFS(t *testing.T, n int, tick time.Duration, fsys log.FS) *testCluster {
	c := &testCluster{t: t, addrs: map[uint64]string{}, nodes: make([]*Node, n), logger: zap.NewNop(), tick: tick, fs: fsys}
	if os.Getenv("SHOAL_TEST_LOG") != "" { // the brokers' logs, to debug a test
		c.logger, _ = zap.NewDevelopment()
	}
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		c.addrs[uint64(i+1)] = ln.Addr().String()
		require.NoError(t, ln.Close()) // the port is the node's from now on
		c.dirs = append(c.dirs, t.TempDir())
	}
	for i := range n {
		c.start(i)
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			if nd != nil {
				_ = nd.Close()
			}
		}
	})
	return c
}

func (c *testCluster) start(i int) {
	fsys := c.fs
	if fsys == nil {
		fsys = log.OSFS()
	}
	cfg := Config{NodeID: uint64(i + 1), ClusterID: "test", DataDir: c.dirs[i], FS: fsys,
		PeerListen: c.addrs[uint64(i+1)], Voters: c.addrs, Host: "127.0.0.1", Port: int32(9092 + i),
		Tick: c.tick, SessionTimeout: testSessionTimeout, Log: log.DefaultConfig(), Logger: c.logger}
	if c.tune != nil {
		c.tune(&cfg)
	}
	var err error
	for range 50 { // the port may linger for a moment after a close
		if c.nodes[i], err = Start(cfg); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(c.t, err)
}

func (c *testCluster) stop(i int) {
	require.NoError(c.t, c.nodes[i].Close())
	c.nodes[i] = nil
}

// leaderOf waits for a broker that leads the group and returns its index.
func (c *testCluster) leaderOf(name string) int {
	c.t.Helper()
	found := -1
	require.Eventually(c.t, func() bool {
		for i, nd := range c.nodes {
			if nd == nil {
				continue
			}
			if st, _, ok := nd.Group(name); ok && st.IsLeader {
				found = i
				return true
			}
		}
		return false
	}, 20*time.Second, 10*time.Millisecond, "no leader for %s", name)
	return found
}

// produce writes batch seq of the producer to the partition's leader,
// retrying through leader changes, and returns its offset.
func (c *testCluster) produce(name string, seq int32) int64 {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		i := c.leaderOf(name)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		res, err := c.nodes[i].Produce(ctx, name, clustertest.Batch(seq))
		cancel()
		if err == nil {
			return res.BaseOffset
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("produce of sequence %d to %s never succeeded", seq, name)
	return -1
}

// TestClusterReplicates: three brokers register and agree on a topic
// created through any of them; its partitions elect leaders, commit
// produces on a majority, survive the loss of a partition's leader
// without losing or duplicating an acknowledged batch, and a restarted
// broker catches up to identical logs.
func TestClusterReplicates(t *testing.T) {
	c := newTestCluster(t, 3)
	require.Eventually(t, func() bool {
		for _, nd := range c.nodes {
			if len(nd.Image().Brokers) != 3 {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "brokers never all registered")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, c.nodes[1].CreateTopic(ctx, "orders", 3, 3, nil))
	err := c.nodes[2].CreateTopic(ctx, "orders", 3, 3, nil)
	require.ErrorContains(t, err, "TOPIC_ALREADY_EXISTS")
	require.Eventually(t, func() bool {
		for _, nd := range c.nodes {
			if _, ok := nd.Image().Topics["orders"]; !ok {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond)

	const part = "orders-0"
	offsets := map[int32]int64{}
	for seq := range int32(50) {
		offsets[seq] = c.produce(part, seq)
	}
	old := c.leaderOf(part)
	c.stop(old)
	for seq := int32(50); seq < 100; seq++ {
		offsets[seq] = c.produce(part, seq)
	}
	require.NotEqual(t, old, c.leaderOf(part))
	c.start(old)

	// Every replica ends with the same batches, each sequence once, at
	// its acknowledged offset.
	var want []byte
	require.Eventually(t, func() bool {
		var logs [][]byte
		for _, nd := range c.nodes {
			_, p, ok := nd.Group(part)
			if !ok {
				return false
			}
			b, err := readCommitted(p)
			if err != nil {
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
		return len(want) > 0
	}, 20*time.Second, 20*time.Millisecond, "replicas never converged")
	seen := map[int32]int64{}
	for b := want; len(b) > 0; {
		h, err := protocol.ParseBatchHeader(b)
		require.NoError(t, err)
		if !h.IsControl() {
			_, dup := seen[h.BaseSequence]
			require.False(t, dup, "sequence %d twice", h.BaseSequence)
			seen[h.BaseSequence] = h.BaseOffset
		}
		b = b[h.Size():]
	}
	for seq, off := range offsets {
		require.Equal(t, off, seen[seq], "sequence %d", seq)
	}
}

// readCommitted reads a log's batches below its high watermark.
func readCommitted(p *log.Partition) ([]byte, error) {
	var out []byte
	for off := p.LogStartOffset(); off < p.HighWatermark(); {
		b, err := p.Read(off, p.HighWatermark(), 1<<20, true)
		if err != nil {
			return nil, err
		}
		if len(b) == 0 { // only raft's own entries (a new leader's empty one) are left
			break
		}
		out = append(out, b...)
		for len(b) > 0 {
			h, _ := protocol.ParseBatchHeader(b)
			off = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
	return out, nil
}

var testTick = 10 * time.Millisecond

// testSessionTimeout is broker.session.timeout.ms in these tests: 50
// ticks, five election timeouts at most.
var testSessionTimeout = 500 * time.Millisecond

// TestPartitionState: a partition's leader publishes itself, its term
// and the replicas in sync with it into the metadata image, on every
// broker; a stopped follower leaves the ISR, and returns to it once it
// has caught up again.
func TestPartitionState(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.Eventually(t, func() bool { return len(c.nodes[0].Image().Brokers) == 3 }, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, c.nodes[0].CreateTopic(ctx, "isr", 1, 3, nil))
	lead := c.leaderOf("isr-0")
	c.produce("isr-0", 0)
	state := func(i int) PartitionState {
		ps, _ := c.nodes[i].PartitionState("isr-0")
		return ps
	}
	term := func() uint64 { st, _, _ := c.nodes[lead].Group("isr-0"); return st.Term }
	everywhere := func(isr ...uint64) func() bool {
		return func() bool {
			for i, nd := range c.nodes {
				if nd == nil {
					continue
				}
				ps := state(i)
				if ps.Leader != uint64(lead+1) || ps.Term != term() || !slices.Equal(ps.ISR, isr) {
					return false
				}
			}
			return true
		}
	}
	require.Eventually(t, everywhere(1, 2, 3), 10*time.Second, 20*time.Millisecond, "leader %d: %+v", lead+1, state(lead))

	f := (lead + 1) % 3 // a follower
	c.stop(f)
	var rest []uint64
	for id := uint64(1); id <= 3; id++ {
		if id != uint64(f+1) {
			rest = append(rest, id)
		}
	}
	c.produce("isr-0", 1)
	require.Eventually(t, everywhere(rest...), 10*time.Second, 20*time.Millisecond, "after stopping %d: %+v", f+1, state(lead))
	c.start(f)
	require.Eventually(t, everywhere(1, 2, 3), 10*time.Second, 20*time.Millisecond, "after restarting %d: %+v", f+1, state(lead))
}
