package integration

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mq/shoal/integration/workload"
)

// Share groups and transactions: share.isolation.level=read_committed
// delivers only committed records, and nothing past the last stable
// offset; read_uncommitted delivers everything. Markers are never
// delivered.
func TestShareIsolationLevels(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	topic := b.createTopic(t, 1, nil)
	admin := b.client(t)

	txn := b.client(t, kgo.TransactionalID("share-txn-"+topic), kgo.DefaultProduceTopic(topic))
	produceTxn := func(prefix string, commit bool) {
		t.Helper()
		require.NoError(t, txn.BeginTransaction())
		for i := range 5 {
			require.NoError(t, txn.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%s%d", prefix, i))).FirstErr())
		}
		require.NoError(t, txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
	}
	produceTxn("committed-", true)
	produceTxn("aborted-", false)
	require.NoError(t, admin.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("plain")}).FirstErr())
	// An open transaction: read_committed stops before it.
	require.NoError(t, txn.BeginTransaction())
	require.NoError(t, txn.ProduceSync(ctx, kgo.StringRecord("open-0")).FirstErr())

	drain := func(level string, want int) []string {
		t.Helper()
		group := "share-" + level + "-" + topic
		require.NoError(t, workload.SetGroupConfigs(ctx, admin, group,
			"share.auto.offset.reset", "earliest", "share.isolation.level", level))
		cl := b.client(t, kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
		var got []string
		deadline := time.Now().Add(15 * time.Second)
		for len(got) < want && time.Now().Before(deadline) {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			for _, r := range cl.PollRecords(pctx, -1).Records() {
				got = append(got, string(r.Value))
				r.Ack(kgo.AckAccept)
			}
			cancel()
		}
		// Nothing more arrives.
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		for _, r := range cl.PollRecords(pctx, -1).Records() {
			got = append(got, string(r.Value))
		}
		cancel()
		cl.Close() // releases anything its background fetches still hold
		sort.Strings(got)
		return got
	}
	require.Equal(t, []string{"committed-0", "committed-1", "committed-2", "committed-3", "committed-4", "plain"},
		drain("read_committed", 6))
	require.Equal(t, []string{"aborted-0", "aborted-1", "aborted-2", "aborted-3", "aborted-4",
		"committed-0", "committed-1", "committed-2", "committed-3", "committed-4", "open-0", "plain"},
		drain("read_uncommitted", 12))

	// Once the open transaction commits, read_committed delivers it.
	require.NoError(t, txn.EndTransaction(ctx, kgo.TryCommit))
	group := "share-read_committed-" + topic
	cl := b.client(t, kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	var got []string
	deadline := time.Now().Add(15 * time.Second)
	for len(got) == 0 && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		for _, r := range cl.PollRecords(pctx, -1).Records() {
			got = append(got, string(r.Value))
			r.Ack(kgo.AckAccept)
		}
		cancel()
	}
	require.Equal(t, []string{"open-0"}, got)
}
