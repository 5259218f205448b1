package broker

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/security"
)

// adminEnv is a broker on a free port plus clients talking to it.
type adminEnv struct {
	t   *testing.T
	dir string
	b   *Broker
	cl  *kgo.Client
	adm *kadm.Client
	ctx context.Context
}

func startAdminBroker(t *testing.T, dir string) *adminEnv {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.AutoCreateTopics = false
	cfg.DefaultPartitions = 2
	b, err := Start(cfg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ProducerLinger(0), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		b.Close()
		t.Fatalf("client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e := &adminEnv{t: t, dir: dir, b: b, cl: cl, adm: kadm.NewClient(cl), ctx: ctx}
	t.Cleanup(func() {
		cancel()
		e.stop()
	})
	return e
}

// stop closes the clients and the broker (idempotent).
func (e *adminEnv) stop() {
	e.cl.Close()
	if err := e.b.Close(); err != nil {
		e.t.Errorf("close: %v", err)
	}
}

func (e *adminEnv) createTopic(name string, partitions int32, configs map[string]*string) kadm.CreateTopicResponse {
	e.t.Helper()
	r, err := e.adm.CreateTopic(e.ctx, partitions, 1, configs, name)
	if err != nil || r.Err != nil {
		e.t.Fatalf("create %s: %v %v %s", name, err, r.Err, r.ErrMessage)
	}
	return r
}

// produce appends one record per timestamp, each in its own batch.
func (e *adminEnv) produce(topic string, partition int32, ts ...time.Time) {
	e.t.Helper()
	for _, at := range ts {
		r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte("value-" + strconv.FormatInt(at.UnixMilli(), 10)), Timestamp: at}
		if err := e.cl.ProduceSync(e.ctx, r).FirstErr(); err != nil {
			e.t.Fatalf("produce: %v", err)
		}
	}
}

// direct sends req to our broker, bypassing the client's routing (which
// refuses requests for unknown brokers or partitions before sending).
func (e *adminEnv) direct(req kmsg.Request) kmsg.Response {
	e.t.Helper()
	resp, err := e.cl.Broker(0).Request(e.ctx, req)
	if err != nil {
		e.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

func cfgVal(s string) *string { return &s }

// noError stands for error code 0 in tables of expected codes.
var noError = &kerr.Error{Message: "NONE", Code: 0}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	if got != want.Code {
		t.Errorf("%s: error code %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

func configOf(t *testing.T, rc kadm.ResourceConfig, key string) kadm.Config {
	t.Helper()
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("config %s missing from %s", key, rc.Name)
	return kadm.Config{}
}

func TestAdminTopicLifecycle(t *testing.T) {
	t.Parallel()
	e := startAdminBroker(t, t.TempDir())

	r := e.createTopic("orders", 3, map[string]*string{"retention.ms": cfgVal("3600000")})
	if r.NumPartitions != 3 || r.ReplicationFactor != 1 || r.ID == (kadm.TopicID{}) {
		t.Fatalf("create response: %+v", r)
	}
	if c := r.Configs["retention.ms"]; c.Value == nil || *c.Value != "3600000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("create response retention.ms: %+v", c)
	}
	if c := r.Configs["segment.bytes"]; c.Value == nil || *c.Value != "1073741824" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("create response segment.bytes: %+v", c)
	}

	// Creating it again, or validating a create, changes nothing.
	if r, _ := e.adm.CreateTopic(e.ctx, 1, 1, nil, "orders"); !errors.Is(r.Err, kerr.TopicAlreadyExists) {
		t.Errorf("re-create: %v", r.Err)
	}
	vr, err := e.adm.ValidateCreateTopics(e.ctx, -1, -1, nil, "dry")
	if err != nil || vr["dry"].Err != nil || vr["dry"].NumPartitions != 2 {
		t.Errorf("validate-only create: %v %+v", err, vr["dry"])
	}
	if e.b.topics.Get("dry") != nil {
		t.Error("validate-only create created the topic")
	}

	// The override is applied to the partition logs.
	if got := e.b.topics.Partition("orders", 0).Log.Config().RetentionMs; got != 3600000 {
		t.Errorf("log retention.ms = %d", got)
	}

	rcs, err := e.adm.DescribeTopicConfigs(e.ctx, "orders", "missing", "bad/name")
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		switch rc.Name {
		case "orders":
			if c := configOf(t, rc, "retention.ms"); *c.Value != "3600000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig || len(c.Synonyms) != 2 {
				t.Errorf("retention.ms: %+v", c)
			}
			if c := configOf(t, rc, "cleanup.policy"); *c.Value != "delete" || c.Source != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("cleanup.policy: %+v", c)
			}
			if len(rc.Configs) != len(topicConfigDefs) {
				t.Errorf("%d configs described, want %d", len(rc.Configs), len(topicConfigDefs))
			}
		case "missing":
			if !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
				t.Errorf("missing topic: %v", rc.Err)
			}
		case "bad/name":
			if !errors.Is(rc.Err, kerr.InvalidTopicException) {
				t.Errorf("invalid topic: %v", rc.Err)
			}
		}
	}

	// Partitions grow, never shrink.
	if cr, err := e.adm.CreatePartitions(e.ctx, 2, "orders"); err != nil || cr["orders"].Err != nil {
		t.Fatalf("create partitions: %v %+v", err, cr)
	}
	if n := int(e.b.topics.PartitionCount(e.b.topics.Get("orders"))); n != 5 {
		t.Errorf("partitions after growth: %d", n)
	}
	for _, set := range []int{5, 4} {
		cr, err := e.adm.UpdatePartitions(e.ctx, set, "orders")
		if err != nil || !errors.Is(cr["orders"].Err, kerr.InvalidPartitions) {
			t.Errorf("update partitions to %d: %v %+v", set, err, cr["orders"])
		}
	}
	if cr, _ := e.adm.ValidateUpdatePartitions(e.ctx, 9, "orders"); cr["orders"].Err != nil || int(e.b.topics.PartitionCount(e.b.topics.Get("orders"))) != 5 {
		t.Errorf("validate-only create partitions: %+v", cr["orders"])
	}
	if cr, _ := e.adm.CreatePartitions(e.ctx, 1, "missing"); !errors.Is(cr["missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("create partitions of a missing topic: %+v", cr["missing"])
	}

	// Delete by name, then again; delete by id (v6).
	if dr, err := e.adm.DeleteTopics(e.ctx, "orders"); err != nil || dr["orders"].Err != nil {
		t.Fatalf("delete: %v %+v", err, dr)
	}
	if e.b.topics.Get("orders") != nil {
		t.Error("topic still registered after delete")
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version = 6
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = cfgVal("orders")
	del.Topics = append(del.Topics, rt)
	byID := e.createTopic("byid", 1, nil)
	rt = kmsg.NewDeleteTopicsRequestTopic()
	rt.TopicID = byID.ID
	del.Topics = append(del.Topics, rt)
	rt = kmsg.NewDeleteTopicsRequestTopic()
	rt.TopicID = [16]byte{1}
	del.Topics = append(del.Topics, rt)
	resp, err := del.RequestWith(e.ctx, e.cl)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "delete deleted topic", resp.Topics[0].ErrorCode, kerr.UnknownTopicOrPartition)
	wantCode(t, "delete by id", resp.Topics[1].ErrorCode, noError)
	if n := resp.Topics[1].Topic; n == nil || *n != "byid" {
		t.Errorf("delete by id answered name %v", n)
	}
	wantCode(t, "delete unknown id", resp.Topics[2].ErrorCode, kerr.UnknownTopicID)
	if e.b.topics.Get("byid") != nil {
		t.Error("topic deleted by id still registered")
	}
}

func TestAdminCreateTopicsInvalid(t *testing.T) {
	t.Parallel()
	e := startAdminBroker(t, t.TempDir())
	e.createTopic("a_b", 1, nil)

	type topicReq struct {
		name       string
		partitions int32
		rf         int16
		assign     [][]int32
		configs    map[string]*string
		want       *kerr.Error
	}
	cases := []topicReq{
		{name: "ok", partitions: -1, rf: -1, want: noError},
		{name: "bad name!", partitions: 1, rf: 1, want: kerr.InvalidTopicException},
		{name: "a.b", partitions: 1, rf: 1, want: kerr.InvalidTopicException}, // collides with a_b
		{name: "a_b", partitions: 1, rf: 1, want: kerr.TopicAlreadyExists},
		{name: "__cluster_metadata", partitions: 1, rf: 1, want: kerr.InvalidRequest}, // Kafka's metadata topic
		{name: "zero", partitions: 0, rf: 1, want: kerr.InvalidPartitions},
		{name: "neg", partitions: -2, rf: 1, want: kerr.InvalidPartitions},
		{name: "rf3", partitions: 1, rf: 3, want: kerr.InvalidReplicationFactor},
		{name: "rf0", partitions: 1, rf: 0, want: kerr.InvalidReplicationFactor},
		{name: "unknowncfg", partitions: 1, rf: 1, configs: map[string]*string{"no.such.config": cfgVal("1")}, want: kerr.InvalidConfig},
		{name: "badcfg", partitions: 1, rf: 1, configs: map[string]*string{"retention.ms": cfgVal("soon")}, want: kerr.InvalidConfig},
		{name: "badpolicy", partitions: 1, rf: 1, configs: map[string]*string{"cleanup.policy": cfgVal("compact,shred")}, want: kerr.InvalidConfig},
		{name: "nullcfg", partitions: 1, rf: 1, configs: map[string]*string{"retention.ms": nil}, want: kerr.InvalidConfig},
		{name: "assign", partitions: -1, rf: -1, assign: [][]int32{{0}, {0}}, want: noError},
		{name: "assignother", partitions: -1, rf: -1, assign: [][]int32{{5}}, want: kerr.InvalidReplicaAssignment},
		{name: "assigntwice", partitions: -1, rf: -1, assign: [][]int32{{0, 0}}, want: kerr.InvalidReplicaAssignment},
		{name: "assignandcount", partitions: 1, rf: -1, assign: [][]int32{{0}}, want: kerr.InvalidRequest},
		{name: "dup", partitions: 1, rf: 1, want: kerr.InvalidRequest},
		{name: "dup", partitions: 1, rf: 1, want: kerr.InvalidRequest},
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	for _, c := range cases {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = c.name, c.partitions, c.rf
		for i, replicas := range c.assign {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(i), replicas
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		for k, v := range c.configs {
			rc := kmsg.NewCreateTopicsRequestTopicConfig()
			rc.Name, rc.Value = k, v
			rt.Configs = append(rt.Configs, rc)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(e.ctx, e.cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != len(cases)-1 {
		t.Fatalf("%d answers for %d topics (one duplicate pair)", len(resp.Topics), len(cases))
	}
	for i, st := range resp.Topics {
		wantCode(t, st.Topic, st.ErrorCode, cases[i].want)
		if st.ErrorCode != 0 && (st.ErrorMessage == nil || st.NumPartitions != -1) {
			t.Errorf("%s: message %v, partitions %d", st.Topic, st.ErrorMessage, st.NumPartitions)
		}
	}
	if n := int(e.b.topics.PartitionCount(e.b.topics.Get("ok"))); n != 2 {
		t.Errorf("NumPartitions -1 made %d partitions, want num.partitions 2", n)
	}
	if n := int(e.b.topics.PartitionCount(e.b.topics.Get("assign"))); n != 2 {
		t.Errorf("manual assignment made %d partitions", n)
	}

	// Too many partitions in one request.
	big, _ := e.adm.CreateTopic(e.ctx, 20000, 1, nil, "huge")
	if !errors.Is(big.Err, kerr.PolicyViolation) {
		t.Errorf("huge topic: %v", big.Err)
	}
}

func TestAdminAlterTopicConfigs(t *testing.T) {
	t.Parallel()
	e := startAdminBroker(t, t.TempDir())
	e.createTopic("cfg", 2, map[string]*string{"segment.bytes": cfgVal("2097152")})
	logCfg := func() (retention, segment int64) {
		c := e.b.topics.Partition("cfg", 1).Log.Config()
		return c.RetentionMs, c.SegmentBytes
	}

	// Incremental: set one, keep the other.
	ar, err := e.adm.AlterTopicConfigs(e.ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: cfgVal("60000")}}, "cfg")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("incremental set: %v %+v", err, ar)
	}
	if r, s := logCfg(); r != 60000 || s != 2097152 {
		t.Errorf("after set: retention %d segment %d", r, s)
	}
	// Delete reverts to the default.
	ar, _ = e.adm.AlterTopicConfigs(e.ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "segment.bytes"}}, "cfg")
	if ar[0].Err != nil {
		t.Fatalf("incremental delete: %+v", ar)
	}
	if _, s := logCfg(); s != 1<<30 {
		t.Errorf("after delete: segment %d", s)
	}
	// All-or-nothing: one bad op fails the resource and changes nothing.
	ar, _ = e.adm.AlterTopicConfigs(e.ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: cfgVal("1")},
		{Op: kadm.SetConfig, Name: "max.message.bytes", Value: cfgVal("lots")},
	}, "cfg")
	if !errors.Is(ar[0].Err, kerr.InvalidConfig) || ar[0].ErrMessage == "" {
		t.Errorf("bad value: %+v", ar[0])
	}
	if r, _ := logCfg(); r != 60000 {
		t.Errorf("failed alter changed retention to %d", r)
	}
	for _, op := range []kadm.AlterConfig{
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: cfgVal("shred")}, // result delete,shred is refused
		{Op: kadm.AppendConfig, Name: "retention.ms", Value: cfgVal("1")},       // not a LIST
		{Op: kadm.SetConfig, Name: "no.such.config", Value: cfgVal("1")},
	} {
		ar, _ = e.adm.AlterTopicConfigs(e.ctx, []kadm.AlterConfig{op}, "cfg")
		if !errors.Is(ar[0].Err, kerr.InvalidConfig) {
			t.Errorf("%+v: %v", op, ar[0].Err)
		}
	}
	ar, _ = e.adm.AlterTopicConfigs(e.ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: cfgVal("delete")}}, "cfg")
	if ar[0].Err != nil {
		t.Errorf("append an item already present: %v", ar[0].Err)
	}
	ar, _ = e.adm.AlterTopicConfigs(e.ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: cfgVal("1")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, "cfg")
	if !errors.Is(ar[0].Err, kerr.InvalidRequest) {
		t.Errorf("duplicate keys: %v", ar[0].Err)
	}
	ar, _ = e.adm.ValidateAlterTopicConfigs(e.ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: cfgVal("5")}}, "cfg")
	if r, _ := logCfg(); ar[0].Err != nil || r != 60000 {
		t.Errorf("validate-only alter: %v, retention %d", ar[0].Err, r)
	}
	ar, _ = e.adm.AlterTopicConfigs(e.ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: cfgVal("5")}}, "missing")
	if !errors.Is(ar[0].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v", ar[0].Err)
	}

	// Legacy AlterConfigs replaces the whole override set.
	ar, err = e.adm.AlterTopicConfigsState(e.ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: cfgVal("2000")}}, "cfg")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("legacy alter: %v %+v", err, ar)
	}
	_, overrides := e.b.topics.Snapshot(e.b.topics.Get("cfg"))
	if len(overrides) != 1 || overrides["max.message.bytes"] != "2000" {
		t.Errorf("overrides after legacy alter: %v", overrides)
	}
	if r, _ := logCfg(); r != 604800000 {
		t.Errorf("legacy alter left retention at %d", r)
	}
	ar, _ = e.adm.AlterTopicConfigsState(e.ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: cfgVal("12")}}, "cfg")
	if !errors.Is(ar[0].Err, kerr.InvalidConfig) {
		t.Errorf("legacy alter with a bad value: %v", ar[0].Err)
	}

	// Topic overrides survive a restart.
	e.stop()
	e = startAdminBroker(t, e.dir)
	_, overrides = e.b.topics.Snapshot(e.b.topics.Get("cfg"))
	if overrides["max.message.bytes"] != "2000" {
		t.Errorf("overrides after restart: %v", overrides)
	}
}

func TestAdminBrokerConfigs(t *testing.T) {
	t.Parallel()
	e := startAdminBroker(t, t.TempDir())
	e.createTopic("inherit", 1, nil)
	e.createTopic("own", 1, map[string]*string{"retention.ms": cfgVal("1000")})

	rcs, err := e.adm.DescribeBrokerConfigs(e.ctx, 0)
	if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
		t.Fatalf("describe broker: %v %+v", err, rcs)
	}
	if c := configOf(t, rcs[0], "num.partitions"); *c.Value != "2" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("num.partitions: %+v", c)
	}
	if c := configOf(t, rcs[0], "log.retention.ms"); *c.Value != "604800000" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("log.retention.ms: %+v", c)
	}
	if len(rcs[0].Configs) != len(brokerConfigDefs)+len(security.Keys) {
		t.Errorf("%d broker configs described, want %d and the %d security keys", len(rcs[0].Configs), len(brokerConfigDefs), len(security.Keys))
	}

	// A dynamic broker default reaches every topic without an override.
	ar, err := e.adm.AlterBrokerConfigs(e.ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: cfgVal("120000")}}, 0)
	if err != nil || ar[0].Err != nil {
		t.Fatalf("alter broker: %v %+v", err, ar)
	}
	check := func(when string) {
		t.Helper()
		if r := e.b.topics.Partition("inherit", 0).Log.Config().RetentionMs; r != 120000 {
			t.Errorf("%s: inheriting topic has retention %d", when, r)
		}
		if r := e.b.topics.Partition("own", 0).Log.Config().RetentionMs; r != 1000 {
			t.Errorf("%s: topic with override has retention %d", when, r)
		}
		trc, err := e.adm.DescribeTopicConfigs(e.ctx, "inherit")
		if err != nil {
			t.Fatal(err)
		}
		if c := configOf(t, trc[0], "retention.ms"); *c.Value != "120000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
			t.Errorf("%s: topic retention.ms: %+v", when, c)
		}
		rcs, err := e.adm.DescribeBrokerConfigs(e.ctx) // the cluster default: only overrides
		if err != nil || len(rcs) != 1 || len(rcs[0].Configs) != 1 {
			t.Fatalf("%s: describe cluster default: %v %+v", when, err, rcs)
		}
		if c := rcs[0].Configs[0]; c.Key != "log.retention.ms" || *c.Value != "120000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
			t.Errorf("%s: cluster default: %+v", when, c)
		}
	}
	check("after alter")

	// Refusals: read-only, unknown, bad value, another broker, bad type.
	for _, c := range []struct {
		op   kadm.AlterConfig
		name string
		want *kerr.Error
	}{
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "num.partitions", Value: cfgVal("3")}, "0", kerr.InvalidRequest},
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "no.such.config", Value: cfgVal("3")}, "0", kerr.InvalidRequest},
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "log.segment.bytes", Value: cfgVal("12")}, "0", kerr.InvalidRequest},
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "log.retention.ms", Value: cfgVal("5")}, "7", kerr.InvalidRequest},
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "log.retention.ms", Value: cfgVal("5")}, "x", kerr.InvalidRequest},
	} {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, c.name
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Op, rc.Value = c.op.Name, kmsg.IncrementalAlterConfigOpSet, c.op.Value
		rr.Configs = append(rr.Configs, rc)
		req.Resources = append(req.Resources, rr)
		resp := e.direct(req).(*kmsg.IncrementalAlterConfigsResponse)
		wantCode(t, c.op.Name+" on broker "+c.name, resp.Resources[0].ErrorCode, c.want)
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, typ := range []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeGroupConfig} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, "0"
		req.Resources = append(req.Resources, rr)
	}
	resp, err := req.RequestWith(e.ctx, e.cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Resources {
		if r.ResourceType == kmsg.ConfigResourceTypeGroupConfig {
			// Group configs are served (share groups, share_configs.go).
			if r.ErrorCode != 0 || len(r.Configs) == 0 {
				t.Errorf("describe GROUP_CONFIG: code %d, %d configs", r.ErrorCode, len(r.Configs))
			}
			continue
		}
		wantCode(t, "describe "+r.ResourceType.String(), r.ErrorCode, kerr.InvalidRequest)
	}

	// The dynamic config survives a restart.
	e.stop()
	e = startAdminBroker(t, e.dir)
	check("after restart")

	// Legacy AlterConfigs replaces the whole dynamic set; deleting the
	// override reverts every inheriting log to the default.
	ar, err = e.adm.AlterBrokerConfigsState(e.ctx, []kadm.AlterConfig{{Name: "message.max.bytes", Value: cfgVal("5000")}})
	if err != nil || ar[0].Err != nil {
		t.Fatalf("legacy alter broker: %v %+v", err, ar)
	}
	if c := e.b.topics.Partition("inherit", 0).Log.Config(); c.RetentionMs != 604800000 || c.MaxMessageBytes != 5000 {
		t.Errorf("after legacy alter: retention %d, max message %d", c.RetentionMs, c.MaxMessageBytes)
	}
	ar, _ = e.adm.AlterBrokerConfigs(e.ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "message.max.bytes"}})
	if ar[0].Err != nil {
		t.Fatalf("delete broker config: %+v", ar)
	}
	if c := e.b.topics.Partition("inherit", 0).Log.Config(); c.MaxMessageBytes != 1048588 {
		t.Errorf("after delete: max message %d", c.MaxMessageBytes)
	}
	if len(e.b.dynamicBrokerConfigs()) != 0 {
		t.Errorf("dynamic configs left: %v", e.b.dynamicBrokerConfigs())
	}
}

func TestAdminOffsetsAndRecords(t *testing.T) {
	t.Parallel()
	e := startAdminBroker(t, t.TempDir())
	e.createTopic("ts", 1, nil)
	base := time.UnixMilli(1_700_000_000_000)
	var stamps []time.Time
	for i := range 10 {
		stamps = append(stamps, base.Add(time.Duration(i)*time.Second))
	}
	stamps[7] = base.Add(time.Hour) // the max timestamp, not the last record
	e.produce("ts", 0, stamps...)

	list := func(ts int64) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 10
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "ts"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(e.ctx, e.cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	for _, c := range []struct {
		ts             int64
		offset, tstamp int64
	}{
		{-1, 10, -1},
		{-2, 0, -1},
		{-4, 0, -1},
		{-3, 7, base.Add(time.Hour).UnixMilli()},
		{-5, -1, -1},
		{base.UnixMilli(), 0, base.UnixMilli()},
		{base.Add(3500 * time.Millisecond).UnixMilli(), 4, base.Add(4 * time.Second).UnixMilli()},
		{base.Add(30 * time.Second).UnixMilli(), 7, base.Add(time.Hour).UnixMilli()},
		{base.Add(2 * time.Hour).UnixMilli(), -1, -1},
	} {
		sp := list(c.ts)
		if sp.ErrorCode != 0 || sp.Offset != c.offset || sp.Timestamp != c.tstamp {
			t.Errorf("ListOffsets %d: err %v offset %d timestamp %d, want %d %d", c.ts, kerr.ErrorForCode(sp.ErrorCode), sp.Offset, sp.Timestamp, c.offset, c.tstamp)
		}
	}
	if sp := list(-6); sp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Errorf("ListOffsets -6: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	mx, err := e.adm.ListMaxTimestampOffsets(e.ctx, "ts")
	if err != nil || mx["ts"][0].Offset != 7 {
		t.Errorf("kadm max timestamp: %v %+v", err, mx)
	}

	// DescribeLogDirs reports sizes that grow as we produce.
	size := func() int64 {
		t.Helper()
		dirs, err := e.adm.DescribeAllLogDirs(e.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		found := false
		dirs.Each(func(d kadm.DescribedLogDir) {
			if d.Err != nil {
				t.Errorf("log dir %s: %v", d.Dir, d.Err)
			}
			if d.TotalBytes <= 0 || d.UsableBytes <= 0 {
				t.Errorf("log dir %s: total %d usable %d", d.Dir, d.TotalBytes, d.UsableBytes)
			}
			if p, ok := d.Topics["ts"][0]; ok {
				n, found = p.Size, true
			}
		})
		if !found {
			t.Fatal("partition ts-0 missing from DescribeLogDirs")
		}
		return n
	}
	before := size()
	if before <= 0 {
		t.Errorf("size %d after producing", before)
	}
	e.produce("ts", 0, base.Add(11*time.Second), base.Add(12*time.Second))
	if after := size(); after <= before {
		t.Errorf("size %d after producing more, was %d", after, before)
	}

	// DeleteRecords moves the earliest offset; beyond the high watermark
	// is out of range; unknown partitions are reported.
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "ts", Partition: 0, At: 5})
	dr, err := e.adm.DeleteRecords(e.ctx, os)
	if err != nil || dr["ts"][0].Err != nil || dr["ts"][0].LowWatermark != 5 {
		t.Fatalf("delete records: %v %+v", err, dr)
	}
	so, err := e.adm.ListStartOffsets(e.ctx, "ts")
	if err != nil || so["ts"][0].Offset != 5 {
		t.Errorf("start offset after delete records: %v %+v", err, so)
	}
	if sp := list(base.UnixMilli()); sp.Offset != 5 {
		t.Errorf("by-time lookup below the log start answered %d", sp.Offset)
	}
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "ts"
	for _, c := range []struct{ partition, offset int64 }{{0, 100}, {3, 1}} {
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = int32(c.partition), c.offset
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := e.direct(req).(*kmsg.DeleteRecordsResponse)
	wantCode(t, "delete records past the high watermark", resp.Topics[0].Partitions[0].ErrorCode, kerr.OffsetOutOfRange)
	wantCode(t, "delete records of an unknown partition", resp.Topics[0].Partitions[1].ErrorCode, kerr.UnknownTopicOrPartition)
	os = kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "ts", Partition: 0, At: -1})
	if dr, _ := e.adm.DeleteRecords(e.ctx, os); dr["ts"][0].Err != nil || dr["ts"][0].LowWatermark != 12 {
		t.Errorf("delete records to the high watermark: %+v", dr["ts"][0])
	}

	// A compacted topic's records are not deleted (Kafka's "can not be
	// deleted due to the configured policy"); compact,delete's are.
	for policy, want := range map[string]error{"compact": kerr.PolicyViolation, "compact,delete": nil} {
		name := map[string]string{"compact": "cp-compact", "compact,delete": "cp-both"}[policy]
		e.createTopic(name, 1, map[string]*string{"cleanup.policy": cfgVal(policy)})
		if err := e.cl.ProduceSync(e.ctx, &kgo.Record{Topic: name, Key: []byte("k"), Value: []byte("1")},
			&kgo.Record{Topic: name, Key: []byte("k"), Value: []byte("2")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: name, Partition: 0, At: 1})
		dr, err := e.adm.DeleteRecords(e.ctx, os)
		if err != nil || !errors.Is(dr[name][0].Err, want) {
			t.Errorf("delete records of a %s topic: %v %v, want %v", policy, err, dr[name][0].Err, want)
		}
	}
}

func TestAdminClusterProducersEpochs(t *testing.T) {
	t.Parallel()
	e := startAdminBroker(t, t.TempDir())
	e.createTopic("p", 1, nil)
	e.produce("p", 0, time.Now(), time.Now()) // kgo producers are idempotent by default

	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.Version = 1
	dcr, err := dc.RequestWith(e.ctx, e.cl)
	if err != nil || dcr.ErrorCode != 0 || dcr.ClusterID != e.b.ClusterID() || dcr.ControllerID != 0 || len(dcr.Brokers) != 1 || dcr.ClusterAuthorizedOperations != -2147483648 {
		t.Errorf("describe cluster: %v %+v", err, dcr)
	}
	dc.EndpointType = 2
	if dcr, _ := dc.RequestWith(e.ctx, e.cl); dcr.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Errorf("describe cluster controllers: %v", kerr.ErrorForCode(dcr.ErrorCode))
	}

	dp := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic, dt.Partitions = "p", []int32{0, 9}
	dp.Topics = append(dp.Topics, dt)
	dpr := e.direct(dp).(*kmsg.DescribeProducersResponse)
	p0 := dpr.Topics[0].Partitions[0]
	if p0.ErrorCode != 0 || len(p0.ActiveProducers) != 1 || p0.ActiveProducers[0].LastSequence != 1 || p0.ActiveProducers[0].CoordinatorEpoch != -1 {
		t.Errorf("describe producers: %+v", p0)
	}
	wantCode(t, "describe producers, unknown partition", dpr.Topics[0].Partitions[1].ErrorCode, kerr.UnknownTopicOrPartition)

	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version = 4
	initPID := func() *kmsg.InitProducerIDResponse { return e.direct(ip).(*kmsg.InitProducerIDResponse) }
	a := initPID()
	if a.ErrorCode != 0 || a.ProducerEpoch != 0 || a.ProducerID < 0 {
		t.Fatalf("init producer id: %+v", a)
	}
	ip.ProducerID, ip.ProducerEpoch = a.ProducerID, 0 // KIP-360 bump: a fresh id
	if b := initPID(); b.ErrorCode != 0 || b.ProducerID == a.ProducerID {
		t.Errorf("epoch bump: %+v (first id %d)", b, a.ProducerID)
	}
	ip.ProducerEpoch = -1
	if b := initPID(); b.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("id without epoch: %v", kerr.ErrorForCode(b.ErrorCode))
	}
	ip.ProducerID, ip.TransactionalID = -1, cfgVal("txn")
	ip.TransactionTimeoutMillis = 0
	if b := initPID(); b.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Errorf("transactional id, no timeout: %v", kerr.ErrorForCode(b.ErrorCode))
	}
	ip.TransactionTimeoutMillis = 60000
	if b := initPID(); b.ErrorCode != 0 || b.ProducerEpoch != 0 {
		t.Errorf("transactional id: %+v", b)
	}

	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.Version = 4
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "p"
	for _, c := range []struct{ partition, current, epoch int32 }{{0, 0, 0}, {0, -1, 3}, {0, 1, 0}, {0, -1, -1}, {5, -1, 0}} {
		op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		op.Partition, op.CurrentLeaderEpoch, op.LeaderEpoch = c.partition, c.current, c.epoch
		ot.Partitions = append(ot.Partitions, op)
	}
	oe.Topics = append(oe.Topics, ot)
	oer := e.direct(oe).(*kmsg.OffsetForLeaderEpochResponse)
	ps := oer.Topics[0].Partitions
	if ps[0].ErrorCode != 0 || ps[0].LeaderEpoch != 0 || ps[0].EndOffset != 2 {
		t.Errorf("epoch 0: %+v", ps[0])
	}
	if ps[1].ErrorCode != 0 || ps[1].LeaderEpoch != -1 || ps[1].EndOffset != -1 {
		t.Errorf("epoch 3: %+v", ps[1])
	}
	wantCode(t, "newer current epoch", ps[2].ErrorCode, kerr.UnknownLeaderEpoch)
	if ps[3].ErrorCode != 0 || ps[3].EndOffset != -1 {
		t.Errorf("epoch -1: %+v", ps[3])
	}
	wantCode(t, "unknown partition", ps[4].ErrorCode, kerr.UnknownTopicOrPartition)

	// Every API of this file is advertised at the versions we serve.
	vr, err := kmsg.NewPtrApiVersionsRequest().RequestWith(e.ctx, e.cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int16][2]int16{2: {1, 10}, 19: {2, 7}, 20: {1, 6}, 21: {0, 2}, 22: {0, 5}, 23: {2, 4}, 32: {1, 4}, 33: {0, 2}, 35: {1, 4}, 37: {0, 3}, 43: {0, 2}, 44: {0, 1}, 60: {0, 2}, 61: {0, 0}}
	for _, k := range vr.ApiKeys {
		if w, ok := want[k.ApiKey]; ok {
			if k.MinVersion != w[0] || k.MaxVersion != w[1] {
				t.Errorf("%s advertised %d..%d, want %d..%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, w[0], w[1])
			}
			delete(want, k.ApiKey)
		}
	}
	if len(want) != 0 {
		t.Errorf("not advertised: %v", want)
	}
}
