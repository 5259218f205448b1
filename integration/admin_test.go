package integration

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's topic defaults (TopicConfig / ServerLogConfigs), which Shoal keeps.
var kafkaTopicDefaults = map[string]string{
	"retention.ms":      "604800000",
	"retention.bytes":   "-1",
	"segment.bytes":     "1073741824",
	"segment.ms":        "604800000",
	"max.message.bytes": "1048588",
	"cleanup.policy":    "delete",
}

func configMap(t *testing.T, rc kadm.ResourceConfig) map[string]kadm.Config {
	t.Helper()
	require.NoError(t, rc.Err, "describe configs of %s: %s", rc.Name, rc.ErrMessage)
	m := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		m[c.Key] = c
	}
	return m
}

func (b *testBroker) topicConfigs(t *testing.T, topic string) map[string]kadm.Config {
	t.Helper()
	rcs, err := b.admin(t).DescribeTopicConfigs(testContext(t), topic)
	require.NoError(t, err)
	rc, err := rcs.On(topic, nil)
	require.NoError(t, err)
	return configMap(t, rc)
}

func TestCreateTopics(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	adm := b.admin(t)

	// Success, with configs.
	name := topicName(t)
	created, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{
		"retention.ms":      strp("12345"),
		"max.message.bytes": strp("200000"),
	}, name)
	require.NoError(t, err)
	require.NoError(t, created.Err, created.ErrMessage)
	assert.Equal(t, int32(3), created.NumPartitions)
	assert.Equal(t, int16(1), created.ReplicationFactor)
	assert.NotEqual(t, kadm.TopicID{}, created.ID, "CreateTopics v7 returns the topic id")

	cfg := b.topicConfigs(t, name)
	assert.Equal(t, "12345", cfgValue(cfg, "retention.ms"))
	assert.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, cfg["retention.ms"].Source, "retention.ms source")
	assert.Equal(t, "200000", cfgValue(cfg, "max.message.bytes"))
	if !b.External {
		for k, v := range kafkaTopicDefaults {
			if k == "retention.ms" || k == "max.message.bytes" {
				continue
			}
			c, ok := cfg[k]
			if assert.True(t, ok, "topic config %s missing from DescribeConfigs", k) {
				assert.Equal(t, v, c.MaybeValue(), "default of %s", k)
				assert.NotEqual(t, kmsg.ConfigSourceDynamicTopicConfig, c.Source, "%s was not set on the topic", k)
			}
		}
	}

	md, err := adm.Metadata(ctx, name)
	require.NoError(t, err)
	require.NoError(t, md.Topics[name].Err)
	assert.Len(t, md.Topics[name].Partitions, 3)
	assert.Equal(t, created.ID, md.Topics[name].ID, "metadata topic id equals the id CreateTopics returned")

	// Validate-only creates nothing.
	dry := topicName(t)
	vr, err := adm.ValidateCreateTopics(ctx, 2, 1, nil, dry)
	require.NoError(t, err)
	require.NoError(t, vr[dry].Err)

	// Errors.
	long := strings.Repeat("x", 250)
	cases := []struct {
		name       string
		topic      string
		partitions int32
		rf         int16
		configs    map[string]*string
		want       *kerr.Error
	}{
		{"exists", name, 3, 1, nil, kerr.TopicAlreadyExists},
		{"zero partitions", topicName(t), 0, 1, nil, kerr.InvalidPartitions},
		{"negative partitions", topicName(t), -5, 1, nil, kerr.InvalidPartitions},
		{"non-numeric retention.ms", topicName(t), 1, 1, map[string]*string{"retention.ms": strp("soon")}, kerr.InvalidConfig},
		{"unknown config", topicName(t), 1, 1, map[string]*string{"no.such.config": strp("1")}, kerr.InvalidConfig},
		{"bad cleanup.policy", topicName(t), 1, 1, map[string]*string{"cleanup.policy": strp("shred")}, kerr.InvalidConfig},
		{"negative max.message.bytes", topicName(t), 1, 1, map[string]*string{"max.message.bytes": strp("-1")}, kerr.InvalidConfig},
		{"slash in name", "bad/name-" + topicName(t), 1, 1, nil, kerr.InvalidTopicException},
		{"dot-dot name", "..", 1, 1, nil, kerr.InvalidTopicException},
		{"name too long", long, 1, 1, nil, kerr.InvalidTopicException},
	}
	if len(md.Brokers) < 3 {
		cases = append(cases, struct {
			name       string
			topic      string
			partitions int32
			rf         int16
			configs    map[string]*string
			want       *kerr.Error
		}{"replication factor above broker count", topicName(t), 1, 3, nil, kerr.InvalidReplicationFactor})
	}
	for _, tc := range cases {
		resp, err := adm.CreateTopics(ctx, tc.partitions, tc.rf, tc.configs, tc.topic)
		require.NoError(t, err, tc.name)
		r, ok := resp[tc.topic]
		require.True(t, ok, "%s: no response for the topic", tc.name)
		assert.ErrorIs(t, r.Err, tc.want, "%s: got %v (%s)", tc.name, r.Err, r.ErrMessage)
	}

	// None of the failed or dry-run topics exist.
	all, err := adm.ListTopics(ctx)
	require.NoError(t, err)
	assert.False(t, all.Has(dry), "validate-only created %s", dry)
	for _, tc := range cases {
		if tc.topic != name {
			assert.False(t, all.Has(tc.topic), "%s: failed create left topic %q behind", tc.name, tc.topic)
		}
	}
}

func TestDeleteTopics(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	adm := b.admin(t)
	topic := b.createTopic(t, 2, nil)
	cl := b.client(t)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr())
	md, err := adm.Metadata(ctx, topic)
	require.NoError(t, err)
	oldID := md.Topics[topic].ID

	dr, err := adm.DeleteTopic(ctx, topic)
	require.NoError(t, err)
	require.NoError(t, dr.Err, dr.ErrMessage)

	c := dialRaw(t, b.Addr)
	mt := c.metadata(topic)
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, mt.ErrorCode, "metadata of a deleted topic: got %s", kerr.ErrorForCode(mt.ErrorCode))

	resp, err := adm.DeleteTopics(ctx, topic)
	require.NoError(t, err)
	assert.ErrorIs(t, resp[topic].Err, kerr.UnknownTopicOrPartition, "deleting twice")

	// Recreating gives a new id and an empty log.
	cr, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, cr.Err)
	assert.NotEqual(t, oldID, cr.ID, "a recreated topic gets a new id")
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	end, ok := ends.Lookup(topic, 0)
	require.True(t, ok)
	require.NoError(t, end.Err)
	assert.Equal(t, int64(0), end.Offset, "a recreated topic starts empty")
}

func TestCreatePartitions(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	adm := b.admin(t)
	topic := b.createTopic(t, 2, nil)

	resp, err := adm.CreatePartitions(ctx, 3, topic)
	require.NoError(t, err)
	require.NoError(t, resp[topic].Err, resp[topic].ErrMessage)

	c := dialRaw(t, b.Addr)
	mt := c.metadata(topic)
	require.Zero(t, mt.ErrorCode)
	require.Len(t, mt.Partitions, 5, "metadata after CreatePartitions")
	for _, pd := range mt.Partitions {
		assert.Zero(t, pd.ErrorCode, "partition %d", pd.Partition)
		assert.GreaterOrEqual(t, pd.Leader, int32(0), "partition %d leader", pd.Partition)
	}
	cl := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 4, Value: []byte("new partition")})
	require.NoError(t, r.FirstErr())
	assert.Equal(t, int64(0), r[0].Record.Offset)

	// Shrinking, staying the same, and unknown topics fail.
	resp, err = adm.UpdatePartitions(ctx, 3, topic)
	require.NoError(t, err)
	assert.ErrorIs(t, resp[topic].Err, kerr.InvalidPartitions, "shrinking 5 -> 3")
	resp, err = adm.UpdatePartitions(ctx, 5, topic)
	require.NoError(t, err)
	assert.ErrorIs(t, resp[topic].Err, kerr.InvalidPartitions, "5 -> 5")
	missing := topicName(t)
	resp, err = adm.CreatePartitions(ctx, 1, missing)
	require.NoError(t, err)
	assert.ErrorIs(t, resp[missing].Err, kerr.UnknownTopicOrPartition, "unknown topic")
}

func TestTopicConfigs(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	adm := b.admin(t)
	topic := b.createTopic(t, 1, map[string]*string{
		"retention.bytes": strp("1000000"),
		"segment.ms":      strp("3600000"),
	})

	// IncrementalAlterConfigs: set one, delete one.
	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("999000")},
		{Op: kadm.DeleteConfig, Name: "segment.ms"},
	}, topic)
	require.NoError(t, err)
	r, err := resp.On(topic, nil)
	require.NoError(t, err)
	require.NoError(t, r.Err, r.ErrMessage)
	cfg := b.topicConfigs(t, topic)
	assert.Equal(t, "999000", cfgValue(cfg, "retention.ms"))
	assert.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, cfg["retention.ms"].Source)
	assert.Equal(t, "1000000", cfgValue(cfg, "retention.bytes"), "untouched by an incremental alter")
	assert.NotEqual(t, kmsg.ConfigSourceDynamicTopicConfig, cfg["segment.ms"].Source, "segment.ms was deleted")
	if !b.External {
		assert.Equal(t, kafkaTopicDefaults["segment.ms"], cfgValue(cfg, "segment.ms"), "segment.ms back to its default")
	}

	// Validate-only changes nothing.
	resp, err = adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("5000")}}, topic)
	require.NoError(t, err)
	r, _ = resp.On(topic, nil)
	require.NoError(t, r.Err, r.ErrMessage)
	assert.Equal(t, "999000", cfgValue(b.topicConfigs(t, topic), "retention.ms"), "validate-only altered the config")

	// Legacy AlterConfigs replaces the whole set of topic overrides.
	resp, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: strp("2097152")}}, topic)
	require.NoError(t, err)
	r, _ = resp.On(topic, nil)
	require.NoError(t, r.Err, r.ErrMessage)
	cfg = b.topicConfigs(t, topic)
	assert.Equal(t, "2097152", cfgValue(cfg, "segment.bytes"))
	assert.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, cfg["segment.bytes"].Source)
	assert.NotEqual(t, kmsg.ConfigSourceDynamicTopicConfig, cfg["retention.ms"].Source, "AlterConfigs must drop overrides it does not list")
	assert.NotEqual(t, kmsg.ConfigSourceDynamicTopicConfig, cfg["retention.bytes"].Source, "AlterConfigs must drop overrides it does not list")

	// Errors.
	for _, tc := range []struct {
		name string
		alt  kadm.AlterConfig
	}{
		{"non-numeric value", kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("abc")}},
		{"unknown name", kadm.AlterConfig{Op: kadm.SetConfig, Name: "no.such.config", Value: strp("1")}},
	} {
		resp, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{tc.alt}, topic)
		require.NoError(t, err)
		r, _ = resp.On(topic, nil)
		assert.ErrorIs(t, r.Err, kerr.InvalidConfig, "%s: got %v (%s)", tc.name, r.Err, r.ErrMessage)
		resp, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{tc.alt}, topic)
		require.NoError(t, err)
		r, _ = resp.On(topic, nil)
		assert.ErrorIs(t, r.Err, kerr.InvalidConfig, "legacy alter, %s: got %v (%s)", tc.name, r.Err, r.ErrMessage)
	}
	assert.Equal(t, "2097152", cfgValue(b.topicConfigs(t, topic), "segment.bytes"), "a rejected alter changed configs")

	missing := topicName(t)
	resp, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("1000")}}, missing)
	require.NoError(t, err)
	r, _ = resp.On(missing, nil)
	assert.ErrorIs(t, r.Err, kerr.UnknownTopicOrPartition, "alter unknown topic: got %v", r.Err)
	rcs, err := adm.DescribeTopicConfigs(ctx, missing)
	if err == nil {
		rc, _ := rcs.On(missing, nil)
		assert.ErrorIs(t, rc.Err, kerr.UnknownTopicOrPartition, "describe unknown topic")
	}
}

func TestBrokerConfigs(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	adm := b.admin(t)
	brokers, err := adm.ListBrokers(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, brokers)
	node := brokers[0].NodeID
	nodeName := strconv.Itoa(int(node))

	describe := func() map[string]kadm.Config {
		rcs, err := adm.DescribeBrokerConfigs(ctx, node)
		require.NoError(t, err)
		rc, err := rcs.On(nodeName, nil)
		require.NoError(t, err)
		return configMap(t, rc)
	}
	cfg := describe()
	require.NotEmpty(t, cfg)
	if !b.External {
		assert.Equal(t, "1048588", cfgValue(cfg, "message.max.bytes"), "message.max.bytes (Kafka's default)")
	}

	// IncrementalAlterConfigs on the broker: log.retention.ms becomes the
	// default retention.ms of topics without an override.
	resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: strp("3600000")}}, node)
	require.NoError(t, err)
	r, err := resp.On(nodeName, nil)
	require.NoError(t, err)
	require.NoError(t, r.Err, r.ErrMessage)
	t.Cleanup(func() {
		// Leave a shared external cluster as we found it.
		_, _ = b.admin(t).AlterBrokerConfigs(t.Context(), []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "log.retention.ms"}}, node)
	})
	cfg = describe()
	assert.Equal(t, "3600000", cfgValue(cfg, "log.retention.ms"))
	// Kafka says DYNAMIC_BROKER_CONFIG for a per-broker override; Shoal,
	// with one broker, keeps one set and says DYNAMIC_DEFAULT_BROKER_CONFIG
	// (documented in broker/broker_configs.go). Either is dynamic.
	assert.Contains(t, []kmsg.ConfigSource{kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		cfg["log.retention.ms"].Source, "log.retention.ms source after a broker alter")
	topic := b.createTopic(t, 1, nil)
	assert.Equal(t, "3600000", cfgValue(b.topicConfigs(t, topic), "retention.ms"), "a topic inherits log.retention.ms")

	// Legacy AlterConfigs on the broker.
	resp, err = adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: strp("7200000")}}, node)
	require.NoError(t, err)
	r, _ = resp.On(nodeName, nil)
	require.NoError(t, r.Err, r.ErrMessage)
	assert.Equal(t, "7200000", cfgValue(describe(), "log.retention.ms"))

	// Delete: back to the static value.
	resp, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "log.retention.ms"}}, node)
	require.NoError(t, err)
	r, _ = resp.On(nodeName, nil)
	require.NoError(t, r.Err, r.ErrMessage)
	assert.NotContains(t, []kmsg.ConfigSource{kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		describe()["log.retention.ms"].Source, "log.retention.ms source after deleting the override")
	if !b.External {
		assert.Equal(t, kafkaTopicDefaults["retention.ms"], cfgValue(b.topicConfigs(t, topic), "retention.ms"))
	}

	// A value that does not parse.
	resp, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: strp("forever")}}, node)
	require.NoError(t, err)
	r, _ = resp.On(nodeName, nil)
	assert.Error(t, r.Err, "log.retention.ms=forever must be rejected")
	assert.True(t, r.Err == kerr.InvalidConfig || r.Err == kerr.InvalidRequest, "log.retention.ms=forever: got %v, want INVALID_CONFIG or INVALID_REQUEST", r.Err)
}

func TestDeleteRecords(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	adm := b.admin(t)
	topic := b.createTopic(t, 1, nil)
	cl := b.client(t)
	for i := range 10 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r%d", i)}).FirstErr())
	}

	var os kadm.Offsets
	os.AddOffset(topic, 0, 4, -1)
	dr, err := adm.DeleteRecords(ctx, os)
	require.NoError(t, err)
	d, ok := dr.Lookup(topic, 0)
	require.True(t, ok)
	require.NoError(t, d.Err)
	assert.Equal(t, int64(4), d.LowWatermark)

	starts, err := adm.ListStartOffsets(ctx, topic)
	require.NoError(t, err)
	s, _ := starts.Lookup(topic, 0)
	require.NoError(t, s.Err)
	assert.Equal(t, int64(4), s.Offset, "earliest offset after DeleteRecords")

	got := b.consumeN(t, topic, 6)
	for i, r := range got {
		assert.Equal(t, int64(4+i), r.Offset)
		assert.Equal(t, fmt.Sprintf("r%d", 4+i), string(r.Value))
	}

	c := dialRaw(t, b.Addr)
	id := c.topicID(topic)
	fr := c.roundTrip(fetchRequest(topic, id, 0, 1, 0)).(*kmsg.FetchResponse)
	require.Len(t, fr.Topics, 1)
	require.Len(t, fr.Topics[0].Partitions, 1)
	assert.Equal(t, kerr.OffsetOutOfRange.Code, fr.Topics[0].Partitions[0].ErrorCode, "fetch below the log start offset")
	assert.Equal(t, int64(4), fr.Topics[0].Partitions[0].LogStartOffset)

	// Beyond the high watermark: OFFSET_OUT_OF_RANGE; -1 means "up to the HWM".
	os = nil
	os.AddOffset(topic, 0, 11, -1)
	dr, err = adm.DeleteRecords(ctx, os)
	require.NoError(t, err)
	d, _ = dr.Lookup(topic, 0)
	assert.ErrorIs(t, d.Err, kerr.OffsetOutOfRange, "delete beyond the high watermark")
	os = nil
	os.AddOffset(topic, 0, -1, -1)
	dr, err = adm.DeleteRecords(ctx, os)
	require.NoError(t, err)
	d, _ = dr.Lookup(topic, 0)
	require.NoError(t, d.Err)
	assert.Equal(t, int64(10), d.LowWatermark, "delete with offset -1 truncates to the high watermark")

	// Unknown partition, by hand (kadm will not route a partition with no leader).
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition = 7
	rp.Offset = 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.DeleteRecordsResponse)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[0].Partitions[0].ErrorCode)
}

func TestListOffsets(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	adm := b.admin(t)
	topic := b.createTopic(t, 1, nil)
	cl := b.client(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	stamps := []time.Duration{1 * time.Second, 5 * time.Second, 3 * time.Second}
	for i, d := range stamps {
		r := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r%d", i), Timestamp: base.Add(d)})
		require.NoError(t, r.FirstErr())
	}
	ms := func(d time.Duration) int64 { return base.Add(d).UnixMilli() }

	lookup := func(lo kadm.ListedOffsets, err error) kadm.ListedOffset {
		t.Helper()
		require.NoError(t, err)
		o, ok := lo.Lookup(topic, 0)
		require.True(t, ok)
		require.NoError(t, o.Err)
		return o
	}
	assert.Equal(t, int64(0), lookup(adm.ListStartOffsets(ctx, topic)).Offset, "earliest")
	assert.Equal(t, int64(3), lookup(adm.ListEndOffsets(ctx, topic)).Offset, "latest")
	mx := lookup(adm.ListMaxTimestampOffsets(ctx, topic))
	assert.Equal(t, int64(1), mx.Offset, "max timestamp offset")
	assert.Equal(t, ms(5*time.Second), mx.Timestamp, "max timestamp")
	for _, tc := range []struct {
		at     time.Duration
		offset int64
	}{
		{0, 0},
		{time.Second, 0},
		{2 * time.Second, 1}, // first offset whose timestamp is >= the target
		{4 * time.Second, 1},
		{5 * time.Second, 1},
	} {
		o := lookup(adm.ListOffsetsAfterMilli(ctx, ms(tc.at), topic))
		assert.Equal(t, tc.offset, o.Offset, "offset for timestamp base+%v", tc.at)
	}

	// After every record: Kafka answers offset -1, timestamp -1 (kadm hides
	// this, so ask by hand).
	c := dialRaw(t, b.Addr)
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = 0
	rp.CurrentLeaderEpoch = -1
	rp.Timestamp = ms(6 * time.Second)
	rt.Partitions = append(rt.Partitions, rp)
	rp2 := rp
	rp2.Partition = 9
	rt.Partitions = append(rt.Partitions, rp2)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.ListOffsetsResponse)
	require.Len(t, resp.Topics, 1)
	parts := map[int32]kmsg.ListOffsetsResponseTopicPartition{}
	for _, p := range resp.Topics[0].Partitions {
		parts[p.Partition] = p
	}
	require.Contains(t, parts, int32(0))
	assert.Zero(t, parts[0].ErrorCode)
	assert.Equal(t, int64(-1), parts[0].Offset, "no record at or after the timestamp")
	assert.Equal(t, int64(-1), parts[0].Timestamp)
	require.Contains(t, parts, int32(9))
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, parts[9].ErrorCode, "unknown partition")
}

func TestMetadata(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	adm := b.admin(t)
	name := topicName(t)
	cr, err := adm.CreateTopic(ctx, 2, 1, nil, name)
	require.NoError(t, err)
	require.NoError(t, cr.Err)

	md, err := adm.Metadata(ctx, name)
	require.NoError(t, err)
	assert.NotEmpty(t, md.Cluster, "cluster id")
	assert.GreaterOrEqual(t, md.Controller, int32(0), "controller id")
	require.NotEmpty(t, md.Brokers)
	td := md.Topics[name]
	require.NoError(t, td.Err)
	assert.NotEqual(t, kadm.TopicID{}, td.ID, "topic id")
	assert.Equal(t, cr.ID, td.ID)
	require.Len(t, td.Partitions, 2)
	for p, pd := range td.Partitions {
		assert.NoError(t, pd.Err)
		assert.Equal(t, int32(p), pd.Partition)
		assert.GreaterOrEqual(t, pd.LeaderEpoch, int32(0), "leader epoch")
		assert.Contains(t, pd.Replicas, pd.Leader)
		assert.Contains(t, pd.ISR, pd.Leader)
	}
	if !b.External {
		require.Len(t, md.Brokers, 1)
		host, port, err := net.SplitHostPort(b.Addr)
		require.NoError(t, err)
		assert.Equal(t, host, md.Brokers[0].Host, "advertised host")
		assert.Equal(t, port, strconv.Itoa(int(md.Brokers[0].Port)), "advertised port")
		assert.Equal(t, md.Brokers[0].NodeID, td.Partitions[0].Leader)
	}

	// By topic id (Metadata v10+ accepts ids with a null name).
	c := dialRaw(t, b.Addr)
	if c.maxVersions[3] >= 12 {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = td.ID
		req.Topics = append(req.Topics, rt)
		resp := c.roundTrip(req).(*kmsg.MetadataResponse)
		require.Len(t, resp.Topics, 1)
		assert.Zero(t, resp.Topics[0].ErrorCode, "metadata by topic id: %s", kerr.ErrorForCode(resp.Topics[0].ErrorCode))
		if resp.Topics[0].Topic != nil {
			assert.Equal(t, name, *resp.Topics[0].Topic)
		}
	}

}

func TestDescribeCluster(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	md, err := b.admin(t).BrokerMetadata(testContext(t))
	require.NoError(t, err)
	c := dialRaw(t, b.Addr)
	resp := c.roundTrip(kmsg.NewPtrDescribeClusterRequest()).(*kmsg.DescribeClusterResponse)
	require.Zero(t, resp.ErrorCode, "DescribeCluster: %s", kerr.ErrorForCode(resp.ErrorCode))
	assert.NotEmpty(t, resp.ClusterID)
	assert.Equal(t, md.Cluster, resp.ClusterID, "DescribeCluster and Metadata agree on the cluster id")
	assert.Equal(t, md.Controller, resp.ControllerID)
	require.Len(t, resp.Brokers, len(md.Brokers))
	sort.Slice(resp.Brokers, func(i, j int) bool { return resp.Brokers[i].NodeID < resp.Brokers[j].NodeID })
	for i, br := range md.Brokers {
		assert.Equal(t, br.NodeID, resp.Brokers[i].NodeID)
		assert.Equal(t, br.Host, resp.Brokers[i].Host)
		assert.Equal(t, br.Port, resp.Brokers[i].Port)
	}
}

func TestAutoCreateTopics(t *testing.T) {
	t.Parallel()
	t.Run("enabled", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, withAutoCreateTopics(true), withDefaultPartitions(3))
		ctx := testContext(t)
		name := topicName(t)
		cl := b.client(t, kgo.AllowAutoTopicCreation())
		r := cl.ProduceSync(ctx, &kgo.Record{Topic: name, Value: []byte("auto")})
		require.NoError(t, r.FirstErr(), "produce to a new topic with auto-create on")
		md, err := b.admin(t).Metadata(ctx, name)
		require.NoError(t, err)
		require.NoError(t, md.Topics[name].Err)
		assert.Len(t, md.Topics[name].Partitions, 3, "auto-created topics get num.partitions")
		assert.NotEqual(t, kadm.TopicID{}, md.Topics[name].ID)
	})
	t.Run("disabled", func(t *testing.T) {
		t.Parallel()
		b := startBroker(t, withAutoCreateTopics(false))
		name := topicName(t)
		c := dialRaw(t, b.Addr)
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		req.AllowAutoTopicCreation = true
		resp := c.roundTrip(req).(*kmsg.MetadataResponse)
		require.Len(t, resp.Topics, 1)
		assert.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[0].ErrorCode, "metadata must not create topics when auto-create is off")
		// Produce v13+ names topics by id; v12 by name, which is the case here.
		preq := produceRequest(name, [16]byte{}, 0, -1, plainBatch(time.Now().UnixMilli(), testRecord{Value: []byte("x")}).encode())
		presp := c.roundTripAt(preq, 12).(*kmsg.ProduceResponse)
		require.Len(t, presp.Topics, 1)
		require.Len(t, presp.Topics[0].Partitions, 1)
		assert.Equal(t, kerr.UnknownTopicOrPartition.Code, presp.Topics[0].Partitions[0].ErrorCode, "produce to an unknown topic with auto-create off")
		all, err := b.admin(t).ListTopics(testContext(t))
		require.NoError(t, err)
		assert.False(t, all.Has(name))
	})
}

func TestDescribeLogDirs(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	topic := b.createTopic(t, 2, nil)
	cl := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: make([]byte, 1000), Key: fmt.Appendf(nil, "%d", i)})
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())

	all, err := b.admin(t).DescribeAllLogDirs(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}}})
	require.NoError(t, err)
	var p0, p1 *kadm.DescribedLogDirPartition
	for _, dirs := range all {
		for _, d := range dirs {
			require.NoError(t, d.Err, "log dir %s", d.Dir)
			assert.NotEmpty(t, d.Dir)
			if ps, ok := d.Topics[topic]; ok {
				if p, ok := ps[0]; ok {
					p0 = &p
				}
				if p, ok := ps[1]; ok {
					p1 = &p
				}
			}
		}
	}
	require.NotNil(t, p0, "partition 0 not in any log dir")
	require.NotNil(t, p1, "partition 1 not in any log dir")
	assert.GreaterOrEqual(t, p0.Size, int64(100*1000), "partition 0 size")
	assert.Less(t, p0.Size, int64(1<<20), "partition 0 size")
	assert.Less(t, p1.Size, p0.Size, "empty partition 1 is smaller")
}

func TestOffsetForLeaderEpoch(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	adm := b.admin(t)
	topic := b.createTopic(t, 1, nil)
	cl := b.client(t)
	for i := range 5 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%d", i)}).FirstErr())
	}
	md, err := adm.Metadata(ctx, topic)
	require.NoError(t, err)
	epoch := md.Topics[topic].Partitions[0].LeaderEpoch

	var req kadm.OffsetForLeaderEpochRequest
	req.Add(topic, 0, epoch)
	resp, err := adm.OffsetForLeaderEpoch(ctx, req)
	require.NoError(t, err)
	o, ok := resp[topic][0]
	require.True(t, ok)
	require.NoError(t, o.Err)
	assert.Equal(t, epoch, o.LeaderEpoch)
	assert.Equal(t, int64(5), o.EndOffset, "the current epoch ends at the log end offset")

	// An epoch newer than any the partition has seen is undefined: -1/-1.
	req = nil
	req.Add(topic, 0, epoch+5)
	resp, err = adm.OffsetForLeaderEpoch(ctx, req)
	require.NoError(t, err)
	o = resp[topic][0]
	require.NoError(t, o.Err)
	assert.Equal(t, int32(-1), o.LeaderEpoch, "unknown future epoch")
	assert.Equal(t, int64(-1), o.EndOffset, "unknown future epoch")

	// Unknown partition, by hand.
	c := dialRaw(t, b.Addr)
	rq := kmsg.NewPtrOffsetForLeaderEpochRequest()
	rq.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition = 3
	rp.CurrentLeaderEpoch = -1
	rp.LeaderEpoch = epoch
	rt.Partitions = append(rt.Partitions, rp)
	rq.Topics = append(rq.Topics, rt)
	rr := c.roundTrip(rq).(*kmsg.OffsetForLeaderEpochResponse)
	require.Len(t, rr.Topics, 1)
	require.Len(t, rr.Topics[0].Partitions, 1)
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, rr.Topics[0].Partitions[0].ErrorCode)
}

// waitUntil polls cond for up to 10 seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cfgValue returns a config's value, "" when absent or null.
func cfgValue(m map[string]kadm.Config, key string) string {
	if c, ok := m[key]; ok && c.Value != nil {
		return *c.Value
	}
	return ""
}
