package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func qEntity(kv ...*string) kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	for i := 0; i < len(kv); i += 2 {
		e = append(e, kadm.ClientQuotaEntityComponent{Type: *kv[i], Name: kv[i+1]})
	}
	return e
}

func sp(s string) *string { return &s }

// TestClientQuotasAdmin sets, describes, removes and reloads quotas with
// kadm, as kafka-client-quotas.sh does.
func TestClientQuotasAdmin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := startTest(t, func(c *Config) { c.DataDir = dir })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	alter := func(e kadm.ClientQuotaEntity, ops ...kadm.AlterClientQuotaOp) {
		t.Helper()
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: e, Ops: ops}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err, res[0].ErrMessage)
	}
	alter(qEntity(sp("client-id"), sp("noisy")), kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Value: 1024},
		kadm.AlterClientQuotaOp{Key: "producer_byte_rate_burst", Value: 4096}, kadm.AlterClientQuotaOp{Key: "quota_mode", Value: 1})
	alter(qEntity(sp("user"), nil, sp("client-id"), nil), kadm.AlterClientQuotaOp{Key: "request_percentage", Value: 12.5})
	alter(qEntity(sp("ip"), sp("10.1.2.3")), kadm.AlterClientQuotaOp{Key: "connection_creation_rate", Value: 5})

	all, err := adm.DescribeClientQuotas(ctx, false, nil)
	require.NoError(t, err)
	require.Len(t, all, 3)

	got, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: sp("noisy")}})
	require.NoError(t, err)
	require.Equal(t, kadm.DescribedClientQuotas{{Entity: qEntity(sp("client-id"), sp("noisy")), Values: kadm.ClientQuotaValues{
		{Key: "producer_byte_rate", Value: 1024}, {Key: "producer_byte_rate_burst", Value: 4096}, {Key: "quota_mode", Value: 1}}}}, got)
	// Non-strict: the user+client-id default entity matches a default client-id filter.
	got, err = adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: 1}})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, qEntity(sp("user"), nil, sp("client-id"), nil), got[0].Entity)
	got, err = adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: 1}})
	require.NoError(t, err)
	require.Empty(t, got)

	alter(qEntity(sp("ip"), sp("10.1.2.3")), kadm.AlterClientQuotaOp{Key: "connection_creation_rate", Remove: true})
	require.NoError(t, b.Close())

	b2 := startTest(t, func(c *Config) { c.DataDir = dir })
	adm2 := kadm.NewClient(newClient(t, b2))
	all, err = adm2.DescribeClientQuotas(ctx, false, nil)
	require.NoError(t, err)
	require.Len(t, all, 2, "quotas survive a restart; the emptied ip entity is gone")
}

// TestClientQuotasBadInput: Kafka's error codes for invalid entities,
// keys, values and filters; nothing is stored.
func TestClientQuotasBadInput(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b)
	adm := kadm.NewClient(cl)
	op := func(k string, v float64) kadm.AlterClientQuotaOp { return kadm.AlterClientQuotaOp{Key: k, Value: v} }
	for _, tc := range []struct {
		name   string
		entity kadm.ClientQuotaEntity
		op     kadm.AlterClientQuotaOp
	}{
		{"unknown entity type", qEntity(sp("group"), sp("g")), op("producer_byte_rate", 10)},
		{"empty entity", nil, op("producer_byte_rate", 10)},
		{"empty name", qEntity(sp("client-id"), sp("")), op("producer_byte_rate", 10)},
		{"ip with client-id", qEntity(sp("ip"), sp("1.2.3.4"), sp("client-id"), sp("c")), op("producer_byte_rate", 10)},
		{"bad ip", qEntity(sp("ip"), sp("not-an-ip")), op("connection_creation_rate", 10)},
		{"unknown key", qEntity(sp("client-id"), sp("c")), op("bogus_rate", 10)},
		{"connection rate on a client", qEntity(sp("client-id"), sp("c")), op("connection_creation_rate", 10)},
		{"zero rate", qEntity(sp("client-id"), sp("c")), op("producer_byte_rate", 0)},
		{"negative rate", qEntity(sp("user"), nil), op("request_rate", -1)},
		{"fractional byte rate", qEntity(sp("client-id"), sp("c")), op("consumer_byte_rate", 1.5)},
		{"bad mode", qEntity(sp("client-id"), sp("c")), op("quota_mode", 2)},
	} {
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: tc.entity, Ops: []kadm.AlterClientQuotaOp{tc.op}}})
		require.NoError(t, err)
		require.ErrorIs(t, res[0].Err, kerr.InvalidRequest, tc.name)
		require.NotEmpty(t, res[0].ErrMessage, tc.name)
	}
	all, err := adm.DescribeClientQuotas(ctx, false, nil)
	require.NoError(t, err)
	require.Empty(t, all)

	describe := func(comps ...kmsg.DescribeClientQuotasRequestComponent) int16 {
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Components = comps
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp.ErrorCode
	}
	comp := func(typ string, match int8, name *string) kmsg.DescribeClientQuotasRequestComponent {
		c := kmsg.NewDescribeClientQuotasRequestComponent()
		c.EntityType, c.MatchType, c.Match = typ, kmsg.QuotasMatchType(match), name
		return c
	}
	require.Equal(t, kerr.UnsupportedVersion.Code, describe(comp("group", 2, nil)), "custom entity type")
	require.Equal(t, kerr.InvalidRequest.Code, describe(comp("", 2, nil)))
	require.Equal(t, kerr.InvalidRequest.Code, describe(comp("user", 1, sp("x"))), "default match with a name")
	require.Equal(t, kerr.InvalidRequest.Code, describe(comp("user", 2, nil), comp("user", 2, nil)), "type twice")
	require.Equal(t, kerr.InvalidRequest.Code, describe(comp("ip", 2, nil), comp("user", 2, nil)), "ip with user")

	// The broker-wide and topic rate configs: INVALID_REQUEST on the
	// BROKER resource, INVALID_CONFIG on a topic, as for every config.
	for _, kv := range [][2]string{{"broker.producer.byte.rate", "-1"}, {"broker.request.rate.burst", "x"}, {"max.connections.per.ip", "-2"}} {
		br, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: kv[0], Value: sp(kv[1])}})
		require.NoError(t, err)
		require.ErrorIs(t, br[0].Err, kerr.InvalidRequest, kv[0])
	}
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "bq")
	require.NoError(t, err)
	tr, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "producer.byte.rate", Value: sp("-5")}}, "bq")
	require.NoError(t, err)
	require.ErrorIs(t, tr[0].Err, kerr.InvalidConfig)
}

// TestControllerMutationQuota: in reject mode, topic creations and
// deletions beyond controller_mutation_rate get THROTTLING_QUOTA_EXCEEDED
// with a throttle time, until the partitions' debt is paid.
func TestControllerMutationQuota(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.ClientID("ops"))
	adm := kadm.NewClient(cl)
	setQuota(t, adm, qEntity(sp("client-id"), sp("ops")), map[string]float64{"controller_mutation_rate": 10, "quota_mode": 1})

	r, err := adm.CreateTopic(ctx, 15, 1, nil, "m1") // within the burst, then 5 partitions of debt
	require.NoError(t, err)
	require.NoError(t, r.Err)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "m2", 1, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, kerr.ThrottlingQuotaExceeded.Code, resp.Topics[0].ErrorCode)
	require.Positive(t, resp.ThrottleMillis)
	require.Nil(t, b.topics.Get("m2"), "refused: not created")

	time.Sleep(time.Duration(resp.ThrottleMillis) * time.Millisecond)
	resp, err = req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].ErrorCode, "allowed again once the debt is paid")
}
