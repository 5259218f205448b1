package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// run executes a tool with a deadline and returns its stdout; a non-zero
// exit fails the test with stderr shown.
func run(t *testing.T, ctx context.Context, stdin string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, err, "%s %s\nstderr:\n%s\nstdout:\n%s", name, strings.Join(args, " "), stderr.String(), stdout.String())
	return stdout.String()
}

// TestKcat: librdkafka 2.0 through kcat: produce (-P), consume (-C -e),
// metadata (-L), and reading what kgo wrote with another codec.
func TestKcat(t *testing.T) {
	t.Parallel()
	kcat := requireTool(t, "kcat")
	b := startBroker(t)
	ctx := testContext(t)
	topic := b.createTopic(t, 1, nil)
	brokers := strings.Join(b.Seeds, ",")

	// kcat -P: key:value lines, a header, snappy, acks=all.
	const n = 20
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "kcat-key-%d:kcat value %d\n", i, i)
	}
	run(t, ctx, in.String(), kcat, "-b", brokers, "-t", topic, "-P", "-K", ":", "-z", "snappy",
		"-H", "origin=kcat", "-X", "acks=all")

	// kgo appends a zstd batch after kcat's.
	cl := b.client(t, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "kgo-key-%d", i),
			Value:   []byte(strings.Repeat(fmt.Sprintf("kgo value %d ", i), 10)),
			Headers: []kgo.RecordHeader{{Key: "origin", Value: []byte("kgo")}}})
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())

	// kcat -C -e: partition|offset|key|value|headers per line.
	out := run(t, ctx, "", kcat, "-b", brokers, "-t", topic, "-C", "-o", "beginning", "-e", "-q",
		"-f", "%p|%o|%k|%s|%h\n")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, n+5, "kcat -C output:\n%s", out)
	for i, line := range lines {
		f := strings.SplitN(line, "|", 5)
		require.Len(t, f, 5, "line %q", line)
		assert.Equal(t, "0", f[0])
		assert.Equal(t, strconv.Itoa(i), f[1], "offset")
		if i < n {
			assert.Equal(t, fmt.Sprintf("kcat-key-%d", i), f[2])
			assert.Equal(t, fmt.Sprintf("kcat value %d", i), f[3])
			assert.Equal(t, "origin=kcat", f[4])
		} else {
			j := i - n
			assert.Equal(t, fmt.Sprintf("kgo-key-%d", j), f[2])
			assert.Equal(t, strings.Repeat(fmt.Sprintf("kgo value %d ", j), 10), f[3])
			assert.Equal(t, "origin=kgo", f[4])
		}
	}

	// kcat -L -J: metadata as JSON.
	var md struct {
		Brokers []struct {
			ID   int32  `json:"id"`
			Name string `json:"name"`
		} `json:"brokers"`
		Topics []struct {
			Topic      string `json:"topic"`
			Error      string `json:"error"`
			Partitions []struct {
				Partition int32 `json:"partition"`
				Leader    int32 `json:"leader"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	mout := run(t, ctx, "", kcat, "-b", brokers, "-L", "-t", topic, "-J")
	require.NoError(t, json.Unmarshal([]byte(mout), &md), "kcat -L -J output:\n%s", mout)
	require.NotEmpty(t, md.Brokers)
	if !b.External {
		assert.Equal(t, b.Addr, md.Brokers[0].Name, "advertised address")
	}
	require.Len(t, md.Topics, 1)
	assert.Equal(t, topic, md.Topics[0].Topic)
	assert.Empty(t, md.Topics[0].Error)
	require.Len(t, md.Topics[0].Partitions, 1)
	assert.Equal(t, md.Brokers[0].ID, md.Topics[0].Partitions[0].Leader)
}

// pythonPath is the system interpreter, which the python3-kafka package
// serves (a python3 earlier on PATH, e.g. pyenv, may not have it).
const pythonPath = "/usr/bin/python3"

const kafkaPythonScript = `
import json, sys
from kafka import KafkaProducer, KafkaConsumer, TopicPartition

bootstrap, topic, n = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3])
producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip", linger_ms=200,
                         request_timeout_ms=20000, api_version_auto_timeout_ms=10000)
futures = [producer.send(topic, partition=0, key=b"py-key-%d" % i, value=b"py value %d" % i,
                         headers=[("origin", b"kafka-python")], timestamp_ms=1700000000000 + i)
           for i in range(n)]
producer.flush(20)
produced = [f.get(timeout=20).offset for f in futures]
producer.close()

consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         api_version_auto_timeout_ms=10000, fetch_max_wait_ms=200)
tp = TopicPartition(topic, 0)
consumer.assign([tp])
consumer.seek(tp, 0)
consumed = []
for _ in range(100):
    if len(consumed) >= n:
        break
    for records in consumer.poll(timeout_ms=500).values():
        for r in records:
            consumed.append({"offset": r.offset, "key": r.key.decode(), "value": r.value.decode(),
                             "timestamp": r.timestamp,
                             "headers": [[k, v.decode()] for k, v in r.headers]})
end = consumer.end_offsets([tp])[tp]
consumer.close()
print(json.dumps({"produced": produced, "consumed": consumed, "end": end}))
`

// TestKafkaPython: kafka-python (api_version auto) produces with gzip and
// reads back with assign + seek.
func TestKafkaPython(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(pythonPath); err != nil {
		missingTool(t, pythonPath+" not found")
	}
	if err := exec.Command(pythonPath, "-c", "import kafka").Run(); err != nil {
		missingTool(t, pythonPath+" cannot import kafka (apt-get install -y python3-kafka)")
	}
	b := startBroker(t)
	ctx := testContext(t)
	topic := b.createTopic(t, 1, nil)

	const n = 25
	out := run(t, ctx, "", pythonPath, "-c", kafkaPythonScript, strings.Join(b.Seeds, ","), topic, strconv.Itoa(n))
	var res struct {
		Produced []int64 `json:"produced"`
		Consumed []struct {
			Offset    int64      `json:"offset"`
			Key       string     `json:"key"`
			Value     string     `json:"value"`
			Timestamp int64      `json:"timestamp"`
			Headers   [][]string `json:"headers"`
		} `json:"consumed"`
		End int64 `json:"end"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), "script output:\n%s", out)
	require.Len(t, res.Produced, n)
	for i, o := range res.Produced {
		assert.Equal(t, int64(i), o, "produced offset %d", i)
	}
	assert.Equal(t, int64(n), res.End, "end offset")
	require.Len(t, res.Consumed, n)
	for i, r := range res.Consumed {
		assert.Equal(t, int64(i), r.Offset)
		assert.Equal(t, fmt.Sprintf("py-key-%d", i), r.Key)
		assert.Equal(t, fmt.Sprintf("py value %d", i), r.Value)
		assert.Equal(t, int64(1700000000000+i), r.Timestamp)
		assert.Equal(t, [][]string{{"origin", "kafka-python"}}, r.Headers)
	}

	// And what kafka-python wrote reads the same through kgo.
	// kafka-python sends a batch uncompressed when gzip would not make it
	// smaller (a lone small record), so only some batches are gzip.
	got := b.consumeN(t, topic, n)
	gzipped := 0
	for i, r := range got {
		assert.Equal(t, fmt.Sprintf("py value %d", i), string(r.Value))
		if r.Attrs.CompressionType() == 1 {
			gzipped++
		}
	}
	assert.Positive(t, gzipped, "no gzip batch came through")
}
