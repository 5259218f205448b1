package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mq/shoal/integration/workload"
)

// TestCompactedTopicShareGroup: a share group over a compacted topic.
// Member A acquires the first 1,000 updates (100 keys) and holds them;
// 1,000 more updates supersede every one of them and the cleaner removes
// them while A holds them. A's release of records that no longer exist
// succeeds; member B then receives each live record once, with its last
// value, and none of the removed offsets (the share-partition's window
// skips them), and once B accepts them the share-partition start offset
// reaches the high watermark with no lag left.
func TestCompactedTopicShareGroup(t *testing.T) {
	t.Parallel()
	b, _ := startCompactingBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := b.createTopic(t, 1, map[string]*string{
		"cleanup.policy": strp("compact"), "segment.ms": strp("1000"), "min.cleanable.dirty.ratio": strp("0.01"),
	})
	group := "share-compacted-" + topic
	require.NoError(t, workload.SetGroupConfigs(ctx, b.client(t), group, "share.auto.offset.reset", "earliest"))

	prod := b.client(t, kgo.DefaultProduceTopic(topic))
	last := map[string]string{}
	lastOff := map[string]int64{}
	produce := func(from, to int) {
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "key-%03d", i%100), Value: fmt.Appendf(nil, "update %d", i)})
		}
		res := prod.ProduceSync(ctx, rs...)
		require.NoError(t, res.FirstErr())
		for _, r := range res {
			last[string(r.Record.Key)], lastOff[string(r.Record.Key)] = string(r.Record.Value), r.Record.Offset
		}
	}
	produce(0, 1000)

	var logA shareAckLog
	a := b.client(t, kgo.ClientID("share-a"), kgo.ShareGroup(group), kgo.ConsumeTopics(topic), logA.opt())
	held := pollUntilHeld(t, ctx, a, "A")
	t.Logf("A holds %d records, offsets %d to %d", len(held), held[0].Offset, held[len(held)-1].Offset)

	// Supersede them all, roll, and wait for the cleaner.
	produce(1000, 2000)
	time.Sleep(1200 * time.Millisecond)
	res := prod.ProduceSync(ctx, &kgo.Record{Key: []byte("filler"), Value: []byte("f")}) // rolls the segment holding 0..1999
	require.NoError(t, res.FirstErr())
	last["filler"], lastOff["filler"] = "f", res[0].Record.Offset
	hw := int64(2001)
	plain := func() int {
		cl := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer cl.Close()
		n := 0
		for next := int64(0); next < hw; {
			fs := cl.PollFetches(ctx)
			require.NoError(t, ctx.Err())
			fs.EachRecord(func(r *kgo.Record) { n, next = n+1, r.Offset+1 })
		}
		return n
	}
	require.Eventually(t, func() bool { return plain() == len(last) }, 60*time.Second, 300*time.Millisecond,
		"the log was never compacted to one record per key")

	// A releases what it holds: those offsets are gone from the log.
	for _, r := range held {
		r.Ack(kgo.AckRelease)
	}
	fctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	require.NoError(t, a.FlushAcks(fctx))
	cancel()
	for _, o := range logA.take() {
		require.NoError(t, o.err, "A's release of records the cleaner removed")
	}
	a.Close()

	// B gets exactly the live records, each once.
	bcl := b.client(t, kgo.ClientID("share-b"), kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	got := map[int64]string{}
	live := map[int64]string{}
	for k, o := range lastOff {
		live[o] = last[k]
	}
	for len(got) < len(live) {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := bcl.PollRecords(pctx, -1)
		cancel()
		require.NoError(t, ctx.Err(), "B received %d of the %d live records", len(got), len(live))
		for _, r := range fs.Records() {
			want, ok := live[r.Offset]
			require.True(t, ok, "B received offset %d, which the cleaner removed (delivery %d)", r.Offset, r.DeliveryCount())
			require.Equal(t, want, string(r.Value))
			_, dup := got[r.Offset]
			require.False(t, dup, "B received offset %d twice", r.Offset)
			got[r.Offset] = string(r.Value)
			r.Ack(kgo.AckAccept)
		}
	}
	fctx, cancel = context.WithTimeout(ctx, 15*time.Second)
	require.NoError(t, bcl.FlushAcks(fctx))
	cancel()
	adm := b.admin(t)
	require.Eventually(t, func() bool {
		start, lag, err := shareStart(ctx, adm, group, topic, 0)
		return err == nil && start == hw && lag == 0
	}, 20*time.Second, 200*time.Millisecond, "the share-partition start offset did not reach the high watermark")
}
