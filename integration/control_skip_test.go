package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mq/shoal/broker"
	"github.com/shoal-mq/shoal/protocol"
)

// privateControlBatch is a control batch of one record whose key is
// (version 0, typ), as Kafka's transaction markers are, with value as
// its value: what the cluster design (docs/CLUSTER.md) would write for
// raft's own entries (a term's empty entry, a configuration change)
// with types from 0x7000 up.
func privateControlBatch(offset int64, typ int16, value []byte) []byte {
	var rec []byte
	rec = append(rec, 0)             // record attributes
	rec = kbin.AppendVarlong(rec, 0) // timestamp delta
	rec = kbin.AppendVarint(rec, 0)  // offset delta
	key := binary.BigEndian.AppendUint16(nil, 0)
	key = binary.BigEndian.AppendUint16(key, uint16(typ))
	rec = kbin.AppendVarint(rec, int32(len(key)))
	rec = append(rec, key...)
	rec = kbin.AppendVarint(rec, int32(len(value)))
	rec = append(rec, value...)
	rec = kbin.AppendVarint(rec, 0) // headers
	records := kbin.AppendVarint(nil, int32(len(rec)))
	records = append(records, rec...)

	now := time.Now().UnixMilli()
	b := binary.BigEndian.AppendUint64(nil, uint64(offset))
	b = binary.BigEndian.AppendUint32(b, 0)           // batch length, set below
	b = binary.BigEndian.AppendUint32(b, 0)           // partition leader epoch
	b = append(b, 2)                                  // magic
	b = binary.BigEndian.AppendUint32(b, 0)           // crc, set below
	b = binary.BigEndian.AppendUint16(b, 0x20)        // attributes: control
	b = binary.BigEndian.AppendUint32(b, 0)           // last offset delta
	b = binary.BigEndian.AppendUint64(b, uint64(now)) // first timestamp
	b = binary.BigEndian.AppendUint64(b, uint64(now)) // max timestamp
	b = binary.BigEndian.AppendUint64(b, ^uint64(0))  // producer id -1
	b = binary.BigEndian.AppendUint16(b, 0xffff)      // producer epoch -1
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)  // base sequence -1
	b = binary.BigEndian.AppendUint32(b, 1)           // record count
	b = append(b, records...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	protocol.SetBatchCRC(b)
	return b
}

// TestClientsOnPrivateControlBatches answers the cluster design's
// pitfall 17 before the design relies on it: what Kafka clients do with
// a control batch of a type Kafka does not define (0x7000) in the
// middle of a partition. franz-go, sarama and librdkafka (kcat) skip
// it and read every data record around it. kafka-go (v0.4.51) and
// Debian's kafka-python (2.0) do not skip control batches at all: they
// hand its record to the application as if it were data. So a cluster
// must never let a fetch return raft's internal batches (docs/CLUSTER.md:
// they are kept out of Fetch responses). The test pins both behaviours;
// if kafka-go or kafka-python starts skipping control batches, its
// cell fails and the constraint can be looked at again.
func TestClientsOnPrivateControlBatches(t *testing.T) {
	t.Parallel()
	if len(externalSeeds()) > 0 {
		t.Skipf("writes a segment file of an in-process broker; %s is set", seedsEnv)
	}
	kcat := requireTool(t, "kcat")
	ctx := testContext(t)
	cfg := broker.DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.Logger = failureLogger(t)
	start := func() *broker.Broker {
		b, err := broker.Start(cfg)
		require.NoError(t, err)
		return b
	}
	const topic = "ctl-skip"
	produce := func(b *broker.Broker, from, n int) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic(topic))
		require.NoError(t, err)
		defer cl.Close()
		for i := from; i < from+n; i++ {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "v%d", i)}).FirstErr())
		}
	}
	b := start()
	adm, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	require.NoError(t, err)
	_, err = kadm.NewClient(adm).CreateTopic(ctx, 1, 1, nil, topic)
	adm.Close()
	require.NoError(t, err)
	produce(b, 0, 3) // offsets 0-2
	require.NoError(t, b.Close())

	// Offset 3: the private control batch, written where the broker's
	// next append would go, then recovered by the restart.
	seg := filepath.Join(cfg.DataDir, "logs", topic+"-0", "00000000000000000000.log")
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(privateControlBatch(3, 0x7000, []byte("raft")))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	b = start()
	defer b.Close()
	produce(b, 3, 2) // offsets 4-5
	want := []string{"v0", "v1", "v2", "v3", "v4"}
	// What kafka-go and kafka-python read: the control record's value
	// as a record (they stop at five here).
	leaked := []string{"v0", "v1", "v2", "raft", "v3"}

	t.Run("franz-go", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		require.NoError(t, err)
		defer cl.Close()
		var got []string
		var offsets []int64
		for len(got) < len(want) {
			fs := cl.PollFetches(ctx)
			require.NoError(t, ctx.Err())
			fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
			fs.EachRecord(func(r *kgo.Record) { got, offsets = append(got, string(r.Value)), append(offsets, r.Offset) })
		}
		require.Equal(t, want, got)
		require.Equal(t, []int64{0, 1, 2, 4, 5}, offsets, "offset 3 is the control batch's")
	})
	t.Run("sarama", func(t *testing.T) {
		cfg := saramaConfig(sarama.V3_6_0_0)
		c, err := sarama.NewConsumer([]string{b.Addr()}, cfg)
		require.NoError(t, err)
		defer c.Close()
		pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
		require.NoError(t, err)
		defer pc.Close()
		var got []string
		timeout := time.After(30 * time.Second)
		for len(got) < len(want) {
			select {
			case m := <-pc.Messages():
				got = append(got, string(m.Value))
			case err := <-pc.Errors():
				t.Fatalf("sarama: %v", err)
			case <-timeout:
				t.Fatalf("sarama read %v", got)
			}
		}
		require.Equal(t, want, got)
	})
	t.Run("kafka-go", func(t *testing.T) {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{b.Addr()}, Topic: topic, Partition: 0, MaxWait: 200 * time.Millisecond})
		defer r.Close()
		require.NoError(t, r.SetOffset(kafka.FirstOffset))
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var got []string
		for len(got) < len(want) {
			m, err := r.ReadMessage(rctx)
			require.NoError(t, err, "kafka-go after %v", got)
			got = append(got, string(m.Value))
		}
		require.Equal(t, leaked, got, "kafka-go hands the control record over as data")
	})
	t.Run("kcat", func(t *testing.T) {
		out := run(t, ctx, "", kcat, "-b", b.Addr(), "-t", topic, "-p", "0", "-C", "-o", "beginning", "-e", "-q")
		require.Equal(t, strings.Join(want, "\n")+"\n", out)
	})
	t.Run("kafka-python", func(t *testing.T) {
		const script = `
import json, sys
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=sys.argv[1], auto_offset_reset="earliest", consumer_timeout_ms=10000)
tp = TopicPartition(sys.argv[2], 0)
c.assign([tp])
c.seek_to_beginning(tp)
got = []
for m in c:
    got.append(m.value.decode())
    if len(got) == 5:
        break
print(json.dumps(got))
`
		out := run(t, ctx, "", pythonPath, "-c", script, b.Addr(), topic)
		require.Equal(t, `["v0", "v1", "v2", "raft", "v3"]`, strings.TrimSpace(out), "kafka-python hands the control record over as data")
	})
}
