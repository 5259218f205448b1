package broker

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/protocol"
)

// batchOffsets decodes raw ShareFetch Records: per batch its base offset,
// lastOffsetDelta and the offsets and values of the records it holds. Each
// batch's CRC must be valid.
func batchOffsets(t *testing.T, raw []byte) (bases []int64, lastDeltas []int32, offsets []int64, vals []string) {
	t.Helper()
	for len(raw) > 0 {
		var rb kmsg.RecordBatch
		require.NoError(t, rb.ReadFrom(raw))
		size := 12 + int(rb.Length)
		require.True(t, protocol.VerifyBatchCRC(raw[:size]), "batch at %d: bad CRC", rb.FirstOffset)
		bases, lastDeltas = append(bases, rb.FirstOffset), append(lastDeltas, rb.LastOffsetDelta)
		require.NoError(t, records.EachRecord(raw[:size], func(off, _ int64, r *kmsg.Record, _ []byte) bool {
			offsets, vals = append(offsets, off), append(vals, string(r.Value))
			return true
		}))
		raw = raw[size:]
	}
	return
}

// TestShareGroupModeTrimsBatches: a message-group mode acquires a few
// records of a batch interleaving groups; the response carries that batch
// trimmed to them (same base offset and lastOffsetDelta, valid CRC, only
// the acquired records), and a franz-go share consumer reads every record
// of such batches, in order per group, exactly once.
func TestShareGroupModeTrimsBatches(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	createTopicRaw(t, b, "trim", 1)
	cl := newClient(t, b)
	keys := []string{"a", "b", "c"}
	var recs []*kgo.Record
	for i := range 12 {
		recs = append(recs, &kgo.Record{Topic: "trim", Key: []byte(keys[i%3]), Value: []byte(fmt.Sprint(i))})
	}
	produceAll(t, cl, recs...) // one batch, offsets 0..11
	setShareGroupConfigs(t, b, "tg", "share.auto.offset.reset", "earliest",
		"share.message.group.source", "key", "share.message.group.ordered", "true")

	r := newRawShare(t, b, "tg", "m1", "trim")
	p := onlyPartition(t, r.fetch(0, 0, 100))
	require.Equal(t, [][3]int64{{0, 2, 1}}, acquired(p), "one head per group")
	bases, deltas, offs, vals := batchOffsets(t, p.Records)
	require.Equal(t, []int64{0}, bases)
	require.Equal(t, []int32{11}, deltas)
	require.Equal(t, []int64{0, 1, 2}, offs)
	require.Equal(t, []string{"0", "1", "2"}, vals)

	// Accept 0 and 2 (groups a and c move on), release 1 (b redelivers it).
	p = onlyPartition(t, r.fetch(1, 0, 100, ackBatch(0, 2, 1, 2, 1)))
	require.Zero(t, p.AcknowledgeErrorCode)
	require.Equal(t, [][3]int64{{1, 1, 2}, {3, 3, 1}, {5, 5, 1}}, acquired(p))
	_, _, offs, _ = batchOffsets(t, p.Records)
	require.Equal(t, []int64{1, 3, 5}, offs)

	// A whole batch acquired (plain mode, another group) goes out verbatim.
	r2 := newRawShare(t, b, "plain", "m2", "trim")
	setShareGroupConfigs(t, b, "plain", "share.auto.offset.reset", "earliest")
	p = onlyPartition(t, r2.fetch(0, 0, 100))
	require.Equal(t, [][3]int64{{0, 11, 1}}, acquired(p))
	stored, err := b.topics.Partition("trim", 0).Log.Read(0, 12, 1<<20, true)
	require.NoError(t, err)
	require.Equal(t, stored, p.Records)

	// franz-go reads the trimmed batches: every record once, each group in
	// offset order.
	setShareGroupConfigs(t, b, "kg", "share.auto.offset.reset", "earliest",
		"share.message.group.source", "key", "share.message.group.ordered", "true")
	sc := newShareClient(t, b, "kg", kgo.ConsumeTopics("trim"))
	perKey := map[string][]string{}
	seen := 0
	for seen < 12 {
		got := pollShare(t, sc, 10*time.Second)
		require.NotEmpty(t, got, "after %d records", seen)
		for _, rec := range got {
			perKey[string(rec.Key)] = append(perKey[string(rec.Key)], string(rec.Value))
			rec.Ack(kgo.AckAccept)
			seen++
		}
	}
	require.Equal(t, map[string][]string{
		"a": {"0", "3", "6", "9"}, "b": {"1", "4", "7", "10"}, "c": {"2", "5", "8", "11"},
	}, perKey)
}

// TestShareGroupModeTrimsCompressedBatches: a compressed batch is trimmed
// (uncompressed) when that is smaller, or when the client would throw
// away half its records or more after decompressing it; otherwise it is
// sent as it is. Either way the acquired records are there and decode.
func TestShareGroupModeTrimsCompressedBatches(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	rng := rand.New(rand.NewPCG(1, 2))
	random := func() []byte {
		v := make([]byte, 200)
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		return v
	}
	zeros := func() []byte { return make([]byte, 200) } // compresses to almost nothing
	for _, tc := range []struct {
		topic   string
		value   func() []byte
		groups  int
		trimmed bool
	}{
		{"trimz-random", random, 4, true}, // 4 of 40 records, incompressible: far smaller
		{"trimz-zeros", zeros, 4, true},   // larger uncompressed, but 36 of 40 records would be thrown away
		{"trimz-most", zeros, 30, false},  // 30 of 40 kept: the compressed batch is smaller, sent as it is
	} {
		createTopicRaw(t, b, tc.topic, 1)
		cl := newClient(t, b, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
		var recs []*kgo.Record
		for i := range 40 {
			recs = append(recs, &kgo.Record{Topic: tc.topic, Key: []byte{byte('a' + i%tc.groups)}, Value: tc.value()})
		}
		produceAll(t, cl, recs...)
		group := "g-" + tc.topic
		setShareGroupConfigs(t, b, group, "share.auto.offset.reset", "earliest",
			"share.message.group.source", "key", "share.message.group.ordered", "true")
		r := newRawShare(t, b, group, "m1", tc.topic)
		p := onlyPartition(t, r.fetch(0, 0, 100))
		last := int64(tc.groups - 1)
		require.Equal(t, [][3]int64{{0, last, 1}}, acquired(p), tc.topic)
		_, deltas, offs, vals := batchOffsets(t, p.Records)
		require.Equal(t, []int32{39}, deltas, tc.topic)
		if tc.trimmed {
			require.Len(t, offs, tc.groups, "%s: trimmed to the acquired records", tc.topic)
			require.Equal(t, int64(0), offs[0], tc.topic)
			require.Equal(t, last, offs[len(offs)-1], tc.topic)
		} else {
			require.Len(t, offs, 40, "%s: sent as it is", tc.topic)
			stored, err := b.topics.Partition(tc.topic, 0).Log.Read(0, 40, 1<<20, true)
			require.NoError(t, err)
			require.Equal(t, stored, p.Records, tc.topic)
		}
		for i, v := range vals[:4] {
			require.Equal(t, string(recs[i].Value), v, tc.topic)
		}
	}
}
