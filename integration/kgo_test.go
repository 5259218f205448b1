package integration

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCompressionRoundTrip produces with each codec and reads every record
// back unchanged: key, value, headers, timestamp, offset, and the batch's
// codec (the broker stores compressed batches verbatim).
func TestCompressionRoundTrip(t *testing.T) {
	t.Parallel()
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
		attr  uint8
	}{
		{"none", kgo.NoCompression(), 0},
		{"gzip", kgo.GzipCompression(), 1},
		{"snappy", kgo.SnappyCompression(), 2},
		{"lz4", kgo.Lz4Compression(), 3},
		{"zstd", kgo.ZstdCompression(), 4},
	}
	for _, tc := range codecs {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t)
			topic := b.createTopic(t, 2, nil)
			ctx := testContext(t)
			cl := b.client(t,
				kgo.ProducerBatchCompression(tc.codec),
				kgo.ProducerLinger(50*time.Millisecond),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
			)

			const n = 200
			base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
			var recs []*kgo.Record
			for i := range n {
				recs = append(recs, &kgo.Record{
					Topic:     topic,
					Partition: int32(i % 2),
					Key:       fmt.Appendf(nil, "key-%d", i),
					Value:     []byte(strings.Repeat(fmt.Sprintf("value-%d;", i), 30)),
					Headers: []kgo.RecordHeader{
						{Key: "h-index", Value: fmt.Appendf(nil, "%d", i)},
						{Key: "h-empty", Value: nil},
					},
					Timestamp: base.Add(time.Duration(i) * time.Millisecond),
				})
			}
			res := cl.ProduceSync(ctx, recs...)
			require.NoError(t, res.FirstErr(), "produce")
			want := map[string]*kgo.Record{}
			next := map[int32]int64{}
			for _, r := range res {
				// Offsets per partition are assigned 0, 1, 2, ... in produce order.
				assert.Equal(t, next[r.Record.Partition], r.Record.Offset, "offset of %s", r.Record.Key)
				next[r.Record.Partition]++
				want[string(r.Record.Key)] = r.Record
			}

			got := b.consumeN(t, topic, n)
			require.Len(t, got, n)
			seen := map[string]bool{}
			for _, r := range got {
				k := string(r.Key)
				w, ok := want[k]
				require.True(t, ok, "unexpected key %q", k)
				require.False(t, seen[k], "key %q read twice", k)
				seen[k] = true
				assert.Equal(t, w.Partition, r.Partition, "partition of %s", k)
				assert.Equal(t, w.Offset, r.Offset, "offset of %s", k)
				assert.Equal(t, w.Value, r.Value, "value of %s", k)
				assert.True(t, w.Timestamp.Equal(r.Timestamp), "timestamp of %s: want %v got %v", k, w.Timestamp, r.Timestamp)
				assert.Equal(t, int8(0), r.Attrs.TimestampType(), "timestamp type of %s (0=CreateTime)", k)
				assert.Equal(t, tc.attr, r.Attrs.CompressionType(), "codec of the batch holding %s", k)
				require.Len(t, r.Headers, 2, "headers of %s", k)
				assert.Equal(t, "h-index", r.Headers[0].Key)
				assert.Equal(t, w.Headers[0].Value, r.Headers[0].Value)
				assert.Equal(t, "h-empty", r.Headers[1].Key)
				assert.Empty(t, r.Headers[1].Value)
			}
		})
	}
}

// TestRecordSizeLimit produces single-record batches just under and just
// over max.message.bytes, for the broker default (1048588, as Kafka) and a
// topic override. The one over gets MESSAGE_TOO_LARGE and is not appended.
func TestRecordSizeLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		limit int
		cfg   map[string]*string
	}{
		{"default", 1048588, nil},
		{"topic-override", 65536, map[string]*string{"max.message.bytes": strp("65536")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t)
			if tc.cfg == nil {
				b.requireInProcess(t) // an external cluster may have another default
			}
			topic := b.createTopic(t, 1, tc.cfg)
			ctx := testContext(t)
			// Let the broker, not the client, judge the size.
			cl := b.client(t,
				kgo.ProducerBatchMaxBytes(16<<20),
				kgo.ProducerBatchCompression(kgo.NoCompression()),
				kgo.FetchMaxPartitionBytes(8<<20),
			)
			// A one-record batch costs 61 bytes of batch header plus about a
			// dozen bytes of record framing on top of the value.
			fits := make([]byte, tc.limit-128)
			tooBig := make([]byte, tc.limit+1)
			_, _ = rand.Read(fits)
			_, _ = rand.Read(tooBig)

			r0 := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("before")})
			require.NoError(t, r0.FirstErr())
			r1 := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fits})
			require.NoError(t, r1.FirstErr(), "a %d-byte value fits under max.message.bytes=%d", len(fits), tc.limit)
			r2 := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: tooBig})
			require.Error(t, r2.FirstErr(), "a %d-byte value exceeds max.message.bytes=%d", len(tooBig), tc.limit)
			require.ErrorIs(t, r2.FirstErr(), kerr.MessageTooLarge)
			r3 := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("after")})
			require.NoError(t, r3.FirstErr())

			assert.Equal(t, int64(0), r0[0].Record.Offset)
			assert.Equal(t, int64(1), r1[0].Record.Offset)
			assert.Equal(t, int64(2), r3[0].Record.Offset, "the rejected record must not take an offset")

			got := b.consumeN(t, topic, 3, kgo.FetchMaxPartitionBytes(8<<20))
			require.Len(t, got, 3)
			assert.Equal(t, []byte("before"), got[0].Value)
			assert.True(t, bytes.Equal(fits, got[1].Value), "large value read back changed")
			assert.Equal(t, []byte("after"), got[2].Value)
		})
	}
}

// TestIdempotentProducer: concurrent idempotent producing yields gap-free,
// unique offsets, and DescribeProducers reports the producer's sequence.
func TestIdempotentProducer(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := b.createTopic(t, 3, nil)
	ctx := testContext(t)
	cl := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))

	const perPartition = 300
	var wg sync.WaitGroup
	var mu sync.Mutex
	offsets := map[int32]map[int64]string{}
	var firstErr error
	for p := range int32(3) {
		offsets[p] = map[int64]string{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perPartition {
				v := fmt.Sprintf("p%d-%d", p, i)
				cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						if firstErr == nil {
							firstErr = err
						}
						return
					}
					if prev, dup := offsets[p][r.Offset]; dup {
						firstErr = fmt.Errorf("offset %d/%d acked for %s and %s", p, r.Offset, prev, v)
					}
					offsets[p][r.Offset] = v
				})
			}
		}()
	}
	wg.Wait()
	require.NoError(t, cl.Flush(ctx))
	require.NoError(t, firstErr)
	for p := range int32(3) {
		require.Len(t, offsets[p], perPartition)
		for o := range int64(perPartition) {
			// kgo keeps per-partition order with idempotence.
			require.Equal(t, fmt.Sprintf("p%d-%d", p, o), offsets[p][o], "partition %d offset %d", p, o)
		}
	}

	id, epoch, err := cl.ProducerID(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, id, int64(0))
	described, err := b.admin(t).DescribeProducers(ctx, map[string]map[int32]struct{}{topic: {0: {}, 1: {}, 2: {}}})
	require.NoError(t, err)
	for p := range int32(3) {
		dp, ok := described[topic].Partitions[p]
		require.True(t, ok, "DescribeProducers: partition %d missing", p)
		require.NoError(t, dp.Err, "DescribeProducers partition %d", p)
		var found bool
		for _, prod := range dp.ActiveProducers {
			if prod.ProducerID == id {
				found = true
				assert.Equal(t, epoch, prod.ProducerEpoch, "producer epoch p%d", p)
				assert.Equal(t, int32(perPartition-1), prod.LastSequence, "last sequence p%d", p)
				assert.Positive(t, prod.LastTimestamp, "last timestamp p%d", p)
			}
		}
		assert.True(t, found, "producer %d not listed for partition %d: %+v", id, p, dp.ActiveProducers)
	}
}

// TestIdempotentDedupRaw drives the producer-state rules by hand: a resent
// batch gets its original offset and is not appended again, a sequence gap
// gets OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestIdempotentDedupRaw(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := b.createTopic(t, 1, nil)
	c := dialRaw(t, b.Addr)
	id := c.topicID(topic)

	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionTimeoutMillis = -1
	init.ProducerID = -1
	init.ProducerEpoch = -1
	ir := c.roundTrip(init).(*kmsg.InitProducerIDResponse)
	require.Zero(t, ir.ErrorCode, "InitProducerId")
	require.GreaterOrEqual(t, ir.ProducerID, int64(0))
	pid, pe := ir.ProducerID, ir.ProducerEpoch

	batch := func(seq int32, n int) []byte {
		var recs []testRecord
		for i := range n {
			recs = append(recs, testRecord{Value: fmt.Appendf(nil, "seq-%d", int(seq)+i)})
		}
		return batchSpec{ProducerID: pid, ProducerEpoch: pe, FirstSequence: seq, Timestamp: time.Now().UnixMilli(), Records: recs}.encode()
	}
	b0, b3, b5 := batch(0, 3), batch(3, 2), batch(5, 1)

	r := c.produce(topic, id, 0, b0)
	require.Zero(t, r.ErrorCode, "seq 0: %s", kerr.ErrorForCode(r.ErrorCode))
	require.Equal(t, int64(0), r.BaseOffset)
	r = c.produce(topic, id, 0, b3)
	require.Zero(t, r.ErrorCode, "seq 3: %s", kerr.ErrorForCode(r.ErrorCode))
	require.Equal(t, int64(3), r.BaseOffset)

	// Retries of either of the last batches: original offsets, nothing appended.
	r = c.produce(topic, id, 0, b0)
	require.Zero(t, r.ErrorCode, "duplicate seq 0: %s", kerr.ErrorForCode(r.ErrorCode))
	assert.Equal(t, int64(0), r.BaseOffset, "duplicate seq 0 must get its original offset")
	r = c.produce(topic, id, 0, b3)
	require.Zero(t, r.ErrorCode, "duplicate seq 3: %s", kerr.ErrorForCode(r.ErrorCode))
	assert.Equal(t, int64(3), r.BaseOffset, "duplicate seq 3 must get its original offset")

	// A gap.
	r = c.produce(topic, id, 0, batch(9, 1))
	assert.Equal(t, kerr.OutOfOrderSequenceNumber.Code, r.ErrorCode, "seq 9 after 4: got %s", kerr.ErrorForCode(r.ErrorCode))

	r = c.produce(topic, id, 0, b5)
	require.Zero(t, r.ErrorCode, "seq 5: %s", kerr.ErrorForCode(r.ErrorCode))
	assert.Equal(t, int64(5), r.BaseOffset)

	recs, hwm := c.fetchAll(topic, id, 0, 0)
	assert.Equal(t, int64(6), hwm, "high watermark after dedup")
	require.Len(t, recs, 6)
	for i, rec := range recs {
		assert.Equal(t, int64(i), rec.Offset)
		assert.Equal(t, fmt.Sprintf("seq-%d", i), string(rec.Value))
	}
}

// TestIdempotentStateSurvivesRestart: producer state (last sequences and
// the offsets of the last batches) is recovered after a graceful restart,
// so a retry after the restart is still answered with its original offset.
func TestIdempotentStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := startBroker(t, withDataDir(dir))
	topic := b.createTopic(t, 1, nil)
	c := dialRaw(t, b.Addr)
	id := c.topicID(topic)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionTimeoutMillis = -1
	init.ProducerID, init.ProducerEpoch = -1, -1
	ir := c.roundTrip(init).(*kmsg.InitProducerIDResponse)
	require.Zero(t, ir.ErrorCode)
	batch := func(seq int32, n int) []byte {
		var recs []testRecord
		for i := range n {
			recs = append(recs, testRecord{Value: fmt.Appendf(nil, "seq-%d", int(seq)+i)})
		}
		return batchSpec{ProducerID: ir.ProducerID, ProducerEpoch: ir.ProducerEpoch, FirstSequence: seq,
			Timestamp: time.Now().UnixMilli(), Records: recs}.encode()
	}
	b0, b3 := batch(0, 3), batch(3, 2)
	require.Zero(t, c.produce(topic, id, 0, b0).ErrorCode)
	require.Zero(t, c.produce(topic, id, 0, b3).ErrorCode)

	b.shutdown(t)
	b = startBroker(t, withDataDir(dir))
	c = dialRaw(t, b.Addr)
	require.Equal(t, id, c.topicID(topic), "topic id survives the restart")

	r := c.produce(topic, id, 0, b3)
	require.Zero(t, r.ErrorCode, "retry of seq 3 after restart: %s", kerr.ErrorForCode(r.ErrorCode))
	assert.Equal(t, int64(3), r.BaseOffset, "retry of seq 3 after restart gets its original offset")
	r = c.produce(topic, id, 0, b0)
	require.Zero(t, r.ErrorCode, "retry of seq 0 after restart: %s", kerr.ErrorForCode(r.ErrorCode))
	assert.Equal(t, int64(0), r.BaseOffset, "retry of seq 0 after restart gets its original offset")
	r = c.produce(topic, id, 0, batch(7, 1))
	assert.Equal(t, kerr.OutOfOrderSequenceNumber.Code, r.ErrorCode, "a gap after restart: got %s", kerr.ErrorForCode(r.ErrorCode))
	r = c.produce(topic, id, 0, batch(5, 1))
	require.Zero(t, r.ErrorCode, "seq 5 after restart: %s", kerr.ErrorForCode(r.ErrorCode))
	assert.Equal(t, int64(5), r.BaseOffset)
	recs, hwm := c.fetchAll(topic, id, 0, 0)
	assert.Equal(t, int64(6), hwm)
	for i, rec := range recs {
		assert.Equal(t, fmt.Sprintf("seq-%d", i), string(rec.Value))
	}
}

// TestAcks produces with acks=0, 1 and all and reads everything back.
func TestAcks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"acks=0", []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}},
		{"acks=1", []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}},
		{"acks=all", []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t)
			topic := b.createTopic(t, 1, nil)
			ctx := testContext(t)
			cl := b.client(t, tc.opts...)
			const n = 100
			var recs []*kgo.Record
			for i := range n {
				recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", tc.name, i)})
			}
			require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
			got := b.consumeN(t, topic, n)
			for i, r := range got {
				assert.Equal(t, int64(i), r.Offset)
				assert.Equal(t, fmt.Sprintf("%s-%d", tc.name, i), string(r.Value))
			}
		})
	}
}

// TestFetchLongPoll: a fetch waits up to MaxWaitMs when there is no data,
// and a parked fetch returns soon after a produce rather than at MaxWaitMs.
func TestFetchLongPoll(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := b.createTopic(t, 1, nil)
	c := dialRaw(t, b.Addr)
	id := c.topicID(topic)

	start := time.Now()
	resp := c.roundTrip(fetchRequest(topic, id, 0, 0, 500*time.Millisecond)).(*kmsg.FetchResponse)
	waited := time.Since(start)
	t.Logf("an empty fetch with MaxWaitMs=500 returned after %v", waited.Round(time.Millisecond))
	require.Zero(t, resp.ErrorCode)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	assert.Empty(t, resp.Topics[0].Partitions[0].RecordBatches)
	assert.GreaterOrEqual(t, waited, 400*time.Millisecond, "an empty fetch with MaxWaitMs=500 answered early")
	assert.Less(t, waited, 3*time.Second, "an empty fetch with MaxWaitMs=500 answered late")

	type result struct {
		resp kmsg.Response
		err  error
		at   time.Time
	}
	done := make(chan result, 1)
	parked := fetchRequest(topic, id, 0, 0, 5*time.Second)
	corr, frame := c.prepare(parked)
	go func() {
		resp, err := c.exchange(parked, corr, frame, 15*time.Second)
		done <- result{resp, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond) // let the fetch park
	p := dialRaw(t, b.Addr)
	pr := p.produce(topic, id, 0, plainBatch(time.Now().UnixMilli(), testRecord{Value: []byte("wake up")}).encode())
	require.Zero(t, pr.ErrorCode, "produce: %s", kerr.ErrorForCode(pr.ErrorCode))
	acked := time.Now()

	select {
	case res := <-done:
		require.NoError(t, res.err, "parked fetch")
		fr := res.resp.(*kmsg.FetchResponse)
		lag := res.at.Sub(acked)
		t.Logf("fetch returned %v after the produce was acknowledged", lag)
		assert.Less(t, lag, 1500*time.Millisecond, "a parked fetch must wake on append, not wait out MaxWaitMs=5s")
		require.Zero(t, fr.ErrorCode)
		require.Len(t, fr.Topics, 1)
		require.Len(t, fr.Topics[0].Partitions, 1)
		recs := decodeBatches(t, fr.Topics[0].Partitions[0].RecordBatches)
		require.Len(t, recs, 1)
		assert.Equal(t, "wake up", string(recs[0].Value))
	case <-time.After(10 * time.Second):
		t.Fatal("fetch with MaxWaitMs=5000 did not return within 10s")
	}
}

// TestFetchSessionsRaw checks KIP-227 incremental fetch sessions by hand.
func TestFetchSessionsRaw(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := b.createTopic(t, 3, nil)
	c := dialRaw(t, b.Addr)
	if c.maxVersions[1] < 7 {
		t.Fatalf("broker serves Fetch up to v%d; sessions need v7+", c.maxVersions[1])
	}
	id := c.topicID(topic)
	for p := range int32(3) {
		r := c.produce(topic, id, p, plainBatch(time.Now().UnixMilli(),
			testRecord{Value: fmt.Appendf(nil, "p%d-0", p)}, testRecord{Value: fmt.Appendf(nil, "p%d-1", p)}).encode())
		require.Zero(t, r.ErrorCode)
	}

	fetch := func(session, epoch int32, offsets map[int32]int64, wait time.Duration) *kmsg.FetchResponse {
		req := fetchRequest(topic, id, 0, 0, wait)
		req.SessionID, req.SessionEpoch = session, epoch
		req.Topics = req.Topics[:0]
		if len(offsets) > 0 {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, id
			for p := range int32(3) {
				if o, ok := offsets[p]; ok {
					rp := fetchRequest(topic, id, p, o, 0).Topics[0].Partitions[0]
					rt.Partitions = append(rt.Partitions, rp)
				}
			}
			req.Topics = append(req.Topics, rt)
		}
		return c.roundTrip(req).(*kmsg.FetchResponse)
	}
	recordsByPartition := func(resp *kmsg.FetchResponse) map[int32][]fetchedRecord {
		out := map[int32][]fetchedRecord{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				require.Zero(t, rp.ErrorCode, "partition %d", rp.Partition)
				if recs := decodeBatches(t, rp.RecordBatches); len(recs) > 0 {
					out[rp.Partition] = recs
				}
			}
		}
		return out
	}

	// Epoch 0: a full fetch that opens a session.
	full := fetch(0, 0, map[int32]int64{0: 0, 1: 0, 2: 0}, 100*time.Millisecond)
	require.Zero(t, full.ErrorCode, "full fetch: %s", kerr.ErrorForCode(full.ErrorCode))
	require.NotZero(t, full.SessionID, "the broker did not open a fetch session")
	got := recordsByPartition(full)
	for p := range int32(3) {
		require.Len(t, got[p], 2, "full fetch, partition %d", p)
	}
	session := full.SessionID

	// Epoch 1: move every fetch offset to the end; nothing new to send.
	inc := fetch(session, 1, map[int32]int64{0: 2, 1: 2, 2: 2}, 100*time.Millisecond)
	require.Zero(t, inc.ErrorCode, "epoch 1: %s", kerr.ErrorForCode(inc.ErrorCode))
	assert.Equal(t, session, inc.SessionID)
	assert.Empty(t, recordsByPartition(inc), "epoch 1 returned records")

	// Produce to partition 1 only, then an incremental fetch naming no
	// partitions: the session remembers them and their offsets.
	r := c.produce(topic, id, 1, plainBatch(time.Now().UnixMilli(), testRecord{Value: []byte("p1-2")}).encode())
	require.Zero(t, r.ErrorCode)
	inc = fetch(session, 2, nil, 2*time.Second)
	require.Zero(t, inc.ErrorCode, "epoch 2: %s", kerr.ErrorForCode(inc.ErrorCode))
	got = recordsByPartition(inc)
	require.Len(t, got[1], 1, "epoch 2 should return the new record of partition 1")
	assert.Equal(t, int64(2), got[1][0].Offset)
	assert.Equal(t, "p1-2", string(got[1][0].Value))
	assert.Empty(t, got[0], "partition 0 has nothing new")
	assert.Empty(t, got[2], "partition 2 has nothing new")
	for _, rt := range inc.Topics {
		for _, rp := range rt.Partitions {
			assert.Equal(t, int32(1), rp.Partition, "an incremental response lists only changed partitions")
		}
	}

	// A stale epoch and an unknown session are rejected.
	bad := fetch(session, 2, nil, 0)
	assert.Equal(t, kerr.InvalidFetchSessionEpoch.Code, bad.ErrorCode, "stale epoch: got %s", kerr.ErrorForCode(bad.ErrorCode))
	bad = fetch(session+7919, 1, nil, 0)
	assert.Equal(t, kerr.FetchSessionIDNotFound.Code, bad.ErrorCode, "unknown session: got %s", kerr.ErrorForCode(bad.ErrorCode))
}

// TestConsumeManyPartitionsWhileProducing consumes 16 partitions with kgo
// (which uses incremental fetch sessions) while another client produces.
func TestConsumeManyPartitionsWhileProducing(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	const partitions = 16
	topic := b.createTopic(t, partitions, nil)
	ctx := testContext(t)

	consumer := b.client(t,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	producer := b.client(t, kgo.ProducerLinger(2*time.Millisecond))

	const total = 4000
	var mu sync.Mutex
	acked := map[string]string{} // "p/offset" -> value
	var prodErr error
	go func() {
		for i := range total {
			v := fmt.Sprintf("v-%d", i)
			producer.Produce(ctx, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k-%d", i), Value: []byte(v)}, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					prodErr = errors.Join(prodErr, err)
					return
				}
				acked[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = v
			})
			if i%200 == 199 {
				time.Sleep(20 * time.Millisecond) // spread production over the consumption
			}
		}
	}()

	seen := map[string]bool{}
	last := map[int32]int64{}
	for len(seen) < total {
		fs := consumer.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d", len(seen), total)
		fs.EachError(func(topic string, p int32, err error) { t.Errorf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			require.False(t, seen[v], "%s consumed twice", v)
			seen[v] = true
			if prev, ok := last[r.Partition]; ok {
				require.Equal(t, prev+1, r.Offset, "partition %d offsets must be consecutive", r.Partition)
			} else {
				require.Equal(t, int64(0), r.Offset, "partition %d starts at 0", r.Partition)
			}
			last[r.Partition] = r.Offset
		})
	}
	require.NoError(t, producer.Flush(ctx))
	mu.Lock()
	defer mu.Unlock()
	require.NoError(t, prodErr)
	require.Len(t, acked, total)
	// Every acknowledged (partition, offset) holds the value acknowledged there.
	cons := b.consumeN(t, topic, total)
	for _, r := range cons {
		k := fmt.Sprintf("%d/%d", r.Partition, r.Offset)
		require.Equal(t, acked[k], string(r.Value), "record at %s", k)
	}
	used := 0
	for p := range int32(partitions) {
		if _, ok := last[p]; ok {
			used++
		}
	}
	assert.Greater(t, used, partitions/2, "records should spread over the partitions")
}
