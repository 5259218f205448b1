package broker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/dedup"
	"github.com/shoal-mq/shoal/broker/records"
)

// dedupTopic creates topic with configs (name, value pairs).
func dedupTopic(t *testing.T, b *Broker, topic string, partitions int32, kv ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfgs := map[string]*string{}
	for i := 0; i < len(kv); i += 2 {
		cfgs[kv[i]] = kadm.StringPtr(kv[i+1])
	}
	r, err := kadm.NewClient(newClient(t, b)).CreateTopic(ctx, partitions, 1, cfgs, topic)
	require.NoError(t, err)
	require.NoError(t, r.Err, r.ErrMessage)
}

// rec is a record with value v and, if id != "", header dedup-id=id
// (plus extra header pairs).
func rec(topic, v, id string, hdrs ...string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Value: []byte(v)}
	if id != "" {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "dedup-id", Value: []byte(id)})
	}
	for i := 0; i < len(hdrs); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: hdrs[i], Value: []byte(hdrs[i+1])})
	}
	return r
}

// produceAll produces recs in one ProduceSync (one batch per partition)
// and requires success for every record.
func produceAll(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

// values reads topic from the start and returns the values in offset
// order per partition (partitions concatenated).
func values(t *testing.T, b *Broker, topic string, want int) []string {
	t.Helper()
	var out []string
	for _, r := range dlqConsume(t, b, topic, want) {
		out = append(out, string(r.Value))
	}
	return out
}

func TestDedupAcrossBatchesAndCompression(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"idempotent-none", nil},
		{"idempotent-zstd", []kgo.Opt{kgo.ProducerBatchCompression(kgo.ZstdCompression())}},
		{"plain-gzip", []kgo.Opt{kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.GzipCompression())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "dd-" + tc.name
			dedupTopic(t, b, topic, 1, dedup.WindowConfig, "60000")
			cl := newClient(t, b, tc.opts...)
			produceAll(t, cl, rec(topic, "a1", "a"), rec(topic, "b1", "b"), rec(topic, "a2", "a"), rec(topic, "n1", ""))
			produceAll(t, cl, rec(topic, "b2", "b"))
			produceAll(t, cl, rec(topic, "c1", "c"), rec(topic, "a3", "a"), rec(topic, "n2", ""))
			produceAll(t, cl, rec(topic, "a4", "a"), rec(topic, "b3", "b")) // every record a duplicate
			produceAll(t, cl, rec(topic, "d1", "d"))
			require.Equal(t, []string{"a1", "b1", "n1", "c1", "n2", "d1"}, values(t, b, topic, 6))
		})
	}
}

func TestDedupSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := startTest(t, func(c *Config) { c.DataDir = dir })
	dedupTopic(t, b, "ddr", 2, dedup.WindowConfig, "600000")
	cl := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := rec("ddr", "x1", "x")
	produceAll(t, cl, r)
	cl.Close()
	require.NoError(t, b.Close())

	b2 := startTest(t, func(c *Config) { c.DataDir = dir })
	cl2 := newClient(t, b2, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r2 := rec("ddr", "x2", "x")
	r2.Partition = 1 // topic scope: across partitions too
	produceAll(t, cl2, rec("ddr", "x3", "x"), r2, rec("ddr", "y1", "y"))
	require.ElementsMatch(t, []string{"x1", "y1"}, values(t, b2, "ddr", 2))
}

func TestDedupWindowExpires(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	// Long enough that e2 lands within the window on a loaded machine.
	dedupTopic(t, b, "dde", 1, dedup.WindowConfig, "3000")
	cl := newClient(t, b)
	produceAll(t, cl, rec("dde", "e1", "e"))
	produceAll(t, cl, rec("dde", "e2", "e"))
	time.Sleep(3100 * time.Millisecond)
	produceAll(t, cl, rec("dde", "e3", "e"))
	require.Equal(t, []string{"e1", "e3"}, values(t, b, "dde", 2))
}

func TestDedupContent(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	dedupTopic(t, b, "ddc", 1, dedup.WindowConfig, "60000", dedup.KeyConfig, "content")
	cl := newClient(t, b)
	kv := func(k, v string) *kgo.Record { return &kgo.Record{Topic: "ddc", Key: []byte(k), Value: []byte(v)} }
	produceAll(t, cl, kv("k", "v"), kv("k", "w"), &kgo.Record{Topic: "ddc", Value: []byte("v")})
	produceAll(t, cl, kv("k", "v"), kv("", "v"), &kgo.Record{Topic: "ddc", Value: []byte("v")})
	var got []string
	for _, r := range dlqConsume(t, b, "ddc", 4) {
		got = append(got, strconv.Quote(string(r.Key))+"="+string(r.Value))
	}
	// Null and empty keys differ.
	require.Equal(t, []string{`"k"=v`, `"k"=w`, `""=v`, `""=v`}, got)
}

func TestDedupMessageGroupScope(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	dedupTopic(t, b, "ddg", 1, dedup.WindowConfig, "60000", dedup.ScopeConfig, "message-group", dedup.KeyConfig, "header:id",
		dedup.GroupHeaderConfig, "grp")
	cl := newClient(t, b)
	r := func(v, id, g string) *kgo.Record {
		return &kgo.Record{Topic: "ddg", Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(id)}, {Key: "grp", Value: []byte(g)}}}
	}
	produceAll(t, cl, r("1", "m", "g1"), r("2", "m", "g2"), r("3", "m", "g1"))
	produceAll(t, cl, r("4", "m", "g2"), r("5", "n", "g2"), r("6", "m", "g3"))
	require.Equal(t, []string{"1", "2", "5", "6"}, values(t, b, "ddg", 4))
}

func TestDedupConfigValidation(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	for _, kv := range [][2]string{
		{dedup.WindowConfig, "-1"}, {dedup.WindowConfig, "x"}, {dedup.WindowConfig, "604800001"},
		{dedup.KeyConfig, "header:"}, {dedup.KeyConfig, "key"}, {dedup.KeyConfig, ""},
		{dedup.ScopeConfig, "queue"}, {dedup.GroupHeaderConfig, ""},
	} {
		_, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{kv[0]: kadm.StringPtr(kv[1])}, "ddv")
		require.ErrorIs(t, err, kerr.InvalidConfig, "%s=%q", kv[0], kv[1])
	}
	r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{dedup.WindowConfig: kadm.StringPtr("300000"),
		dedup.KeyConfig: kadm.StringPtr("content"), dedup.ScopeConfig: kadm.StringPtr("message-group")}, "ddv")
	require.NoError(t, err)
	require.NoError(t, r.Err, r.ErrMessage)
	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: dedup.ScopeConfig, Value: kadm.StringPtr("partition")}}, "ddv")
	require.NoError(t, err)
	require.ErrorIs(t, alt[0].Err, kerr.InvalidConfig)
}

// TestDedupHolesWithShareGroup: the holes duplicates leave (including a
// batch left with no record) are skipped by a franz-go share consumer,
// and the share-partition's SPSO still reaches the end of the log.
func TestDedupHolesWithShareGroup(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	dedupTopic(t, b, "ddh", 1, dedup.WindowConfig, "60000")
	cl := newClient(t, b)
	produceAll(t, cl, rec("ddh", "a1", "a"), rec("ddh", "b1", "b"), rec("ddh", "a2", "a"))
	produceAll(t, cl, rec("ddh", "a3", "a"), rec("ddh", "b2", "b")) // a batch of holes only
	produceAll(t, cl, rec("ddh", "c1", "c"))
	end := b.topics.Partition("ddh", 0).Log.HighWatermark()
	require.Equal(t, int64(6), end)
	setShareGroupConfigs(t, b, "hg", "share.auto.offset.reset", "earliest")
	sc := newShareClient(t, b, "hg", kgo.ConsumeTopics("ddh"))
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for spso(t, b, "hg", "ddh", 0) < end {
		require.True(t, time.Now().Before(deadline), "SPSO stuck at %d, got %v", spso(t, b, "hg", "ddh", 0), got)
		for _, r := range pollShare(t, sc, time.Second) {
			got = append(got, string(r.Value))
			r.Ack(kgo.AckAccept)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		require.NoError(t, sc.FlushAcks(ctx))
		cancel()
	}
	require.Equal(t, []string{"a1", "b1", "c1"}, got)
}

// TestDedupDuplicateWaitsForFirstCopy: with dedup.scope=topic a
// duplicate may go to another partition than its first copy. It is
// answered only once the first copy is durable: here the first copy is
// appended to partition 0 behind the syncer's back (nothing would fsync
// it), and the duplicate's answer must come after partition 0's high
// watermark, which follows the fsynced end, covers it.
func TestDedupDuplicateWaitsForFirstCopy(t *testing.T) {
	t.Parallel()
	for _, rebuild := range []bool{false, true} {
		t.Run("rebuild="+strconv.FormatBool(rebuild), func(t *testing.T) {
			t.Parallel()
			testDedupDuplicateWaits(t, rebuild)
		})
	}
}

// testDedupDuplicateWaits is TestDedupDuplicateWaitsForFirstCopy; with
// rebuild the table is rebuilt from the log (a config change) between
// the first copy and the duplicate, so the first copy's id comes from a
// record above the high watermark.
func testDedupDuplicateWaits(t *testing.T, rebuild bool) {
	b := startTest(t)
	const topic = "dd-first"
	dedupTopic(t, b, topic, 2, dedup.WindowConfig, "60000")
	cl := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	// A durable record in the window, so a rebuild reads partition 0 from
	// below the high watermark on.
	earlier := rec(topic, "earlier", "w")
	produceAll(t, cl, earlier)
	tp := b.topics.Get(topic)
	_, cfgs := b.topics.Snapshot(tp)
	p0 := b.topics.Partition(topic, 0)
	r := kmsg.Record{Value: []byte("first"), Headers: []kmsg.Header{{Key: "dedup-id", Value: []byte("x")}}}
	now := time.Now()
	res, deps, err := b.dedup.Append(tp, p0, b.dedupSettingsFor(cfgs), records.EncodeBatch(records.AppendRecord(nil, &r), 1, now.UnixMilli(), now.UnixMilli()), now)
	require.NoError(t, err)
	require.Zero(t, deps.Waits())
	require.Less(t, p0.Log.HighWatermark(), res.LastOffset+1, "not fsynced yet")

	if rebuild {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := kadm.NewClient(newClient(t, b)).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: dedup.WindowConfig, Value: kadm.StringPtr("60001")}}, topic)
		require.NoError(t, err)
	}
	dup := rec(topic, "second", "x")
	dup.Partition = 1
	produceAll(t, cl, dup)
	require.GreaterOrEqual(t, p0.Log.HighWatermark(), res.LastOffset+1, "the duplicate was answered before its first copy was durable")
	require.Equal(t, []string{"earlier", "first"}, values(t, b, topic, 2))
}

// TestDedupTopicDeletedAndRecreated: a deleted topic's table goes with
// it, and a topic created again under the same name (a new id) starts
// with an empty window: an id its predecessor stored is stored again.
func TestDedupTopicDeletedAndRecreated(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	dedupTopic(t, b, "ddx", 1, dedup.WindowConfig, "600000")
	cl := newClient(t, b)
	produceAll(t, cl, rec("ddx", "x1", "x"), rec("ddx", "x2", "x"))
	require.Equal(t, []string{"x1"}, values(t, b, "ddx", 1))
	old := b.topics.Get("ddx").ID
	require.True(t, b.dedup.Has(old))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dr, err := kadm.NewClient(newClient(t, b)).DeleteTopics(ctx, "ddx")
	require.NoError(t, err)
	require.NoError(t, dr["ddx"].Err)
	require.False(t, b.dedup.Has(old), "the deleted topic's table is dropped")

	dedupTopic(t, b, "ddx", 1, dedup.WindowConfig, "600000")
	require.NotEqual(t, old, b.topics.Get("ddx").ID)
	cl2 := newClient(t, b)
	produceAll(t, cl2, rec("ddx", "x3", "x"), rec("ddx", "x4", "x"))
	require.Equal(t, []string{"x3"}, values(t, b, "ddx", 1))
}
