//go:build linux

package integration

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mq/shoal/integration/workload"
)

const (
	etlRecords    = 200_000
	etlStages     = 3
	etlPartitions = 3
	etlTxnRecords = 500 // records per transaction, at most
)

// TestTransactETLChainCrash is the exactly-once acceptance test: a chain
// of three franz-go GroupTransactSession stages copies 200,000 records
// topic to topic (etl-0 → etl-1 → etl-2 → etl-3), each stage a consumer
// group reading read_committed and producing in transactions that also
// commit its offsets. Members join and leave during the run, a member
// whose session fails is replaced by one with the same transactional id
// (which fences it), and the broker is SIGKILLed and restarted mid-run.
// At the end the last topic holds every input value exactly once under
// read_committed.
func TestTransactETLChainCrash(t *testing.T) {
	if len(externalSeeds()) > 0 {
		t.Skipf("runs its own shoal binary; %s is set", seedsEnv)
	}
	if testing.Short() {
		t.Skip("-short")
	}
	seed := crashSeed(t)
	child := newCrashChild(t, seed)
	child.start()
	child.waitReady()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	topics := make([]string, etlStages+1)
	admCl := newCrashClient(t, child.addr)
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	noRebalanceDelay(ctx, t, adm)
	for i := range topics {
		topics[i] = fmt.Sprintf("etl-%d-%d", i, seed%1e6)
		resp, err := adm.CreateTopic(ctx, etlPartitions, 1, nil, topics[i])
		require.NoError(t, err)
		require.NoError(t, resp.Err)
	}

	// The input.
	in := newCrashClient(t, child.addr, kgo.DefaultProduceTopic(topics[0]), kgo.ProducerLinger(5*time.Millisecond))
	var inErr atomic.Value
	for i := range etlRecords {
		in.Produce(ctx, kgo.StringRecord(fmt.Sprintf("%07d", i)), func(_ *kgo.Record, err error) {
			if err != nil {
				inErr.Store(err)
			}
		})
	}
	require.NoError(t, in.Flush(ctx))
	in.Close()
	require.Nil(t, inErr.Load())
	began := time.Now()

	// The stages: members run until stopped; one whose session fails is
	// replaced under the same transactional id.
	type member struct {
		stop chan struct{}
		done chan struct{}
	}
	var (
		mu        sync.Mutex
		failures  []string
		txns      atomic.Int64
		committed atomic.Int64
	)
	startMember := func(stage, idx int) *member {
		m := &member{stop: make(chan struct{}), done: make(chan struct{})}
		txnID := fmt.Sprintf("etl-%d-%d-%d", seed%1e6, stage, idx)
		go func() {
			defer close(m.done)
			for {
				err := runETLMember(ctx, child.addr, txnID, fmt.Sprintf("etl-g-%d-%d", seed%1e6, stage), topics[stage], topics[stage+1], m.stop, &txns, &committed)
				if err == nil || ctx.Err() != nil {
					return
				}
				mu.Lock()
				failures = append(failures, fmt.Sprintf("%s: %v", txnID, err))
				mu.Unlock()
				select {
				case <-m.stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
		return m
	}
	var members [etlStages][]*member
	for s := range etlStages {
		for i := range 2 {
			members[s] = append(members[s], startMember(s, i))
		}
	}

	// The verifier reads the last topic read_committed throughout.
	seen := make(map[string]int, etlRecords)
	var total int
	verifier := newCrashClient(t, child.addr, kgo.ConsumeTopics(topics[etlStages]), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	defer verifier.Close()
	poll := func(d time.Duration) {
		pctx, pcancel := context.WithTimeout(ctx, d)
		defer pcancel()
		fs := verifier.PollFetches(pctx)
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			total++
		})
	}

	// Membership churn and a crash, driven by progress through the last
	// topic so they land mid-run whatever the machine's speed.
	joined, killed, left := false, false, false
	for len(seen) < etlRecords && ctx.Err() == nil {
		poll(500 * time.Millisecond)
		switch {
		case !joined && len(seen) >= etlRecords/10:
			joined = true
			for s := range etlStages {
				members[s] = append(members[s], startMember(s, 2))
			}
			t.Logf("%v: a third member joined each stage (%d records through)", time.Since(began).Round(time.Millisecond), len(seen))
		case joined && !killed && len(seen) >= etlRecords*3/10:
			killed = true
			child.kill()
			child.start()
			took := child.waitReady()
			t.Logf("%v: broker SIGKILLed and restarted, ready after %v (%d records through)", time.Since(began).Round(time.Millisecond), took, len(seen))
		case killed && !left && len(seen) >= etlRecords/2:
			left = true
			for s := range etlStages {
				close(members[s][0].stop)
			}
			t.Logf("%v: the first member of each stage left (%d records through)", time.Since(began).Round(time.Millisecond), len(seen))
		}
	}
	// A quiet period: nothing may arrive after every value is there.
	for range 3 {
		poll(300 * time.Millisecond)
	}
	t.Logf("%v: %d distinct values, %d records in %d transactions (%d committed); member restarts: %d %v",
		time.Since(began).Round(time.Millisecond), len(seen), total, txns.Load(), committed.Load(), len(failures), failures)
	for s := range etlStages {
		for _, m := range members[s] {
			select {
			case <-m.stop:
			default:
				close(m.stop)
			}
		}
	}
	for s := range etlStages {
		for _, m := range members[s] {
			<-m.done
		}
	}
	require.NoError(t, ctx.Err(), "the chain did not finish in time")
	require.True(t, joined && killed && left)
	var dups, missing []string
	for i := range etlRecords {
		v := fmt.Sprintf("%07d", i)
		switch n := seen[v]; {
		case n == 0:
			missing = append(missing, v)
		case n > 1:
			dups = append(dups, v)
		}
	}
	require.Empty(t, missing, "values missing from the last topic")
	require.Empty(t, dups, "values seen more than once in the last topic")
	require.Equal(t, etlRecords, total, "records in the last topic")
}

// runETLMember runs one GroupTransactSession member until stop is closed
// (nil) or its session fails (the error: the caller replaces it).
func runETLMember(ctx context.Context, addr, txnID, group, in, out string, stop <-chan struct{}, txns, committed *atomic.Int64) error {
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ClientID("shoal-etl"),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(20 * time.Second),
		kgo.DefaultProduceTopic(out),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(6 * time.Second),
		kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.DialTimeout(time.Second),
		kgo.ProducerLinger(0),
	}
	// Small transactions, so membership changes and the crash land in
	// the middle of the run.
	return workload.TransactCopy(ctx, opts, etlTxnRecords, nil, stop, txns, committed)
}
