package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/kafkaerr"
)

// setShareBrokerConfig sets a broker-level share config override as
// IncrementalAlterConfigs on the BROKER resource would (in memory only).
func setShareBrokerConfig(b *Broker, name, value string) {
	b.dyn.Lock()
	if b.dyn.m == nil {
		b.dyn.m = map[string]string{}
	}
	b.dyn.m[name] = value
	b.dyn.Unlock()
}

// setShareGroupConfigs sets group configs (name, value pairs) as
// IncrementalAlterConfigs on the GROUP resource does.
func setShareGroupConfigs(t *testing.T, b *Broker, group string, kv ...string) {
	t.Helper()
	var ops []kmsg.IncrementalAlterConfigsRequestResourceConfig
	for i := 0; i < len(kv); i += 2 {
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Op, op.Value = kv[i], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kv[i+1])
		ops = append(ops, op)
	}
	require.NoError(t, b.shares.IncrementalAlterGroupConfigs(group, ops, false))
}

// startShareTest starts a broker whose share groups may use acquisition
// locks down to 1 s.
func startShareTest(t *testing.T, mut ...func(*Config)) *Broker {
	t.Helper()
	b := startTest(t, mut...)
	setShareBrokerConfig(b, "group.share.min.record.lock.duration.ms", "1000")
	return b
}

// produceValues creates topic with one partition and produces values
// "0".."n-1" at offsets 0..n-1, in batches of about 10.
func produceValues(t *testing.T, b *Broker, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.MaxBufferedRecords(10))
	if b.topics.Get(topic) == nil {
		_, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic)
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	wg.Wait()
	cl.Close()
}

// newShareClient is a franz-go share consumer of group on topics.
func newShareClient(t *testing.T, b *Broker, group string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{
		kgo.ShareGroup(group),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
	return newClient(t, b, append(base, opts...)...)
}

// pollShare polls once with a timeout, failing the test on fetch errors
// other than the poll's own timeout.
func pollShare(t *testing.T, cl *kgo.Client, d time.Duration) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	fs := cl.PollRecords(ctx, -1)
	for _, e := range fs.Errors() {
		if e.Err != context.DeadlineExceeded {
			t.Logf("fetch error %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
	}
	return fs.Records()
}

// shareSPSO returns the SPSO of group's share-partition topic/0 through
// DescribeShareGroupOffsets.
func shareSPSO(t *testing.T, b *Broker, group, topic string) (start, lag int64) {
	t.Helper()
	cl := newClient(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := kadm.NewClient(cl).DescribeShareGroupOffsets(ctx, group)
	require.NoError(t, err)
	o, ok := got[group].Offsets.Lookup(topic, 0)
	require.True(t, ok, "no offsets for %s/%s: %+v", group, topic, got)
	require.NoError(t, o.Err)
	return o.StartOffset, o.Lag
}

func TestShareAcceptAll(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	const n = 300
	produceValues(t, b, "sa", n)
	setShareGroupConfigs(t, b, "g", "share.auto.offset.reset", "earliest")
	cl := newShareClient(t, b, "g", kgo.ConsumeTopics("sa"))
	seen := map[int64]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < n && time.Now().Before(deadline) {
		for _, r := range pollShare(t, cl, 5*time.Second) {
			require.False(t, seen[r.Offset], "offset %d delivered twice", r.Offset)
			require.Equal(t, int32(1), r.DeliveryCount())
			require.Equal(t, strconv.FormatInt(r.Offset, 10), string(r.Value))
			seen[r.Offset] = true
			r.Ack(kgo.AckAccept)
		}
	}
	require.Len(t, seen, n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, cl.FlushAcks(ctx))
	start, lag := shareSPSO(t, b, "g", "sa")
	require.Equal(t, int64(n), start)
	require.Equal(t, int64(0), lag)
}

// collectAcks returns an option recording every ShareAckCallback result.
type ackLog struct {
	mu  sync.Mutex
	res []kgo.ShareAckResult
}

func (l *ackLog) opt() kgo.Opt {
	return kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
		l.mu.Lock()
		l.res = append(l.res, rs...)
		l.mu.Unlock()
	})
}

func (l *ackLog) errors() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []error
	for _, r := range l.res {
		if r.Err != nil {
			out = append(out, r.Err)
		}
	}
	return out
}

func flushAcks(t *testing.T, cl *kgo.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, cl.FlushAcks(ctx))
}

// Release: a released record comes back with its delivery count + 1.
func TestShareReleaseRedelivers(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	const n = 50
	produceValues(t, b, "sr", n)
	setShareGroupConfigs(t, b, "g", "share.auto.offset.reset", "earliest")
	var acks ackLog
	cl := newShareClient(t, b, "g", kgo.ConsumeTopics("sr"), acks.opt())
	counts := map[int64][]int32{}
	accepted := 0
	deadline := time.Now().Add(30 * time.Second)
	for accepted < n && time.Now().Before(deadline) {
		for _, r := range pollShare(t, cl, 5*time.Second) {
			counts[r.Offset] = append(counts[r.Offset], r.DeliveryCount())
			if r.DeliveryCount() == 1 {
				r.Ack(kgo.AckRelease)
			} else {
				r.Ack(kgo.AckAccept)
				accepted++
			}
		}
	}
	flushAcks(t, cl)
	require.Len(t, counts, n)
	for off, cs := range counts {
		require.Equal(t, []int32{1, 2}, cs, "offset %d", off)
	}
	require.Empty(t, acks.errors())
	start, _ := shareSPSO(t, b, "g", "sr")
	require.Equal(t, int64(n), start)
}

// Reject: a rejected record is archived and never delivered again.
func TestShareRejectArchives(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	const n = 40
	produceValues(t, b, "sj", n)
	setShareGroupConfigs(t, b, "g", "share.auto.offset.reset", "earliest")
	var acks ackLog
	cl := newShareClient(t, b, "g", kgo.ConsumeTopics("sj"), acks.opt())
	seen := map[int64]int{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < n && time.Now().Before(deadline) {
		for _, r := range pollShare(t, cl, 5*time.Second) {
			seen[r.Offset]++
			r.Ack(kgo.AckReject)
		}
	}
	require.Len(t, seen, n)
	flushAcks(t, cl)
	// Nothing comes back.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		for _, r := range pollShare(t, cl, 500*time.Millisecond) {
			t.Fatalf("rejected offset %d delivered again (count %d)", r.Offset, r.DeliveryCount())
		}
	}
	for off, c := range seen {
		require.Equal(t, 1, c, "offset %d", off)
	}
	require.Empty(t, acks.errors())
	start, lag := shareSPSO(t, b, "g", "sj")
	require.Equal(t, int64(n), start)
	require.Equal(t, int64(0), lag)
}

// Renew: AckRenew restarts the acquisition lock, so an accept after the
// original lock would have expired still succeeds and nothing is
// redelivered.
func TestShareRenewExtendsLock(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	produceValues(t, b, "sw", 1)
	setShareGroupConfigs(t, b, "g", "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "2000")
	var acks ackLog
	cl := newShareClient(t, b, "g", kgo.ConsumeTopics("sw"), acks.opt())
	var rs []*kgo.Record
	for deadline := time.Now().Add(20 * time.Second); len(rs) == 0 && time.Now().Before(deadline); {
		rs = pollShare(t, cl, 5*time.Second)
	}
	require.Len(t, rs, 1)
	r := rs[0]
	require.Equal(t, int32(1), r.DeliveryCount())
	lockedUntil := r.AcquisitionDeadline()
	for i := 0; i < 3; i++ { // 3 × 1.2 s: well past the first 2 s lock
		time.Sleep(1200 * time.Millisecond)
		r.Ack(kgo.AckRenew)
		flushAcks(t, cl)
	}
	require.Empty(t, acks.errors(), "renew failed")
	require.True(t, time.Now().After(lockedUntil), "test did not outlive the first lock")
	r.Ack(kgo.AckAccept)
	flushAcks(t, cl)
	require.Empty(t, acks.errors(), "accept after renew failed")
	start, _ := shareSPSO(t, b, "g", "sw")
	require.Equal(t, int64(1), start)
}

// Lock expiry: records neither acknowledged nor renewed are released when
// their acquisition lock expires and delivered again, count + 1.
func TestShareLockExpiryRedelivers(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	const n = 20
	produceValues(t, b, "se", n)
	setShareGroupConfigs(t, b, "g", "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "1000")
	var acks ackLog
	cl := newShareClient(t, b, "g", kgo.ConsumeTopics("se"), acks.opt())
	first := map[int64]bool{}
	for deadline := time.Now().Add(20 * time.Second); len(first) < n && time.Now().Before(deadline); {
		for _, r := range pollShare(t, cl, 5*time.Second) {
			require.Equal(t, int32(1), r.DeliveryCount())
			first[r.Offset] = true // not acknowledged: held until the lock expires
		}
	}
	require.Len(t, first, n)
	time.Sleep(1500 * time.Millisecond)
	// The next poll auto-accepts the previous poll's records, too late:
	// those acknowledgements fail; the records come back with count 2.
	again := map[int64]bool{}
	for deadline := time.Now().Add(20 * time.Second); len(again) < n && time.Now().Before(deadline); {
		for _, r := range pollShare(t, cl, 5*time.Second) {
			if r.DeliveryCount() < 2 {
				t.Fatalf("offset %d redelivered with count %d", r.Offset, r.DeliveryCount())
			}
			again[r.Offset] = true
			r.Ack(kgo.AckAccept)
		}
	}
	require.Len(t, again, n)
	flushAcks(t, cl)
	start, _ := shareSPSO(t, b, "g", "se")
	require.Equal(t, int64(n), start)
}

// Delivery limit: a record released at its last allowed delivery is
// archived, never delivered more than share.delivery.count.limit times.
func TestShareDeliveryLimitArchives(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	const n = 30
	produceValues(t, b, "sl", n)
	setShareGroupConfigs(t, b, "g", "share.auto.offset.reset", "earliest", "share.delivery.count.limit", "3")
	cl := newShareClient(t, b, "g", kgo.ConsumeTopics("sl"))
	counts := map[int64][]int32{}
	total := 0
	for deadline := time.Now().Add(30 * time.Second); total < 3*n && time.Now().Before(deadline); {
		for _, r := range pollShare(t, cl, 5*time.Second) {
			counts[r.Offset] = append(counts[r.Offset], r.DeliveryCount())
			total++
			r.Ack(kgo.AckRelease)
		}
	}
	flushAcks(t, cl)
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		for _, r := range pollShare(t, cl, 500*time.Millisecond) {
			t.Fatalf("offset %d delivered beyond the limit (count %d)", r.Offset, r.DeliveryCount())
		}
	}
	require.Len(t, counts, n)
	for off, cs := range counts {
		require.Equal(t, []int32{1, 2, 3}, cs, "offset %d", off)
	}
	start, _ := shareSPSO(t, b, "g", "sl")
	require.Equal(t, int64(n), start)
}

// Eight consumers sharing one partition get disjoint records and
// together every record.
func TestShareEightConsumersOnePartition(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	const n, members = 2000, 8
	setShareGroupConfigs(t, b, "g", "share.auto.offset.reset", "earliest")
	produceValues(t, b, "s8", 1) // create the topic
	var (
		mu    sync.Mutex
		owner = map[int64]int{}
		dups  []string
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < members; i++ {
		cl := newShareClient(t, b, "g", kgo.ConsumeTopics("s8"), kgo.ShareMaxRecords(25))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				done := len(owner) >= n+1
				mu.Unlock()
				if done {
					return
				}
				fs := cl.PollRecords(ctx, -1)
				mu.Lock()
				for _, r := range fs.Records() {
					if prev, ok := owner[r.Offset]; ok {
						dups = append(dups, fmt.Sprintf("offset %d to %d and %d", r.Offset, prev, i))
					}
					owner[r.Offset] = i
					r.Ack(kgo.AckAccept)
				}
				if len(owner) >= n+1 {
					cancel() // everything consumed: stop every poll
				}
				mu.Unlock()
			}
		}()
	}
	produceValues(t, b, "s8", n)
	wg.Wait()
	require.Empty(t, dups)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, owner, n+1)
	per := make([]int, members)
	for _, i := range owner {
		per[i]++
	}
	t.Logf("records per consumer: %v", per)
}

// Restart: acknowledged records are never delivered again after the
// broker restarts on the same data directory; records that were only
// acquired are.
func TestShareRestartKeepsAcks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *Config) { c.DataDir = dir }
	b := startShareTest(t, cfg)
	const n = 100
	produceValues(t, b, "sk", n)
	setShareGroupConfigs(t, b, "g", "share.auto.offset.reset", "earliest")
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ShareGroup("g"), kgo.ConsumeTopics("sk"), kgo.FetchMaxWait(500*time.Millisecond))
	require.NoError(t, err)
	var rs []*kgo.Record
	for deadline := time.Now().Add(20 * time.Second); len(rs) == 0 && time.Now().Before(deadline); {
		rs = pollShare(t, cl, 5*time.Second)
	}
	require.NotEmpty(t, rs)
	accepted := map[int64]bool{}
	for _, r := range rs {
		if r.Offset%2 == 0 {
			r.Ack(kgo.AckAccept)
			accepted[r.Offset] = true
		}
	}
	flushAcks(t, cl)
	// Stop the broker under the consumer, holding the odd records.
	require.NoError(t, b.Close())
	leaveCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	cl.LeaveGroupContext(leaveCtx)
	cancel()
	cl.Close()

	b2 := startShareTest(t, cfg)
	cl2 := newShareClient(t, b2, "g", kgo.ConsumeTopics("sk"))
	again := map[int64]bool{}
	for deadline := time.Now().Add(30 * time.Second); len(again) < n-len(accepted) && time.Now().Before(deadline); {
		for _, r := range pollShare(t, cl2, 5*time.Second) {
			require.False(t, accepted[r.Offset], "accepted offset %d delivered again", r.Offset)
			require.False(t, again[r.Offset], "offset %d delivered twice", r.Offset)
			again[r.Offset] = true
			r.Ack(kgo.AckAccept)
		}
	}
	require.Len(t, again, n-len(accepted))
	flushAcks(t, cl2)
	start, _ := shareSPSO(t, b2, "g", "sk")
	require.Equal(t, int64(n), start)
}

// Group configs: defaults, bounds (INVALID_CONFIG), persistence.
func TestShareGroupConfigs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *Config) { c.DataDir = dir }
	b := startTest(t, cfg)
	entries, err := b.shares.GroupConfigEntries("cg")
	require.NoError(t, err)
	vals := map[string]string{}
	for _, e := range entries {
		vals[e.Name] = *e.Value
	}
	require.Equal(t, map[string]string{
		"consumer.heartbeat.interval.ms":            "5000",
		"consumer.session.timeout.ms":               "45000",
		"errors.deadletterqueue.copy.record.enable": "false",
		"errors.deadletterqueue.topic.name":         "",
		"share.acquire.mode":                        "batch_optimized",
		"share.auto.offset.reset":                   "latest",
		"share.delivery.count.limit":                "5",
		"share.delivery.rate.limit":                 "0",
		"share.delivery.rate.limit.scope":           "group",
		"share.heartbeat.interval.ms":               "5000",
		"share.isolation.level":                     "read_uncommitted",
		"share.message.group.fair":                  "false",
		"share.message.group.ordered":               "false",
		"share.message.group.source":                "none",
		"share.partition.max.record.locks":          "120000",
		"share.record.lock.duration.ms":             "30000",
		"share.redelivery.backoff.max.ms":           "60000",
		"share.redelivery.backoff.ms":               "0",
		"share.renew.acknowledge.enable":            "true",
		"share.session.timeout.ms":                  "45000",
	}, vals)

	set := func(name, value string) error {
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Op, op.Value = name, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
		return b.shares.IncrementalAlterGroupConfigs("cg", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op}, false)
	}
	for _, bad := range [][2]string{
		{"share.record.lock.duration.ms", "1000"}, // below group.share.min.record.lock.duration.ms
		{"share.record.lock.duration.ms", "60001"},
		{"share.delivery.count.limit", "1"},
		{"share.delivery.count.limit", "11"},
		{"share.partition.max.record.locks", "1000001"},
		{"share.auto.offset.reset", "sometimes"},
		{"share.auto.offset.reset", "by_duration:-PT1H"},
		{"share.isolation.level", "read_maybe"},
		{"share.heartbeat.interval.ms", "50000"},
		{"share.unknown", "1"},
		{"share.delivery.rate.limit", "-1"},
		{"share.delivery.rate.limit.scope", "partition"},
	} {
		err := set(bad[0], bad[1])
		require.Error(t, err, "%s=%s", bad[0], bad[1])
		require.Equal(t, kerr.InvalidConfig.Code, kafkaerr.Code(err), "%s=%s: %v", bad[0], bad[1], err)
	}
	require.NoError(t, set("share.auto.offset.reset", "by_duration:P1DT2H3M4.5S"))
	require.NoError(t, set("share.partition.max.record.locks", "1000000"))
	setShareBrokerConfig(b, "group.share.min.record.lock.duration.ms", "1000")
	require.NoError(t, set("share.record.lock.duration.ms", "1000"))
	// The effective values, as the share-partitions get them
	// (shareSettings resolves each with GroupConfigInt's rules).
	require.Equal(t, time.Second, time.Duration(b.shares.GroupConfigInt("cg", "share.record.lock.duration.ms"))*time.Millisecond)
	require.Equal(t, int64(1000000), b.shares.GroupConfigInt("cg", "share.partition.max.record.locks"))
	require.NoError(t, b.Close())

	b2 := startTest(t, cfg)
	entries, err = b2.shares.GroupConfigEntries("cg")
	require.NoError(t, err)
	for _, e := range entries {
		switch e.Name {
		case "share.auto.offset.reset":
			require.Equal(t, "by_duration:P1DT2H3M4.5S", *e.Value)
			require.Equal(t, kmsg.ConfigSourceGroupConfig, e.Source)
		case "share.record.lock.duration.ms":
			// The broker bound is back to 15000: the stored 1000 no
			// longer applies.
			require.Equal(t, "1000", *e.Value)
		}
	}
	require.Equal(t, 15*time.Second, time.Duration(b2.shares.GroupConfigInt("cg", "share.record.lock.duration.ms"))*time.Millisecond)
}

// DescribeShareGroupOffsets, AlterShareGroupOffsets and
// DeleteShareGroupOffsets through kadm.
func TestShareGroupOffsetsAdmin(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	produceValues(t, b, "so", 30)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))

	// Unknown group.
	desc, err := adm.DescribeShareGroupOffsets(ctx, "og")
	require.NoError(t, err)
	require.ErrorIs(t, desc.Error(), kerr.GroupIDNotFound)

	// Alter creates the group and sets the SPSO.
	res, err := adm.AlterShareGroupOffsets(ctx, "og", kadm.Offsets{"so": {0: {At: 12}}, "missing": {0: {At: 1}}})
	require.NoError(t, err)
	require.ErrorIs(t, res.Error(), kerr.UnknownTopicOrPartition)
	start, lag := shareSPSO(t, b, "og", "so")
	require.Equal(t, int64(12), start)
	require.Equal(t, int64(18), lag)

	// A consumer starts at the altered SPSO.
	cl := newShareClient(t, b, "og", kgo.ConsumeTopics("so"))
	var rs []*kgo.Record
	for deadline := time.Now().Add(20 * time.Second); len(rs) == 0 && time.Now().Before(deadline); {
		rs = pollShare(t, cl, 5*time.Second)
	}
	require.NotEmpty(t, rs)
	require.Equal(t, int64(12), rs[0].Offset)
	leaveCtx, lcancel := context.WithTimeout(ctx, 5*time.Second)
	require.NoError(t, cl.LeaveGroupContext(leaveCtx))
	lcancel()

	// Delete: the state is gone; describe-all lists nothing for it.
	_, err = adm.DeleteShareGroupOffsets(ctx, "og", "so")
	require.NoError(t, err)
	got, err := adm.DescribeShareGroupOffsets(ctx, "og")
	require.NoError(t, err)
	_, ok := got["og"].Offsets.Lookup("so", 0)
	require.False(t, ok, "%+v", got)

	// Topic deletion hook.
	_, err = adm.AlterShareGroupOffsets(ctx, "og", kadm.Offsets{"so": {0: {At: 3}}})
	require.NoError(t, err)
	keys, err := b.shares.StoredPartitions("og")
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.NoError(t, b.shares.DeleteTopicState(b.topics.Get("so").ID))
	keys, err = b.shares.StoredPartitions("og")
	require.NoError(t, err)
	require.Empty(t, keys)

	// DeleteGroups hook.
	code, _, isShare := b.shares.DeleteGroup("og")
	require.True(t, isShare)
	require.Equal(t, int16(0), code)
	require.False(t, b.shares.IsShareGroup("og"))
}
