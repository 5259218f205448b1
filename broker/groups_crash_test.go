package broker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"
)

// crashChildEnv names the data directory a child process serves from in
// TestGroupCrashResume; the child writes its address to <dir>/addr and
// runs until it is killed.
const crashChildEnv = "SHOAL_GROUP_CRASH_CHILD"

// TestGroupCrashResume: a group consumes and commits against a broker in
// a child process, the child is killed with SIGKILL (no shutdown at all),
// and a broker restarted on the same data directory lets the group resume
// exactly from the committed offsets, metadata included.
func TestGroupCrashResume(t *testing.T) {
	serveCrashChild(t, crashChildEnv, func(b *Broker) {
		setBrokerConfigs(b, "group.initial.rebalance.delay.ms", "0", "group.min.session.timeout.ms", "1000")
	})
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	child := startCrashChild(t, "TestGroupCrashResume", crashChildEnv, dir)
	addr := child.addr

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("crash"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, "crash")
	require.NoError(t, err)
	for i := 0; i < 300; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte(strconv.Itoa(i))}).FirstErr())
	}
	cl.Close()

	// Consume part of the topic in a group, committing synchronously with
	// metadata; what the broker acknowledged must survive the kill.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("crash-group"), kgo.ConsumeTopics("crash"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.SessionTimeout(2*time.Second), kgo.HeartbeatInterval(200*time.Millisecond))
	require.NoError(t, err)
	consumed := 0
	for consumed < 150 {
		fs := consumer.PollRecords(ctx, 150-consumed)
		require.NoError(t, fs.Err0())
		consumed += fs.NumRecords()
	}
	require.NoError(t, consumer.CommitUncommittedOffsets(ctx))
	adm := kadm.NewClient(consumer)
	before, err := adm.FetchOffsets(ctx, "crash-group")
	require.NoError(t, err)
	require.NoError(t, before.Error())
	var sum int64
	before.Each(func(o kadm.OffsetResponse) { sum += o.At })
	require.Equal(t, int64(150), sum)
	simple := kadm.Offsets{}
	simple.Add(kadm.Offset{Topic: "crash", Partition: 1, At: 42, LeaderEpoch: 0, Metadata: "simple-meta"})
	_, err = adm.CommitOffsets(ctx, "simple-group", simple)
	require.NoError(t, err)

	child.kill()
	consumer.Close()

	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.DataDir, cfg.Logger = "127.0.0.1:0", dir, zaptest.NewLogger(t)
	b, err := Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	setBrokerConfigs(b, "group.initial.rebalance.delay.ms", "0", "group.min.session.timeout.ms", "1000")

	adm2 := kadm.NewClient(newClient(t, b))
	after, err := adm2.FetchOffsets(ctx, "crash-group")
	require.NoError(t, err)
	require.Equal(t, before.Offsets(), after.Offsets())
	s, err := adm2.FetchOffsets(ctx, "simple-group")
	require.NoError(t, err)
	o, ok := s.Lookup("crash", 1)
	require.True(t, ok)
	require.Equal(t, int64(42), o.At)
	require.Equal(t, "simple-meta", o.Metadata)

	// The group resumes exactly where it committed.
	resumed := newClient(t, b, kgo.ConsumerGroup("crash-group"), kgo.ConsumeTopics("crash"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(2*time.Second), kgo.HeartbeatInterval(200*time.Millisecond))
	// Each partition holds 100 records; those committed to the end have
	// nothing left to deliver, and one the first consumer never fetched
	// from (it may have read 150 records from two partitions) has no
	// commit and starts at the reset offset, 0.
	want := map[int32]int64{}
	for p := int32(0); p < 3; p++ {
		at := int64(0)
		if c, ok := before.Lookup("crash", p); ok {
			at = c.At
		}
		if at < 100 {
			want[p] = at
		}
	}
	require.NotEmpty(t, want)
	first := map[int32]int64{}
	for len(first) < len(want) {
		fs := resumed.PollFetches(ctx)
		require.NoError(t, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
		})
	}
	require.Equal(t, want, first, "each partition resumed at its committed offset")
}
