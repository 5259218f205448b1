package broker

import (
	"errors"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// metaOp is one key's write in a group commit: a set, or a delete.
type metaOp struct {
	key, value []byte
	del        bool
}

// metaWrite is one caller's writes waiting for their group commit; done
// gets the commit's outcome.
type metaWrite struct {
	ops  []metaOp
	done func(error)
}

// groupCommitter makes concurrent small writes to the metadata store
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
type groupCommitter struct {
	db *badger.DB
	// beforeCommit, for fault-injection tests, runs before each group
	// commit; an error fails the group's writes (nothing is written).
	beforeCommit func() error

	mu      sync.Mutex
	queue   []*metaWrite
	running bool
}

// write commits ops durably and returns once they are (or why not).
func (g *groupCommitter) write(ops ...metaOp) error {
	ch := make(chan error, 1)
	g.writeAsync(ops, func(err error) { ch <- err })
	return <-ch
}

// writeAsync queues ops and returns; done runs, on the commit loop's
// goroutine, once they are durable or failed. done must not block on
// another write.
func (g *groupCommitter) writeAsync(ops []metaOp, done func(error)) {
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
func (g *groupCommitter) loop() {
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
func (g *groupCommitter) safeCommit(q []*metaWrite) (errs []error) {
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
func (g *groupCommitter) commit(q []*metaWrite) []error {
	errs := make([]error, len(q))
	if g.beforeCommit != nil {
		if err := g.beforeCommit(); err != nil {
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
func (g *groupCommitter) update(q []*metaWrite) error {
	return g.db.Update(func(btx *badger.Txn) error {
		for _, w := range q {
			for _, op := range w.ops {
				var err error
				if op.del {
					err = btx.Delete(op.key)
				} else {
					err = btx.Set(op.key, op.value)
				}
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
}
