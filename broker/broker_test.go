package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
