package txn

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/shoal-mq/shoal/broker/meta"
)

// newTestCoordinator is a coordinator over a store of its own, without
// topics or groups: enough for what writes txn records only.
func newTestCoordinator(t *testing.T) (*Coordinator, *meta.Store) {
	t.Helper()
	lg := zaptest.NewLogger(t)
	st, err := meta.Open(t.TempDir(), lg)
	require.NoError(t, err)
	done := make(chan struct{})
	c := New(Options{Store: st, Logger: lg, Done: done, Setting: func(string) int64 { return 3600000 }})
	t.Cleanup(func() {
		close(done)
		c.Wait()
		require.NoError(t, st.Close())
	})
	return c, st
}

// TestTxnStampedWritesGetDistinctVersions: concurrent stamped writes
// (persistStampedLocked) of different transactions, made while a group
// commit is held, get versions of their own, independently of the group
// lock that also serialises one group's TxnOffsetCommits. (From review:
// the handler-level TestTxnOffsetConcurrentCommitsGetDistinctStamps, in
// package broker, passes even with stamped writes group-committed.)
func TestTxnStampedWritesGetDistinctVersions(t *testing.T) {
	t.Parallel()
	c, st := newTestCoordinator(t)
	release := make(chan struct{})
	var held atomic.Bool
	st.Committer().SetBeforeCommit(func() error {
		if held.CompareAndSwap(false, true) {
			<-release
		}
		return nil
	})
	const n = 6
	txs := make([]*Txn, n)
	for i := range txs {
		txs[i] = c.lock(fmt.Sprintf("sv-%d", i), true)
		txs[i].mu.Unlock()
	}
	// A plain group-committed write holds the commit loop.
	go func() {
		tx := c.lock("sv-hold", true)
		defer tx.mu.Unlock()
		_ = c.persistLocked(tx, time.Now())
	}()
	require.Eventually(t, held.Load, 5*time.Second, time.Millisecond)
	done := make(chan uint64, n)
	for _, tx := range txs {
		go func() {
			tx.mu.Lock()
			defer tx.mu.Unlock()
			require.NoError(t, c.persistStampedLocked(tx, time.Now()))
			v, err := c.recordVersion(tx.id)
			require.NoError(t, err)
			done <- v
		}()
	}
	time.Sleep(50 * time.Millisecond) // let them queue, if they queue
	close(release)
	seen := map[uint64]bool{}
	for range n {
		v := <-done
		require.False(t, seen[v], "two stamped writes share version %d", v)
		seen[v] = true
	}
}
