package topics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Syncer makes appended records durable and moves high watermarks.
//
// Under FsyncAlways each partition commits on its own: an append marks the
// partition dirty and, if no fsync of that partition is running, starts a
// sync loop for it. The loop fsyncs, advances the high watermark to what
// is now durable, wakes fetchers and completes every waiter covered, then
// runs again while appends arrived meanwhile: one fsync serves every
// request that arrived during the previous one (group commit). Partitions
// do not wait for each other's fsyncs, so one slow partition does not
// delay acknowledgements on the others.
//
// Under FsyncInterval the high watermark moves at append time and a
// partition is fsynced once its oldest unsynced append is FlushInterval
// old, or sooner as its topic's flush.ms (Kafka: "the maximum time that a
// message in any topic is kept in memory before flushed to disk") or
// flush.messages (fsync after that many unsynced records, at the append
// that reaches it) ask; both are topic configs with the dynamic broker
// defaults log.flush.interval.ms and log.flush.interval.messages, so
// changing them takes effect at the next append or check. The run loop
// checks every min(FlushInterval, flushCheck). Under FsyncAlways both are
// met by construction: nothing is acknowledged or visible unsynced.
//
// A failed fsync leaves the log sticky-failed (log package contract):
// waiters get the error, and later appends to that partition fail.
type Syncer struct {
	o SyncOptions

	mu struct {
		sync.Mutex
		parts map[*Partition]*partSync
		// stopping: shutdown began; lazy starts are immediate.
		stopping bool
		// active counts running sync loops and pending lazy starts; idle
		// is broadcast when it drops to zero. (Not a WaitGroup: a
		// background transaction abort or dead-letter write may start a
		// loop while run waits at shutdown.)
		active int
		idle   sync.Cond
	}
}

// partSync is one partition's pending durability work, guarded by
// syncer.mu.
type partSync struct {
	dirty   bool // appended since the running fsync captured its end
	running bool // a sync loop owns this partition
	waiters []syncWaiter
	// FsyncInterval: when the partition became dirty and the first
	// offset appended since (flush.ms, flush.messages).
	since time.Time
	from  int64
	// lazy is a pending deferred start (appendedLazy): only while no
	// loop runs.
	lazy *time.Timer
}

// flushCheck bounds the period of the FsyncInterval checks, so a flush.ms
// below FlushInterval is honoured within this much.
const flushCheck = 100 * time.Millisecond

type syncWaiter struct {
	offset int64 // wait until durable end > offset
	done   chan error
}

// SyncOptions are what a Syncer needs, given once.
type SyncOptions struct {
	// Always is the broker's fsync policy "always" (FsyncAlways);
	// false is "interval" (FsyncInterval), flushing every FlushInterval.
	Always        bool
	FlushInterval time.Duration
	// FsyncSeconds observes each fsync's latency.
	FsyncSeconds prometheus.Histogram
	Logger       *zap.Logger
	// Stop, once closed, makes Run flush what is dirty and return when
	// the last sync loop is done.
	Stop <-chan struct{}
}

// NewSyncer returns a syncer; Run drives it.
func NewSyncer(o SyncOptions) *Syncer {
	s := &Syncer{o: o}
	s.mu.parts = map[*Partition]*partSync{}
	s.mu.idle.L = &s.mu.Mutex
	return s
}

// partLocked returns p's pending work, creating it. s.mu held.
func (s *Syncer) partLocked(p *Partition) *partSync {
	ps := s.mu.parts[p]
	if ps == nil {
		ps = &partSync{}
		s.mu.parts[p] = ps
	}
	return ps
}

// Appended records that p has new data [first, end). It returns a
// channel that receives nil once [.., end) is durable, or the error that
// prevented it; with wait false it returns nil.
func (s *Syncer) Appended(p *Partition, first, end int64, wait bool) <-chan error {
	if !s.o.Always {
		p.Log.SetHighWatermark(end)
		p.Notify()
		s.appendedInterval(p, first, end)
		return nil
	}
	var ch chan error
	s.mu.Lock()
	ps := s.partLocked(p)
	ps.dirty = true
	if wait && s.o.Always {
		ch = make(chan error, 1)
		ps.waiters = append(ps.waiters, syncWaiter{offset: end - 1, done: ch})
	}
	if s.o.Always && !ps.running {
		s.startLocked(p, ps)
	}
	s.mu.Unlock()
	return ch
}

// AppendedLazy is appended(p, first, end, true) for records whose
// durability nobody is waiting on yet (a v5 transaction's markers): if
// no fsync of p is running, theirs starts after delay, or sooner with
// the next append's, which then covers them; so they do not cost a
// busy partition an fsync of their own for the next batches to queue
// behind. Shutdown starts pending ones at once (run).
func (s *Syncer) AppendedLazy(p *Partition, first, end int64, delay time.Duration) <-chan error {
	if delay <= 0 || !s.o.Always {
		return s.Appended(p, first, end, true)
	}
	ch := make(chan error, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.partLocked(p)
	ps.dirty = true
	ps.waiters = append(ps.waiters, syncWaiter{offset: end - 1, done: ch})
	if ps.running || ps.lazy != nil {
		return ch
	}
	if s.mu.stopping {
		s.startLocked(p, ps)
		return ch
	}
	s.mu.active++
	var tm *time.Timer
	tm = time.AfterFunc(delay, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if ps := s.mu.parts[p]; ps != nil && ps.lazy == tm {
			ps.lazy = nil
			s.startLocked(p, ps)
		}
		s.doneLocked()
	})
	ps.lazy = tm // before the timer can take s.mu
	return ch
}

// Hurry starts p's pending lazy fsync (appendedLazy) now: someone
// waits for it.
func (s *Syncer) Hurry(p *Partition) {
	s.mu.Lock()
	if ps := s.mu.parts[p]; ps != nil && ps.lazy != nil {
		s.startLocked(p, ps)
	}
	s.mu.Unlock()
}

// startLocked starts p's sync loop, cancelling a pending lazy start.
// s.mu held; no loop is running.
func (s *Syncer) startLocked(p *Partition, ps *partSync) {
	if ps.lazy != nil {
		if ps.lazy.Stop() {
			s.doneLocked() // its func will not run
		}
		ps.lazy = nil
	}
	ps.running = true
	s.mu.active++
	go s.loop(p)
}

// doneLocked ends one loop or lazy start. s.mu held.
func (s *Syncer) doneLocked() {
	if s.mu.active--; s.mu.active == 0 {
		s.mu.idle.Broadcast()
	}
}

// done is doneLocked taking s.mu.
func (s *Syncer) done() {
	s.mu.Lock()
	s.doneLocked()
	s.mu.Unlock()
}

// loop fsyncs p until no append is left unsynced (FsyncAlways).
func (s *Syncer) loop(p *Partition) {
	defer s.done()
	for {
		s.mu.Lock()
		ps := s.mu.parts[p]
		if !ps.dirty && len(ps.waiters) == 0 {
			ps.running = false
			delete(s.mu.parts, p)
			s.mu.Unlock()
			return
		}
		ps.dirty = false
		waiters := ps.waiters
		ps.waiters = nil
		s.mu.Unlock()

		end, err := s.syncOne(p)
		var again []syncWaiter
		for _, w := range waiters {
			switch {
			case err != nil:
				w.done <- err
			case end > w.offset:
				w.done <- nil
			default:
				// Cannot happen: a waiter is registered after its append
				// and Sync captures the end after that. Keep it for the
				// next pass rather than answer early.
				again = append(again, w)
			}
		}
		if len(again) > 0 {
			s.mu.Lock()
			ps.dirty = true
			ps.waiters = append(again, ps.waiters...)
			s.mu.Unlock()
		}
	}
}

// syncOne fsyncs p and, under FsyncAlways, moves its high watermark.
func (s *Syncer) syncOne(p *Partition) (int64, error) {
	began := time.Now()
	end, err := p.Log.Sync()
	s.o.FsyncSeconds.Observe(time.Since(began).Seconds())
	if err != nil {
		s.o.Logger.Error("fsync failed; partition stops accepting writes", zap.String("topic", p.Topic), zap.Int32("partition", p.Index), zap.Error(err))
		return end, err
	}
	if s.o.Always {
		p.Log.SetHighWatermark(end)
		p.Notify()
	}
	return end, nil
}

// appendedInterval marks p dirty under FsyncInterval and starts its
// fsync at once when flush.messages unsynced records are reached.
func (s *Syncer) appendedInterval(p *Partition, first, end int64) {
	flushMessages := p.Log.Config().FlushMessages
	s.mu.Lock()
	ps := s.partLocked(p)
	if !ps.dirty {
		ps.dirty, ps.since, ps.from = true, time.Now(), first
	}
	start := flushMessages > 0 && end-ps.from >= flushMessages && !ps.running
	if start {
		ps.running = true
		s.mu.active++
	}
	s.mu.Unlock()
	if start {
		go s.syncInterval(p)
	}
}

// syncInterval fsyncs p once (FsyncInterval); appends during the fsync
// leave p dirty for the next check.
func (s *Syncer) syncInterval(p *Partition) {
	defer s.done()
	s.mu.Lock()
	ps := s.mu.parts[p]
	ps.dirty = false
	s.mu.Unlock()
	s.syncOne(p)
	s.mu.Lock()
	ps.running = false
	if !ps.dirty {
		delete(s.mu.parts, p)
	}
	s.mu.Unlock()
}

// flushDue starts the fsync of every dirty partition whose oldest
// unsynced append is older than FlushInterval or its flush.ms
// (FsyncInterval).
func (s *Syncer) flushDue(now time.Time) {
	s.mu.Lock()
	var due []*Partition
	for p, ps := range s.mu.parts {
		if !ps.dirty || ps.running {
			continue
		}
		limit := s.o.FlushInterval
		if ms := p.Log.Config().FlushMs; ms >= 0 && ms < limit.Milliseconds() {
			limit = time.Duration(ms) * time.Millisecond
		}
		if now.Sub(ps.since) >= limit {
			ps.running = true
			s.mu.active++
			due = append(due, p)
		}
	}
	s.mu.Unlock()
	for _, p := range due {
		go s.syncInterval(p)
	}
}

// Run drives FsyncInterval flushes and, at shutdown, waits for the
// per-partition loops. Close stops it (syncStop) only after every
// connection has finished, so no produce waits for an fsync that never
// comes.
func (s *Syncer) Run() {
	var tick <-chan time.Time
	if !s.o.Always {
		t := time.NewTicker(min(s.o.FlushInterval, flushCheck))
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case now := <-tick:
			s.flushDue(now)
		case <-s.o.Stop:
			s.mu.Lock()
			s.mu.stopping = true
			for p, ps := range s.mu.parts {
				if ps.lazy != nil {
					s.startLocked(p, ps)
				}
			}
			for s.mu.active > 0 {
				s.mu.idle.Wait()
			}
			s.mu.Unlock()
			if !s.o.Always {
				s.flushDirty()
			}
			return
		}
	}
}

// flushDirty fsyncs every dirty partition in parallel (FsyncInterval).
func (s *Syncer) flushDirty() {
	s.mu.Lock()
	var dirty []*Partition
	for p := range s.mu.parts {
		dirty = append(dirty, p)
	}
	clear(s.mu.parts)
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range dirty {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.syncOne(p)
		}()
	}
	wg.Wait()
}
