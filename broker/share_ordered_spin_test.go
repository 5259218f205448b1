package broker

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// shareFetchCounter counts the ShareFetch requests a client writes.
type shareFetchCounter struct{ n atomic.Int64 }

func (c *shareFetchCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == 78 {
		c.n.Add(1)
	}
}

// TestOrderedSlowConsumerDoesNotSpin: in ordered mode a consumer that holds
// one record of every message group gets an immediate empty answer to a
// fetch carrying no acknowledgement (its own acknowledgements are what
// frees its groups, and franz-go sends them only with its next fetch). A
// consumer processing slowly therefore fetches again and again while it
// works; those answers must back off instead of turning the wait into a
// busy loop of requests at round-trip pace. Its acknowledgements, once
// sent, must still free its groups at once.
func TestOrderedSlowConsumerDoesNotSpin(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	createTopicRaw(t, b, "slow", 1)
	pcl := newClient(t, b, kgo.DefaultProduceTopic("slow"), kgo.ProducerLinger(0))
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint("k", i%20)), Value: []byte(fmt.Sprint(i))})
	}
	produceAll(t, pcl, recs...)
	setShareGroupConfigs(t, b, "slowg", "share.auto.offset.reset", "earliest",
		"share.message.group.source", "key", "share.message.group.ordered", "true")

	var fetches shareFetchCounter
	cl := newShareClient(t, b, "slowg", kgo.ConsumeTopics("slow"), kgo.WithHooks(&fetches))
	var got []*kgo.Record
	for len(got) == 0 {
		got = pollShare(t, cl, 10*time.Second)
	}
	require.Len(t, got, 20, "one record of each of the 20 groups")

	// "Process" for a while without acknowledging: the client keeps
	// fetching in the background.
	before := fetches.n.Load()
	const work = 600 * time.Millisecond
	time.Sleep(work)
	during := fetches.n.Load() - before
	t.Logf("%d ShareFetches during %v of processing", during, work)
	require.Less(t, during, int64(60), "fetches while the consumer processes must back off, not spin")

	// Once the acknowledgements go out, the groups' next records follow
	// without waiting out a long backoff.
	for _, r := range got {
		r.Ack(kgo.AckAccept)
	}
	start := time.Now()
	var next []*kgo.Record
	for len(next) == 0 {
		next = pollShare(t, cl, 10*time.Second)
	}
	waited := time.Since(start)
	t.Logf("next records %v after the acknowledgements", waited)
	require.Len(t, next, 20)
	require.Less(t, waited, work/2, "the next records must not wait out the whole backoff")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, r := range next {
		r.Ack(kgo.AckAccept)
	}
	require.NoError(t, cl.FlushAcks(ctx))
}

// TestOrderedBackoffEndsBeforeLock: a member (refetching at once after an
// empty answer, acknowledging only on its next fetch, as franz-go does)
// finishes processing the record it holds 2.5 s into a 3 s lock. The fetch
// in flight then must not wait past the lock's expiry, or the
// acknowledgement made in time would arrive late and the record be
// delivered again. (Found by review of the backoff.)
func TestOrderedBackoffEndsBeforeLock(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	createTopicRaw(t, b, "lk", 1)
	produceAll(t, newClient(t, b), &kgo.Record{Topic: "lk", Key: []byte("a"), Value: []byte("0")},
		&kgo.Record{Topic: "lk", Key: []byte("a"), Value: []byte("1")})
	const lock = 3000 * time.Millisecond
	setShareGroupConfigs(t, b, "lkg", "share.auto.offset.reset", "earliest",
		"share.message.group.source", "key", "share.message.group.ordered", "true",
		"share.record.lock.duration.ms", "3000")
	m := newRawShare(t, b, "lkg", "m1", "lk")
	acquiredAt := time.Now()
	require.Equal(t, [][3]int64{{0, 0, 1}}, acquired(onlyPartition(t, m.fetch(0, 0, 100))))

	epoch := int32(1)
	fetches := 0
	for {
		start := time.Now()
		done := start.Sub(acquiredAt) >= 2500*time.Millisecond
		resp := m.fetch(epoch, 500, 100)
		epoch++
		fetches++
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				require.Empty(t, acquired(p), "a fetch sent %v into the %v lock outlived it and redelivered", start.Sub(acquiredAt), lock)
			}
		}
		if done {
			break
		}
	}
	t.Logf("%d fetches in %v", fetches, time.Since(acquiredAt))
	pp := onlyPartition(t, m.fetch(epoch, 500, 100, ackBatch(0, 0, 1)))
	require.Zero(t, pp.AcknowledgeErrorCode, "the acknowledgement is in time")
	require.Equal(t, [][3]int64{{1, 1, 1}}, acquired(pp), "the group's next record, delivered once")
}
