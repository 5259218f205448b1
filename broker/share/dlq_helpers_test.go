package share

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/protocol"
)

// Helpers of the dead-letter tests, ported from the root package's
// share_dlq_test.go and share_test.go (which reached these states through
// a broker and Kafka clients).

// newShareTest is the root's startShareTest without a broker: a share
// coordinator (newTestShare on dir, "" for a new one) whose share groups
// may use acquisition locks down to 1 s.
func newShareTest(t testing.TB, dir string, opts ...func(*Options)) *testShare {
	t.Helper()
	h := newTestShare(t, dir, opts...)
	h.setBrokerConfig("group.share.min.record.lock.duration.ms", "1000")
	return h
}

// dlqSetup creates src (partitions) and, if dlqParts > 0, the opted-in
// dead-letter topic dlq.<src>, then appends n records to every source
// partition with key k<i>, value <i> and header h=<i>: one batch per
// partition, as the root's ProduceSync of the n records did.
func (h *testShare) dlqSetup(src string, partitions int32, dlqParts int32, n int) {
	h.t.Helper()
	h.createTopic(src, partitions, nil)
	if dlqParts > 0 {
		h.createTopic("dlq."+src, dlqParts, map[string]string{DLQGroupEnableTopic: "true"})
	}
	for p := int32(0); p < partitions; p++ {
		var recs []testRecord
		for i := 0; i < n; i++ {
			s := strconv.Itoa(i)
			recs = append(recs, testRecord{key: []byte("k" + s), value: []byte(s),
				headers: []kmsg.Header{{Key: "h", Value: []byte(s)}}})
		}
		h.appendBatch(src, p, encodeBatch(recs, batchOpts{}))
	}
}

// dlqGroupSetup is dlqSetup plus share group group reading src from the
// earliest offset with dlq.<src> as its dead-letter topic.
func (h *testShare) dlqGroupSetup(group, src string, partitions, dlqParts int32, n int) {
	h.t.Helper()
	h.dlqSetup(src, partitions, dlqParts, n)
	h.setGroupConfigs(group, "share.auto.offset.reset", "earliest", DLQTopicNameConfig, "dlq."+src)
}

// dlqRecord is a record read back from a topic's log (dlqConsume).
type dlqRecord struct {
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []kmsg.Header
}

// dlqConsume reads every record of topic (every partition, from its log
// start up to the high watermark, skipping control batches as a consumer
// does) until want records are there, and a little longer, to catch
// extras, as the root's helper of the same name does with a consumer
// (20 s at most, 500 ms more once want arrived). It reads the logs
// directly instead of through a client.
func (h *testShare) dlqConsume(topic string, want int) []dlqRecord {
	h.t.Helper()
	var out []dlqRecord
	deadline := time.Now().Add(20 * time.Second)
	extra := time.Time{}
	for time.Now().Before(deadline) {
		if len(out) >= want {
			if extra.IsZero() {
				extra = time.Now().Add(500 * time.Millisecond)
			} else if time.Now().After(extra) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
		out = h.readTopic(topic)
	}
	return out
}

// readTopic returns every record of every partition of topic below the
// high watermark, skipping control batches.
func (h *testShare) readTopic(topic string) []dlqRecord {
	h.t.Helper()
	tt := h.topics.Get(topic)
	if tt == nil {
		return nil
	}
	var out []dlqRecord
	for p := range h.topics.PartitionCount(tt) {
		lp := h.topics.PartitionOf(tt, p)
		require.NotNil(h.t, lp, "%s-%d", topic, p)
		hw := lp.Log.HighWatermark()
		for off := lp.Log.LogStartOffset(); off < hw; {
			raw, err := lp.Log.Read(off, hw, 1<<20, true)
			require.NoError(h.t, err)
			if len(raw) == 0 {
				break
			}
			require.NoError(h.t, records.EachBatch(raw, func(bh *protocol.BatchHeader, batch []byte) error {
				off = bh.LastOffset() + 1
				if bh.IsControl() {
					return nil
				}
				return records.EachRecord(batch, func(offset, _ int64, r *kmsg.Record, _ []byte) bool {
					if offset < hw {
						rec := dlqRecord{Partition: p, Offset: offset,
							Key: append([]byte(nil), r.Key...), Value: append([]byte(nil), r.Value...)}
						for _, hd := range r.Headers {
							rec.Headers = append(rec.Headers, kmsg.Header{Key: hd.Key, Value: append([]byte(nil), hd.Value...)})
						}
						out = append(out, rec)
					}
					return true
				})
			}))
		}
	}
	return out
}

// spso reads a share-partition's SPSO through its owner (-1: not loaded).
func (h *testShare) spso(group, topicName string, p int32) int64 {
	h.t.Helper()
	tp := h.topics.Get(topicName)
	require.NotNil(h.t, tp)
	sp := h.c.part(shareKey(group, shareTP{topicID: tp.ID, partition: p}))
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.mu.p == nil {
		return -1
	}
	return sp.mu.p.SPSO()
}
