package integration

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker"
)

// TestCompactedTopic: cleanup.policy=compact through real clients. 100,000
// updates over 1,000 keys (half snappy, half uncompressed) and tombstones
// for 100 of them; once the cleaner has run, a consumer reading from the
// start (franz-go, and kcat) sees exactly one record per live key, at the
// offset and with the value of its last update, and no deleted key (their
// tombstones older than delete.retention.ms); the same after a restart.
// A record without a key is refused with INVALID_RECORD.
func TestCompactedTopic(t *testing.T) {
	kcat := requireTool(t, "kcat")
	b, opts := startCompactingBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic := b.createTopic(t, 1, map[string]*string{
		"cleanup.policy": strp("compact"), "segment.bytes": strp("1048576"),
		"segment.ms": strp("1000"), "delete.retention.ms": strp("1000"),
	})

	type kv struct {
		off int64
		val string
	}
	// The table every acknowledged update leaves (the cleaner runs while
	// they are produced: what a consumer reading them all would end with).
	before := map[string]kv{}
	acked := func(res kgo.ProduceResults) {
		require.NoError(t, res.FirstErr())
		for _, r := range res {
			if r.Record.Value == nil {
				delete(before, string(r.Record.Key))
			} else {
				before[string(r.Record.Key)] = kv{r.Record.Offset, string(r.Record.Value)}
			}
		}
	}
	const updates, keys, deleted = 100_000, 1_000, 100
	produce := func(cl *kgo.Client, from, to int) {
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			k := i % keys
			rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%04d", k),
				Value: fmt.Appendf(nil, "update %d of key %d %s", i, k, strings.Repeat("x", 60))})
		}
		acked(cl.ProduceSync(ctx, rs...))
	}
	snappy := b.client(t, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	plain := b.client(t, kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := 0; i < updates/2; i += 5000 {
		produce(snappy, i, i+5000)
	}
	for i := updates / 2; i < updates; i += 5000 {
		produce(plain, i, i+5000)
	}
	var tombs []*kgo.Record
	for k := range deleted {
		tombs = append(tombs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%04d", k*7)})
	}
	acked(plain.ProduceSync(ctx, tombs...))

	// A keyless record is refused, and nothing is appended.
	err := plain.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("no key")}).FirstErr()
	require.True(t, errors.Is(err, kerr.InvalidRecord), "keyless produce: %v", err)

	// What a consumer reading from the start finds: the table, and how
	// many records it read.
	readAll := func() (map[string]kv, int) {
		cl := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer cl.Close()
		hw := listEnd(t, ctx, b, topic)
		tab, n := map[string]kv{}, 0
		for next := int64(0); next < hw; {
			fs := cl.PollFetches(ctx)
			require.NoError(t, fs.Err())
			fs.EachRecord(func(r *kgo.Record) {
				n++
				if r.Value == nil {
					delete(tab, string(r.Key))
				} else {
					tab[string(r.Key)] = kv{r.Offset, string(r.Value)}
				}
				next = r.Offset + 1
			})
		}
		return tab, n
	}
	require.Len(t, before, keys-deleted)
	require.Equal(t, int64(updates+deleted), listEnd(t, ctx, b, topic))

	// Past delete.retention.ms and segment.ms: one more record rolls the
	// segment, so everything before it may be cleaned.
	time.Sleep(1500 * time.Millisecond)
	require.NoError(t, plain.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("filler"), Value: []byte("f")}).FirstErr())
	filler := listEnd(t, ctx, b, topic) - 1
	before["filler"] = kv{filler, "f"}

	var after map[string]kv
	require.Eventually(t, func() bool {
		var n int
		after, n = readAll()
		return n == len(before)
	}, 60*time.Second, 300*time.Millisecond, "the log was never compacted to one record per key")
	require.Equal(t, before, after)

	// kcat (librdkafka) reads the compacted log from the start: the
	// same keys, offsets and values, each once.
	out := run(t, ctx, "", kcat, "-b", b.Addr, "-t", topic, "-C", "-e", "-q", "-f", "%k %o %s\n")
	seen := map[string]kv{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.SplitN(line, " ", 3)
		require.Len(t, f, 3, "kcat line %q", line)
		off, err := strconv.ParseInt(f[1], 10, 64)
		require.NoError(t, err)
		_, dup := seen[f[0]]
		require.False(t, dup, "kcat read %s twice", f[0])
		seen[f[0]] = kv{off, f[2]}
	}
	require.Equal(t, before, seen)

	// After a restart: the same table at the same offsets, and produce
	// goes on after the last offset.
	b.shutdown(t)
	b = startBroker(t, opts...)
	after, _ = readAll()
	require.Equal(t, before, after)
	cl := b.client(t)
	res := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("key-0001"), Value: []byte("new")})
	require.NoError(t, res.FirstErr())
	require.Equal(t, filler+1, res[0].Record.Offset)
}

// startCompactingBroker starts a broker on its own data dir whose
// cleaner looks for work every 100 ms; opts start it again on that dir.
func startCompactingBroker(t *testing.T) (*testBroker, []brokerOption) {
	opts := []brokerOption{withDataDir(t.TempDir()), func(c *broker.Config) {
		c.BrokerConfigs = map[string]string{"log.cleaner.backoff.ms": "100"}
	}}
	return startBroker(t, opts...), opts
}

// listEnd is a partition 0's high watermark.
func listEnd(t *testing.T, ctx context.Context, b *testBroker, topic string) int64 {
	adm := b.admin(t)
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	o, ok := ends.Lookup(topic, 0)
	require.True(t, ok)
	require.NoError(t, o.Err)
	return o.Offset
}

// TestCompactedTopicRefusesUndecodableBatches: on a compacted topic every
// record must decode, compressed batches included (Kafka's LogValidator
// reads them all), since the cleaner must read every record: a gzip batch
// whose payload is not records is CORRUPT_MESSAGE, one holding a keyless
// record INVALID_RECORD; nothing is appended, and the topic cleans on.
func TestCompactedTopicRefusesUndecodableBatches(t *testing.T) {
	t.Parallel()
	b, _ := startCompactingBroker(t)
	ctx := testContext(t)
	topic := b.createTopic(t, 1, map[string]*string{"cleanup.policy": strp("compact"), "segment.ms": strp("1000")})
	cl := b.client(t)

	gzipBatch := func(payload []byte, n int32) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		_, _ = w.Write(payload)
		require.NoError(t, w.Close())
		now := time.Now().UnixMilli()
		rb := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: 1, LastOffsetDelta: n - 1,
			FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: n, Records: buf.Bytes()}
		raw := rb.AppendTo(nil)
		rb.Length = int32(len(raw) - 12)
		raw = rb.AppendTo(nil)
		rb.CRC = int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
		return rb.AppendTo(nil)
	}
	produce := func(batch []byte) (int16, string) {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		p := resp.Topics[0].Partitions[0]
		msg := ""
		if p.ErrorMessage != nil {
			msg = *p.ErrorMessage
		}
		return p.ErrorCode, msg
	}
	code, msg := produce(gzipBatch([]byte("not records at all"), 1))
	require.Equal(t, kerr.CorruptMessage.Code, code, msg)
	require.Contains(t, msg, "do not decode") // not the CRC check: the batch is well framed
	keyless := kmsg.Record{Value: []byte("no key")}
	keyless.Length = int32(len(keyless.AppendTo(nil)) - 1)
	code, msg = produce(gzipBatch(keyless.AppendTo(nil), 1))
	require.Equal(t, kerr.InvalidRecord.Code, code, msg)
	require.Equal(t, int64(0), listEnd(t, ctx, b, topic), "a refused batch was appended")

	// The topic takes keyed records and compacts them.
	for i := range 3 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: fmt.Appendf(nil, "v%d", i)}).FirstErr())
	}
	time.Sleep(1100 * time.Millisecond)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("roll"), Value: []byte("r")}).FirstErr())
	require.Eventually(t, func() bool {
		return countFrom(t, ctx, b, topic) == 2
	}, 30*time.Second, 200*time.Millisecond, "the topic was not compacted")
}

// countFrom reads partition 0 of topic from the start to its end and
// returns how many records it holds.
func countFrom(t *testing.T, ctx context.Context, b *testBroker, topic string) int {
	end := listEnd(t, ctx, b, topic)
	cl := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	n := 0
	for next := int64(0); next < end; {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachRecord(func(r *kgo.Record) { n, next = n+1, r.Offset+1 })
	}
	return n
}
