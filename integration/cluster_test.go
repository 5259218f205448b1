package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// clusterChild is one broker process of a test cluster.
type clusterChild struct {
	t                 *testing.T
	bin, addr, peer   string
	id                int
	voters, dir, logf string
	cmd               *exec.Cmd
	done              chan error
}

func (c *clusterChild) start() {
	c.t.Helper()
	logf, err := os.OpenFile(c.logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(c.t, err)
	fmt.Fprintf(logf, "=== test: start at %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(c.bin, "--node-id", strconv.Itoa(c.id), "--listen", c.addr, "--voters", c.voters,
		"--peer-listen", c.peer, "--data-dir", c.dir, "--fsync", "always", "--log-level", "info", "--http-addr", "")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(c.t, cmd.Start())
	_ = logf.Close()
	c.cmd, c.done = cmd, make(chan error, 1)
	go func() { c.done <- cmd.Wait() }()
}

func (c *clusterChild) kill() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
	c.cmd = nil
}

// startCluster builds cmd/shoal and starts n brokers on 127.0.0.1.
func startCluster(t *testing.T, n int) []*clusterChild {
	bin := buildShoal(t, t.TempDir())
	var voters []string
	children := make([]*clusterChild, n)
	for i := range children {
		c := &clusterChild{t: t, bin: bin, id: i + 1, addr: freeAddr(t), peer: freeAddr(t), dir: t.TempDir()}
		c.logf = filepath.Join(c.dir, "shoal.log")
		voters = append(voters, fmt.Sprintf("%d@%s", c.id, c.peer))
		children[i] = c
	}
	for _, c := range children {
		c.voters = strings.Join(voters, ",")
		c.start()
	}
	t.Cleanup(func() {
		for _, c := range children {
			c.kill()
		}
		if t.Failed() {
			for _, c := range children {
				b, _ := os.ReadFile(c.logf)
				t.Logf("broker %d log:\n%s", c.id, tailLines(string(b), 40))
			}
		}
	})
	return children
}

func seedsOf(children []*clusterChild) []string {
	var s []string
	for _, c := range children {
		s = append(s, c.addr)
	}
	return s
}

// TestClusterFailover: three broker processes replicate a topic; an
// idempotent franz-go producer given the three seeds goes on through a
// SIGKILL of a partition's leader, and a consumer then reads every
// acknowledged record exactly once, in order, from the surviving
// brokers and from the restarted one.
func TestClusterFailover(t *testing.T) {
	children := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seedsOf(children)...), kgo.RecordRetries(1000),
		kgo.ProducerLinger(0), kgo.RetryTimeout(60*time.Second))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var created bool
	for !created {
		resp, err := adm.CreateTopic(ctx, 3, -1, nil, "orders")
		if err == nil && resp.Err == nil {
			created = true
			break
		}
		require.NoError(t, ctx.Err(), "topic never created: %v %v", err, resp.Err)
		time.Sleep(200 * time.Millisecond)
	}

	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i += 100 {
			var rs []*kgo.Record
			for j := i; j < min(i+100, to); j++ {
				rs = append(rs, &kgo.Record{Topic: "orders", Key: []byte(strconv.Itoa(j % 7)), Value: []byte(strconv.Itoa(j))})
			}
			require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
		}
	}
	produce(0, 2000)

	md, err := adm.Metadata(ctx, "orders")
	require.NoError(t, err)
	leader := md.Topics["orders"].Partitions[0].Leader
	require.Positive(t, leader)
	killed := children[leader-1]
	t.Logf("killing broker %d, leader of orders-0", leader)
	began := time.Now()
	killed.kill()
	produce(2000, 4000)
	t.Logf("4000 records acknowledged, 2000 of them after the kill, %v after it", time.Since(began).Round(time.Millisecond))
	killed.start()

	// Read everything back with a fresh client: each partition's values
	// in the order they were produced, no value twice, none missing.
	cons, err := kgo.NewClient(kgo.SeedBrokers(seedsOf(children)...), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cons.Close()
	seen := map[int]bool{}
	last := map[int32]int{}
	for len(seen) < 4000 {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of 4000", len(seen))
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			v, err := strconv.Atoi(string(r.Value))
			require.NoError(t, err)
			require.False(t, seen[v], "value %d twice", v)
			if prev, ok := last[r.Partition]; ok {
				require.Greater(t, v, prev, "partition %d out of order", r.Partition)
			}
			last[r.Partition] = v
			seen[v] = true
		})
	}
	require.Len(t, seen, 4000)
}
