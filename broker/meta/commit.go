package meta

import (
	"errors"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// Op is one key's write in a group commit: a set, or a delete.
type Op struct {
	Key, Value []byte
	Del        bool
}

// metaWrite is one caller's writes waiting for their group commit; done
// gets the commit's outcome.
type metaWrite struct {
	ops  []Op
	done func(error)
}

// Committer makes concurrent small writes to the metadata store
// share one badger commit. Badger syncs its WAL once per write request
// even when its writer batches requests, so N concurrent SyncWrites
// updates cost N syncs in a row; the transaction coordinator's writes
// (four producers' decisions and completions at once under load) queued
// behind each other's syncs (sharegroup/store does the same for share
// state). A commit loop takes every write queued while the previous
// commit ran and commits them as one transaction, in queue order, so a
// later write of a key replaces an earlier one and a write is never
// overtaken by one queued after it. Every write of a group gets the same
// badger version.
type Committer struct {
	db *badger.DB

	mu      sync.Mutex // guards the fields below; never held during a commit
	queue   []*metaWrite
	running bool
	// beforeCommit, for fault-injection tests, runs (outside mu) before
	// each group commit; an error fails the group's writes (nothing is
	// written).
	beforeCommit func() error
}

// Write commits ops durably and returns once they are (or why not).
func (g *Committer) Write(ops ...Op) error {
	ch := make(chan error, 1)
	g.WriteAsync(ops, func(err error) { ch <- err })
	return <-ch
}

// SetBeforeCommit sets a fault-injection hook for tests: fn runs before
// each group commit, and an error fails the group's writes (nothing is
// written). Set it before the writes it is to fail.
func (g *Committer) SetBeforeCommit(fn func() error) {
	g.mu.Lock()
	g.beforeCommit = fn
	g.mu.Unlock()
}

// WriteAsync queues ops and returns; done runs, on the commit loop's
// goroutine, once they are durable or failed. done must not block on
// another write.
func (g *Committer) WriteAsync(ops []Op, done func(error)) {
	g.mu.Lock()
	g.queue = append(g.queue, &metaWrite{ops: ops, done: done})
	start := !g.running
	g.running = true
	g.mu.Unlock()
	if start {
		go g.loop()
	}
}

// loop commits queued writes until the queue is empty.
func (g *Committer) loop() {
	for {
		g.mu.Lock()
		q := g.queue
		g.queue = nil
		if len(q) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		errs := g.safeCommit(q)
		for i, w := range q {
			w.done(errs[i])
		}
	}
}

// safeCommit is commit turning a panic (a bug, in badger or here) into
// an error for every write of q.
func (g *Committer) safeCommit(q []*metaWrite) (errs []error) {
	defer func() {
		if r := recover(); r != nil {
			err := fmt.Errorf("metadata write panicked: %v", r)
			errs = make([]error, len(q))
			for i := range errs {
				errs[i] = err
			}
		}
	}()
	return g.commit(q)
}

// commit writes q in one transaction. If the group is too big for one,
// each write is committed alone, in order (each still atomic). A failed
// commit fails every write of its group: what it wrote is unknown, as
// with any failed badger commit.
func (g *Committer) commit(q []*metaWrite) []error {
	errs := make([]error, len(q))
	g.mu.Lock()
	before := g.beforeCommit
	g.mu.Unlock()
	if before != nil {
		if err := before(); err != nil {
			for i := range errs {
				errs[i] = err
			}
			return errs
		}
	}
	err := g.update(q)
	if !errors.Is(err, badger.ErrTxnTooBig) || len(q) == 1 {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for i := range q {
		errs[i] = g.update(q[i : i+1])
	}
	return errs
}

// update commits the writes of q in one badger transaction.
func (g *Committer) update(q []*metaWrite) error {
	return g.db.Update(func(btx *badger.Txn) error {
		for _, w := range q {
			for _, op := range w.ops {
				var err error
				if op.Del {
					err = btx.Delete(op.Key)
				} else {
					err = btx.Set(op.Key, op.Value)
				}
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
}
