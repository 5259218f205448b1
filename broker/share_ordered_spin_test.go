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

// TestOwnGroupsWait: the first blocked fetch of a run is answered at once,
// later ones wait a quarter of the run's age (1 ms at least, MaxWait at
// most); acknowledgements start a new run, a fetch that is not blocked
// ends it.
func TestOwnGroupsWait(t *testing.T) {
	t.Parallel()
	var s shareSession
	t0 := time.Unix(1000, 0)
	const maxWait = 500 * time.Millisecond
	require.Equal(t, time.Duration(0), s.ownGroupsWait(t0, true, false, maxWait), "first of a run")
	require.Equal(t, time.Millisecond, s.ownGroupsWait(t0.Add(time.Millisecond), true, false, maxWait), "at least 1 ms")
	require.Equal(t, 25*time.Millisecond, s.ownGroupsWait(t0.Add(100*time.Millisecond), true, false, maxWait))
	require.Equal(t, maxWait, s.ownGroupsWait(t0.Add(10*time.Second), true, false, maxWait), "at most MaxWait")
	require.Equal(t, time.Duration(0), s.ownGroupsWait(t0.Add(11*time.Second), true, true, maxWait), "acknowledgements: a new run")
	require.Equal(t, 25*time.Millisecond, s.ownGroupsWait(t0.Add(11*time.Second+100*time.Millisecond), true, false, maxWait))
	require.Equal(t, maxWait, s.ownGroupsWait(t0.Add(12*time.Second), false, false, maxWait), "not blocked: the full long poll")
	require.Equal(t, time.Duration(0), s.ownGroupsWait(t0.Add(13*time.Second), true, false, maxWait), "the run ended")
}
