package topics

import (
	"crypto/rand"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/metrics"
	slog "github.com/shoal-mq/shoal/log"
)

// Partition is one topic partition: its log plus the long-poll waiters
// woken when its high watermark moves. The log is safe for concurrent
// use; waiters are guarded by mu.
type Partition struct {
	// Topic, Index and Log never change once the partition is open.
	Topic string
	Index int32
	Log   *slog.Partition
	// M are the topic's metric children (package metrics), shared by its
	// partitions; resolved when the partition is opened.
	M *metrics.Topic

	mu struct {
		sync.Mutex
		waiters map[chan struct{}]struct{}
	}
}

// Watch registers ch to be signalled (non-blocking send) on the next
// high watermark move. The caller must unwatch.
func (p *Partition) Watch(ch chan struct{}) {
	p.mu.Lock()
	if p.mu.waiters == nil {
		p.mu.waiters = make(map[chan struct{}]struct{})
	}
	p.mu.waiters[ch] = struct{}{}
	p.mu.Unlock()
}

// Unwatch removes ch from the waiters.
func (p *Partition) Unwatch(ch chan struct{}) {
	p.mu.Lock()
	delete(p.mu.waiters, ch)
	p.mu.Unlock()
}

// Notify wakes every waiter.
func (p *Partition) Notify() {
	p.mu.Lock()
	for ch := range p.mu.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
}

// Topic is a topic and its partitions. Name and ID never change;
// partitions only grow (CreatePartitions) and configs change through
// AlterConfigs, both under Registry.mu: read them with Registry.Snapshot,
// PartitionCount and Override.
type Topic struct {
	Name       string
	ID         [16]byte
	configs    map[string]string // explicit topic overrides
	partitions []*Partition
	// replicated: a cluster topic (Admin.Adopt), its partitions written
	// by their raft groups.
	replicated bool
}

func (t *Topic) record() record {
	return record{Name: t.Name, ID: t.ID, Partitions: int32(len(t.partitions)), Configs: t.configs}
}

// Registry is the set of topics, looked up by name or id on every
// request. Its mu is taken before a Partition's mu and never held during
// I/O; the changes (Admin) take it only to swap what they have built.
type Registry struct {
	mu struct {
		sync.RWMutex
		byName map[string]*Topic
		byID   map[[16]byte]*Topic
	}
}

// NewRegistry returns an empty registry (Admin.Load fills it).
func NewRegistry() *Registry {
	r := &Registry{}
	r.mu.byName = map[string]*Topic{}
	r.mu.byID = map[[16]byte]*Topic{}
	return r
}

// Get returns the topic called name, or nil.
func (r *Registry) Get(name string) *Topic {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.byName[name]
}

// GetID returns the topic of id, or nil.
func (r *Registry) GetID(id [16]byte) *Topic {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.byID[id]
}

// Partition returns partition idx of topic name, or nil.
func (r *Registry) Partition(name string, idx int32) *Partition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t := r.mu.byName[name]
	if t == nil || idx < 0 || int(idx) >= len(t.partitions) {
		return nil
	}
	return t.partitions[idx]
}

// All returns the topics sorted by nothing in particular; callers sort.
func (r *Registry) All() []*Topic {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Topic, 0, len(r.mu.byName))
	for _, t := range r.mu.byName {
		out = append(out, t)
	}
	return out
}

// Snapshot returns a copy of a topic's mutable fields under the lock:
// its partitions hosted here, in index order (every partition on a
// single node; see Admin.Adopt for a cluster), and its config overrides.
// PartitionCount is the number of partitions.
func (r *Registry) Snapshot(t *Topic) (parts []*Partition, configs map[string]string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	parts = make([]*Partition, 0, len(t.partitions))
	for _, p := range t.partitions {
		if p != nil { // a cluster partition another broker hosts (Admin.Adopt)
			parts = append(parts, p)
		}
	}
	configs = make(map[string]string, len(t.configs))
	for k, v := range t.configs {
		configs[k] = v
	}
	return parts, configs
}

// PartitionOf returns partition idx of t, nil if t is nil or has no
// such partition (looked up by t's name, as Partition does).
func (r *Registry) PartitionOf(t *Topic, idx int32) *Partition {
	if t == nil {
		return nil
	}
	return r.Partition(t.Name, idx)
}

// PartitionByID resolves a topic id and partition index.
func (r *Registry) PartitionByID(id [16]byte, idx int32) (*Topic, *Partition, int16) {
	t := r.GetID(id)
	if t == nil {
		return nil, nil, kerr.UnknownTopicID.Code
	}
	p := r.Partition(t.Name, idx)
	if p == nil {
		return t, nil, kerr.UnknownTopicOrPartition.Code
	}
	return t, p, 0
}

// HasPartition reports whether topic name has partition idx, hosted
// here or, in a cluster, on other brokers only (Partition is nil then).
func (r *Registry) HasPartition(name string, idx int32) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t := r.mu.byName[name]
	return t != nil && idx >= 0 && int(idx) < len(t.partitions)
}

// PartitionCount returns the number of partitions of t.
func (r *Registry) PartitionCount(t *Topic) int32 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return int32(len(t.partitions))
}

// MetadataTopic is Kafka's metadata topic, which no topic may be
// (Reserved; a cluster's metadata group has its name).
const MetadataTopic = "__cluster_metadata"

// Reserved refuses to create Kafka's metadata topic, as Kafka does:
// INVALID_REQUEST "Creation of internal topic __cluster_metadata is
// prohibited." Admin.Create and a cluster's topic creation check it.
func Reserved(name string) error {
	if name == MetadataTopic {
		return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Creation of internal topic %s is prohibited.", name)
	}
	return nil
}

// ValidName applies Kafka's rules: 1..249 chars of [a-zA-Z0-9._-],
// not "." or "..".
func ValidName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("%w: %q", kafkaerr.ErrInvalidTopic, name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q contains %q", kafkaerr.ErrInvalidTopic, name, c)
		}
	}
	return nil
}

// newID returns a random topic id, never the zero id (Kafka's "no id").
func newID() [16]byte {
	var id [16]byte
	for {
		if _, err := rand.Read(id[:]); err != nil {
			panic(err) // crypto/rand never fails on Linux
		}
		if id != [16]byte{} {
			return id
		}
	}
}

// Override returns t's explicit override of config name, "" if none
// (no broker default stands behind it).
func (r *Registry) Override(t *Topic, name string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return t.configs[name]
}
