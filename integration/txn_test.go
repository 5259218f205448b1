package integration

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// readValues reads topic from the start with the isolation level until
// want records arrived and then for a short quiet period more (so extra
// records would be seen), and returns the values, sorted.
func readValues(t *testing.T, b *testBroker, topic string, iso kgo.IsolationLevel, want int) []string {
	t.Helper()
	ctx := testContext(t)
	cl := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	var out []string
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err0(), "read %d of %d: %v", len(out), want, out)
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	quiet, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	cl.PollFetches(quiet).EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	sort.Strings(out)
	return out
}

// TestSaramaTransactions: sarama's transactional producer commits and
// aborts; sarama and franz-go read_committed consumers never see aborted
// records, read_uncommitted consumers see everything.
func TestSaramaTransactions(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := b.createTopic(t, 2, nil)
	cfg := saramaConfig(sarama.V3_0_0_0)
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Transaction.ID = "sarama-" + topic
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	prod, err := sarama.NewSyncProducer(b.Seeds, cfg)
	require.NoError(t, err)
	defer prod.Close()

	send := func(vals ...string) {
		for i, v := range vals {
			_, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: int32(i % 2), Value: sarama.StringEncoder(v)})
			require.NoError(t, err)
		}
	}
	require.NoError(t, prod.BeginTxn())
	send("c1", "c2", "c3")
	require.NoError(t, prod.CommitTxn())
	require.NoError(t, prod.BeginTxn())
	send("a1", "a2")
	require.NoError(t, prod.AbortTxn())
	require.NoError(t, prod.BeginTxn())
	send("c4")
	require.NoError(t, prod.CommitTxn())

	committed := []string{"c1", "c2", "c3", "c4"}
	everything := []string{"a1", "a2", "c1", "c2", "c3", "c4"}
	require.Equal(t, committed, readValues(t, b, topic, kgo.ReadCommitted(), 4))
	require.Equal(t, everything, readValues(t, b, topic, kgo.ReadUncommitted(), 6))

	saramaRead := func(iso sarama.IsolationLevel, want int) []string {
		ccfg := saramaConfig(sarama.V3_0_0_0)
		ccfg.Consumer.IsolationLevel = iso
		cons, err := sarama.NewConsumer(b.Seeds, ccfg)
		require.NoError(t, err)
		defer cons.Close()
		var out []string
		for p := int32(0); p < 2; p++ {
			pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
			require.NoError(t, err)
			deadline := time.After(10 * time.Second)
		loop:
			for {
				select {
				case m := <-pc.Messages():
					out = append(out, string(m.Value))
				case err := <-pc.Errors():
					t.Fatalf("sarama consumer: %v", err)
				case <-time.After(700 * time.Millisecond):
					break loop
				case <-deadline:
					break loop
				}
			}
			require.NoError(t, pc.Close())
		}
		sort.Strings(out)
		require.Len(t, out, want, "%v", out)
		return out
	}
	require.Equal(t, committed, saramaRead(sarama.ReadCommitted, 4))
	require.Equal(t, everything, saramaRead(sarama.ReadUncommitted, 6))
}

// TestTransactionFencing: a second producer with the same transactional
// id fences the first; the first's open transaction is aborted and its
// late writes and commit are refused.
func TestTransactionFencing(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := b.createTopic(t, 1, nil)
	ctx := testContext(t)
	id := "fence-" + topic
	opts := []kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic), kgo.RecordRetries(3)}
	zombie := b.client(t, opts...)
	require.NoError(t, zombie.BeginTransaction())
	require.NoError(t, zombie.ProduceSync(ctx, kgo.StringRecord("zombie-1")).FirstErr())

	fresh := b.client(t, opts...)
	require.NoError(t, fresh.BeginTransaction())
	require.NoError(t, fresh.ProduceSync(ctx, kgo.StringRecord("fresh-1")).FirstErr())

	err := zombie.ProduceSync(ctx, kgo.StringRecord("zombie-2")).FirstErr()
	require.Error(t, err, "the fenced producer's write must fail")
	require.True(t, errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.ProducerFenced), "%v", err)
	err = zombie.EndTransaction(ctx, kgo.TryCommit)
	require.Error(t, err, "the fenced producer's commit must fail")

	require.NoError(t, fresh.EndTransaction(ctx, kgo.TryCommit))
	require.Equal(t, []string{"fresh-1"}, readValues(t, b, topic, kgo.ReadCommitted(), 1))
	all := readValues(t, b, topic, kgo.ReadUncommitted(), 2)
	require.Contains(t, all, "zombie-1")
	require.NotContains(t, all, "zombie-2")
}
