package store

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/sharegroup"
)

// TestSubmitBehindFailedWriteNotYetDone: a write of a key submitted
// right as a failed write of it finishes (it has left the store's list
// of writes in flight) fails too, though nothing chains it to the failed
// one: an owner that checked Done/Failed a moment before (the broker's
// prepareLocked) kept its Partition, and the new write, made from states
// that were never stored, must not be applied. (A review found that a
// failed write left that list before it was done; 50,000 writes queued
// before it in its group widened that window.)
func TestSubmitBehindFailedWriteNotYetDone(t *testing.T) {
	t.Parallel()
	db := openDB(t, t.TempDir())
	defer db.Close()
	hold := make(chan error)
	var calls atomic.Int32
	s := New(db, Options{Prefix: []byte("sg/"), SnapshotEvery: 1 << 30, BeforeCommit: func() error {
		switch calls.Add(1) {
		case 1: // group 0: held until the next group is queued
			return <-hold
		case 2: // group 1: the fillers and w1 fail
			return errors.New("injected")
		}
		return nil
	}})
	_, eff, err := sharegroup.New(sharegroup.DefaultConfig(), 1, 0)
	require.NoError(t, err)
	recs := eff.Records
	filler, k := Key{Group: "f"}, Key{Group: "g"}

	w0 := s.Submit([]PartitionRecords{{Key: Key{Group: "first"}, Records: recs}})
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	for i := 0; i < 50000; i++ { // queued before w1 in group 1: closed before it
		s.Submit([]PartitionRecords{{Key: filler, Records: recs}})
	}
	w1 := s.Submit([]PartitionRecords{{Key: k, Records: recs}})
	hold <- nil
	require.NoError(t, w0.Wait())

	var w2 *Pending
	deadline := time.Now().Add(5 * time.Second)
	for w2 == nil && !w1.Done() && time.Now().Before(deadline) {
		s.gc.Lock()
		_, inFlight := s.gc.last[k]
		if !inFlight && !w1.Done() {
			w2 = &Pending{} // placeholder; submitted below, after unlocking
		}
		s.gc.Unlock()
		if w2 != nil {
			w2 = s.Submit([]PartitionRecords{{Key: k, Records: recs}})
		}
	}
	require.Error(t, w1.Wait())
	if w2 == nil {
		return // w1 was Done as soon as it left gc.last: no window
	}
	require.ErrorIs(t, w2.Wait(), ErrEarlierWriteFailed,
		"a write of the key submitted while its failed predecessor was not Done was applied")
}
