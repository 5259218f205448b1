package integration

// Lost responses and retries (docs reliability T4): idempotent producers
// talk to the broker through a TCP proxy that, for a fraction of Produce
// responses, drops the response and closes the connection, forwards half
// of it and closes, or holds it past the client's request timeout. The
// client cannot tell whether such a produce was stored and retries it
// with the same producer id, epoch and sequence; the broker must answer a
// retry of any of the last five batches with its original offsets and
// store nothing twice. Pass: every record acknowledged, each value stored
// exactly once at the offset its acknowledgement gave, each producer's
// records in order within a partition.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mq/shoal/broker"
	"github.com/shoal-mq/shoal/integration/faultproxy"
)

// lostScale multiplies the lost-answer tests' volume and time limit:
// SHOAL_LOST_SCALE (default 1; the reliability soak tier is 100).
func lostScale(t *testing.T) int { return envScale(t, "SHOAL_LOST_SCALE") }

// proxiedBroker starts a broker that advertises a fault proxy (started,
// without faults), a topic of partitions, and the test's context,
// scaled by lostScale.
func proxiedBroker(t *testing.T, partitions int32) (*faultproxy.Proxy, *testBroker, string, context.Context) {
	t.Helper()
	proxy, err := faultproxy.New(1)
	require.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	b := startBroker(t, func(c *broker.Config) { c.AdvertisedAddr = proxy.Addr() })
	b.requireInProcess(t)
	require.NoError(t, proxy.Start(b.Addr))
	topic := b.createTopic(t, partitions, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(lostScale(t))*testTimeout)
	t.Cleanup(cancel)
	return proxy, b, topic, ctx
}

// lostAnswers are the lost-answer tests' faults: for rate of the
// exchanges of keys, the answer is lost (half the time), cut (four in
// ten) or held 1.2 s, past the tests' request timeouts.
func lostAnswers(rate float64, keys ...int16) faultproxy.Faults {
	A := []faultproxy.Action{faultproxy.LoseResponse, faultproxy.CutResponse, faultproxy.HoldResponse}
	return faultproxy.Faults{Rate: rate, Keys: keys, Hold: 1200 * time.Millisecond,
		Actions: []faultproxy.Action{A[0], A[0], A[0], A[0], A[0], A[1], A[1], A[1], A[1], A[2]}}
}

// lostStats logs what the proxy did and requires that it lost or cut
// some answers.
func lostStats(t *testing.T, proxy *faultproxy.Proxy) {
	t.Helper()
	s := proxy.Stats()
	t.Logf("proxy: %v", s)
	require.Positive(t, s.Faults[faultproxy.LoseResponse]+s.Faults[faultproxy.CutResponse], "the proxy injected faults")
}

func TestLostProduceResponses(t *testing.T) {
	t.Parallel()
	const (
		producers  = 4
		partitions = 4
	)
	perProd := 20000 * lostScale(t) // about 20,000 produce requests per unit
	proxy, b, topic, ctx := proxiedBroker(t, partitions)

	type ack struct {
		partition int32
		offset    int64
	}
	acks := make([]map[string]ack, producers)
	var mu sync.Mutex
	var failed atomic.Int64
	pad := strings.Repeat("x", 400)
	proxy.Set(lostAnswers(0.02, 0)) // Produce
	var wg sync.WaitGroup
	for id := range producers {
		acks[id] = make(map[string]ack, perProd)
		cl := b.client(t,
			kgo.SeedBrokers(proxy.Addr()),
			kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.MaxBufferedRecords(64),
			kgo.ProducerBatchMaxBytes(512), // with pad, one record per batch: many requests
			kgo.ProduceRequestTimeout(700*time.Millisecond),
			kgo.RequestTimeoutOverhead(300*time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }),
			kgo.RecordDeliveryTimeout(60*time.Second),
		)
		wg.Go(func() {
			for seq := range perProd {
				name := fmt.Sprintf("p%d-%d", id, seq)
				r := &kgo.Record{Value: []byte(name + " " + pad), Partition: int32(seq % partitions)}
				cl.Produce(ctx, r, func(r *kgo.Record, err error) {
					if err != nil {
						if failed.Add(1) <= 5 {
							t.Errorf("produce %s: %v", name, err)
						}
						return
					}
					mu.Lock()
					acks[id][name] = ack{r.Partition, r.Offset}
					mu.Unlock()
				})
			}
			require.NoError(t, cl.Flush(ctx))
		})
	}
	wg.Wait()
	proxy.Set(faultproxy.Faults{})
	require.Zero(t, failed.Load(), "every record is acknowledged")
	lostStats(t, proxy)

	recs := b.consumeN(t, topic, producers*perProd)
	require.Len(t, recs, producers*perProd)
	seen := map[string]bool{}
	last := map[[2]int]int{} // (producer, partition) -> last seq read
	for _, r := range recs {
		v, _, _ := strings.Cut(string(r.Value), " ")
		require.False(t, seen[v], "%s stored twice (partition %d offset %d)", v, r.Partition, r.Offset)
		seen[v] = true
		var id, seq int
		_, err := fmt.Sscanf(v, "p%d-%d", &id, &seq)
		require.NoError(t, err, "value %q", v)
		a, ok := acks[id][v]
		require.True(t, ok, "%s was stored but never acknowledged", v)
		require.Equal(t, ack{r.Partition, r.Offset}, a, "%s is stored where its acknowledgement said", v)
		k := [2]int{id, int(r.Partition)}
		if prev, ok := last[k]; ok {
			require.Greater(t, seq, prev, "producer %d's records are in order in partition %d", id, r.Partition)
		}
		last[k] = seq
	}
}

// TestLostTxnResponses: transactional producers through the fault proxy,
// which hits Produce, AddPartitionsToTxn and EndTxn responses. A commit
// whose answer was lost is retried by the client (EndTxn v5 recognises the
// epoch just left) or reported unconfirmed, after which the client aborts
// with a bumped epoch, as franz-go documents. Pass (reliability target
// T5): read_committed shows every confirmed commit exactly once, nothing
// of an abort, an unconfirmed transaction whole or not at all, and each
// producer's transactions in order.
func TestLostTxnResponses(t *testing.T) {
	t.Parallel()
	const (
		producers  = 2
		perTxn     = 10
		partitions = 3
	)
	txns := 400 * lostScale(t)
	proxy, b, topic, ctx := proxiedBroker(t, partitions)

	const (
		committed = iota + 1
		aborted
		unconfirmed
	)
	outcome := make([][]int, producers)
	proxy.Set(lostAnswers(0.08, 0, 24, 26)) // Produce, AddPartitionsToTxn, EndTxn
	var wg sync.WaitGroup
	for id := range producers {
		outcome[id] = make([]int, txns)
		cl := b.client(t,
			kgo.SeedBrokers(proxy.Addr()),
			kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.TransactionalID(fmt.Sprintf("%s-%d", topic, id)),
			kgo.TransactionTimeout(30*time.Second),
			kgo.ProduceRequestTimeout(700*time.Millisecond),
			kgo.RequestTimeoutOverhead(300*time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }),
		)
		wg.Go(func() {
			for n := range txns {
				if err := cl.BeginTransaction(); err != nil {
					t.Errorf("producer %d txn %d: begin: %v", id, n, err)
					return
				}
				var failed atomic.Bool
				for i := range perTxn {
					r := &kgo.Record{Value: fmt.Appendf(nil, "t%d-%d-%d", id, n, i), Partition: int32(i % partitions)}
					cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
						if err != nil {
							failed.Store(true)
						}
					})
				}
				if err := cl.Flush(ctx); err != nil {
					t.Errorf("producer %d txn %d: flush: %v", id, n, err)
					return
				}
				end := kgo.TryCommit
				if failed.Load() {
					end = kgo.TryAbort
				}
				err := cl.EndTransaction(ctx, end)
				switch {
				case err == nil && end == kgo.TryCommit:
					outcome[id][n] = committed
				case err == nil:
					outcome[id][n] = aborted
				default:
					// Unconfirmed: abort with a bumped epoch, as the client
					// documents; the commit may or may not have happened.
					t.Logf("producer %d txn %d: end: %v; aborting", id, n, err)
					outcome[id][n] = unconfirmed
					if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
						t.Errorf("producer %d txn %d: abort after %v: %v", id, n, end, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	proxy.Set(faultproxy.Faults{})
	if t.Failed() {
		return
	}
	lostStats(t, proxy)
	want := 0
	counts := map[int]int{}
	for id := range producers {
		for n := range txns {
			counts[outcome[id][n]]++
			if outcome[id][n] == committed {
				want += perTxn
			}
		}
	}
	t.Logf("transactions: %d committed, %d aborted, %d unconfirmed", counts[committed], counts[aborted], counts[unconfirmed])

	// Everything has ended, so the last stable offset is the high
	// watermark. Read until every confirmed commit is there and then
	// nothing more arrives for two seconds (unconfirmed transactions may
	// add whole ones).
	cl := b.client(t,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	seen := map[[2]int]int{} // (producer, txn) -> records read
	last := map[[2]int]int{} // (producer, partition) -> last txn read
	read := 0
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		idle := pctx.Err() != nil
		cancel()
		require.NoError(t, ctx.Err(), "reading back %d of at least %d records", read, want)
		fs.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fetch %d: %v", p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			read++
			var id, n, i int
			_, err := fmt.Sscanf(string(r.Value), "t%d-%d-%d", &id, &n, &i)
			require.NoError(t, err)
			require.NotEqual(t, aborted, outcome[id][n], "t%d-%d was aborted but is read", id, n)
			seen[[2]int{id, n}]++
			require.LessOrEqual(t, seen[[2]int{id, n}], perTxn, "t%d-%d has a record read twice", id, n)
			k := [2]int{id, int(r.Partition)}
			if prev, ok := last[k]; ok {
				require.GreaterOrEqual(t, n, prev, "producer %d's transactions are in order in partition %d", id, r.Partition)
			}
			last[k] = n
		})
		if idle && read >= want {
			break
		}
	}
	landed := 0
	for id := range producers {
		for n := range txns {
			c := seen[[2]int{id, n}]
			switch outcome[id][n] {
			case committed:
				require.Equal(t, perTxn, c, "committed t%d-%d is whole", id, n)
			case unconfirmed:
				require.True(t, c == 0 || c == perTxn, "unconfirmed t%d-%d is whole or absent: %d of %d", id, n, c, perTxn)
				if c > 0 {
					landed++
				}
			}
		}
	}
	t.Logf("unconfirmed transactions found committed: %d of %d", landed, counts[unconfirmed])
}
