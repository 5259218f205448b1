package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterClientsFailover (criterion C7's clients): sarama, kafka-go
// and librdkafka (kcat) produce to a three-broker cluster through a
// SIGKILL of the partition's leader, given the three seeds, and every
// value each wrote is read back once, in order, by kafka-go and by
// Debian's kafka-python, the two clients that hand control records to
// the application (integration/control_skip_test.go): raft's own
// entries (a term's first, empty one) must never reach them.
func TestClusterClientsFailover(t *testing.T) {
	kcat := requireTool(t, "kcat")
	children := startCluster(t, 3)
	seeds := seedsOf(children)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClusterClient(t, seeds, kgo.MetadataMinAge(50*time.Millisecond)))
	for {
		resp, err := adm.CreateTopic(ctx, 1, -1, nil, "clients")
		if err == nil && resp.Err == nil {
			break
		}
		require.NoError(t, ctx.Err(), "topic never created: %v %v", err, resp.Err)
		time.Sleep(200 * time.Millisecond)
	}
	leaderOf := func() int32 {
		for {
			md, err := adm.Metadata(ctx, "clients")
			if err == nil {
				if l := md.Topics["clients"].Partitions[0].Leader; l > 0 && children[l-1].cmd != nil {
					return l
				}
			}
			require.NoError(t, ctx.Err(), "no leader")
			time.Sleep(50 * time.Millisecond)
		}
	}

	writers := []struct {
		name    string
		produce func(values []string)
	}{
		{"sarama", func(values []string) {
			cfg := saramaConfig(sarama.V3_0_0_0)
			cfg.Producer.Idempotent, cfg.Net.MaxOpenRequests = true, 1
			cfg.Producer.Retry.Max, cfg.Producer.Retry.Backoff = 100, 100*time.Millisecond
			cfg.Metadata.Retry.Max = 100
			p, err := sarama.NewSyncProducer(seeds, cfg)
			require.NoError(t, err)
			defer p.Close()
			for _, v := range values {
				_, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "clients", Value: sarama.StringEncoder(v)})
				require.NoError(t, err, "sarama %s", v)
			}
		}},
		{"kafka-go", func(values []string) {
			w := &kafka.Writer{Addr: kafka.TCP(seeds...), Topic: "clients", RequiredAcks: kafka.RequireAll,
				MaxAttempts: 100, BatchTimeout: time.Millisecond, WriteBackoffMin: 50 * time.Millisecond, WriteBackoffMax: 200 * time.Millisecond}
			defer w.Close()
			for _, v := range values {
				require.NoError(t, w.WriteMessages(ctx, kafka.Message{Value: []byte(v)}), "kafka-go %s", v)
			}
		}},
		{"kcat", func(values []string) {
			run(t, ctx, strings.Join(values, "\n")+"\n", kcat, "-P", "-b", strings.Join(seeds, ","), "-t", "clients",
				"-X", "enable.idempotence=true", "-X", "topic.metadata.refresh.interval.ms=200")
		}},
	}
	var want []string
	for _, w := range writers {
		var before, after []string
		for i := range 30 {
			before = append(before, fmt.Sprintf("%s-%d", w.name, i))
			after = append(after, fmt.Sprintf("%s-%d", w.name, 30+i))
		}
		w.produce(before)
		victim := children[leaderOf()-1]
		killed := time.Now()
		victim.kill()
		w.produce(after)
		t.Logf("%s: 30 values acknowledged %v after its leader's SIGKILL", w.name, time.Since(killed).Round(time.Millisecond))
		victim.start()
		want = append(want, before...)
		want = append(want, after...)
	}

	// kafka-go reads back.
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: seeds, Topic: "clients", Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	var got []string
	for len(got) < len(want) {
		m, err := r.ReadMessage(ctx)
		require.NoError(t, err, "kafka-go read after %d of %d", len(got), len(want))
		got = append(got, string(m.Value))
	}
	require.Equal(t, want, got, "kafka-go read")

	// kafka-python reads back.
	if _, err := os.Stat(pythonPath); err != nil {
		missingTool(t, "python3-kafka (/usr/bin/python3 with kafka-python) is needed")
	}
	out, err := exec.CommandContext(ctx, pythonPath, "-c", kafkaPythonReadAll, strings.Join(seeds, ","), "clients",
		fmt.Sprint(len(want))).CombinedOutput()
	require.NoError(t, err, "kafka-python:\n%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Equal(t, want, lines, "kafka-python read")
}

// kafkaPythonReadAll prints the values of partition 0 of a topic, one per
// line, until it has n.
const kafkaPythonReadAll = `
import sys
from kafka import KafkaConsumer, TopicPartition
bootstrap, topic, n = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3])
consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         api_version_auto_timeout_ms=10000, fetch_max_wait_ms=200)
tp = TopicPartition(topic, 0)
consumer.assign([tp])
consumer.seek(tp, 0)
got = []
for _ in range(200):
    if len(got) >= n:
        break
    for records in consumer.poll(timeout_ms=500).values():
        got.extend(r.value.decode() for r in records)
consumer.close()
print("\n".join(got))
`
