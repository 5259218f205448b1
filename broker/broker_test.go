package broker

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"
)

// startTest starts a broker on a free port with a fresh data dir.
func startTest(t *testing.T, mut ...func(*Config)) *Broker {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.Logger = zaptest.NewLogger(t)
	for _, m := range mut {
		m(&cfg)
	}
	b, err := Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

func newClient(t *testing.T, b *Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

func TestProduceConsumeRoundTrip(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.DefaultProduceTopic("rt"), kgo.ConsumeTopics("rt"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	_, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, "rt")
	require.NoError(t, err)
	const n = 1000
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) { require.NoError(t, err) })
	}
	require.NoError(t, cl.Flush(ctx))
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) {
			require.False(t, seen[string(r.Value)], "duplicate %s", r.Value)
			seen[string(r.Value)] = true
		})
	}
}

func TestRestartKeepsRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := func(c *Config) { c.DataDir = dir }
	b := startTest(t, cfg)
	cl := newClient(t, b, kgo.AllowAutoTopicCreation())
	for i := 0; i < 100; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "keep", Value: []byte(fmt.Sprint(i))}).FirstErr())
	}
	cl.Close()
	require.NoError(t, b.Close())

	b2 := startTest(t, cfg)
	cl2 := newClient(t, b2, kgo.ConsumeTopics("keep"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 100 {
		fs := cl2.PollFetches(ctx)
		require.NoError(t, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) {
			require.Equal(t, int64(len(got)), r.Offset)
			got = append(got, string(r.Value))
		})
	}
	for i, v := range got {
		require.Equal(t, fmt.Sprint(i), v)
	}
}

// TestGracefulCloseLosesNothing closes the broker while producers are
// busy: Close must return promptly, and every record whose produce was
// acknowledged must be there after a restart, at its acknowledged offset.
func TestGracefulCloseLosesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *Config) { c.DataDir = dir }
	b := startTest(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.RecordRetries(0), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0))
	_, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "busy")
	require.NoError(t, err)

	type ack struct {
		part   int32
		offset int64
		value  string
	}
	acks := make(chan ack, 1<<16)
	var acked atomic.Int64
	stop := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprint(i)
			cl.Produce(ctx, &kgo.Record{Topic: "busy", Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err == nil {
					acks <- ack{r.Partition, r.Offset, string(r.Value)}
					acked.Add(1)
				}
			})
			if i%100 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	// Close only once production is well under way, however loaded the
	// machine is.
	require.Eventually(t, func() bool { return acked.Load() >= 200 }, 20*time.Second, 5*time.Millisecond)
	began := time.Now()
	require.NoError(t, b.Close())
	require.Less(t, time.Since(began), 5*time.Second, "Close took too long")
	close(stop)
	cl.Close() // fails whatever is still buffered
	close(acks)
	want := map[int32]map[int64]string{0: {}, 1: {}}
	for a := range acks {
		want[a.part][a.offset] = a.value
	}
	require.GreaterOrEqual(t, len(want[0])+len(want[1]), 200)

	b2 := startTest(t, cfg)
	start := kgo.NewOffset().AtStart()
	cl2 := newClient(t, b2, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"busy": {0: start, 1: start}}))
	need := len(want[0]) + len(want[1])
	seen := 0
	for seen < need {
		fs := cl2.PollFetches(ctx)
		require.NoError(t, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) {
			if v, ok := want[r.Partition][r.Offset]; ok {
				require.Equal(t, v, string(r.Value), "partition %d offset %d", r.Partition, r.Offset)
				seen++
			}
		})
	}
}

// TestFetchSurvivesFailedPartition: one partition failing mid-fetch (here
// its log closed under the fetch, as a topic deletion does) is reported on
// that partition while the others are served. It used to panic the whole
// broker when an earlier partition of the same fetch had data.
func TestFetchSurvivesFailedPartition(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	_, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "two")
	require.NoError(t, err)
	for p := int32(0); p < 2; p++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "two", Partition: p, Value: []byte("v")}).FirstErr())
	}
	require.NoError(t, b.topics.Partition("two", 1).Log.Close())

	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = "two", b.topics.Get("two").ID // kgo picks the version
	for p := int32(0); p < 2; p++ {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, resp.Topics[0].Partitions, 2)
	got := map[int32]kmsg.FetchResponseTopicPartition{}
	for _, p := range resp.Topics[0].Partitions {
		got[p.Partition] = p
	}
	require.Zero(t, got[0].ErrorCode)
	require.NotEmpty(t, got[0].RecordBatches)
	require.NotZero(t, got[1].ErrorCode)
	// The broker is still serving.
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "two", Partition: 0, Value: []byte("w")}).FirstErr())
}

// TestIdleConnectionClosed: a connection that sends nothing for
// IdleTimeout is closed (Kafka connections.max.idle.ms); an active one is
// not.
func TestIdleConnectionClosed(t *testing.T) {
	t.Parallel()
	// The timeout is ten times the pause between the active client's
	// requests: with 300 ms, a scheduling stall of the race-instrumented
	// CI run (2 cores, every package's tests at once) closed the active
	// client too.
	b := startTest(t, func(c *Config) { c.IdleTimeout = time.Second })
	idle, err := net.Dial("tcp", b.Addr())
	require.NoError(t, err)
	defer idle.Close()
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	began := time.Now()
	_, err = idle.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the broker should close the idle connection")
	require.Less(t, time.Since(began), 6*time.Second)

	// A client that keeps talking stays connected past the timeout.
	cl := newClient(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 20; i++ {
		require.NoError(t, cl.Ping(ctx))
		time.Sleep(100 * time.Millisecond)
	}
}
