package broker

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Incremental fetch sessions (KIP-227). A session remembers, per
// partition, the fetch position and what the client was last told, so an
// incremental fetch names only what changed and an incremental response
// lists only partitions with news (records, an error, or a moved high
// watermark or log start offset).
//
// Epoch rules (FetchRequest SessionID, SessionEpoch):
//
//	id 0,  epoch -1  sessionless full fetch
//	id 0,  epoch 0   open a new session from the request's partitions
//	id X,  epoch 0   close X, open a new one
//	id X,  epoch -1  close X, sessionless full fetch
//	id X,  epoch N>0 incremental: X unknown -> FETCH_SESSION_ID_NOT_FOUND,
//	                 N != expected -> INVALID_FETCH_SESSION_EPOCH
//
// The expected epoch advances after every incremental fetch and wraps
// from MaxInt32 to 1.

type tpKey struct {
	topic     string
	partition int32
}

type sessionPart struct {
	topic     string
	topicID   [16]byte
	partition int32
	offset    int64
	maxBytes  int32
	// What the client last saw; -2 forces the partition into the next
	// response (new partitions).
	lastHW, lastLogStart int64
	lastErr              int16
}

type fetchSession struct {
	id       int32
	mu       sync.Mutex // held while a fetch uses the session
	epoch    int32      // next expected epoch
	parts    map[tpKey]*sessionPart
	order    []tpKey // iteration order, rotated for fairness
	lastUsed time.Time
}

func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// rotate moves the first n keys to the end so that partitions that
// could not be served because of MaxBytes go first next time.
func (s *fetchSession) rotate(n int) {
	if n <= 0 || n >= len(s.order) {
		return
	}
	s.order = append(s.order[n:], s.order[:n]...)
}

func (s *fetchSession) remove(k tpKey) {
	if _, ok := s.parts[k]; !ok {
		return
	}
	delete(s.parts, k)
	for i, o := range s.order {
		if o == k {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}

func (s *fetchSession) upsert(sp *sessionPart) {
	k := tpKey{sp.topic, sp.partition}
	if old, ok := s.parts[k]; ok {
		old.offset, old.maxBytes = sp.offset, sp.maxBytes
		if sp.topicID != [16]byte{} {
			old.topicID = sp.topicID
		}
		return
	}
	sp.lastHW, sp.lastLogStart, sp.lastErr = -2, -2, -2
	s.parts[k] = sp
	s.order = append(s.order, k)
}

// fetchSessionCache holds sessions by id. Bounded: when full, the least
// recently used session idle for over evictAfter is evicted; if none is,
// the client is served sessionless (id 0), as Kafka does.
type fetchSessionCache struct {
	max        int
	evictAfter time.Duration
	mu         sync.Mutex
	sessions   map[int32]*fetchSession
}

func newFetchSessionCache(max int) *fetchSessionCache {
	return &fetchSessionCache{max: max, evictAfter: 30 * time.Second, sessions: map[int32]*fetchSession{}}
}

func (c *fetchSessionCache) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

func (c *fetchSessionCache) remove(id int32) {
	c.mu.Lock()
	delete(c.sessions, id)
	c.mu.Unlock()
}

// create returns a new empty session, or nil when the cache is full.
func (c *fetchSessionCache) create(now time.Time) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= c.max {
		var lru *fetchSession
		for _, s := range c.sessions {
			if lru == nil || s.lastUsed.Before(lru.lastUsed) {
				lru = s
			}
		}
		if lru == nil || now.Sub(lru.lastUsed) < c.evictAfter {
			return nil
		}
		delete(c.sessions, lru.id)
	}
	for {
		id := rand.Int32N(math.MaxInt32-1) + 1
		if _, ok := c.sessions[id]; ok {
			continue
		}
		s := &fetchSession{id: id, epoch: 1, parts: map[tpKey]*sessionPart{}, lastUsed: now}
		c.sessions[id] = s
		return s
	}
}

func (c *fetchSessionCache) touch(s *fetchSession, now time.Time) {
	c.mu.Lock()
	s.lastUsed = now
	c.mu.Unlock()
}
