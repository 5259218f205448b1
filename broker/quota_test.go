package broker

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/protocol"
)

// quotaBroker starts a broker whose durability does not bound the
// throughput being measured, with topic "q".
func quotaBroker(t *testing.T) (*Broker, *kadm.Client) {
	b := startTest(t, func(c *Config) { c.Fsync = FsyncInterval })
	adm := kadm.NewClient(newClient(t, b))
	_, err := adm.CreateTopic(context.Background(), 1, 1, nil, "q")
	require.NoError(t, err)
	return b, adm
}

func setQuota(t *testing.T, adm *kadm.Client, e kadm.ClientQuotaEntity, kv map[string]float64) {
	t.Helper()
	var ops []kadm.AlterClientQuotaOp
	for k, v := range kv {
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: v})
	}
	res, err := adm.AlterClientQuotas(context.Background(), []kadm.AlterClientQuotaEntry{{Entity: e, Ops: ops}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err, res[0].ErrMessage)
}

func setBrokerConfig(t *testing.T, adm *kadm.Client, name, value string) {
	t.Helper()
	res, err := adm.AlterBrokerConfigs(context.Background(), []kadm.AlterConfig{{Name: name, Value: &value}})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err, r.ErrMessage)
	}
}

// producer pushes 10 KiB records to "q", one per pace or as fast as the
// broker takes them, and counts the acknowledged bytes.
type producer struct {
	cl     *kgo.Client
	acked  atomic.Int64
	failed atomic.Int64
	stop   context.CancelFunc
	done   chan struct{}
}

func startProducer(t *testing.T, b *Broker, clientID string, pace time.Duration) *producer {
	ctx, cancel := context.WithCancel(context.Background())
	p := &producer{stop: cancel, done: make(chan struct{})}
	p.cl = newClient(t, b, kgo.ClientID(clientID), kgo.DefaultProduceTopic("q"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedBytes(8<<20), kgo.ProducerBatchMaxBytes(128<<10))
	val := make([]byte, 10<<10)
	rand.Read(val)
	go func() {
		defer close(p.done)
		// Paced by the clock, not by ticks: a goroutine delayed by a busy
		// machine (the race detector, parallel tests) catches up, so the
		// offered rate stays what the test asks for.
		began, sent := time.Now(), 0
		for ctx.Err() == nil {
			if pace > 0 {
				due := int(time.Since(began) / pace)
				if sent >= due {
					time.Sleep(pace)
					continue
				}
				sent++
			}
			p.cl.Produce(ctx, &kgo.Record{Value: val}, func(r *kgo.Record, err error) {
				if err == nil {
					p.acked.Add(int64(len(r.Value)))
				} else if ctx.Err() == nil {
					p.failed.Add(1)
				}
			})
		}
	}()
	t.Cleanup(func() { p.stop(); <-p.done })
	return p
}

// rate measures the bytes/s acknowledged to each producer over d.
func rates(d time.Duration, ps ...*producer) []float64 {
	start := make([]int64, len(ps))
	for i, p := range ps {
		start[i] = p.acked.Load()
	}
	began := time.Now()
	time.Sleep(d)
	took := time.Since(began).Seconds()
	out := make([]float64, len(ps))
	for i, p := range ps {
		out[i] = float64(p.acked.Load()-start[i]) / took
	}
	return out
}

// TestProducerQuotaHoldsRate: with a 10 MB/s producer quota, a franz-go
// producer pushing as fast as it can stays within 5% of the quota over
// 10 s (Kafka's quota system test), after spending its one-second burst.
func TestProducerQuotaHoldsRate(t *testing.T) {
	t.Parallel()
	b, adm := quotaBroker(t)
	const quota = 10e6
	setQuota(t, adm, qEntity(sp("client-id"), sp("fast")), map[string]float64{"producer_byte_rate": quota})
	p := startProducer(t, b, "fast", 0)
	time.Sleep(2 * time.Second) // the burst (one second of the rate) is spent
	got := rates(10*time.Second, p)[0]
	t.Logf("%.0f B/s", got)
	require.InDelta(t, quota, got, 0.05*quota, "measured %.0f B/s", got)
	require.Zero(t, p.failed.Load(), "throttling never fails a record")
}

// TestQuotaNoisyAndQuiet: the noisy client is held to its client-id
// quota while the quiet one keeps its full rate; then a broker-wide limit
// caps the sum of both.
func TestQuotaNoisyAndQuiet(t *testing.T) {
	t.Parallel()
	b, adm := quotaBroker(t)
	const noisyQuota = 2e6
	setQuota(t, adm, qEntity(sp("client-id"), sp("noisy")), map[string]float64{"producer_byte_rate": noisyQuota})
	quiet := startProducer(t, b, "quiet", 10*time.Millisecond) // about 1 MB/s
	solo := rates(3*time.Second, quiet)[0]
	noisy := startProducer(t, b, "noisy", 0)
	time.Sleep(2 * time.Second) // noisy spends its burst
	r := rates(5*time.Second, noisy, quiet)
	t.Logf("alone quiet %.0f B/s; together noisy %.0f, quiet %.0f", solo, r[0], r[1])
	require.InDelta(t, noisyQuota, r[0], 0.1*noisyQuota, "noisy client held to its quota")
	require.InDelta(t, solo, r[1], 0.1*solo, "quiet client keeps its rate (%.0f B/s alone)", solo)

	// A broker-wide cap below the sum both push.
	const cap = 2e6
	require.Greater(t, r[0]+r[1], cap*1.2)
	setBrokerConfig(t, adm, "broker.producer.byte.rate", fmt.Sprint(int64(cap)))
	time.Sleep(2 * time.Second)
	r = rates(5*time.Second, noisy, quiet)
	t.Logf("capped: noisy %.0f, quiet %.0f", r[0], r[1])
	require.InDelta(t, cap, r[0]+r[1], 0.1*cap, "the sum is capped: %v", r)
	require.Zero(t, noisy.failed.Load()+quiet.failed.Load())
}

// throttles counts the throttles a client is told of.
type throttles struct {
	mu sync.Mutex
	n  int
}

func (h *throttles) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.mu.Lock()
	h.n++
	h.mu.Unlock()
}

func (h *throttles) count() int { h.mu.Lock(); defer h.mu.Unlock(); return h.n }

// TestQuotaBurstAfterIdle: a client idle for a while gets its burst at
// full speed (no throttle at all), then the steady rate.
func TestQuotaBurstAfterIdle(t *testing.T) {
	t.Parallel()
	b, adm := quotaBroker(t)
	const rate, burst = 2e6, 8e6
	setQuota(t, adm, qEntity(sp("client-id"), sp("bursty")), map[string]float64{"producer_byte_rate": rate, "producer_byte_rate_burst": burst})
	var th throttles
	cl := newClient(t, b, kgo.ClientID("bursty"), kgo.DefaultProduceTopic("q"), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.WithHooks(&th))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	val := make([]byte, 100<<10)
	rand.Read(val)
	send := func(bytes int) {
		var recs []*kgo.Record
		for n := 0; n < bytes; n += len(val) {
			recs = append(recs, &kgo.Record{Value: val})
		}
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	}
	send(7e6) // within the burst (plus what accrues meanwhile)
	require.Zero(t, th.count(), "the burst is not throttled")

	// Past the burst the client is throttled. Measure the steady rate
	// between two points both in the throttled regime: how much the
	// bucket refilled while the sends above ran depends on the machine
	// (and the race detector), so "the bucket is empty now" is not.
	for th.count() == 0 {
		send(1e6)
		require.NoError(t, ctx.Err(), "never throttled past the burst")
	}
	send(2e6) // settle into the throttled regime
	began := time.Now()
	send(6e6)
	got := 6e6 / time.Since(began).Seconds()
	require.InDelta(t, rate, got, 0.15*rate, "then the steady rate: %.0f B/s", got)
}

// rawBatch is one RecordBatch of n records of size bytes, no producer id.
func rawBatch(n, size int) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{OffsetDelta: int32(i), Value: make([]byte, size)}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: recs}
	rb.Length = int32(len(rb.AppendTo(nil)) - 12)
	out := rb.AppendTo(nil)
	protocol.SetBatchCRC(out)
	return out
}

func rawProduce(ctx context.Context, t *testing.T, cl *kgo.Client, records []byte) (*kmsg.ProduceResponse, time.Duration) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "q"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	began := time.Now()
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	return resp, time.Since(began)
}

// TestQuotaRejectMode: with quota_mode=1 a produce over the limit is
// answered at once with NOT_ENOUGH_REPLICAS (and a throttle time saying
// when to retry); a franz-go producer recovers by itself and no record
// is lost or duplicated.
func TestQuotaRejectMode(t *testing.T) {
	t.Parallel()
	b, adm := quotaBroker(t)
	setQuota(t, adm, qEntity(sp("client-id"), sp("strict")),
		map[string]float64{"producer_byte_rate": 1e6, "producer_byte_rate_burst": 1e6, "quota_mode": 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	raw := newClient(t, b, kgo.ClientID("strict"))
	for i := 0; i < 2; i++ { // the burst, then debt
		resp, _ := rawProduce(ctx, t, raw, rawBatch(90, 10<<10))
		require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
	}
	resp, took := rawProduce(ctx, t, raw, rawBatch(10, 10<<10))
	p := resp.Topics[0].Partitions[0]
	require.Equal(t, kerr.NotEnoughReplicas.Code, p.ErrorCode, "over the quota")
	require.Contains(t, *p.ErrorMessage, "quota")
	require.Positive(t, resp.ThrottleMillis)
	require.Less(t, took, time.Second, "refused at once, not throttled")

	// A real producer through the same quota: every record lands once.
	// franz-go refreshes metadata before retrying a produce error, no
	// sooner than MetadataMinAge (5s by default).
	cl := newClient(t, b, kgo.ClientID("strict"), kgo.DefaultProduceTopic("q"), kgo.ProducerBatchMaxBytes(256<<10),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	const n = 300 // 3 MB: three seconds of quota
	val := make([]byte, 10<<10)
	var wg sync.WaitGroup
	var errs atomic.Int64
	for i := 0; i < n; i++ {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				errs.Add(1)
			}
			wg.Done()
		})
	}
	began := time.Now()
	wg.Wait()
	t.Logf("produced in %v", time.Since(began))
	require.Zero(t, errs.Load(), "the client retries rejected produces")

	c := newClient(t, b, kgo.ConsumeTopics("q"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	for total := 0; total < 180+n; {
		fs := c.PollFetches(ctx)
		require.NoError(t, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) {
			total++
			if r.Key != nil {
				seen[string(r.Key)]++
			}
		})
	}
	require.Len(t, seen, n)
	for k, v := range seen {
		require.Equal(t, 1, v, "record %s", k)
	}
}

// TestConsumerQuotaHoldsRate: a consumer fetching as fast as it can is
// held to its consumer_byte_rate, and a topic's consumer.byte.rate caps
// every consumer of the topic together.
func TestConsumerQuotaHoldsRate(t *testing.T) {
	t.Parallel()
	b, adm := quotaBroker(t)
	p := startProducer(t, b, "filler", 0)
	for p.acked.Load() < 16e6 {
		time.Sleep(50 * time.Millisecond)
	}
	p.stop()
	const quota = 2e6
	// A small burst: a fetch returns at most what the bucket holds, and
	// the client counts at poll time, so big fetches would make the
	// measurement jumpy.
	setQuota(t, adm, qEntity(sp("client-id"), sp("reader")), map[string]float64{"consumer_byte_rate": quota, "consumer_byte_rate_burst": 256 << 10})
	consume := func(clientID string) *atomic.Int64 {
		var got atomic.Int64
		ctx, cancel := context.WithCancel(context.Background())
		cl := newClient(t, b, kgo.ClientID(clientID), kgo.ConsumeTopics("q"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got.Add(int64(len(r.Value))) })
			}
		}()
		t.Cleanup(func() { cancel(); <-done })
		return &got
	}
	measure := func(got ...*atomic.Int64) float64 {
		time.Sleep(2 * time.Second) // past the burst
		sum := func() (n int64) {
			for _, g := range got {
				n += g.Load()
			}
			return n
		}
		from, began := sum(), time.Now()
		time.Sleep(5 * time.Second)
		return float64(sum()-from) / time.Since(began).Seconds()
	}
	reader := consume("reader")
	r := measure(reader)
	t.Logf("reader: %.0f B/s", r)
	require.InDelta(t, quota, r, 0.1*quota)

	const topicCap = 1e6
	cfg := kadm.AlterConfig{Name: "consumer.byte.rate", Value: kmsg.StringPtr(fmt.Sprint(int64(topicCap)))}
	res, err := adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{cfg}, "q")
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	r = measure(reader, consume("other"))
	t.Logf("both under the topic cap: %.0f B/s", r)
	require.InDelta(t, topicCap, r, 0.1*topicCap)
}

// TestRequestQuotas: request_rate holds a client to its requests per
// second (the connection is muted, the client told through
// ThrottleTimeMs); request_percentage throttles a client whose requests
// use more handler time than its share.
func TestRequestQuotas(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	adm := kadm.NewClient(newClient(t, b))
	setQuota(t, adm, qEntity(sp("client-id"), sp("chatty")), map[string]float64{"request_rate": 20})
	setQuota(t, adm, qEntity(sp("client-id"), sp("busy")), map[string]float64{"request_percentage": 0.5})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	metadata := func(cl *kgo.Client, n int) {
		for i := 0; i < n; i++ {
			_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			require.NoError(t, err)
		}
	}

	var th throttles
	chatty := newClient(t, b, kgo.ClientID("chatty"), kgo.WithHooks(&th))
	// Spend the burst (one second: 20): the bucket refills while the
	// requests run, so on a slow machine 25 may not empty it. Go on until
	// the first throttle, so the measurement starts with the bucket in debt.
	for deadline := time.Now().Add(10 * time.Second); th.count() == 0 && time.Now().Before(deadline); {
		metadata(chatty, 1)
	}
	require.Positive(t, th.count(), "throttled once the burst is spent")
	began := time.Now()
	metadata(chatty, 40)
	got := 40 / time.Since(began).Seconds()
	t.Logf("chatty: %.1f requests/s", got)
	require.InDelta(t, 20, got, 3)
	require.Positive(t, th.count())
	// The throttles show in shoal_quota_throttle_time_seconds by scope.
	require.Positive(t, histogramCount(t, b.metrics.QuotaThrottle.WithLabelValues("client-id")))

	// 0.5% of a thread: 5ms of handling per second, spent by some
	// thousands of Metadata requests.
	var busyTh throttles
	busy := newClient(t, b, kgo.ClientID("busy"), kgo.WithHooks(&busyTh))
	for deadline := time.Now().Add(15 * time.Second); busyTh.count() == 0 && time.Now().Before(deadline); {
		metadata(busy, 10)
	}
	require.Positive(t, busyTh.count(), "throttled once its handler time is spent")

	// Time a fetch spends long-polling is not handler time: 2 s of
	// polls would spend 10 times the 20% (200 ms/s) budget if it were,
	// while the real handling (Metadata, ListOffsets, fetch setup) stays
	// well inside it even under the race detector on a starved machine
	// (handler time is wall-clock time, descheduling included).
	setQuota(t, adm, qEntity(sp("client-id"), sp("poller")), map[string]float64{"request_percentage": 20})
	_, err := adm.CreateTopic(ctx, 1, 1, nil, "empty")
	require.NoError(t, err)
	var pollTh throttles
	poller := newClient(t, b, kgo.ClientID("poller"), kgo.WithHooks(&pollTh), kgo.ConsumeTopics("empty"), kgo.FetchMaxWait(300*time.Millisecond))
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	poller.PollFetches(pctx)
	require.Zero(t, pollTh.count())
}

func histogramCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, o.(prometheus.Metric).Write(&m))
	return m.GetHistogram().GetSampleCount()
}
