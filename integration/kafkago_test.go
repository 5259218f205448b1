package integration

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKafkaGo: Conn.CreateTopics, then Writer -> Reader (no consumer group).
func TestKafkaGo(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	topic := topicName(t)

	// Conn: create a topic on the controller and read its partitions back.
	conn, err := kafka.DialContext(ctx, "tcp", b.Addr)
	require.NoError(t, err, "dial")
	defer conn.Close()
	controller, err := conn.Controller()
	require.NoError(t, err, "Controller")
	cc, err := kafka.DialContext(ctx, "tcp", net.JoinHostPort(controller.Host, strconv.Itoa(controller.Port)))
	require.NoError(t, err, "dial controller %s:%d", controller.Host, controller.Port)
	defer cc.Close()
	require.NoError(t, cc.CreateTopics(kafka.TopicConfig{
		Topic:             topic,
		NumPartitions:     3,
		ReplicationFactor: 1,
		ConfigEntries:     []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: "86400000"}},
	}), "Conn.CreateTopics")
	// kafka-go treats TOPIC_ALREADY_EXISTS as success (idempotent create);
	// other errors come through.
	assert.NoError(t, cc.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 3, ReplicationFactor: 1}), "creating twice")
	err = cc.CreateTopics(kafka.TopicConfig{Topic: topicName(t), NumPartitions: 0, ReplicationFactor: 1})
	assert.ErrorIs(t, err, kafka.InvalidPartitionNumber, "zero partitions")
	var parts []kafka.Partition
	waitUntil(t, "ReadPartitions lists 3 partitions", func() bool {
		parts, err = conn.ReadPartitions(topic)
		return err == nil && len(parts) == 3
	})
	for _, p := range parts {
		assert.Equal(t, topic, p.Topic)
		assert.Equal(t, controller.ID, p.Leader.ID, "partition %d leader", p.ID)
	}

	// Writer, all partitions, zstd.
	w := &kafka.Writer{
		Addr:         kafka.TCP(b.Seeds...),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		Compression:  kafka.Zstd,
		BatchTimeout: 10 * time.Millisecond,
		BatchSize:    100,
	}
	defer w.Close()
	const n = 90
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	var msgs []kafka.Message
	for i := range n {
		msgs = append(msgs, kafka.Message{
			Key:     fmt.Appendf(nil, "key-%d", i),
			Value:   fmt.Appendf(nil, "kafka-go value %d", i),
			Headers: []kafka.Header{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}},
			Time:    base.Add(time.Duration(i) * time.Millisecond),
		})
	}
	require.NoError(t, w.WriteMessages(ctx, msgs...), "WriteMessages")

	// One Reader per partition (no GroupID: groups are a later issue).
	got := map[string]kafka.Message{}
	for _, p := range parts {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   b.Seeds,
			Topic:     topic,
			Partition: p.ID,
			MinBytes:  1,
			MaxBytes:  10 << 20,
			MaxWait:   200 * time.Millisecond,
		})
		require.NoError(t, r.SetOffset(kafka.FirstOffset))
		end, err := kafka.DialLeader(ctx, "tcp", b.Addr, topic, p.ID)
		require.NoError(t, err, "DialLeader %d", p.ID)
		last, err := end.ReadLastOffset()
		end.Close()
		require.NoError(t, err, "ReadLastOffset %d", p.ID)
		for want := int64(0); want < last; want++ {
			m, err := r.ReadMessage(ctx)
			require.NoError(t, err, "ReadMessage partition %d offset %d", p.ID, want)
			assert.Equal(t, want, m.Offset, "partition %d", p.ID)
			got[string(m.Key)] = m
		}
		require.NoError(t, r.Close())
	}
	require.Len(t, got, n, "messages read across partitions")
	for i, want := range msgs {
		m, ok := got[string(want.Key)]
		if !assert.True(t, ok, "message %d missing", i) {
			continue
		}
		assert.Equal(t, want.Value, m.Value)
		assert.True(t, want.Time.Equal(m.Time), "time of %d: want %v got %v", i, want.Time, m.Time)
		if assert.Len(t, m.Headers, 1) {
			assert.Equal(t, "i", m.Headers[0].Key)
			assert.Equal(t, fmt.Appendf(nil, "%d", i), m.Headers[0].Value)
		}
	}
}
