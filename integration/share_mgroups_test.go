package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mq/shoal/integration/workload"
)

// Message groups on share groups (issue 5) through unmodified franz-go
// share consumers: ordered (FIFO per group), fair, no starvation behind a
// huge group, redelivery backoff, config validation.

// produceGrouped produces records whose message group is the key (or a
// "tenant" header when header is set); the value is "group/seq".
func produceGrouped(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, header bool, groups []string) {
	t.Helper()
	seq := map[string]int{}
	rs := make([]*kgo.Record, 0, len(groups))
	for _, g := range groups {
		r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s/%d", g, seq[g])}
		if header {
			r.Headers = []kgo.RecordHeader{{Key: "tenant", Value: []byte(g)}}
		} else {
			r.Key = []byte(g)
		}
		seq[g]++
		rs = append(rs, r)
	}
	for len(rs) > 0 {
		n := min(len(rs), 5000)
		require.NoError(t, cl.ProduceSync(ctx, rs[:n]...).FirstErr())
		rs = rs[n:]
	}
}

func parseGroupValue(t *testing.T, v []byte) (string, int) {
	for i := len(v) - 1; i >= 0; i-- {
		if v[i] == '/' {
			n, err := strconv.Atoi(string(v[i+1:]))
			require.NoError(t, err)
			return string(v[:i]), n
		}
	}
	t.Fatalf("bad value %q", v)
	return "", 0
}

// orderedGroup is a broker with a one-partition topic and a share group
// (prefix + the topic's name) in ordered mode, the message group being the
// record key, reading from the earliest offset.
type orderedGroup struct {
	b            *testBroker
	ctx          context.Context
	topic, group string
	admin        *kgo.Client
}

// startOrderedGroup starts an orderedGroup; configs are more group configs
// (name, value pairs).
func startOrderedGroup(t *testing.T, prefix string, configs ...string) orderedGroup {
	t.Helper()
	b := startBroker(t)
	o := orderedGroup{b: b, ctx: testContext(t), topic: b.createTopic(t, 1, nil), admin: b.client(t)}
	o.group = prefix + o.topic
	kv := append([]string{"share.auto.offset.reset", "earliest",
		"share.message.group.source", "key",
		"share.message.group.ordered", "true"}, configs...)
	require.NoError(t, workload.SetGroupConfigs(o.ctx, o.admin, o.group, kv...))
	return o
}

// The ordered test: 8 consumers and 1,000 groups on one partition.
// Each group's records are processed in offset order and none twice after
// an accept; some records are released and must come back before the
// group's next one.
func TestShareOrderedMessageGroups(t *testing.T) {
	t.Parallel()
	o := startOrderedGroup(t, "ordered-")
	b, ctx, topic, group, admin := o.b, o.ctx, o.topic, o.group, o.admin

	const nGroups, perGroup = 1000, 8
	rng := rand.New(rand.NewPCG(1, 2))
	var groups []string
	for range nGroups * perGroup {
		groups = append(groups, fmt.Sprintf("g%03d", rng.IntN(nGroups)))
	}
	produceGrouped(t, ctx, admin, topic, false, groups)

	var (
		mu        sync.Mutex
		next      = map[string]int{} // group -> next seq to process
		accepted  atomic.Int64
		violation error
	)
	total := int64(len(groups))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for c := range 8 {
		cl := b.client(t, kgo.ClientID(fmt.Sprintf("ordered-%d", c)), kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ShareMaxRecords(200))
		wg.Go(func() {
			crng := rand.New(rand.NewPCG(uint64(c), 9))
			for accepted.Load() < total && ctx.Err() == nil {
				fs := cl.PollRecords(ctx, -1)
				for _, r := range fs.Records() {
					g, seq := parseGroupValue(t, r.Value)
					mu.Lock()
					if want := next[g]; seq != want && violation == nil {
						violation = fmt.Errorf("group %s: got seq %d (offset %d, delivery %d), want %d", g, seq, r.Offset, r.DeliveryCount(), want)
					}
					release := crng.IntN(20) == 0 && r.DeliveryCount() < 3
					if !release {
						next[g] = seq + 1
					}
					mu.Unlock()
					if release {
						r.Ack(kgo.AckRelease)
						continue
					}
					r.Ack(kgo.AckAccept)
					accepted.Add(1)
				}
			}
		})
	}
	deadline := time.Now().Add(90 * time.Second)
	for accepted.Load() < total && time.Now().Before(deadline) {
		mu.Lock()
		v := violation
		mu.Unlock()
		if v != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	require.NoError(t, violation)
	require.Equal(t, total, accepted.Load(), "every record accepted once")
	for g, n := range next {
		require.Equal(t, countOf(groups, g), n, "group %s", g)
	}
}

func countOf(groups []string, g string) int {
	n := 0
	for _, x := range groups {
		if x == g {
			n++
		}
	}
	return n
}

// The fairness test: one group with 100,000 records and 50 groups
// with 100 each, all produced before consumption starts (the big group
// first); every small group is fully delivered within the first 20% of
// deliveries. Groups come from a header.
func TestShareFairMessageGroups(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	topic := b.createTopic(t, 1, nil)
	group := "fair-" + topic
	admin := b.client(t, kgo.ProducerBatchMaxBytes(1<<20))
	require.NoError(t, workload.SetGroupConfigs(ctx, admin, group,
		"share.auto.offset.reset", "earliest",
		"share.message.group.source", "header:tenant",
		"share.message.group.fair", "true"))
	var groups []string
	for range 100_000 {
		groups = append(groups, "big")
	}
	for g := range 50 {
		for range 100 {
			groups = append(groups, fmt.Sprintf("small-%02d", g))
		}
	}
	produceGrouped(t, ctx, admin, topic, true, groups)

	var (
		mu        sync.Mutex
		delivered int
		left      = map[string]int{}
		doneAt    = map[string]int{}
	)
	for _, g := range groups {
		left[g]++
	}
	total := len(groups)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for c := range 4 {
		cl := b.client(t, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID(fmt.Sprintf("fair-%d", c)))
		wg.Go(func() {
			for ctx.Err() == nil {
				fs := cl.PollRecords(ctx, -1)
				mu.Lock()
				for _, r := range fs.Records() {
					g, _ := parseGroupValue(t, r.Value)
					delivered++
					if left[g]--; left[g] == 0 {
						doneAt[g] = delivered
					}
					r.Ack(kgo.AckAccept)
				}
				finished := delivered >= total
				mu.Unlock()
				if finished {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, total, delivered)
	for g := range 50 {
		name := fmt.Sprintf("small-%02d", g)
		require.LessOrEqual(t, doneAt[name], total/5, "%s was fully delivered only after %d of %d deliveries", name, doneAt[name], total)
	}
}

// A message group with more consecutive records than the in-flight window
// holds, its head acquired by a consumer that never acknowledges, must not
// block the other groups' records behind it (the seed design's limit).
func TestShareOrderedHugeStuckGroupDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	o := startOrderedGroup(t, "stuck-", "share.partition.max.record.locks", "200")
	b, ctx, topic, group, admin := o.b, o.ctx, o.topic, o.group, o.admin
	var groups []string
	for range 5000 { // 25x the window
		groups = append(groups, "huge")
	}
	for g := range 20 {
		for range 5 {
			groups = append(groups, fmt.Sprintf("other-%02d", g))
		}
	}
	produceGrouped(t, ctx, admin, topic, false, groups)

	// The stuck member speaks the protocol by hand: a franz-go client
	// would keep fetching (and holding) other groups' heads in the
	// background.
	td, err := b.admin(t).ListTopics(ctx, topic)
	require.NoError(t, err)
	stuck := newRawShareMember(t, b, group, "stuck-member", [16]byte(td[topic].ID))
	require.Equal(t, [][3]int64{{0, 0, 1}}, acquiredRanges(t, stuck.fetch(1, 5*time.Second)), "the stuck member holds the huge group's head")

	worker := b.client(t, kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	got := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for others := 0; others < 100; {
		require.True(t, time.Now().Before(deadline), "other groups starved: %d of 100 delivered", others)
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := worker.PollRecords(pctx, -1)
		pcancel()
		for _, r := range fs.Records() {
			g, seq := parseGroupValue(t, r.Value)
			require.NotEqual(t, "huge", g, "the huge group's next record while its head is in flight")
			require.Equal(t, got[g], seq, "group %s out of order", g)
			got[g]++
			others++
			r.Ack(kgo.AckAccept)
		}
	}
}

// share.redelivery.backoff.ms: a released record is redelivered only after
// the backoff, doubling per delivery; other records are not held up.
func TestShareRedeliveryBackoff(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	topic := b.createTopic(t, 1, nil)
	group := "backoff-" + topic
	admin := b.client(t)
	require.NoError(t, workload.SetGroupConfigs(ctx, admin, group,
		"share.auto.offset.reset", "earliest",
		"share.redelivery.backoff.ms", "1000",
		"share.redelivery.backoff.max.ms", "5000"))
	require.NoError(t, admin.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("retry-me")}).FirstErr())

	cl := b.client(t, kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	poll := func() *kgo.Record {
		for {
			pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
			rs := cl.PollRecords(pctx, -1).Records()
			pcancel()
			require.NoError(t, ctx.Err())
			if len(rs) > 0 {
				require.Len(t, rs, 1)
				return rs[0]
			}
		}
	}
	r := poll()
	require.Equal(t, "retry-me", string(r.Value))
	r.Ack(kgo.AckRelease)
	released := time.Now()
	// Another record produced meanwhile is delivered at once.
	require.NoError(t, admin.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("fresh")}).FirstErr())
	r = poll()
	require.Equal(t, "fresh", string(r.Value))
	require.Less(t, time.Since(released), time.Second, "a fresh record waited for another's backoff")
	r.Ack(kgo.AckAccept)

	r = poll()
	require.Equal(t, "retry-me", string(r.Value))
	require.Equal(t, int32(2), r.DeliveryCount())
	require.GreaterOrEqual(t, time.Since(released), time.Second, "redelivered before its 1 s backoff")
	r.Ack(kgo.AckRelease)
	released = time.Now()
	r = poll()
	require.Equal(t, int32(3), r.DeliveryCount())
	require.GreaterOrEqual(t, time.Since(released), 2*time.Second, "the second backoff doubles")
	r.Ack(kgo.AckAccept)
}

func TestShareMessageGroupConfigValidation(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	cl := b.client(t)
	for _, kv := range [][2]string{
		{"share.message.group.source", "value"},
		{"share.message.group.source", "header:"},
		{"share.message.group.ordered", "yes"},
		{"share.message.group.fair", "1"},
		{"share.redelivery.backoff.ms", "-1"},
		{"share.redelivery.backoff.max.ms", "soon"},
	} {
		err := workload.SetGroupConfigs(ctx, cl, "validate-groups", kv[0], kv[1])
		require.Error(t, err, "%s=%s", kv[0], kv[1])
		require.True(t, errors.Is(err, kerr.InvalidConfig), "%s=%s: %v", kv[0], kv[1], err)
	}
	require.NoError(t, workload.SetGroupConfigs(ctx, cl, "validate-groups",
		"share.message.group.source", "header:message-group-id",
		"share.message.group.ordered", "true",
		"share.redelivery.backoff.ms", "250"))
}

// share.delivery.rate.limit with scope message-group: a message group
// producing far more than the limit is delivered at the limit (after its
// one-second burst), within 10%, while the other message groups of the
// same share group are not held up.
func TestShareMessageGroupRateLimit(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	topic := b.createTopic(t, 1, nil)
	group := "mg-rate-" + topic
	admin := b.client(t)
	const rate = 50
	require.NoError(t, workload.SetGroupConfigs(ctx, admin, group,
		"share.auto.offset.reset", "earliest",
		"share.message.group.source", "key",
		"share.message.group.fair", "true",
		"share.delivery.rate.limit", strconv.Itoa(rate),
		"share.delivery.rate.limit.scope", "message-group"))
	var groups []string
	for range 300 {
		groups = append(groups, "hot")
	}
	for g := range 5 {
		for range 20 {
			groups = append(groups, fmt.Sprintf("cold-%d", g))
		}
	}
	produceGrouped(t, ctx, admin, topic, false, groups)

	cl := b.client(t, kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	start := time.Now()
	var hotAt []time.Duration
	coldDone := time.Duration(0)
	cold := 0
	deadline := time.Now().Add(30 * time.Second)
	for len(hotAt) < 300 && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollRecords(pctx, -1)
		cancel()
		for _, r := range fs.Records() {
			g, _ := parseGroupValue(t, r.Value)
			if g == "hot" {
				hotAt = append(hotAt, time.Since(start))
			} else if cold++; cold == 100 {
				coldDone = time.Since(start)
			}
			r.Ack(kgo.AckAccept)
		}
	}
	require.Len(t, hotAt, 300)
	require.Equal(t, 100, cold)
	require.Less(t, coldDone, 2*time.Second, "the other message groups waited for the limited one")
	// After the burst (one second of the rate), the steady rate.
	steady := float64(len(hotAt)-rate-1) / (hotAt[len(hotAt)-1] - hotAt[rate]).Seconds()
	t.Logf("hot message group: %.1f records/s after its burst (limit %d)", steady, rate)
	require.InDelta(t, rate, steady, rate*0.1)
}

// Ordered mode with consumers that take a while per record: the message
// groups' heads are spread over every consumer. 200 groups and four
// consumers fetching up to 100 records each: without the spreading, the
// first two consumers would hold all 200 heads, take back the heads their
// acknowledgements free, and the other two would get nothing for the whole
// run. Each group's records are still processed in order.
func TestShareOrderedSlowConsumersAllWork(t *testing.T) {
	t.Parallel()
	o := startOrderedGroup(t, "ordered-slow-")
	b, ctx, topic, group, admin := o.b, o.ctx, o.topic, o.group, o.admin

	const nGroups, perGroup, consumers = 200, 15, 4
	const perRecord = 300 * time.Microsecond // simulated handling time
	var groups []string
	for range perGroup {
		for g := range nGroups {
			groups = append(groups, fmt.Sprintf("g%03d", g))
		}
	}
	produceGrouped(t, ctx, admin, topic, false, groups)

	var (
		mu        sync.Mutex
		next      = map[string]int{}
		processed = make([]int, consumers)
		accepted  atomic.Int64
		violation error
	)
	total := int64(len(groups))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for c := range consumers {
		cl := b.client(t, kgo.ClientID(fmt.Sprintf("slow-%d", c)), kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ShareMaxRecords(100))
		wg.Go(func() {
			for accepted.Load() < total && ctx.Err() == nil {
				rs := cl.PollRecords(ctx, -1).Records()
				select {
				case <-time.After(time.Duration(len(rs)) * perRecord):
				case <-ctx.Done():
					return
				}
				mu.Lock()
				for _, r := range rs {
					g, seq := parseGroupValue(t, r.Value)
					if want := next[g]; seq != want && violation == nil {
						violation = fmt.Errorf("group %s: got seq %d (offset %d), want %d", g, seq, r.Offset, want)
					}
					next[g] = seq + 1
					processed[c]++
					r.Ack(kgo.AckAccept)
				}
				mu.Unlock()
				accepted.Add(int64(len(rs)))
			}
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for accepted.Load() < total && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.NoError(t, violation)
	require.Equal(t, total, accepted.Load(), "every record accepted once")
	for c, n := range processed {
		// An even split is 25% each; the first two consumers alone
		// would process everything without the spreading.
		require.GreaterOrEqual(t, n, len(groups)/10, "consumer %d processed %d of %d records (all: %v)", c, n, len(groups), processed)
	}
}
