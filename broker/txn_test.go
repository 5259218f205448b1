package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func txnClient(t *testing.T, b *Broker, id string, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, b, append([]kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic("txn"),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

func produceTxn(t *testing.T, cl *kgo.Client, commit bool, vals ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, cl.BeginTransaction())
	for i, v := range vals {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: int32(i % 2)}).FirstErr())
	}
	require.NoError(t, cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
}

func TestTransactionsCommitAbortIsolation(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	_, err := adm.CreateTopic(ctx, 2, 1, nil, "txn")
	require.NoError(t, err)

	cl := txnClient(t, b, "t1")
	produceTxn(t, cl, true, "c1", "c2", "c3")
	produceTxn(t, cl, false, "a1", "a2")
	produceTxn(t, cl, true, "c4")

	// An open transaction holds the last stable offset back.
	require.NoError(t, cl.BeginTransaction())
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("open"), Partition: 0}).FirstErr())
	lso, err := adm.ListCommittedOffsets(ctx, "txn")
	require.NoError(t, err)
	hw, err := adm.ListEndOffsets(ctx, "txn")
	require.NoError(t, err)
	l0, _ := lso.Lookup("txn", 0)
	h0, _ := hw.Lookup("txn", 0)
	require.Less(t, l0.Offset, h0.Offset)

	dt, err := adm.DescribeTransactions(ctx, "t1")
	require.NoError(t, err)
	d := dt["t1"]
	require.Equal(t, "Ongoing", d.State)
	require.Len(t, d.Topics["txn"], 1)

	committed := collect(t, b, "txn", kgo.ReadCommitted(), 4)
	require.ElementsMatch(t, []string{"c1", "c2", "c3", "c4"}, committed)
	all := collect(t, b, "txn", kgo.ReadUncommitted(), 7)
	require.ElementsMatch(t, []string{"c1", "c2", "c3", "a1", "a2", "c4", "open"}, all)

	require.NoError(t, cl.EndTransaction(ctx, kgo.TryCommit))
	committed = collect(t, b, "txn", kgo.ReadCommitted(), 5)
	require.ElementsMatch(t, []string{"c1", "c2", "c3", "c4", "open"}, committed)
	lso, err = adm.ListCommittedOffsets(ctx, "txn")
	require.NoError(t, err)
	hw, err = adm.ListEndOffsets(ctx, "txn")
	require.NoError(t, err)
	require.Equal(t, hw, lso)

	lt, err := adm.ListTransactions(ctx, nil, []string{"CompleteCommit"})
	require.NoError(t, err)
	require.Contains(t, lt, "t1")
}

// collect reads n records from the start of topic.
func collect(t *testing.T, b *Broker, topic string, iso kgo.IsolationLevel, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(50*time.Millisecond))
	defer cl.Close()
	var out []string
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err0(), "have %v", out)
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	// Nothing more arrives.
	short, c2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer c2()
	fs := cl.PollFetches(short)
	fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	return out
}

// kgoReadCommitted is read_committed for collect.
var kgoReadCommitted = kgo.ReadCommitted()
