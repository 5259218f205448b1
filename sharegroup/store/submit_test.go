package store

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/sharegroup"
)

// gate holds the next group commit (Options.BeforeCommit) once armed,
// until release says how it ends.
type gate struct {
	armed, held atomic.Bool
	release     chan error
}

// gatedStore returns a Store whose group commits the returned gate can
// hold.
func gatedStore(t *testing.T) (*gate, *Store) {
	g := &gate{release: make(chan error, 1)}
	return g, New(openDB(t, t.TempDir()), Options{Prefix: []byte("sg/"), BeforeCommit: g.hook})
}

func (g *gate) hook() error {
	if !g.armed.Swap(false) {
		return nil
	}
	g.held.Store(true)
	return <-g.release
}

// hold arms g and submits batch, whose commit it then holds.
func (g *gate) hold(t *testing.T, s *Store, batch []PartitionRecords) *Pending {
	t.Helper()
	g.armed.Store(true)
	w := s.Submit(batch)
	require.Eventually(t, g.held.Load, 5*time.Second, time.Millisecond)
	return w
}

// ackRange has member m accept [first, last] of p (acquiring it first)
// and returns the records to persist.
func ackRange(t *testing.T, p *sharegroup.Partition, first, last int64) []sharegroup.Record {
	t.Helper()
	return ackRangeAs(t, p, first, last, sharegroup.AckAccept)
}

// ackRangeAs is ackRange acknowledging with typ.
func ackRangeAs(t *testing.T, p *sharegroup.Partition, first, last int64, typ sharegroup.AckType) []sharegroup.Record {
	t.Helper()
	_, eff := p.Acquire(at(1), "m", []sharegroup.LogBatch{{First: first, Last: last}}, int(last-first+1), sharegroup.RecordLimit)
	recs := eff.Records
	eff, err := p.Acknowledge(at(2), "m", []sharegroup.AckBatch{{First: first, Last: last, Types: []sharegroup.AckType{typ}}})
	require.NoError(t, err)
	require.NotEmpty(t, eff.Records)
	return append(recs, eff.Records...)
}

func newPartitionAt(t *testing.T, s *Store, k Key) *sharegroup.Partition {
	t.Helper()
	p, eff, err := sharegroup.New(sharegroup.DefaultConfig(), 1, 0)
	require.NoError(t, err)
	write(t, s, k, eff)
	return p
}

// twoPartitions stores new share-partitions g/1 and g/2 in s.
func twoPartitions(t *testing.T, s *Store) (a, b Key, pa, pb *sharegroup.Partition) {
	t.Helper()
	a, b = Key{Group: "g", Partition: 1}, Key{Group: "g", Partition: 2}
	return a, b, newPartitionAt(t, s, a), newPartitionAt(t, s, b)
}

func notYet[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s before the write in flight finished", what)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestSubmitAfterFailedWriteFails: a write of a share-partition queued
// behind one of its writes that then fails is not applied (its records
// follow states that were never stored), while a write of another
// share-partition queued with it is. A write of it submitted later fails
// too, until a Load, after which it writes again.
func TestSubmitAfterFailedWriteFails(t *testing.T) {
	t.Parallel()
	g, s := gatedStore(t)
	a, b, pa, pb := twoPartitions(t, s)

	w1 := g.hold(t, s, []PartitionRecords{{Key: a, Records: ackRange(t, pa, 0, 4)}})
	w2 := s.Submit([]PartitionRecords{{Key: a, Records: ackRange(t, pa, 5, 9)}})
	w3 := s.Submit([]PartitionRecords{{Key: b, Records: ackRange(t, pb, 0, 9)}})
	require.False(t, w2.Done())
	g.release <- errors.New("injected")

	require.ErrorContains(t, w1.Wait(), "injected")
	require.ErrorIs(t, w2.Wait(), ErrEarlierWriteFailed)
	require.True(t, w2.Failed())
	require.NoError(t, w3.Wait())
	require.False(t, w3.Failed())
	require.ErrorIs(t, s.Write([]PartitionRecords{{Key: a, Records: ackRange(t, pa, 10, 12)}}), ErrEarlierWriteFailed,
		"a write of a submitted once the failure is over, from the same state, fails too")

	la, found, err := s.Load(a, sharegroup.DefaultConfig())
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, int64(0), la.SPSO(), "neither acceptance of a is stored")
	lb, _, err := s.Load(b, sharegroup.DefaultConfig())
	require.NoError(t, err)
	require.Equal(t, int64(10), lb.SPSO())

	require.NoError(t, s.Write([]PartitionRecords{{Key: a, Records: ackRange(t, la, 0, 2)}}))
	la, _, err = s.Load(a, sharegroup.DefaultConfig())
	require.NoError(t, err)
	require.Equal(t, int64(3), la.SPSO())
}

// TestSubmitAppliesInOrder: writes of one share-partition finish in the
// order they were submitted, each durable when its Wait returns.
func TestSubmitAppliesInOrder(t *testing.T) {
	t.Parallel()
	g, s := gatedStore(t)
	p := newPartitionAt(t, s, key)
	w1 := g.hold(t, s, []PartitionRecords{{Key: key, Records: ackRange(t, p, 0, 4)}})
	w2 := s.Submit([]PartitionRecords{{Key: key, Records: ackRange(t, p, 5, 9)}})
	done := make(chan error, 1)
	go func() { done <- w2.Wait() }()
	notYet(t, done, "the second write finished")
	g.release <- nil
	require.NoError(t, <-done)
	require.True(t, w1.Done())
	require.NoError(t, w1.Wait())
	q, _, err := s.Load(key, sharegroup.DefaultConfig())
	require.NoError(t, err)
	require.Equal(t, p.Snapshot(), q.Snapshot())
}

// TestLoadAndDeleteWaitForWritesInFlight: Load reads a share-partition
// only once its submitted writes have finished, and Delete deletes it
// only then, so a write in flight can neither be missed by a reload nor
// bring deleted state back.
func TestLoadAndDeleteWaitForWritesInFlight(t *testing.T) {
	t.Parallel()
	g, s := gatedStore(t)
	p := newPartitionAt(t, s, key)

	g.hold(t, s, []PartitionRecords{{Key: key, Records: ackRange(t, p, 0, 4)}})
	loaded := make(chan *sharegroup.Partition, 1)
	go func() {
		q, _, err := s.Load(key, sharegroup.DefaultConfig())
		require.NoError(t, err)
		loaded <- q
	}()
	notYet(t, loaded, "Load returned")
	g.release <- nil
	require.Equal(t, int64(5), (<-loaded).SPSO())

	g.hold(t, s, []PartitionRecords{{Key: key, Records: ackRange(t, p, 5, 9)}})
	deleted := make(chan error, 1)
	go func() { deleted <- s.Delete(key) }()
	notYet(t, deleted, "Delete returned")
	g.release <- nil
	require.NoError(t, <-deleted)
	recs, err := s.LoadRecords(key)
	require.NoError(t, err)
	require.Empty(t, recs, "the write in flight was applied before the delete, not after")
}

// TestSubmitStartsCommit: a write submitted while nothing commits starts
// the commit goroutine (and says so, for its submitter to yield to it);
// one queued behind a commit in flight does not, and neither does a write
// refused at once.
func TestSubmitStartsCommit(t *testing.T) {
	t.Parallel()
	g, s := gatedStore(t)
	a, b, pa, pb := twoPartitions(t, s)

	w1 := g.hold(t, s, []PartitionRecords{{Key: a, Records: ackRange(t, pa, 0, 4)}})
	require.True(t, w1.StartsCommit())
	w2 := s.Submit([]PartitionRecords{{Key: b, Records: ackRange(t, pb, 0, 4)}})
	require.False(t, w2.StartsCommit(), "queued behind the commit in flight")
	g.release <- nil
	require.NoError(t, w1.Wait())
	require.NoError(t, w2.Wait())
	require.Eventually(t, func() bool {
		s.gc.Lock()
		defer s.gc.Unlock()
		return !s.gc.running
	}, 5*time.Second, time.Millisecond)
	w3 := s.Submit([]PartitionRecords{{Key: a, Records: ackRange(t, pa, 5, 9)}})
	require.True(t, w3.StartsCommit(), "nothing was committing")
	require.NoError(t, w3.Wait())
	require.False(t, s.Submit(nil).StartsCommit(), "nothing to write")
}
