package broker

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	slog "github.com/shoal-mq/shoal/log"
)

// The markers of an EndTxn v5 decision wait up to markerSyncDelay for the
// next append to their partition to start its fsync, which covers them
// (syncer.appendedLazy); without one they are fsynced on their own.

// countLogSyncs counts the fsyncs of segment files whose path contains
// part.
func countLogSyncs(fs *slog.MemFS, part string) *atomic.Int64 {
	var n atomic.Int64
	fs.SetErrorHook(func(op slog.Op, name string) error {
		if op == slog.OpSync && strings.Contains(name, part) && strings.HasSuffix(name, ".log") {
			n.Add(1)
		}
		return nil
	})
	return &n
}

// TestTV2MarkerSharesNextTxnFsync: with a long delay, the commit marker is
// not fsynced on its own; the producer's next transactional batch is
// answered after one fsync, which makes the marker durable too and lets
// the completion finish; read_committed then shows the first
// transaction committed and stops at the open second one.
func TestTV2MarkerSharesNextTxnFsync(t *testing.T) {
	t.Parallel()
	fs := slog.NewMemFS()
	b := startTest(t, func(c *Config) {
		c.markerSyncDelay = time.Hour
		c.beforeRecovery = func(b *Broker) { b.fs = fs }
	})
	r := tv2Producer(t, b, "ms", 1)
	require.Equal(t, "NONE", codeName(r.produceAt(12, "ms", 0, 0, "a")))
	syncs := countLogSyncs(fs, "ms-0")

	resp := r.endAt(5, r.pid, r.epoch, true)
	require.Equal(t, "NONE", codeName(resp.ErrorCode))
	r.epoch = resp.ProducerEpoch
	done, cmpErr, ok := b.txns.Completion(r.id)
	require.True(t, ok)
	time.Sleep(50 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("the marker waits for an append to share its fsync")
	default:
	}
	require.Zero(t, syncs.Load())
	c := dialRaw(t, b)
	got := fetchCommitted(t, c, "ms", 0)
	require.Equal(t, int64(1), got.hw, "the marker's offset waits for its fsync")
	require.Equal(t, int64(1), got.lso)
	require.Equal(t, []string{"a"}, got.values, "the decision is durable: the records are readable once the marker is appended")

	require.Equal(t, "NONE", codeName(r.produceAt(12, "ms", 0, 0, "b")))
	select {
	case <-done:
		require.NoError(t, cmpErr())
	case <-time.After(10 * time.Second):
		t.Fatal("the completion did not finish after the next batch's fsync")
	}
	require.Equal(t, int64(1), syncs.Load(), "one fsync covered the marker and the next batch")
	got = fetchCommitted(t, c, "ms", 0)
	require.Equal(t, []string{"a"}, got.values)
	require.Equal(t, int64(3), got.hw)
	require.Equal(t, int64(2), got.lso, "the second transaction is open")
}

// TestTV2MarkerFsyncedWithoutTraffic: with nothing else appended, the
// marker is fsynced on its own once the delay has passed, and the
// outcome becomes visible to read_committed.
func TestTV2MarkerFsyncedWithoutTraffic(t *testing.T) {
	t.Parallel()
	fs := slog.NewMemFS()
	b := startTest(t, func(c *Config) {
		c.markerSyncDelay = 20 * time.Millisecond
		c.beforeRecovery = func(b *Broker) { b.fs = fs }
	})
	r := tv2Producer(t, b, "mw", 2)
	require.Equal(t, "NONE", codeName(r.produceAt(12, "mw", 0, 0, "a")))
	require.Equal(t, "NONE", codeName(r.produceAt(12, "mw", 1, 0, "b")))
	syncs := countLogSyncs(fs, "mw-")
	r.endV5(t, true) // waits for the completion
	require.Equal(t, int64(2), syncs.Load(), "one fsync per partition, for its marker")
	c := dialRaw(t, b)
	for p, want := range []string{"a", "b"} {
		got := fetchCommitted(t, c, "mw", int32(p))
		require.Equal(t, []string{want}, got.values)
		require.Equal(t, int64(2), got.hw)
		require.Equal(t, got.hw, got.lso)
	}
}

// TestTV2SettleHurriesPendingMarkers: the next transaction touches only
// one of the two partitions the last one marked; its EndTxn, which first
// waits for the last completion (settleLocked), starts the other
// marker's pending fsync rather than waiting out the delay.
func TestTV2SettleHurriesPendingMarkers(t *testing.T) {
	t.Parallel()
	b := startTest(t, func(c *Config) { c.markerSyncDelay = time.Hour })
	r := tv2Producer(t, b, "mh", 2)
	require.Equal(t, "NONE", codeName(r.produceAt(12, "mh", 0, 0, "a")))
	require.Equal(t, "NONE", codeName(r.produceAt(12, "mh", 1, 0, "b")))
	resp := r.endAt(5, r.pid, r.epoch, true)
	require.Equal(t, "NONE", codeName(resp.ErrorCode))
	r.epoch = resp.ProducerEpoch
	require.Equal(t, "NONE", codeName(r.produceAt(12, "mh", 0, 0, "c")))
	done := make(chan int16, 1)
	go func() { done <- r.endAt(5, r.pid, r.epoch, true).ErrorCode }()
	select {
	case code := <-done:
		require.Equal(t, "NONE", codeName(code))
	case <-time.After(10 * time.Second):
		t.Fatal("EndTxn waited for the previous transaction's lazy marker fsync")
	}
	c := dialRaw(t, b) // the second marker waits (an hour): its records are readable once it is appended

	require.Equal(t, []string{"a", "c"}, fetchCommitted(t, c, "mh", 0).values)
	require.Equal(t, []string{"b"}, fetchCommitted(t, c, "mh", 1).values)
}

// TestTV2PowerLossBeforeLazyMarkerFsync: EndTxn v5 commit is answered,
// and power fails while the markers wait for an fsync to share (only
// synced bytes survive, on MemFS). The decision is in badger and the
// completion is not, so the next start replays it: both partitions show
// the transaction committed.
func TestTV2PowerLossBeforeLazyMarkerFsync(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fs := slog.NewMemFS()
	b := startTest(t, func(c *Config) {
		c.DataDir = dir
		c.markerSyncDelay = time.Hour
		c.beforeRecovery = func(b *Broker) { b.fs = fs }
	})
	r := tv2Producer(t, b, "pl", 2)
	require.Equal(t, "NONE", codeName(r.produceAt(12, "pl", 0, 0, "a")))
	require.Equal(t, "NONE", codeName(r.produceAt(12, "pl", 1, 0, "b")))
	require.Equal(t, "NONE", codeName(r.endAt(5, r.pid, r.epoch, true).ErrorCode), "the decision is durable")
	crashed := fs.CrashClone() // power loss: the markers were never fsynced
	// The old broker must not get further than the power loss allows:
	// its Close would fsync the markers and then record the completion.
	failSyncs(fs, "pl-")
	require.Error(t, b.Close())

	b2 := startTest(t, func(c *Config) { c.DataDir = dir; c.beforeRecovery = func(b *Broker) { b.fs = crashed } })
	c2 := dialRaw(t, b2)
	for p, want := range []string{"a", "b"} {
		got := fetchCommitted(t, c2, "pl", int32(p))
		require.Equal(t, []string{want}, got.values, "partition %d", p)
		require.Equal(t, got.hw, got.lso, "partition %d: nothing left open", p)
		require.Equal(t, int64(2), got.hw, "partition %d: the record and the replayed marker", p)
	}
}
