package broker

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/metrics"
	slog "github.com/shoal-mq/shoal/log"
	"github.com/twmb/franz-go/pkg/kerr"
)

// partition is one topic partition: its log plus the long-poll waiters
// woken when its high watermark moves. The log is safe for concurrent
// use; waiters are guarded by mu.
type partition struct {
	topic string
	index int32
	log   *slog.Partition
	// m are the topic's metric children (package metrics), shared by its
	// partitions; resolved when the partition is opened.
	m *metrics.Topic

	mu struct {
		sync.Mutex
		waiters map[chan struct{}]struct{}
	}
}

// watch registers ch to be signalled (non-blocking send) on the next
// high watermark move. The caller must unwatch.
func (p *partition) watch(ch chan struct{}) {
	p.mu.Lock()
	if p.mu.waiters == nil {
		p.mu.waiters = make(map[chan struct{}]struct{})
	}
	p.mu.waiters[ch] = struct{}{}
	p.mu.Unlock()
}

func (p *partition) unwatch(ch chan struct{}) {
	p.mu.Lock()
	delete(p.mu.waiters, ch)
	p.mu.Unlock()
}

// notify wakes every waiter.
func (p *partition) notify() {
	p.mu.Lock()
	for ch := range p.mu.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
}

// topic is a topic and its partitions. Name and id never change;
// partitions only grow (CreatePartitions) and configs change through
// AlterConfigs, both under topicRegistry.mu.
type topic struct {
	name       string
	id         [16]byte
	configs    map[string]string // explicit topic overrides
	partitions []*partition
}

func (t *topic) record() topicRecord {
	return topicRecord{Name: t.name, ID: t.id, Partitions: int32(len(t.partitions)), Configs: t.configs}
}

// topicRegistry owns the set of topics. Lock order: topicRegistry.mu
// before partition.mu. No disk I/O happens under mu except topic
// creation and deletion, which are rare admin operations serialised by
// adminMu instead.
type topicRegistry struct {
	mu struct {
		sync.RWMutex
		byName map[string]*topic
		byID   map[[16]byte]*topic
	}
}

func newTopicRegistry() *topicRegistry {
	r := &topicRegistry{}
	r.mu.byName = map[string]*topic{}
	r.mu.byID = map[[16]byte]*topic{}
	return r
}

func (r *topicRegistry) get(name string) *topic {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.byName[name]
}

func (r *topicRegistry) getID(id [16]byte) *topic {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.byID[id]
}

// partition returns the partition or nil.
func (r *topicRegistry) partition(name string, idx int32) *partition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t := r.mu.byName[name]
	if t == nil || idx < 0 || int(idx) >= len(t.partitions) {
		return nil
	}
	return t.partitions[idx]
}

// all returns the topics sorted by nothing in particular; callers sort.
func (r *topicRegistry) all() []*topic {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*topic, 0, len(r.mu.byName))
	for _, t := range r.mu.byName {
		out = append(out, t)
	}
	return out
}

// snapshot returns a copy of a topic's mutable fields under the lock.
func (r *topicRegistry) snapshot(t *topic) (parts []*partition, configs map[string]string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	parts = append([]*partition(nil), t.partitions...)
	configs = make(map[string]string, len(t.configs))
	for k, v := range t.configs {
		configs[k] = v
	}
	return parts, configs
}

// partitionOf returns partition idx of t, nil if t is nil or has no
// such partition (looked up by t's name, as partition does).
func (r *topicRegistry) partitionOf(t *topic, idx int32) *partition {
	if t == nil {
		return nil
	}
	return r.partition(t.name, idx)
}

// partitionByID resolves a topic id and partition index.
func (r *topicRegistry) partitionByID(id [16]byte, idx int32) (*topic, *partition, int16) {
	t := r.getID(id)
	if t == nil {
		return nil, nil, kerr.UnknownTopicID.Code
	}
	p := r.partition(t.name, idx)
	if p == nil {
		return t, nil, kerr.UnknownTopicOrPartition.Code
	}
	return t, p, 0
}

// partitionCount returns the number of partitions of t.
func (r *topicRegistry) partitionCount(t *topic) int32 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return int32(len(t.partitions))
}

// validTopicName applies Kafka's rules: 1..249 chars of [a-zA-Z0-9._-],
// not "." or "..".
func validTopicName(name string) error {
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

func newTopicID() [16]byte {
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

// partitionDir is where a partition's log lives: <data>/logs/<topic>-<n>,
// as in Kafka.
func (b *Broker) partitionDir(topicName string, idx int32) string {
	return filepath.Join(b.cfg.DataDir, "logs", topicName+"-"+strconv.Itoa(int(idx)))
}

// openPartition opens (recovering) or creates a partition log.
func (b *Broker) openPartition(t *topic, idx int32, configs map[string]string) (*partition, error) {
	lp, err := slog.Open(b.fs, b.partitionDir(t.name, idx), b.logConfig(configs), b.lg.Named("log").With(zap.String("topic", t.name), zap.Int32("partition", idx)))
	if err != nil {
		return nil, fmt.Errorf("broker: open %s-%d: %w", t.name, idx, err)
	}
	return &partition{topic: t.name, index: idx, log: lp, m: b.metrics.Topic(t.name)}, nil
}

// loadTopics opens every topic recorded in the metadata store and removes
// log directories that belong to no topic (left by a crash during topic
// deletion).
func (b *Broker) loadTopics() error {
	recs, err := b.meta.topics()
	if err != nil {
		return err
	}
	// Partitions recover in parallel: after a crash each re-reads the
	// unflushed tail of its newest segment, CPU (CRC) and disk bound.
	known := map[string]bool{}
	topics := make([]*topic, len(recs))
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		errs  []error
	)
	sem := make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))
	for ti, rec := range recs {
		t := &topic{name: rec.Name, id: rec.ID, configs: rec.Configs}
		if t.configs == nil {
			t.configs = map[string]string{}
		}
		t.partitions = make([]*partition, rec.Partitions)
		topics[ti] = t
		for i := int32(0); i < rec.Partitions; i++ {
			known[filepath.Base(b.partitionDir(t.name, i))] = true
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				p, err := b.openPartition(t, i, t.configs)
				if err != nil {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
					return
				}
				t.partitions[i] = p
			}()
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		for _, t := range topics {
			for _, p := range t.partitions {
				if p != nil {
					p.log.Close()
				}
			}
		}
		return errors.Join(errs...)
	}
	for _, t := range topics {
		b.topics.mu.byName[t.name] = t
		b.topics.mu.byID[t.id] = t
	}
	logs := filepath.Join(b.cfg.DataDir, "logs")
	entries, err := os.ReadDir(logs)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, e := range entries {
		if e.IsDir() && !known[e.Name()] && !strings.HasPrefix(e.Name(), ".") {
			b.lg.Warn("removing log directory of a deleted topic", zap.String("dir", e.Name()))
			if err := os.RemoveAll(filepath.Join(logs, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// createTopic validates, persists, then opens a new topic. configs must
// already be validated. adminMu serialises topic creation and deletion.
func (b *Broker) createTopic(name string, partitions int32, configs map[string]string, validateOnly bool) (*topic, error) {
	if err := validTopicName(name); err != nil {
		return nil, err
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.topics.get(name) != nil {
		return nil, kafkaerr.ErrTopicExists
	}
	if validateOnly {
		return &topic{name: name, configs: configs}, nil
	}
	// A deletion of this name whose clean-up failed (its offsets are
	// still there) is finished first, or the name stays taken.
	if err := b.finishTopicDeletions(name); err != nil {
		return nil, fmt.Errorf("the deletion of an earlier topic %s is not finished: %w", name, err)
	}
	if configs == nil {
		configs = map[string]string{}
	}
	t := &topic{name: name, id: newTopicID(), configs: configs}
	for i := int32(0); i < partitions; i++ {
		// A directory left by a deleted topic of the same name must not be
		// adopted.
		if err := os.RemoveAll(b.partitionDir(name, i)); err != nil {
			return nil, err
		}
	}
	rec := t.record()
	rec.Partitions = partitions
	// Persist, then open: a crash in between leaves a topic whose
	// partitions are created empty on the next start.
	if err := b.meta.putTopic(rec); err != nil {
		return nil, err
	}
	for i := int32(0); i < partitions; i++ {
		p, err := b.openPartition(t, i, configs)
		if err != nil {
			return nil, err
		}
		t.partitions = append(t.partitions, p)
	}
	b.topics.mu.Lock()
	b.topics.mu.byName[name] = t
	b.topics.mu.byID[t.id] = t
	b.topics.mu.Unlock()
	b.lg.Info("created topic", zap.String("topic", name), zap.Int32("partitions", partitions))
	return t, nil
}

// deleteTopic removes a topic durably, then deletes its logs, then every
// group's committed offsets of it and its share-group state, so a topic
// created again under the same name starts fresh (Kafka does the same).
// All of it runs under adminMu: a topic of the same name cannot be
// created, and its consumers cannot commit offsets for it, before the old
// one's offsets are gone (they are removed by name). The deletion of the
// topic record also records the clean-up as pending (metaStore.deleteTopic)
// until it has finished; a start-up finishes one a crash interrupted, and
// creating the name again one that failed (finishTopicDeletions).
func (b *Broker) deleteTopic(t *topic) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.topics.get(t.name) != t {
		return kafkaerr.ErrUnknownTopic // deleted (and maybe re-created) meanwhile
	}
	if err := b.meta.deleteTopic(t.name, t.id); err != nil {
		return err
	}
	b.topics.mu.Lock()
	delete(b.topics.mu.byName, t.name)
	delete(b.topics.mu.byID, t.id)
	parts := t.partitions
	b.topics.mu.Unlock()
	var errs []error
	for _, p := range parts {
		p.notify()
		errs = append(errs, p.log.Delete())
	}
	b.metrics.ForgetTopic(t.name)
	b.dedup.forget(t.id)
	b.lg.Info("deleted topic", zap.String("topic", t.name))
	errs = append(errs, b.finishTopicDeletion(deletedTopic{t.name, t.id}))
	return errors.Join(errs...)
}

// finishTopicDeletion removes a deleted topic's committed offsets (by
// name) and share-group state (by id), then clears its pending record
// (metaStore.deleteTopic). adminMu held, or start-up before serving.
func (b *Broker) finishTopicDeletion(d deletedTopic) error {
	if b.cfg.beforeTopicCleanup != nil {
		if err := b.cfg.beforeTopicCleanup(d.name); err != nil {
			return err
		}
	}
	var dropErr error
	if b.topics.get(d.name) == nil {
		dropErr = b.groups.dropTopicOffsets(d.name)
	} else {
		// Cannot happen (a name is used again only once this is done),
		// but if it does the offsets may be the new topic's.
		b.lg.Warn("a deleted topic's name is in use again; keeping its offsets", zap.String("topic", d.name))
	}
	if err := errors.Join(dropErr, b.deleteShareTopicState(d.id)); err != nil {
		return err // still pending
	}
	return b.meta.clearTopicDeletion(d.id)
}

// finishTopicDeletions finishes the pending clean-ups of deleted topics
// called name, or of every deleted topic when name is "": at start-up,
// before serving, for those a crash interrupted, and in createTopic for
// its name (adminMu held), so a name is used again only once the old
// topic's offsets are gone even if its clean-up failed.
func (b *Broker) finishTopicDeletions(name string) error {
	ds, err := b.meta.deletingTopics()
	if err != nil {
		return err
	}
	for _, d := range ds {
		if name != "" && d.name != name {
			continue
		}
		b.lg.Info("finishing a topic deletion's clean-up", zap.String("topic", d.name))
		if err := b.finishTopicDeletion(d); err != nil {
			return err
		}
	}
	return nil
}

// addPartitions grows a topic to count partitions.
func (b *Broker) addPartitions(t *topic, count int32, validateOnly bool) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.topics.get(t.name) != t {
		return kafkaerr.ErrUnknownTopic
	}
	parts, configs := b.topics.snapshot(t)
	cur := int32(len(parts))
	if count <= cur {
		return fmt.Errorf("%w: topic currently has %d partitions, which is higher than or equal to the requested %d", kafkaerr.ErrInvalidPartitions, cur, count)
	}
	if validateOnly {
		return nil
	}
	rec := t.record()
	rec.Partitions = count
	rec.Configs = configs
	if err := b.meta.putTopic(rec); err != nil {
		return err
	}
	var added []*partition
	for i := cur; i < count; i++ {
		if err := os.RemoveAll(b.partitionDir(t.name, i)); err != nil {
			return err
		}
		p, err := b.openPartition(t, i, configs)
		if err != nil {
			return err
		}
		added = append(added, p)
	}
	b.topics.mu.Lock()
	t.partitions = append(t.partitions, added...)
	b.topics.mu.Unlock()
	return nil
}
