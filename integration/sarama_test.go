package integration

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func saramaConfig(version sarama.KafkaVersion) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = "shoal-integration-sarama"
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Metadata.Retry.Max = 10
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Retry.Max = 5
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	return cfg
}

// TestSarama: SyncProducer + partition consumer round trip and ClusterAdmin
// topic administration, at two protocol generations.
func TestSarama(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		version     sarama.KafkaVersion
		codec       sarama.CompressionCodec
		idempotent  bool
		partitioner sarama.PartitionerConstructor
	}{
		{"V3_0_snappy", sarama.V3_0_0_0, sarama.CompressionSnappy, false, sarama.NewManualPartitioner},
		{"V4_0_zstd_idempotent", sarama.V4_0_0_0, sarama.CompressionZSTD, true, sarama.NewManualPartitioner},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t)
			cfg := saramaConfig(tc.version)
			cfg.Producer.Compression = tc.codec
			cfg.Producer.Partitioner = tc.partitioner
			if tc.idempotent {
				cfg.Producer.Idempotent = true
				cfg.Net.MaxOpenRequests = 1
			}

			// ClusterAdmin: create, describe, configs, errors.
			admin, err := sarama.NewClusterAdmin(b.Seeds, cfg)
			require.NoError(t, err, "NewClusterAdmin")
			defer func() { assert.NoError(t, admin.Close()) }()
			topic := topicName(t)
			retention := "86400000"
			require.NoError(t, admin.CreateTopic(topic, &sarama.TopicDetail{
				NumPartitions:     2,
				ReplicationFactor: 1,
				ConfigEntries:     map[string]*string{"retention.ms": &retention},
			}, false), "CreateTopic")
			err = admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false)
			assert.True(t, errors.Is(err, sarama.ErrTopicAlreadyExists), "creating twice: %v", err)

			mds, err := admin.DescribeTopics([]string{topic})
			require.NoError(t, err, "DescribeTopics")
			require.Len(t, mds, 1)
			assert.Equal(t, sarama.ErrNoError, mds[0].Err)
			assert.Equal(t, topic, mds[0].Name)
			assert.Len(t, mds[0].Partitions, 2)
			if tc.version.IsAtLeast(sarama.V2_8_0_0) {
				assert.NotEqual(t, sarama.Uuid{}, mds[0].Uuid, "topic id")
			}
			entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
			require.NoError(t, err, "DescribeConfig")
			var found bool
			for _, e := range entries {
				if e.Name == "retention.ms" {
					found = true
					assert.Equal(t, retention, e.Value)
				}
			}
			assert.True(t, found, "retention.ms not described")
			topics, err := admin.ListTopics()
			require.NoError(t, err, "ListTopics")
			assert.Contains(t, topics, topic)

			// SyncProducer -> Consumer.
			producer, err := sarama.NewSyncProducer(b.Seeds, cfg)
			require.NoError(t, err, "NewSyncProducer")
			defer func() { assert.NoError(t, producer.Close()) }()
			const n = 50
			base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
			var msgs []*sarama.ProducerMessage
			for i := range n {
				msgs = append(msgs, &sarama.ProducerMessage{
					Topic:     topic,
					Partition: 1,
					Key:       sarama.StringEncoder(fmt.Sprintf("k%d", i)),
					Value:     sarama.StringEncoder(fmt.Sprintf("sarama value %d", i)),
					Headers:   []sarama.RecordHeader{{Key: []byte("i"), Value: fmt.Appendf(nil, "%d", i)}},
					Timestamp: base.Add(time.Duration(i) * time.Millisecond),
				})
			}
			// One SendMessage, then the rest as a batch.
			p, off, err := producer.SendMessage(msgs[0])
			require.NoError(t, err, "SendMessage")
			assert.Equal(t, int32(1), p)
			assert.Equal(t, int64(0), off)
			require.NoError(t, producer.SendMessages(msgs[1:]), "SendMessages")
			for i, m := range msgs {
				assert.Equal(t, int64(i), m.Offset, "offset of message %d", i)
			}

			consumer, err := sarama.NewConsumer(b.Seeds, cfg)
			require.NoError(t, err, "NewConsumer")
			defer func() { assert.NoError(t, consumer.Close()) }()
			pc, err := consumer.ConsumePartition(topic, 1, sarama.OffsetOldest)
			require.NoError(t, err, "ConsumePartition")
			defer func() { assert.NoError(t, pc.Close()) }()
			timeout := time.After(30 * time.Second)
			for i := 0; i < n; {
				select {
				case m := <-pc.Messages():
					assert.Equal(t, int64(i), m.Offset)
					assert.Equal(t, fmt.Sprintf("k%d", i), string(m.Key))
					assert.Equal(t, fmt.Sprintf("sarama value %d", i), string(m.Value))
					assert.True(t, msgs[i].Timestamp.Equal(m.Timestamp), "timestamp %d: want %v got %v", i, msgs[i].Timestamp, m.Timestamp)
					if assert.Len(t, m.Headers, 1) {
						assert.Equal(t, "i", string(m.Headers[0].Key))
						assert.Equal(t, fmt.Sprintf("%d", i), string(m.Headers[0].Value))
					}
					i++
				case err := <-pc.Errors():
					t.Fatalf("partition consumer: %v", err)
				case <-timeout:
					t.Fatalf("consumed %d of %d messages", i, n)
				}
			}
			assert.Equal(t, int64(n), pc.HighWaterMarkOffset())

			require.NoError(t, admin.DeleteTopic(topic), "DeleteTopic")
		})
	}
}
