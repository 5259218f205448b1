package broker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeGroupConfigs describes the GROUP resource group over the wire,
// by name.
func describeGroupConfigs(t *testing.T, c *rawConn, group string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	req.Resources = append(req.Resources, rr)
	req.IncludeSynonyms = true
	resp := c.do(req, 4).(*kmsg.DescribeConfigsResponse)
	require.Len(t, resp.Resources, 1)
	require.Zero(t, resp.Resources[0].ErrorCode, codeName(resp.Resources[0].ErrorCode))
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, e := range resp.Resources[0].Configs {
		out[e.Name] = e
	}
	return out
}

// setGroupConfig sets one config of the GROUP resource group over the
// wire and returns the error code.
func setGroupConfig(t *testing.T, c *rawConn, group, name, value string) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	op.Name, op.Op, op.Value = name, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
	rr.Configs = append(rr.Configs, op)
	req.Resources = append(req.Resources, rr)
	resp := c.do(req, 1).(*kmsg.IncrementalAlterConfigsResponse)
	require.Len(t, resp.Resources, 1)
	return resp.Resources[0].ErrorCode
}

// The KIP-848 group configs consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms: described with the broker defaults,
// altered within the group.consumer.{min,max}.* bounds, persisted, and
// used by the coordinator for that group only.
func TestGroupConsumerGroupConfigs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *Config) { c.DataDir = dir }
	b := startGroupTest(t, cfg)
	c := dialRaw(t, b)

	got := describeGroupConfigs(t, c, "cfg")
	for name, want := range map[string][2]string{
		"consumer.session.timeout.ms":    {"45000", "group.consumer.session.timeout.ms"},
		"consumer.heartbeat.interval.ms": {"5000", "group.consumer.heartbeat.interval.ms"},
	} {
		e, ok := got[name]
		require.True(t, ok, "%s is described", name)
		require.Equal(t, want[0], *e.Value, name)
		require.Equal(t, kmsg.ConfigSourceDefaultConfig, e.Source, name)
		require.Equal(t, kmsg.ConfigTypeInt, e.ConfigType, name)
		require.False(t, e.ReadOnly, name)
		require.Equal(t, want[1], e.ConfigSynonyms[len(e.ConfigSynonyms)-1].Name, name)
	}
	require.Contains(t, got, "share.session.timeout.ms", "share configs are still described")

	for _, bad := range [][2]string{
		{"consumer.session.timeout.ms", "44999"}, // below group.consumer.min.session.timeout.ms
		{"consumer.session.timeout.ms", "60001"}, // above group.consumer.max.session.timeout.ms
		{"consumer.session.timeout.ms", "soon"},
		{"consumer.heartbeat.interval.ms", "4999"},
		{"consumer.heartbeat.interval.ms", "15001"},
	} {
		code := setGroupConfig(t, c, "cfg", bad[0], bad[1])
		require.Equal(t, kerr.InvalidConfig.Code, code, "%s=%s: %s", bad[0], bad[1], codeName(code))
	}
	require.Zero(t, setGroupConfig(t, c, "cfg", "consumer.session.timeout.ms", "50000"))
	require.Zero(t, setGroupConfig(t, c, "cfg", "consumer.heartbeat.interval.ms", "7000"))
	require.Equal(t, 50*time.Second, b.groups.ConsumerSettings("cfg").SessionTimeout)
	require.Equal(t, 45*time.Second, b.groups.ConsumerSettings("other").SessionTimeout, "other groups keep the broker default")

	// The broker default follows the dynamic broker config; the bounds too.
	setBrokerConfigs(b, "group.consumer.heartbeat.interval.ms", "6000", "group.consumer.max.session.timeout.ms", "70000")
	require.Equal(t, "6000", *describeGroupConfigs(t, c, "other")["consumer.heartbeat.interval.ms"].Value)
	require.Zero(t, setGroupConfig(t, c, "bounds", "consumer.session.timeout.ms", "70000"))
	require.NoError(t, b.Close())

	b2 := startGroupTest(t, cfg)
	c2 := dialRaw(t, b2)
	e := describeGroupConfigs(t, c2, "cfg")["consumer.session.timeout.ms"]
	require.Equal(t, "50000", *e.Value, "the group config survives a restart")
	require.Equal(t, kmsg.ConfigSourceGroupConfig, e.Source)
	require.Equal(t, 50*time.Second, b2.groups.ConsumerSettings("cfg").SessionTimeout)
	// group.consumer.max.session.timeout.ms is back to 60000: the stored
	// 70000 is clamped, though still described as set.
	require.Equal(t, "70000", *describeGroupConfigs(t, c2, "bounds")["consumer.session.timeout.ms"].Value)
	require.Equal(t, 60*time.Second, b2.groups.ConsumerSettings("bounds").SessionTimeout)

	// A KIP-848 member of the group gets the group's heartbeat interval;
	// a member of another group the broker default.
	createTopicRaw(t, b2, "cfg-t", 1)
	h := c2.cgHeartbeat("cfg", cgHeartbeat{member: "m1", topics: []string{"cfg-t"}})
	require.Zero(t, h.ErrorCode, codeName(h.ErrorCode))
	require.EqualValues(t, 7000, h.HeartbeatIntervalMillis)
	h = c2.cgHeartbeat("other", cgHeartbeat{member: "m2", topics: []string{"cfg-t"}})
	require.Zero(t, h.ErrorCode, codeName(h.ErrorCode))
	require.EqualValues(t, 5000, h.HeartbeatIntervalMillis)

	// A change applies at the member's next heartbeat.
	require.Zero(t, setGroupConfig(t, c2, "other", "consumer.heartbeat.interval.ms", "8000"))
	h = c2.cgHeartbeat("other", cgHeartbeat{member: "m2", epoch: h.MemberEpoch})
	require.Zero(t, h.ErrorCode, codeName(h.ErrorCode))
	require.EqualValues(t, 8000, h.HeartbeatIntervalMillis)
}
