package broker

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// syncer makes appended records durable and moves high watermarks.
//
// Under FsyncAlways, producers append, mark their partition dirty and wait
// for a durability ticket. The syncer loop takes every dirty partition at
// once, fsyncs them in parallel, advances each high watermark to what is
// now durable, wakes fetchers, and completes the tickets: one fsync per
// partition serves every request that arrived while the previous round
// ran (group commit). Under FsyncInterval the high watermark moves at
// append time and the loop fsyncs dirty partitions every FlushInterval.
//
// A failed fsync leaves the log sticky-failed (log package contract):
// waiters get the error, and later appends to that partition fail.
type syncer struct {
	b    *Broker
	kick chan struct{}

	mu struct {
		sync.Mutex
		dirty   map[*partition]struct{}
		waiters []syncWaiter
	}
}

type syncWaiter struct {
	p      *partition
	offset int64 // wait until durable end > offset
	done   chan error
}

func newSyncer(b *Broker) *syncer {
	s := &syncer{b: b, kick: make(chan struct{}, 1)}
	s.mu.dirty = map[*partition]struct{}{}
	return s
}

// appended records that p has new data ending before end (exclusive). It
// returns a channel that receives nil once [.., end) is durable, or the
// error that prevented it; with wait false it returns nil.
func (s *syncer) appended(p *partition, end int64, wait bool) <-chan error {
	if s.b.cfg.Fsync == FsyncInterval {
		p.log.SetHighWatermark(end)
		p.notify()
		s.mu.Lock()
		s.mu.dirty[p] = struct{}{}
		s.mu.Unlock()
		return nil
	}
	var ch chan error
	s.mu.Lock()
	s.mu.dirty[p] = struct{}{}
	if wait {
		ch = make(chan error, 1)
		s.mu.waiters = append(s.mu.waiters, syncWaiter{p: p, offset: end - 1, done: ch})
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return ch
}

func (s *syncer) run() {
	var tick <-chan time.Time
	if s.b.cfg.Fsync == FsyncInterval {
		t := time.NewTicker(s.b.cfg.FlushInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-s.kick:
		case <-tick:
		case <-s.b.syncStop:
			// Every connection has finished: a final round completes the
			// last waiters; Close then closes (and fsyncs) every log.
			s.round()
			return
		}
		s.round()
	}
}

// round fsyncs every dirty partition and completes waiters.
func (s *syncer) round() {
	s.mu.Lock()
	dirty := s.mu.dirty
	waiters := s.mu.waiters
	s.mu.dirty = make(map[*partition]struct{}, len(dirty))
	s.mu.waiters = nil
	s.mu.Unlock()
	if len(dirty) == 0 {
		return
	}
	type result struct {
		end int64
		err error
	}
	results := make(map[*partition]result, len(dirty))
	var rmu sync.Mutex
	var wg sync.WaitGroup
	for p := range dirty {
		wg.Add(1)
		go func() {
			defer wg.Done()
			end, err := p.log.Sync()
			if err != nil {
				s.b.lg.Error("fsync failed; partition stops accepting writes", zap.String("topic", p.topic), zap.Int32("partition", p.index), zap.Error(err))
			} else if s.b.cfg.Fsync == FsyncAlways {
				p.log.SetHighWatermark(end)
				p.notify()
			}
			rmu.Lock()
			results[p] = result{end, err}
			rmu.Unlock()
		}()
	}
	wg.Wait()
	for _, w := range waiters {
		r := results[w.p]
		switch {
		case r.err != nil:
			w.done <- r.err
		case r.end > w.offset:
			w.done <- nil
		default:
			// Cannot happen: a waiter is registered after its append and
			// the sync captured the end after that. Requeue defensively.
			s.mu.Lock()
			s.mu.dirty[w.p] = struct{}{}
			s.mu.waiters = append(s.mu.waiters, w)
			s.mu.Unlock()
			select {
			case s.kick <- struct{}{}:
			default:
			}
		}
	}
}
