package txn

import (
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
)

// Transaction timeouts and transactional-id expiry (doc.go has the
// model and locks).

// ExpireLoop aborts timed-out transactions, retries unfinished
// completions and removes expired transactional ids.
func (c *Coordinator) ExpireLoop() {
	tk := time.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	// As Kafka's scheduler, the first pass comes one interval after
	// start, not at once.
	lastAbort, lastRemove := time.Now(), time.Now()
	for {
		select {
		case <-c.o.Done:
			return
		case now := <-tk.C:
			if now.Sub(lastAbort) >= time.Duration(c.o.Setting("transaction.abort.timed.out.transaction.cleanup.interval.ms"))*time.Millisecond {
				lastAbort = now
				c.abortTimedOut(now)
			}
			if now.Sub(lastRemove) >= time.Duration(c.o.Setting("transaction.remove.expired.transaction.cleanup.interval.ms"))*time.Millisecond {
				lastRemove = now
				c.removeExpired(now)
			}
		}
	}
}

func (c *Coordinator) abortTimedOut(now time.Time) {
	for _, t := range c.all() {
		t.mu.Lock()
		switch t.mu.State {
		case Ongoing:
			if t.mu.StartMs >= 0 && now.UnixMilli()-t.mu.StartMs > int64(t.mu.TimeoutMs) {
				c.lg.Info("aborting a transaction open longer than its timeout", zap.String("transactional_id", t.id),
					zap.Int64("producer_id", t.mu.ProducerID), zap.Int16("epoch", t.mu.Epoch), zap.Int32("timeout_ms", t.mu.TimeoutMs))
				if err := c.abortFencingLocked(t, now); err != nil {
					c.lg.Warn("aborting a timed-out transaction failed", zap.String("transactional_id", t.id), zap.Error(err))
				}
			}
		case PrepareCommit, PrepareAbort:
			if err := c.completeLocked(t, now); err != nil {
				c.lg.Warn("completing a transaction failed; retrying later", zap.String("transactional_id", t.id), zap.Error(err))
			}
		}
		if cmp := t.mu.completing; cmp != nil && closed(cmp.done) {
			if err := c.settleLocked(t, now); err != nil {
				c.lg.Warn("completing a transaction failed; retrying later", zap.String("transactional_id", t.id), zap.Error(err))
			}
		}
		t.mu.Unlock()
	}
}

func (c *Coordinator) removeExpired(now time.Time) {
	exp := c.o.Setting("transactional.id.expiration.ms")
	for _, t := range c.all() {
		t.mu.Lock()
		if cmp := t.mu.completing; cmp != nil && closed(cmp.done) && cmp.err == nil {
			t.mu.completing = nil
		}
		st := t.mu.State
		if (st == Empty || st == CompleteCommit || st == CompleteAbort) && t.mu.completing == nil && now.UnixMilli()-t.mu.UpdateMs > exp {
			err := c.o.Store.DB().Update(func(btx *badger.Txn) error { return btx.Delete(Key(t.id)) })
			if err != nil {
				c.lg.Warn("removing an expired transactional id failed", zap.String("transactional_id", t.id), zap.Error(err))
			} else {
				t.mu.removed = true
				t.mu.State = Dead
				c.mu.Lock()
				if c.mu.txns[t.id] == t {
					delete(c.mu.txns, t.id)
				}
				c.mu.Unlock()
				c.lg.Info("transactional id expired", zap.String("transactional_id", t.id))
			}
		}
		t.mu.Unlock()
	}
}
