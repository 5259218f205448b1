package sqs

import "sync"

// maxFirstReceives bounds firstReceives: the most recent first receives
// are remembered (about 64 bytes each), older ones forgotten.
const maxFirstReceives = 1 << 18

// firstReceives remembers when messages were first received, for
// ApproximateFirstReceiveTimestamp on their later receives. In memory
// only: a message first received before a restart has none afterwards
// (the share group's state keeps delivery counts, not times), nor one
// past the bound.
type firstReceives struct {
	mu   sync.Mutex
	at   map[msgKey]int64
	ring []msgKey // insertion order; the oldest is overwritten
	next int
}

// msgKey is a message: where its record is.
type msgKey struct {
	topic     [16]byte
	partition int32
	offset    int64
}

// first returns when k was first received, recording now if it is the
// first receive (first true): the record's first delivery.
func (f *firstReceives) first(k msgKey, now int64, first bool) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !first {
		at, ok := f.at[k]
		return at, ok
	}
	if f.at == nil {
		f.at = map[msgKey]int64{}
	}
	if _, ok := f.at[k]; !ok {
		if len(f.ring) < maxFirstReceives {
			f.ring = append(f.ring, k)
		} else {
			delete(f.at, f.ring[f.next])
			f.ring[f.next] = k
			f.next = (f.next + 1) % maxFirstReceives
		}
	}
	f.at[k] = now
	return now, true
}

// forget drops deleted messages (their ring slots are reused in turn).
func (f *firstReceives) forget(ks []msgKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range ks {
		delete(f.at, k)
	}
}
