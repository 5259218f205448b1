package broker

// Regression tests for bugs an independent review found in this
// session's transaction and dedup code.

import (
	"context"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/protocol"
)

func rawOneRecordBatch(pid int64, epoch int16, seq int32, attrs int16, value, dedupID string) []byte {
	r := kmsg.Record{Value: []byte(value)}
	if dedupID != "" {
		r.Headers = []kmsg.Header{{Key: "dedup-id", Value: []byte(dedupID)}}
	}
	r.Length = int32(len(r.AppendTo(nil)) - 1)
	now := time.Now().UnixMilli()
	b := (&kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs,
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		NumRecords: 1, Records: r.AppendTo(nil)}).AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	protocol.SetBatchCRC(b)
	return b
}

func (r *rawTxn) produceRaw(topic string, part int32, records []byte) int16 {
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &r.id, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return r.c.do(req, 9).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

// A produce whose first batch is plain and second transactional must not
// skip the coordinator's check: that would open a transaction in a
// partition the txn never added, which no EndTxn or timeout closes, and
// the LSO would stay there (found in review).
func TestTxnPlainBatchCannotSmuggleTransactionalOne(t *testing.T) {
	b := startTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := kadm.NewClient(newClient(t, b)).CreateTopic(ctx, 2, 1, nil, "st")
	require.NoError(t, err)
	r := &rawTxn{c: dialRaw(t, b), id: "st-1"}
	require.Zero(t, r.init(60000).ErrorCode)
	require.Equal(t, []string{"NONE"}, names(r.addPartitions("st", 0)))
	// Partition 1 was never added: plain batch first, transactional second.
	recs := append(rawOneRecordBatch(-1, -1, -1, 0, "plain", ""), rawOneRecordBatch(r.pid, r.epoch, 0, protocol.AttrTransactional, "txn", "")...)
	code := r.produceRaw("st", 1, recs)
	require.Equal(t, "INVALID_TXN_STATE", codeName(code), "the transactional batch behind a plain one is checked too")
	require.Zero(t, r.end(true))
	p := b.topics.Partition("st", 1)
	require.Equal(t, p.Log.HighWatermark(), p.Log.LastStableOffset(), "no stray transaction holds the LSO")
	require.Empty(t, p.Log.OpenTransactions())
}

// Transactional batches are not deduplicated: the ids of an aborted
// transaction must not drop its committed retry (found in review).
func TestDedupSkipsTransactionalBatches(t *testing.T) {
	b := startTest(t)
	dedupTopic(t, b, "dt", 1, "dedup.window.ms", "60000")
	r := &rawTxn{c: dialRaw(t, b), id: "dt-1"}
	require.Zero(t, r.init(60000).ErrorCode)
	require.Equal(t, []string{"NONE"}, names(r.addPartitions("dt", 0)))
	require.Zero(t, r.produceRaw("dt", 0, rawOneRecordBatch(r.pid, r.epoch, 0, protocol.AttrTransactional, "v", "id-1")))
	require.Zero(t, r.end(false)) // abort
	require.Equal(t, []string{"NONE"}, names(r.addPartitions("dt", 0)))
	require.Zero(t, r.produceRaw("dt", 0, rawOneRecordBatch(r.pid, r.epoch, 1, protocol.AttrTransactional, "v", "id-1")))
	require.Zero(t, r.end(true))
	// Count records of committed (non-aborted) data batches.
	p := b.topics.Partition("dt", 0)
	raw, err := p.Log.Read(0, p.Log.LastStableOffset(), 1<<20, true)
	require.NoError(t, err)
	aborted := p.Log.AbortedTransactions(0, p.Log.LastStableOffset())
	committed := 0
	_ = records.EachBatch(raw, func(h *protocol.BatchHeader, batch []byte) error {
		if h.IsControl() {
			return nil
		}
		for _, a := range aborted {
			if a.ProducerID == h.ProducerID && h.BaseOffset >= a.FirstOffset && h.BaseOffset < a.LastOffset {
				return nil
			}
		}
		committed += int(h.RecordCount)
		return nil
	})
	require.Equal(t, 1, committed, "the committed retry lost its record to the aborted attempt's dedup id")
}

// A compressed batch with one duplicate is rewritten uncompressed; the
// rewrite may exceed max.message.bytes, which applies to the client's
// batch, not to the rewrite (found in review).
func TestDedupRewriteKeepsClientSizeLimit(t *testing.T) {
	produceBigGzipBatch(t, "a") // "a" repeats the first record's id
}

func TestDedupCompressedBatchWithoutDuplicates(t *testing.T) {
	produceBigGzipBatch(t, "c")
}

// produceBigGzipBatch produces one record with dedup id "a" to a topic
// with a 20,000-byte max.message.bytes, then one gzip batch of 50 records
// of 1,000 bytes (ids firstID, b0..b48: about 50 KB uncompressed, far less
// compressed), which must be accepted.
func produceBigGzipBatch(t *testing.T, firstID string) {
	t.Helper()
	b := startTest(t)
	dedupTopic(t, b, "dm", 1, "dedup.window.ms", "60000", "max.message.bytes", "20000")
	cl := newClient(t, b, kgo.ProducerBatchCompression(kgo.GzipCompression()), kgo.ProducerLinger(50*time.Millisecond))
	produceAll(t, cl, rec("dm", "first", "a"))
	big := strings.Repeat("x", 1000)
	recs := []*kgo.Record{rec("dm", big, firstID)}
	for i := 0; i < 49; i++ {
		recs = append(recs, rec("dm", big, "b"+strconv.Itoa(i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}
