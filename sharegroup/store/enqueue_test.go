package store

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/sharegroup"
)

// TestEnqueueOrderAndBarrier: Writes enqueued without waiting commit in
// order (the reloaded state is the Partition's), and Barrier returns only
// once every Write enqueued before it has completed.
func TestEnqueueOrderAndBarrier(t *testing.T) {
	t.Parallel()
	db := openDB(t, t.TempDir())
	defer db.Close()
	gate := make(chan struct{})
	var held atomic.Bool
	s := New(db, Options{Prefix: []byte("sg/"), SnapshotEvery: 5, BeforeCommit: func() error {
		if held.Load() {
			<-gate
		}
		return nil
	}})
	cfg := sharegroup.DefaultConfig()
	p, eff, err := sharegroup.New(cfg, 1, 0)
	require.NoError(t, err)
	write(t, s, key, eff)

	held.Store(true)
	var waits []func() error
	for r := range 12 { // enough to fold into a snapshot twice on the way
		off := int64(r)
		_, eff = p.Acquire(at(r), "m", []sharegroup.LogBatch{{First: off, Last: off}}, 1, sharegroup.BatchOptimized)
		waits = append(waits, s.Enqueue([]PartitionRecords{{Key: key, Records: eff.Records}}))
		eff, err = p.Acknowledge(at(r), "m", []sharegroup.AckBatch{{First: off, Last: off, Types: []sharegroup.AckType{sharegroup.AckType(1 + r%3)}}})
		require.NoError(t, err)
		waits = append(waits, s.Enqueue([]PartitionRecords{{Key: key, Records: eff.Records}}))
	}
	barrier := make(chan struct{})
	go func() { s.Barrier(); close(barrier) }()
	select {
	case <-barrier:
		t.Fatal("Barrier returned while Writes enqueued before it were held")
	case <-time.After(100 * time.Millisecond):
	}
	held.Store(false)
	close(gate)
	<-barrier
	for _, w := range waits {
		require.NoError(t, w())
	}
	q, found, err := s.Load(key, cfg)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, p.Snapshot(), q.Snapshot())
	s.Barrier() // nothing enqueued: returns at once
}

// TestFailedWriteMakesLaterWritesStale: a failed Write moves Gen of its
// keys; a Write enqueued behind it, built on the failed one's Partition,
// is refused (ErrStale) and writes nothing, so the durable state never
// holds a later record without the earlier one. Other keys are not
// affected; a Partition reloaded at the new Gen writes again.
func TestFailedWriteMakesLaterWritesStale(t *testing.T) {
	t.Parallel()
	db := openDB(t, t.TempDir())
	defer db.Close()
	boom := errors.New("disk on fire")
	var fail atomic.Bool
	gate := make(chan struct{})
	var held atomic.Bool
	s := New(db, Options{Prefix: []byte("sg/"), BeforeCommit: func() error {
		if held.Swap(false) {
			<-gate
			return nil
		}
		if fail.Swap(false) {
			return boom
		}
		return nil
	}})
	cfg := sharegroup.DefaultConfig()
	other := Key{Group: "g", Partition: 99}
	p, eff, err := sharegroup.New(cfg, 1, 0)
	require.NoError(t, err)
	write(t, s, key, eff)
	po, eff, err := sharegroup.New(cfg, 1, 0)
	require.NoError(t, err)
	write(t, s, other, eff)
	g := s.Gen(key)
	require.Zero(t, g)

	// Hold the committer on an unrelated Write, so that the failing one
	// is enqueued while the first commits, as an acknowledgement is.
	held.Store(true)
	po.Acquire(at(0), "m", []sharegroup.LogBatch{{First: 0, Last: 9}}, 10, sharegroup.BatchOptimized)
	eff, err = po.Acknowledge(at(0), "m", []sharegroup.AckBatch{{First: 0, Last: 9, Types: []sharegroup.AckType{sharegroup.AckAccept}}})
	require.NoError(t, err)
	first := s.Enqueue([]PartitionRecords{{Key: other, Records: eff.Records}})
	for held.Load() {
		time.Sleep(time.Millisecond) // the committer is at the gate
	}
	fail.Store(true)
	_, eff = p.Acquire(at(1), "m", []sharegroup.LogBatch{{First: 0, Last: 9}}, 10, sharegroup.BatchOptimized)
	eff, err = p.Acknowledge(at(1), "m", []sharegroup.AckBatch{{First: 0, Last: 4, Types: []sharegroup.AckType{sharegroup.AckAccept}}})
	require.NoError(t, err)
	failing := s.Enqueue([]PartitionRecords{{Key: key, Records: eff.Records, Gen: g}})
	close(gate)
	require.NoError(t, first())
	require.ErrorIs(t, failing(), boom)
	require.Equal(t, g+1, s.Gen(key))
	require.Zero(t, s.Gen(other))

	// Built on the failed acknowledgement: refused, nothing written.
	eff, err = p.Acknowledge(at(2), "m", []sharegroup.AckBatch{{First: 5, Last: 9, Types: []sharegroup.AckType{sharegroup.AckAccept}}})
	require.NoError(t, err)
	require.ErrorIs(t, s.Write([]PartitionRecords{{Key: key, Records: eff.Records, Gen: g}}), ErrStale)
	require.Equal(t, g+1, s.Gen(key), "a refused Write moves nothing")
	q, found, err := s.Load(key, cfg)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, int64(0), q.SPSO(), "neither acknowledgement is durable")

	// Reloaded at the new Gen, the Partition writes again.
	g = s.Gen(key)
	q.Acquire(at(3), "m", []sharegroup.LogBatch{{First: 0, Last: 9}}, 10, sharegroup.BatchOptimized)
	eff, err = q.Acknowledge(at(3), "m", []sharegroup.AckBatch{{First: 0, Last: 9, Types: []sharegroup.AckType{sharegroup.AckAccept}}})
	require.NoError(t, err)
	require.NoError(t, s.Write([]PartitionRecords{{Key: key, Records: eff.Records, Gen: g}}))
	r, _, err := s.Load(key, cfg)
	require.NoError(t, err)
	require.Equal(t, int64(10), r.SPSO())
}
