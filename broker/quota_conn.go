package broker

// Quota enforcement on a connection (package quota has the model).
//
// Throttling follows KIP-219: the response goes out at once carrying
// ThrottleTimeMs, and the connection reads no further request for that
// long (it is muted), so a client that ignores the field is slowed down
// all the same and nothing is refused. Request quotas (request_rate,
// request_percentage) always throttle: a request of any API has no error
// slot to refuse it with; quota_mode applies to the byte rates, to
// controller_mutation_rate and to connection_creation_rate.

import (
	"math"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/configs"
	"github.com/shoal-mq/shoal/broker/quota"
	"github.com/shoal-mq/shoal/broker/topics"
)

// connQuota is one connection's quota state. Reader goroutine only.
type connQuota struct {
	ip string
	// throttle is the back-off owed for the request being handled: the
	// largest of its quotas' throttle times.
	throttle time.Duration
	// hint is a throttle time for the response of a request refused in
	// reject mode: the client is told when to retry, but not muted.
	hint       time.Duration
	mutedUntil time.Time
	// parked is how long the request being handled waited in a long
	// poll: not handler time for request_percentage (Kafka parks such
	// requests in purgatory, off its threads).
	parked time.Duration
}

func (q *connQuota) owe(d time.Duration) { q.throttle = max(q.throttle, d) }

// parkedSince records a long-poll wait that began at t.
func (q *connQuota) parkedSince(t time.Time) { q.parked += time.Since(t) }

// brokerLimit is a broker-wide limit from the dynamic broker configs
// (name and name.burst; 0 or unset: unlimited).
func (b *Broker) brokerLimit(out []quota.Limit, name string, n float64) []quota.Limit {
	v, ok := b.brokerConfig(name)
	if !ok {
		return out
	}
	rate := configs.Int(v, 0)
	if rate <= 0 {
		return out
	}
	bv, _ := b.brokerConfig(name + ".burst")
	return append(out, quota.Limit{Key: "b|" + name, Rate: float64(rate), Burst: float64(configs.Int(bv, 0)), N: n})
}

// topicLimit is a topic's producer.byte.rate or consumer.byte.rate (0:
// unlimited); the burst is one second of the rate.
func (b *Broker) topicLimit(out []quota.Limit, topic, name string, n float64) []quota.Limit {
	t := b.topics.Get(topic)
	if t == nil {
		return out
	}
	// No broker default stands behind these configs: the override or 0.
	v := b.topics.Override(t, name)
	if rate := configs.Int(v, 0); rate > 0 {
		out = append(out, quota.Limit{Key: "t|" + name + "|" + topic, Rate: float64(rate), N: n})
	}
	return out
}

// quotaBeforeRequest charges request_rate (client, ip, broker-wide)
// before a request is handled. ApiVersions is exempt, so a client can
// always negotiate.
func (c *conn) quotaBeforeRequest(key int16, now time.Time) {
	c.quota.throttle, c.quota.hint, c.quota.parked = 0, 0, 0
	if key == 18 {
		return
	}
	limits := c.b.quotas.ClientLimits(nil, quota.RequestRate, c.ident(), 1)
	limits = c.b.brokerLimit(limits, "broker.request.rate", 1)
	c.quota.owe(c.b.chargeThrottleOnly(now, limits))
}

// quotaAfterRequest charges request_percentage with the time the handler
// took, long-poll waits excepted (Kafka: percent of one thread per
// second), then sets the
// response's throttle time and mutes the connection for it.
func (c *conn) quotaAfterRequest(key int16, resp kmsg.Response, took time.Duration, now time.Time) {
	if key != 18 {
		busy := max(took-c.quota.parked, 0)
		limits := c.b.quotas.ClientLimits(nil, quota.RequestPercentage, c.ident(), busy.Seconds()*100)
		c.quota.owe(c.b.chargeThrottleOnly(now, limits))
	}
	d := max(c.quota.throttle, c.quota.hint)
	if d <= 0 {
		return
	}
	if tr, ok := resp.(kmsg.SetThrottleResponse); ok && resp != nil {
		cur := int32(0)
		if t, ok := resp.(kmsg.ThrottleResponse); ok {
			cur, _ = t.Throttle()
		}
		tr.SetThrottle(max(cur, throttleMillis(d)))
	}
	if c.quota.throttle > 0 {
		c.quota.mutedUntil = now.Add(c.quota.throttle)
	}
}

func (b *Broker) chargeThrottleOnly(now time.Time, limits []quota.Limit) time.Duration {
	for i := range limits {
		limits[i].Reject = false
	}
	_, w := b.quotas.Charge(now, limits)
	return w
}

func throttleMillis(d time.Duration) int32 {
	return int32(min(math.Ceil(float64(d)/float64(time.Millisecond)), math.MaxInt32))
}

// waitUnmuted blocks the reader while the connection is muted. It
// returns false if the broker or the connection is closing.
func (c *conn) waitUnmuted() bool {
	d := time.Until(c.quota.mutedUntil)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.b.ctx.Done():
		return false
	case <-c.done:
		return false
	}
}

// produceQuota charges a produce's record bytes to producer_byte_rate
// (client, ip), broker.producer.byte.rate and each topic's
// producer.byte.rate. In reject mode a produce the quota cannot cover is
// refused before anything is appended: it returns NOT_ENOUGH_REPLICAS
// (retriable and "not written" in franz-go, sarama, librdkafka and the
// Java client; Produce has no THROTTLING_QUOTA_EXCEEDED) for every
// partition, with the message, and sets the response's throttle time to
// when a retry can pass, without muting. acks=0 produce is never
// refused (its client could not see the error): it is throttled.
func (c *conn) produceQuota(req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse) (int16, *string) {
	b := c.b
	var total int
	perTopic := make(map[string]int, len(req.Topics))
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			n := len(req.Topics[i].Partitions[j].Records)
			total += n
			perTopic[req.Topics[i].Topic] += n
		}
	}
	limits := b.quotas.ClientLimits(nil, quota.ProducerByteRate, c.ident(), float64(total))
	limits = b.brokerLimit(limits, "broker.producer.byte.rate", float64(total))
	for t, n := range perTopic {
		limits = b.topicLimit(limits, t, "producer.byte.rate", float64(n))
	}
	if req.Acks == 0 {
		c.quota.owe(b.chargeThrottleOnly(time.Now(), limits))
		return 0, nil
	}
	rejected, wait := b.quotas.Charge(time.Now(), limits)
	if !rejected {
		c.quota.owe(wait)
		return 0, nil
	}
	resp.ThrottleMillis = throttleMillis(wait)
	msg := "Produce quota exceeded (quota_mode=1): retry after " + wait.Round(time.Millisecond).String()
	return kerr.NotEnoughReplicas.Code, &msg
}

// fetchQuotaHold reports whether a fetch must be answered at once with no
// records because its consumer_byte_rate quotas are spent, and otherwise
// caps maxBytes to the bytes they allow (the first batch still always
// comes whole, KIP-74), so consumers sharing a limit overshoot it by at
// most a batch each. Spent means a
// throttle-mode bucket still in debt (the response is throttled and the
// connection muted for the rest), or a reject-mode one (the response's
// throttle time says when to come back; no error, since every client
// treats a partition error of a fetch as a reason to refresh metadata).
// As in Kafka, a fetch over the quota returns no data rather than
// refusing.
func (c *conn) fetchQuotaHold(items []*fetchItem, resp *kmsg.FetchResponse, maxBytes *int32) bool {
	limits := c.fetchLimits(items, nil)
	if len(limits) == 0 {
		return false
	}
	rejected, wait, tokens := c.b.quotas.Available(time.Now(), limits)
	switch {
	case wait <= 0:
		if tokens < float64(*maxBytes) {
			*maxBytes = int32(max(tokens, 1))
		}
		return false
	case rejected:
		resp.ThrottleMillis = throttleMillis(wait)
	default:
		c.quota.owe(wait)
	}
	return true
}

// fetchQuotaCharge charges the records a fetch returns.
func (c *conn) fetchQuotaCharge(items []*fetchItem) {
	sizes := map[string]int{}
	for _, it := range items {
		sizes[it.topic] += len(it.records)
	}
	limits := c.fetchLimits(items, sizes)
	if len(limits) == 0 {
		return
	}
	for i := range limits {
		limits[i].Reject = false // already served: only the debt remains
	}
	_, wait := c.b.quotas.Charge(time.Now(), limits)
	c.quota.owe(wait)
}

// shareFetchQuotaCharge charges the records a ShareFetch returns to the
// same consumer byte quotas as Fetch, as Kafka does; they throttle it
// (reject mode too: the records are already acquired).
func (c *conn) shareFetchQuotaCharge(resp *kmsg.ShareFetchResponse) {
	var items []*fetchItem
	sizes := map[string]int{}
	for _, rt := range resp.Topics {
		t := c.b.topics.GetID(rt.TopicID)
		if t == nil {
			continue
		}
		for _, rp := range rt.Partitions {
			sizes[t.Name] += len(rp.Records)
		}
		items = append(items, &fetchItem{topic: t.Name})
	}
	if len(items) == 0 {
		return
	}
	c.quota.owe(c.b.chargeThrottleOnly(time.Now(), c.fetchLimits(items, sizes)))
}

// fetchLimits lists consumer_byte_rate (client, ip),
// broker.consumer.byte.rate and each topic's consumer.byte.rate, costing
// sizes (nil: zero, for a debt check).
func (c *conn) fetchLimits(items []*fetchItem, sizes map[string]int) []quota.Limit {
	b := c.b
	total := 0
	for _, n := range sizes {
		total += n
	}
	limits := b.quotas.ClientLimits(nil, quota.ConsumerByteRate, c.ident(), float64(total))
	limits = b.brokerLimit(limits, "broker.consumer.byte.rate", float64(total))
	seen := map[string]bool{}
	for _, it := range items {
		if !seen[it.topic] && it.err == 0 {
			seen[it.topic] = true
			limits = b.topicLimit(limits, it.topic, "consumer.byte.rate", float64(sizes[it.topic]))
		}
	}
	return limits
}

// fetchHeld fills the watermarks of a fetch answered without records.
func fetchHeld(items []*fetchItem, parts []*topics.Partition) {
	for i, it := range items {
		if p := parts[i]; p != nil && it.err == 0 {
			it.hw, it.logS = p.Log.HighWatermark(), p.Log.LogStartOffset()
		}
	}
}

// ident is who the connection is, for quota matching: a user entity
// is the name of the connection's principal (a client certificate's
// mapped name, or ANONYMOUS), as in Kafka.
func (c *conn) ident() quota.Ident {
	return quota.Ident{User: strings.TrimPrefix(c.principal, "User:"), ClientID: c.clientID, IP: c.quota.ip}
}

// remoteIP is the address a connection comes from, without its port.
func remoteIP(nc net.Conn) string {
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}
