package broker

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConfigDocUpToDate fails when docs/CONFIG.md is not what the config
// tables generate. Regenerate with `go generate ./broker`.
func TestConfigDocUpToDate(t *testing.T) {
	raw, err := os.ReadFile("../docs/CONFIG.md")
	require.NoError(t, err)
	require.True(t, string(raw) == ConfigReference(), "docs/CONFIG.md is stale: run `go generate ./broker`")
}

// Every startup setting parses its own default and formats it back.
func TestSettingsRoundTripDefaults(t *testing.T) {
	def := DefaultOptions()
	for i := range Settings {
		s := &Settings[i]
		var o Options
		require.NoError(t, s.Set(&o, s.Get(&def)), s.Key)
		require.Equal(t, s.Get(&def), s.Get(&o), s.Key)
		d := brokerConfigByName[s.Key]
		require.False(t, d != nil && d.dynamic(), "%s is both a startup setting and a dynamic broker config", s.Key)
	}
}

func brokerConfigValue(t *testing.T, adm *kadm.Client, name string) kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeBrokerConfigs(context.Background(), 0)
	require.NoError(t, err)
	for _, c := range rcs[0].Configs {
		if c.Key == name {
			return c
		}
	}
	t.Fatalf("broker config %s not described", name)
	return kadm.Config{}
}

// produceSized produces one record with a value of n random
// (incompressible) bytes and returns the produce error.
func produceSized(cl *kgo.Client, topic string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v := make([]byte, n)
	rand.Read(v)
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: v}).FirstErr()
}

// Static broker configs (Config.BrokerConfigs, the properties file) are
// reported as STATIC_BROKER_CONFIG and enforced; a dynamic override wins
// over them at once, and deleting it reverts to them, without a restart.
func TestStaticAndDynamicBrokerConfigsTakeEffect(t *testing.T) {
	t.Parallel()
	b := startTest(t, func(c *Config) {
		c.BrokerConfigs = map[string]string{"message.max.bytes": "2000", "log.retention.ms": "3600000"}
	})
	cl := newClient(t, b, kgo.RecordRetries(0), kgo.ProducerBatchMaxBytes(1<<20))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	_, err := adm.CreateTopic(ctx, 1, 1, nil, "st")
	require.NoError(t, err)

	c := brokerConfigValue(t, adm, "message.max.bytes")
	require.Equal(t, "2000", *c.Value)
	require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, c.Source)
	tcs, err := adm.DescribeTopicConfigs(ctx, "st")
	require.NoError(t, err)
	tc, err := tcs.On("st", nil)
	require.NoError(t, err)
	for _, e := range tc.Configs {
		if e.Key == "retention.ms" {
			require.Equal(t, "3600000", *e.Value)
			require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, e.Source)
		}
	}
	require.ErrorIs(t, produceSized(cl, "st", 5000), kerr.MessageTooLarge)

	ar, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "message.max.bytes", Value: kadm.StringPtr("100000")}})
	require.NoError(t, err)
	require.NoError(t, ar[0].Err)
	require.NoError(t, produceSized(cl, "st", 5000), "the dynamic override applies at once")

	ar, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "message.max.bytes"}})
	require.NoError(t, err)
	require.NoError(t, ar[0].Err)
	require.ErrorIs(t, produceSized(cl, "st", 5000), kerr.MessageTooLarge, "back to the static value")
	require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, brokerConfigValue(t, adm, "message.max.bytes").Source)
}

// Dynamic log configs change what the partitions do without a restart:
// smaller segments roll, then a retention size deletes the oldest.
func TestDynamicRetentionTakesEffect(t *testing.T) {
	t.Parallel()
	b := startTest(t, func(c *Config) { c.RetentionCheckInterval = 50 * time.Millisecond })
	cl := newClient(t, b, kgo.ProducerBatchMaxBytes(256<<10))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	_, err := adm.CreateTopic(ctx, 1, 1, nil, "dr")
	require.NoError(t, err)
	ar, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.segment.bytes", Value: kadm.StringPtr("1048576")}})
	require.NoError(t, err)
	require.NoError(t, ar[0].Err)
	for range 40 { // ~4 MiB: four segments of 1 MiB
		require.NoError(t, produceSized(cl, "dr", 100<<10))
	}
	starts, err := adm.ListStartOffsets(ctx, "dr")
	require.NoError(t, err)
	s, _ := starts.Lookup("dr", 0)
	require.Zero(t, s.Offset)

	ar, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.bytes", Value: kadm.StringPtr("1048576")}})
	require.NoError(t, err)
	require.NoError(t, ar[0].Err)
	require.Eventually(t, func() bool {
		starts, err := adm.ListStartOffsets(ctx, "dr")
		if err != nil {
			return false
		}
		s, _ := starts.Lookup("dr", 0)
		return s.Offset > 0
	}, 10*time.Second, 50*time.Millisecond, "retention.bytes inherited from log.retention.bytes deletes old segments")
}

func TestStartRejectsBadStaticBrokerConfig(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.DataDir = "127.0.0.1:0", t.TempDir()
	cfg.BrokerConfigs = map[string]string{"log.retention.ms": "soon"}
	_, err := Start(cfg)
	require.ErrorContains(t, err, "log.retention.ms")
	cfg.BrokerConfigs = map[string]string{"node.id": "3"}
	_, err = Start(cfg)
	require.ErrorContains(t, err, "node.id")
}

// DescribeLogDirs reports what the segment files hold on disk, through a
// produce, a restart (recovery) and a DeleteRecords that drops segments:
// their batches, as Kafka's does, so not the zeros written ahead of the
// active segment's (shoal.log.zero.ahead.bytes), which a clean shutdown
// cuts off.
func TestDescribeLogDirsRealSizes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := func() (*Broker, *kadm.Client) {
		b := startTest(t, func(c *Config) { c.DataDir = dir })
		return b, kadm.NewClient(newClient(t, b, kgo.ProducerBatchMaxBytes(256<<10)))
	}
	onDisk := func() int64 {
		var n int64
		matches, err := filepath.Glob(filepath.Join(dir, "logs", "ld-0", "*.log"))
		require.NoError(t, err)
		for _, m := range matches {
			fi, err := os.Stat(m)
			require.NoError(t, err)
			n += fi.Size()
		}
		return n
	}
	reported := func(adm *kadm.Client) int64 {
		dirs, err := adm.DescribeAllLogDirs(context.Background(), nil)
		require.NoError(t, err)
		var size int64 = -1
		dirs.Each(func(d kadm.DescribedLogDir) {
			require.Equal(t, filepath.Join(dir, "logs"), d.Dir)
			require.NoError(t, d.Err)
			if p, ok := d.Topics.Lookup("ld", 0); ok {
				size = p.Size
			}
		})
		return size
	}
	b, adm := start()
	_, err := adm.CreateTopic(context.Background(), 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("1048576")}, "ld")
	require.NoError(t, err)
	cl := newClient(t, b, kgo.ProducerBatchMaxBytes(256<<10))
	for range 30 {
		require.NoError(t, produceSized(cl, "ld", 100<<10))
	}
	require.Greater(t, onDisk(), int64(3_000_000))
	live := func(msg string) {
		disk, rep := onDisk(), reported(adm)
		require.GreaterOrEqual(t, disk, rep, msg)
		require.LessOrEqual(t, disk-rep, b.cfg.ZeroAheadBytes, msg)
	}
	live("while serving")

	require.NoError(t, b.Close())
	b, adm = start()
	require.Equal(t, onDisk(), reported(adm), "after recovery")

	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "ld", Partition: 0, At: 25})
	res, err := adm.DeleteRecords(context.Background(), os)
	require.NoError(t, err)
	require.NoError(t, res.Error())
	require.Less(t, reported(adm), int64(2<<20))
	live("after DeleteRecords dropped segments")
	_ = b
}

// Under --fsync=interval, flush.messages and flush.ms (and their dynamic
// broker defaults) decide when a partition is fsynced, without a restart.
func TestIntervalFlushConfigsTakeEffect(t *testing.T) {
	t.Parallel()
	b := startTest(t, withHTTP, func(c *Config) { c.Fsync, c.FlushInterval = FsyncInterval, time.Hour })
	cl := newClient(t, b, kgo.ProducerLinger(0))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	_, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"flush.messages": kadm.StringPtr("10")}, "fl")
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "fm")
	require.NoError(t, err)
	fsyncs := func() float64 { return scrapeMetrics(t, b).value("shoal_fsync_duration_seconds") }
	for range 5 {
		require.NoError(t, produceSized(cl, "fl", 10))
		require.NoError(t, produceSized(cl, "fm", 10))
	}
	time.Sleep(300 * time.Millisecond)
	require.Zero(t, fsyncs(), "nothing is due within the hour")
	for range 5 {
		require.NoError(t, produceSized(cl, "fl", 10))
	}
	require.Eventually(t, func() bool { return fsyncs() == 1 }, 5*time.Second, 20*time.Millisecond, "the 10th unsynced record of fl fsyncs it")

	ar, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.flush.interval.ms", Value: kadm.StringPtr("200")}})
	require.NoError(t, err)
	require.NoError(t, ar[0].Err)
	require.Eventually(t, func() bool { return fsyncs() >= 2 }, 5*time.Second, 20*time.Millisecond, "fm's records are older than log.flush.interval.ms")
}

// Under --fsync=interval without flush.* configs, a partition is fsynced
// once its oldest unsynced record is FlushInterval old.
func TestIntervalFsyncFollowsFlushInterval(t *testing.T) {
	t.Parallel()
	b := startTest(t, withHTTP, func(c *Config) { c.Fsync, c.FlushInterval = FsyncInterval, 150*time.Millisecond })
	cl := newClient(t, b)
	_, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, nil, "fi")
	require.NoError(t, err)
	require.NoError(t, produceSized(cl, "fi", 10))
	require.Eventually(t, func() bool { return scrapeMetrics(t, b).value("shoal_fsync_duration_seconds") >= 1 },
		5*time.Second, 20*time.Millisecond)
}

// Zeros ahead of the log (shoal.log.zero.ahead.bytes) are written only
// when every append waits for its fsync; under --fsync=interval nothing
// is written ahead whatever the setting says.
func TestZeroAheadOnlyWithFsyncAlways(t *testing.T) {
	t.Parallel()
	for _, fsync := range []FsyncPolicy{FsyncAlways, FsyncInterval} {
		b := startTest(t, func(c *Config) { c.Fsync, c.ZeroAheadBytes = fsync, 128<<10 })
		want := int64(128 << 10)
		if fsync == FsyncInterval {
			want = 0
		}
		require.Equal(t, want, b.logConfig(nil).ZeroAheadBytes, "fsync=%s", fsync)
	}
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.DataDir, cfg.ZeroAheadBytes = "127.0.0.1:0", t.TempDir(), 32<<20
	_, err := Start(cfg)
	require.ErrorContains(t, err, "zero-ahead")
}

// TestReplicaLagMaxFloor: replica.lag.time.max.ms below a second is
// refused (healthy followers would leave the ISR between raft ticks).
func TestReplicaLagMaxFloor(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ReplicaLagMax = 500 * time.Millisecond
	require.ErrorContains(t, cfg.Validate(), "replica.lag.time.max.ms")
	cfg.ReplicaLagMax = time.Second
	require.NoError(t, cfg.Validate())
}
