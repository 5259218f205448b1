package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	slog "github.com/shoal-mq/shoal/log"
)

// clusterChild is one broker process of a test cluster.
type clusterChild struct {
	t                 *testing.T
	bin, addr, peer   string
	id                int
	voters, dir, logf string
	extra             []string // more flags
	cmd               *exec.Cmd
	done              chan error
}

func (c *clusterChild) start() {
	c.t.Helper()
	logf, err := os.OpenFile(c.logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(c.t, err)
	fmt.Fprintf(logf, "=== test: start at %s\n", time.Now().Format(time.RFC3339Nano))
	args := []string{"--node-id", strconv.Itoa(c.id), "--listen", c.addr, "--voters", c.voters,
		"--peer-listen", c.peer, "--data-dir", c.dir, "--fsync", "always", "--log-level", "info", "--http-addr", "", "--sqs-addr", ""}
	cmd := exec.Command(c.bin, append(args, c.extra...)...)
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
	return startClusterWith(t, n, nil)
}

// startClusterWith is startCluster where broker from reaches broker to
// at peerAddr(from, to) if peerAddr is set (a proxy in between), at
// to's peer listener otherwise.
func startClusterWith(t *testing.T, n int, peerAddr func(from, to *clusterChild) string) []*clusterChild {
	children := newCluster(t, n, peerAddr)
	for _, c := range children {
		c.start()
	}
	return children
}

// newCluster is startClusterWith with no broker started yet.
func newCluster(t *testing.T, n int, peerAddr func(from, to *clusterChild) string) []*clusterChild {
	bin := buildShoal(t, t.TempDir())
	children := make([]*clusterChild, n)
	for i := range children {
		c := &clusterChild{t: t, bin: bin, id: i + 1, addr: freeAddr(t), peer: freeAddr(t), dir: t.TempDir()}
		c.logf = filepath.Join(c.dir, "shoal.log")
		children[i] = c
	}
	for _, c := range children {
		var voters []string
		for _, to := range children {
			addr := to.peer
			if peerAddr != nil && to != c {
				addr = peerAddr(c, to)
			}
			voters = append(voters, fmt.Sprintf("%d@%s", to.id, addr))
		}
		c.voters = strings.Join(voters, ",")
	}
	t.Cleanup(func() {
		for _, c := range children {
			c.kill()
		}
		if t.Failed() {
			for _, c := range children {
				b, _ := os.ReadFile(c.logf)
				t.Logf("broker %d log:\n%s", c.id, tailLines(string(b), 400))
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

	// KIP-951: a broker that does not lead orders-0 answers a Produce
	// v11 with NOT_LEADER_OR_FOLLOWER, the leader and its epoch, and the
	// leader's endpoint.
	other := leader%3 + 1
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 11, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, ltBatch(-1, -1, -1, false, "to a follower")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	raw, err := cl.Broker(int(other)).Request(ctx, req)
	require.NoError(t, err)
	presp := raw.(*kmsg.ProduceResponse)
	sp := presp.Topics[0].Partitions[0]
	require.Equal(t, kerr.NotLeaderForPartition.Code, sp.ErrorCode)
	require.Equal(t, leader, sp.CurrentLeader.LeaderID)
	require.Equal(t, md.Topics["orders"].Partitions[0].LeaderEpoch, sp.CurrentLeader.LeaderEpoch)
	require.Len(t, presp.Brokers, 1)
	require.Equal(t, leader, presp.Brokers[0].NodeID)
	for _, br := range md.Brokers {
		if br.NodeID == leader {
			require.Equal(t, br.Host, presp.Brokers[0].Host)
			require.Equal(t, br.Port, presp.Brokers[0].Port)
		}
	}
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

// TestClusterKillLoop (criteria C1, C2 and C7 of the cluster issue, short
// profile; scripts/killloop.sh runs the long one): four idempotent
// producers write to six partitions while partition leaders, and now
// and then the metadata leader, are SIGKILLed and restarted, KILLS
// times (CLUSTER_KILLS, default 4). Then every acknowledged
// record must be read back once, each producer's records of a partition
// in their order, and after a clean stop every replica's log must be
// byte-identical. It reports the time from each kill to the next
// acknowledged produce on the killed leader's partition.
func TestClusterKillLoop(t *testing.T) {
	kills := envInt(t, "CLUSTER_KILLS", 4)
	children := startCluster(t, 3)
	seeds := seedsOf(children)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(kills)*20*time.Second+2*time.Minute)
	defer cancel()
	adm, lp, probe := startLoop(t, ctx, seeds, "loop")
	var failovers []time.Duration
	for k := range kills {
		time.Sleep(time.Second)
		part := int32(k % 6)
		var victim int32
		for wait := time.Now(); ; time.Sleep(100 * time.Millisecond) {
			require.Less(t, time.Since(wait), 20*time.Second, "kill %d: no leader for partition %d", k, part)
			md, err := adm.Metadata(ctx, "loop")
			if err != nil {
				continue // asked a broker just killed: ask again
			}
			victim = md.Topics["loop"].Partitions[part].Leader
			if k%5 == 4 && md.Controller > 0 {
				victim = md.Controller // the metadata group's leader
			}
			if victim > 0 && children[victim-1].cmd != nil {
				break
			}
		}
		c := children[victim-1]
		killedAt := time.Now()
		c.kill()
		probePartition(t, ctx, probe, "loop", part) // the time until the partition takes a produce again
		failovers = append(failovers, time.Since(killedAt))
		c.start()
	}
	total := lp.finish(t)
	slices.Sort(failovers)
	if n := len(failovers); n > 0 {
		t.Logf("%d kills: kill to next acknowledged produce p50 %v, max %v", n,
			failovers[n/2].Round(time.Millisecond), failovers[n-1].Round(time.Millisecond))
	}
	t.Logf("%d records acknowledged", total)
	verifyLoop(t, ctx, seeds, "loop", lp.acked, total)
	time.Sleep(2 * time.Second) // followers catch up
	verifyReplicas(t, children, "loop", 6)
}

// startLoop creates topic and starts the loop producers on it; it
// returns an admin client and a probe producer whose metadata is fresh
// (franz-go answers Metadata from a cache younger than MetadataMinAge,
// 5 s by default, which would be most of what a failover takes).
func startLoop(t *testing.T, ctx context.Context, seeds []string, topic string) (*kadm.Client, *loopProducers, *kgo.Client) {
	adm := kadm.NewClient(newClusterClient(t, seeds, kgo.MetadataMinAge(50*time.Millisecond)))
	createLoopTopic(t, ctx, adm, topic)
	lp := startLoopProducers(t, ctx, seeds, topic)
	probe := newClusterClient(t, seeds, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(100*time.Millisecond))
	return adm, lp, probe
}

// envInt is the integer in environment variable name, def if unset.
func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, name)
	return n
}

// createLoopTopic creates topic (6 partitions on every broker) once
// the cluster takes it.
func createLoopTopic(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) {
	createClusterTopic(t, ctx, adm, topic, 6, -1)
}

// createClusterTopic creates topic, retrying until the cluster can (its
// brokers registered, a metadata leader).
func createClusterTopic(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, partitions int32, rf int16) {
	for {
		resp, err := adm.CreateTopic(ctx, partitions, rf, nil, topic)
		if err == nil && resp.Err == nil {
			return
		}
		require.NoError(t, ctx.Err(), "topic never created: %v %v", err, resp.Err)
		time.Sleep(200 * time.Millisecond)
	}
}

// probePartition produces to one partition until a produce is
// acknowledged.
func probePartition(t *testing.T, ctx context.Context, probe *kgo.Client, topic string, part int32) {
	for {
		r := &kgo.Record{Topic: topic, Partition: part, Value: []byte("probe")}
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		err := probe.ProduceSync(pctx, r).FirstErr()
		pcancel()
		if err == nil {
			return
		}
		require.NoError(t, ctx.Err())
	}
}

// loopAck is where a record was acknowledged.
type loopAck struct {
	part int32
	off  int64
}

// loopProducers are four idempotent franz-go producers, each writing
// values "p/n" (n counting up), 20 records per ProduceSync, until
// finish.
type loopProducers struct {
	acked []map[int]loopAck // per producer, by n
	stop  chan struct{}
	errs  chan error
}

func startLoopProducers(t *testing.T, ctx context.Context, seeds []string, topic string) *loopProducers {
	const producers = 4
	lp := &loopProducers{acked: make([]map[int]loopAck, producers), stop: make(chan struct{}), errs: make(chan error, producers)}
	for p := range producers {
		lp.acked[p] = map[int]loopAck{}
		cl := newClusterClient(t, seeds)
		go func() {
			for n := 0; ; n += 20 {
				select {
				case <-lp.stop:
					lp.errs <- nil
					return
				default:
				}
				var rs []*kgo.Record
				for j := n; j < n+20; j++ {
					rs = append(rs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%d/%d", p, j)})
				}
				res := cl.ProduceSync(ctx, rs...)
				if err := res.FirstErr(); err != nil {
					lp.errs <- fmt.Errorf("producer %d: %w", p, err)
					return
				}
				for _, r := range res {
					var pp, j int
					_, _ = fmt.Sscanf(string(r.Record.Value), "%d/%d", &pp, &j)
					lp.acked[p][j] = loopAck{r.Record.Partition, r.Record.Offset}
				}
			}
		}()
	}
	return lp
}

// finish stops the producers, fails on any producer error, and
// returns how many records were acknowledged.
func (lp *loopProducers) finish(t *testing.T) int {
	close(lp.stop)
	for range lp.acked {
		require.NoError(t, <-lp.errs)
	}
	total := 0
	for _, m := range lp.acked {
		total += len(m)
	}
	return total
}

// verifyLoop reads topic back: every acknowledged record once, at its
// acknowledged partition and offset, each producer's records in order
// in each partition.
func verifyLoop(t *testing.T, ctx context.Context, seeds []string, topic string, acked []map[int]loopAck, total int) {
	cons := newClusterClient(t, seeds, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	type pos struct {
		p   int
		prt int32
	}
	last := map[pos]int{}
	seen := map[string]bool{}
	found, read := 0, 0
	// Reading gives up only when it stops making progress (the long
	// profiles read tens of millions of records).
	lastRead, progressed := 0, time.Now()
	for found < total && time.Since(progressed) < 60*time.Second {
		if read > lastRead {
			lastRead, progressed = read, time.Now()
		}
		fs := cons.PollFetches(ctx)
		read += fs.NumRecords()
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if v == "probe" {
				return
			}
			require.False(t, seen[v], "%s read twice", v)
			seen[v] = true
			var p, j int
			_, err := fmt.Sscanf(v, "%d/%d", &p, &j)
			require.NoError(t, err, "value %q", v)
			k := pos{p, r.Partition}
			if prev, ok := last[k]; ok {
				require.Greater(t, j, prev, "producer %d out of order in partition %d", p, r.Partition)
			}
			last[k] = j
			if a, ok := acked[p][j]; ok {
				require.Equal(t, a, loopAck{r.Partition, r.Offset}, "%s moved", v)
				found++
			}
		})
	}
	require.Equal(t, total, found, "acknowledged records missing")
}

// verifyReplicas stops the brokers cleanly and checks C2: every
// partition's replicas hold the same log, as far as the shortest goes.
func verifyReplicas(t *testing.T, children []*clusterChild, topic string, parts int) {
	for _, c := range children {
		if c.cmd != nil {
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			<-c.done
			c.cmd = nil
		}
	}
	for part := range parts {
		var logs [][]byte
		for _, c := range children {
			logs = append(logs, replicaLog(t, filepath.Join(c.dir, "cluster", fmt.Sprintf("%s-%d", topic, part))))
		}
		n := len(logs[0])
		for _, l := range logs {
			n = min(n, len(l))
		}
		for i, l := range logs {
			require.True(t, bytes.Equal(logs[0][:n], l[:n]), "%s-%d: replica %d differs", topic, part, i+1)
		}
		require.Greater(t, n, 0)
	}
}

func newClusterClient(t *testing.T, seeds []string, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RecordRetries(1 << 30),
		kgo.ProducerLinger(0), kgo.RetryTimeout(2 * time.Minute)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// replicaLog reads a stopped replica's whole log (every batch, raft's
// own included) from its directory.
func replicaLog(t *testing.T, dir string) []byte {
	cfg := slog.DefaultConfig()
	cfg.Replica = true
	p, err := slog.Open(slog.OSFS(), dir, cfg, nil)
	require.NoError(t, err, dir)
	defer p.Close()
	b, _, err := p.ReadOrdinals(nil, p.FirstOrdinal(), p.NextOrdinal(), 1<<40)
	require.NoError(t, err)
	return b
}
