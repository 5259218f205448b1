package broker

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareDeliveryRateLimit: a share group with share.delivery.rate.limit
// (scope group) is delivered records at that rate, within 10%, while
// another group on the same topic is unaffected.
func TestShareDeliveryRateLimit(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	const n, rate = 3000, 200
	produceValues(t, b, "sr", n)
	setShareGroupConfigs(t, b, "slow", "share.auto.offset.reset", "earliest", "share.delivery.rate.limit", "200")
	setShareGroupConfigs(t, b, "fast", "share.auto.offset.reset", "earliest")

	var slowGot atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	slow := newShareClient(t, b, "slow", kgo.ConsumeTopics("sr"))
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, r := range pollShare(t, slow, time.Second) {
				r.Ack(kgo.AckAccept)
				slowGot.Add(1)
			}
		}
	}()
	defer func() { close(stop); <-done }()

	fast := newShareClient(t, b, "fast", kgo.ConsumeTopics("sr"))
	got := 0
	for deadline := time.Now().Add(time.Minute); got < n && time.Now().Before(deadline); {
		for _, r := range pollShare(t, fast, 5*time.Second) {
			r.Ack(kgo.AckAccept)
			got++
		}
	}
	require.Equal(t, n, got, "the unlimited group gets everything")

	time.Sleep(time.Second) // past the slow group's burst
	from, began := slowGot.Load(), time.Now()
	time.Sleep(4 * time.Second)
	measured := float64(slowGot.Load()-from) / time.Since(began).Seconds()
	t.Logf("slow group: %.0f records/s", measured)
	require.InDelta(t, rate, measured, 0.1*rate)
}

// TestShareFetchConsumerQuota: ShareFetch is charged to the consumer byte
// quotas like Fetch: a share consumer over its consumer_byte_rate is
// throttled, and still gets every record.
func TestShareFetchConsumerQuota(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	const n = 500
	produceValues(t, b, "sq", n)
	setShareGroupConfigs(t, b, "g", "share.auto.offset.reset", "earliest")
	setQuota(t, kadm.NewClient(newClient(t, b)), qEntity(sp("client-id"), sp("sharer")), map[string]float64{"consumer_byte_rate": 4000})
	var th throttles
	cl := newShareClient(t, b, "g", kgo.ConsumeTopics("sq"), kgo.ClientID("sharer"), kgo.WithHooks(&th))
	got := 0
	for deadline := time.Now().Add(30 * time.Second); got < n && time.Now().Before(deadline); {
		for _, r := range pollShare(t, cl, 5*time.Second) {
			r.Ack(kgo.AckAccept)
			got++
		}
	}
	require.Equal(t, n, got)
	require.Positive(t, th.count())
}
