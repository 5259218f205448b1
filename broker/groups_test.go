package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// setBrokerConfigs sets dynamic broker config overrides in memory, the
// way the coordinator reads them (tests use it for short group timings).
func setBrokerConfigs(b *Broker, kv ...string) {
	b.dyn.Lock()
	for i := 0; i+1 < len(kv); i += 2 {
		b.dyn.m[kv[i]] = kv[i+1]
	}
	b.dyn.Unlock()
}

// startGroupTest starts a broker whose group coordinator does not delay
// the first rebalance and accepts session timeouts from 500ms.
func startGroupTest(t *testing.T, mut ...func(*Config)) *Broker {
	t.Helper()
	b := startTest(t, mut...)
	setBrokerConfigs(b, "group.initial.rebalance.delay.ms", "0", "group.min.session.timeout.ms", "500")
	return b
}

// produceN produces n records round-robin over the topic's partitions.
func produceN(t *testing.T, b *Broker, topic string, partitions int32, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	_, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	require.NoError(t, cl.Flush(ctx))
	cl.Close()
}

// requireCommittedAtEnd checks that the group's committed offset of every
// partition of topic equals the partition's log end.
func requireCommittedAtEnd(t *testing.T, b *Broker, group, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	committed, err := adm.FetchOffsets(ctx, group)
	require.NoError(t, err)
	ends.Each(func(o kadm.ListedOffset) {
		require.NoError(t, o.Err)
		c, ok := committed.Lookup(topic, o.Partition)
		require.True(t, ok, "no commit for %s-%d", topic, o.Partition)
		require.NoError(t, c.Err)
		require.Equal(t, o.Offset, c.At, "partition %d", o.Partition)
	})
}

// committedAtEnd reports whether the group's committed offsets equal
// the log end of every partition of topic.
func committedAtEnd(ctx context.Context, adm *kadm.Client, group, topic string) bool {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false
	}
	ok := true
	ends.Each(func(o kadm.ListedOffset) {
		c, found := committed.Lookup(topic, o.Partition)
		if !found || c.Err != nil || c.At != o.Offset {
			ok = false
		}
	})
	return ok
}

// consumeInGroup runs members members of a kgo group with the given
// balancer over topic, started one after another while records are
// being consumed (so the group rebalances under load), until every one
// of n records was processed at least once and the group's commits
// reached the log end. Each member commits what it processed after
// every poll and when partitions are revoked.
func consumeInGroup(t *testing.T, b *Broker, group, topic string, n, members int, opts ...kgo.Opt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	var mu sync.Mutex
	seen := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var clients []*kgo.Client
	for i := 0; i < members; i++ {
		cl := newClient(t, b, append([]kgo.Opt{
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(),
			kgo.SessionTimeout(6 * time.Second),
			kgo.HeartbeatInterval(100 * time.Millisecond),
			kgo.FetchMaxBytes(2048), // small fetches: consumption spans the rebalances
			kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
				cl.CommitUncommittedOffsets(ctx)
			}),
		}, opts...)...)
		clients = append(clients, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
				fs := cl.PollFetches(pctx)
				pcancel()
				if ctx.Err() != nil {
					return
				}
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
				mu.Unlock()
				if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
					t.Logf("commit: %v", err) // a rebalance can reject a commit; the next one retries
				}
			}
		}()
		time.Sleep(300 * time.Millisecond)
	}
	for {
		mu.Lock()
		got := len(seen)
		mu.Unlock()
		if got >= n && committedAtEnd(ctx, adm, group, topic) {
			break
		}
		select {
		case <-ctx.Done():
			close(stop)
			wg.Wait()
			t.Fatalf("consumed %d of %d records; committed at end: %v", got, n, committedAtEnd(context.Background(), adm, group, topic))
		case <-time.After(100 * time.Millisecond):
		}
	}
	close(stop)
	wg.Wait()
	for _, cl := range clients {
		cl.Close()
	}
	require.Len(t, seen, n)
}

func TestGroupBalancers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"range", kgo.RangeBalancer()},
		{"roundrobin", kgo.RoundRobinBalancer()},
		{"sticky", kgo.StickyBalancer()},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := startGroupTest(t)
			const n = 10000
			produceN(t, b, "bal", 6, n)
			consumeInGroup(t, b, "g-"+tc.name, "bal", n, 3, kgo.Balancers(tc.balancer))
			requireCommittedAtEnd(t, b, "g-"+tc.name, "bal")
		})
	}
}
