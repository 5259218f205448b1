package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/dedup"
	slog "github.com/shoal-mq/shoal/log"
)

// Storage faults during the background completion of EndTxn v5 and the
// dedup wait, on an in-memory file system (log.MemFS) that fails syncs
// of chosen files and simulates a power loss (CrashClone: only synced
// bytes survive).

// failSyncs makes every fsync of a file whose path contains part fail.
func failSyncs(fs *slog.MemFS, part string) {
	fs.SetErrorHook(func(op slog.Op, name string) error {
		if op == slog.OpSync && strings.Contains(name, part) {
			return errors.New("injected EIO")
		}
		return nil
	})
}

// TestTV2MarkerSyncFailureNeverTearsACommit: EndTxn v5 commit is answered
// once the decision is durable; then one partition's marker fsync fails.
// Redoing the completion must not skip that partition just because its
// marker was appended (the producer's epoch in memory already shows it):
// it waits for the marker to be durable, which cannot happen, so the txn
// keeps its PrepareCommit and a later write of the txn fails. After a
// power loss the decision is replayed at start, and both partitions
// show the commit (before the fix: committed in one, aborted in the
// other).
func TestTV2MarkerSyncFailureNeverTearsACommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fs := slog.NewMemFS()
	b := startTest(t, func(c *Config) { c.DataDir = dir; c.beforeRecovery = func(b *Broker) { b.fs = fs } })
	r := tv2Producer(t, b, "tf", 2)
	require.Equal(t, "NONE", codeName(r.produceAt(12, "tf", 0, 0, "a")))
	require.Equal(t, "NONE", codeName(r.produceAt(12, "tf", 1, 0, "b")))
	failSyncs(fs, "tf-1")
	require.Equal(t, "NONE", codeName(r.endAt(5, r.pid, r.epoch, true).ErrorCode), "the decision is durable")
	_, cmpErr, ok := b.txns.Completion(r.id)
	require.True(t, ok)
	require.Error(t, cmpErr(), "tf-1's marker fsync failed")
	// A later write of the txn redoes the completion first, and fails.
	require.NotZero(t, r.init(60000).ErrorCode, "the completion cannot be made durable")
	require.Error(t, b.Close(), "tf-1 failed")

	b2 := startTest(t, func(c *Config) { c.DataDir = dir; c.beforeRecovery = func(b *Broker) { b.fs = fs.CrashClone() } })
	c2 := dialRaw(t, b2)
	for p, want := range []string{"a", "b"} {
		got := fetchCommitted(t, c2, "tf", int32(p))
		require.Equal(t, []string{want}, got.values, "partition %d", p)
		require.Equal(t, got.hw, got.lso, "partition %d", p)
	}
}

// TestTV2CommitWithNothingOpen: at v5 only a retry (the epoch just left)
// of a completed commit succeeds; a commit at the current epoch with no
// transaction open is INVALID_TXN_STATE, as Kafka answers.
func TestTV2CommitWithNothingOpen(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	r := tv2Producer(t, b, "cn", 1)
	require.Equal(t, "NONE", codeName(r.produceAt(12, "cn", 0, 0, "a")))
	r.endV5(t, true)
	resp := r.endAt(5, r.pid, r.epoch, true)
	require.Equal(t, "INVALID_TXN_STATE", codeName(resp.ErrorCode))
	require.Equal(t, "NONE", codeName(r.endAt(5, r.pid, r.epoch-1, true).ErrorCode), "the retry")
}

// TestDedupFirstCopySyncFailure: with dedup.scope=topic the first copy's
// fsync fails (its partition stops accepting writes). Its ids are
// forgotten, so the client's retry to a healthy partition is stored
// rather than refused (or, before the wait, dropped) as a duplicate of a
// copy that does not exist.
func TestDedupFirstCopySyncFailure(t *testing.T) {
	t.Parallel()
	fs := slog.NewMemFS()
	b := startTest(t, func(c *Config) { c.beforeRecovery = func(b *Broker) { b.fs = fs } })
	dedupTopic(t, b, "dd", 2, dedup.WindowConfig, "300000")
	failSyncs(fs, "dd-0")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	to := func(p int32) *kgo.Record {
		r := rec("dd", "v", "X")
		r.Partition = p
		return r
	}
	require.Error(t, cl.ProduceSync(ctx, to(0)).FirstErr(), "the first copy's fsync failed")
	require.NoError(t, cl.ProduceSync(ctx, to(1)).FirstErr())
	p1 := b.topics.Partition("dd", 1)
	require.Equal(t, int64(1), p1.Log.HighWatermark(), "stored and durable in partition 1")
	require.NoError(t, cl.ProduceSync(ctx, to(1)).FirstErr())
	require.Equal(t, int64(2), p1.Log.LogEndOffset(), "the next one is a duplicate again: a batch without records")
}

// TestTV2ExhaustedEpochFailedCompletion: EndTxn v5 at an exhausted epoch
// answers a new producer id once its decision is durable; then the
// marker's fsync fails, so the txn stays in PrepareCommit at the old id.
// Requests with the new id get CONCURRENT_TRANSACTIONS (retriable), not
// INVALID_PRODUCER_ID_MAPPING or PRODUCER_FENCED, which a client treats
// as fatal. After a
// power loss the decision is completed at start and the new id works.
func TestTV2ExhaustedEpochFailedCompletion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fs := slog.NewMemFS()
	cfg := func(c *Config) { c.DataDir = dir; c.beforeRecovery = func(b *Broker) { b.fs = fs } }
	b := startTest(t, cfg)
	r := tv2Producer(t, b, "xe", 1)
	b = exhaustEpoch(t, b, r, cfg)
	require.Equal(t, "NONE", codeName(r.produceAt(12, "xe", 0, 0, "last")))
	failSyncs(fs, "xe-0")
	resp := r.endAt(5, r.pid, r.epoch, true)
	require.Equal(t, "NONE", codeName(resp.ErrorCode), "the decision is durable")
	require.NotEqual(t, r.pid, resp.ProducerID)
	require.Equal(t, "PrepareCommit", r.describe().State, "its marker is not durable")

	next := &rawTxn{c: r.c, id: r.id, pid: resp.ProducerID, epoch: resp.ProducerEpoch}
	require.Equal(t, "CONCURRENT_TRANSACTIONS", codeName(next.produceAt(12, "xe", 0, 0, "new")))
	require.Equal(t, "CONCURRENT_TRANSACTIONS", codeName(next.addOffsets("g")))
	require.Equal(t, "CONCURRENT_TRANSACTIONS", codeName(next.endAt(5, next.pid, next.epoch, true).ErrorCode))
	// InitProducerId v3+ with it too, not PRODUCER_FENCED (found by review).
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &next.id, 60000
	init.ProducerID, init.ProducerEpoch = next.pid, next.epoch
	require.Equal(t, "CONCURRENT_TRANSACTIONS", codeName(next.c.do(init, 4).(*kmsg.InitProducerIDResponse).ErrorCode))
	require.Equal(t, "PrepareCommit", r.describe().State, "nothing changed")
	require.Error(t, b.Close(), "xe-0 failed")

	b2 := startTest(t, func(c *Config) { c.DataDir = dir; c.beforeRecovery = func(b *Broker) { b.fs = fs.CrashClone() } })
	next.c = dialRaw(t, b2)
	d := next.describe()
	require.Equal(t, "CompleteCommit", d.State)
	require.Equal(t, next.pid, d.ProducerID)
	require.Equal(t, "NONE", codeName(next.produceAt(12, "xe", 0, 0, "new")))
	next.endV5(t, true)
	require.Equal(t, []string{"last", "new"}, fetchCommitted(t, next.c, "xe", 0).values)
}

// TestTxnStateWriteFailures: the transaction coordinator's group-commit
// writes fail. A decision whose write fails is not taken: EndTxn answers
// NOT_COORDINATOR (the client retries) and the transaction stays open
// with its partitions; the retry commits it. A completion whose
// Complete write fails is redone by the transaction's next write, which
// succeeds once the store does.
func TestTxnStateWriteFailures(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	injected := errors.New("injected badger failure")
	plan := make(chan error, 2) // the next commits' outcomes; then success
	b.meta.Committer().SetBeforeCommit(func() error {
		select {
		case err := <-plan:
			return err
		default:
			return nil
		}
	})
	r := txnWithOffset(t, b, "wf", "wf", "a")
	plan <- injected
	require.Equal(t, "NOT_COORDINATOR", codeName(r.end(true)))
	d := r.describe()
	require.Equal(t, "Ongoing", d.State, "the decision was not taken")
	require.Len(t, d.Topics, 1)
	off, code := r.fetchOffset("g", "wf", 0, true)
	require.Equal(t, "UNSTABLE_OFFSET_COMMIT", code, "the offset is still pending")
	require.Zero(t, r.end(true))
	require.Equal(t, []string{"a"}, fetchCommitted(t, r.c, "wf", 0).values)
	off, code = r.fetchOffset("g", "wf", 0, true)
	require.Equal(t, "NONE", code)
	require.Equal(t, int64(7), off)

	// The next transaction's Complete write fails (its Prepare is written).
	require.Equal(t, []string{"NONE"}, names(r.addPartitions("wf", 0)))
	require.Zero(t, r.produce("wf", 0, 1, "b"))
	plan <- nil      // Prepare
	plan <- injected // Complete
	require.Zero(t, r.end(true), "the decision is durable")
	_, cmpErr, ok := b.txns.Completion(r.id)
	require.True(t, ok)
	require.ErrorIs(t, cmpErr(), injected)
	require.Equal(t, []string{"a", "b"}, fetchCommitted(t, r.c, "wf", 0).values, "the markers are durable")
	require.Equal(t, []string{"NONE"}, names(r.addPartitions("wf", 0)), "the redo writes Complete first")
	_, _, ok = b.txns.Completion(r.id)
	require.False(t, ok, "the completion is durable")
}
