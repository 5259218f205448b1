package meta

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

func openTestBadger(t *testing.T) *badger.DB {
	t.Helper()
	db, err := badger.Open(badgerOptions(t.TempDir(), zap.NewNop()))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func readKey(t *testing.T, db *badger.DB, key string) (string, uint64, bool) {
	t.Helper()
	var val string
	var ver uint64
	err := db.View(func(btx *badger.Txn) error {
		item, err := btx.Get([]byte(key))
		if err != nil {
			return err
		}
		ver = item.Version()
		v, err := item.ValueCopy(nil)
		val = string(v)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return "", 0, false
	}
	require.NoError(t, err)
	return val, ver, true
}

// TestGroupCommitterGroupsConcurrentWrites: writes queued while a commit
// runs share the next commit (one version), every write is durable and
// readable when write returns, and writes keep their queue order: a key
// written twice in one group holds the later value.
func TestGroupCommitterGroupsConcurrentWrites(t *testing.T) {
	t.Parallel()
	db := openTestBadger(t)
	release := make(chan struct{})
	var commits atomic.Int32
	g := &Committer{db: db, beforeCommit: func() error {
		if commits.Add(1) == 1 {
			<-release // hold the first commit while the others queue
		}
		return nil
	}}
	first := make(chan error, 1)
	go func() { first <- g.Write(Op{Key: []byte("first"), Value: []byte("1")}) }()
	for commits.Load() == 0 {
		runtime.Gosched()
	}
	const n = 20
	var wg sync.WaitGroup
	var queued sync.WaitGroup
	queued.Add(n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			ch := make(chan error, 1)
			g.WriteAsync([]Op{{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}}, func(err error) { ch <- err })
			queued.Done()
			errs[i] = <-ch
		})
	}
	queued.Wait()
	// Two writes of one key, queued in this order, in the same group.
	last := make(chan error, 2)
	g.WriteAsync([]Op{{Key: []byte("same"), Value: []byte("old")}}, func(err error) { last <- err })
	g.WriteAsync([]Op{{Key: []byte("same"), Value: []byte("new")}}, func(err error) { last <- err })
	close(release)
	require.NoError(t, <-first)
	wg.Wait()
	require.NoError(t, <-last)
	require.NoError(t, <-last)
	require.Equal(t, int32(2), commits.Load(), "everything queued behind the first commit went in one")
	_, v0, ok := readKey(t, db, "k0")
	require.True(t, ok)
	for i := range n {
		require.NoError(t, errs[i])
		val, ver, ok := readKey(t, db, fmt.Sprintf("k%d", i))
		require.True(t, ok)
		require.Equal(t, fmt.Sprintf("v%d", i), val)
		require.Equal(t, v0, ver, "one commit, one version")
	}
	val, _, _ := readKey(t, db, "same")
	require.Equal(t, "new", val, "the later write of a key wins")
}

// TestGroupCommitterFailures: a failed commit fails every write of its
// group and writes nothing; a group too big for one transaction is
// committed write by write, so only the write too big on its own fails.
func TestGroupCommitterFailures(t *testing.T) {
	t.Parallel()
	db := openTestBadger(t)
	fail := errors.New("injected")
	var failing atomic.Bool
	failing.Store(true)
	g := &Committer{db: db, beforeCommit: func() error {
		if failing.Load() {
			return fail
		}
		return nil
	}}
	require.ErrorIs(t, g.Write(Op{Key: []byte("a"), Value: []byte("1")}), fail)
	_, _, ok := readKey(t, db, "a")
	require.False(t, ok, "nothing written")
	failing.Store(false)

	// One write too big alone, queued between two small ones.
	big := make([]Op, 0, 200_000)
	for i := range cap(big) {
		big = append(big, Op{Key: fmt.Appendf(nil, "big%07d", i), Value: make([]byte, 64)})
	}
	q := []*metaWrite{
		{ops: []Op{{Key: []byte("b"), Value: []byte("2")}}},
		{ops: big},
		{ops: []Op{{Key: []byte("c"), Value: []byte("3")}, {Key: []byte("b"), Del: true}}},
	}
	errs := g.commit(q)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], badger.ErrTxnTooBig)
	require.NoError(t, errs[2])
	_, _, ok = readKey(t, db, "b")
	require.False(t, ok, "deleted by the write after it")
	val, _, _ := readKey(t, db, "c")
	require.Equal(t, "3", val)
	_, _, ok = readKey(t, db, "big0000000")
	require.False(t, ok)
}
