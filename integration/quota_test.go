package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
)

// TestSaramaRejectModeRecovers: under a producer quota in reject mode
// (quota_mode=1), sarama's producer gets NOT_ENOUGH_REPLICAS for what
// is over the quota, retries it by itself, and every message lands once.
func TestSaramaRejectModeRecovers(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	b.requireInProcess(t) // quota_mode is Shoal's
	topic := b.createTopic(t, 1, nil)
	cfg := saramaConfig(sarama.V3_0_0_0)
	cfg.ClientID = "sarama-strict"
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	res, err := b.admin(t).AlterClientQuotas(testContext(t), []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &cfg.ClientID}},
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 100 << 10},
			{Key: "producer_byte_rate_burst", Value: 100 << 10}, {Key: "quota_mode", Value: 1}},
	}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)

	p, err := sarama.NewSyncProducer(b.Seeds, cfg)
	require.NoError(t, err)
	defer p.Close()
	const n = 30 // 300 KiB: two seconds past the burst
	val := make([]byte, 10<<10)
	began := time.Now()
	for i := 0; i < n; i++ {
		_, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprint(i)), Value: sarama.ByteEncoder(val)})
		require.NoError(t, err, "message %d", i)
	}
	require.Greater(t, time.Since(began), 1500*time.Millisecond, "the quota held")
	seen := map[string]bool{}
	for _, r := range b.consumeN(t, topic, n) {
		require.False(t, seen[string(r.Key)], "duplicate %s", r.Key)
		seen[string(r.Key)] = true
	}
	require.Len(t, seen, n)
}

// TestKcatRejectModeRecovers: the same with librdkafka (kcat -P): what
// is over the quota is retried by the client and every line lands once.
func TestKcatRejectModeRecovers(t *testing.T) {
	t.Parallel()
	kcat := requireTool(t, "kcat")
	b := startBroker(t)
	b.requireInProcess(t)
	topic := b.createTopic(t, 1, nil)
	id := "kcat-strict"
	res, err := b.admin(t).AlterClientQuotas(testContext(t), []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &id}},
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 100 << 10},
			{Key: "producer_byte_rate_burst", Value: 100 << 10}, {Key: "quota_mode", Value: 1}},
	}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)

	const n = 300 // 1 KiB lines, sent ten per request: 300 KiB
	var in strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, "%d:%s\n", i, strings.Repeat("x", 1<<10))
	}
	began := time.Now()
	run(t, testContext(t), in.String(), kcat, "-b", strings.Join(b.Seeds, ","), "-t", topic, "-P", "-K", ":",
		"-X", "client.id="+id, "-X", "batch.num.messages=10", "-X", "linger.ms=0", "-X", "acks=all")
	require.Greater(t, time.Since(began), 1500*time.Millisecond, "the quota held")
	seen := map[string]bool{}
	for _, r := range b.consumeN(t, topic, n) {
		require.False(t, seen[string(r.Key)], "duplicate %s", r.Key)
		seen[string(r.Key)] = true
	}
	require.Len(t, seen, n)
}
