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

// tpkg_Partition is one topic tpkg_Partition: its log plus the long-poll waiters
// woken when its high watermark moves. The log is safe for concurrent
// use; waiters are guarded by mu.
type tpkg_Partition struct {
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
func (p *tpkg_Partition) Watch(ch chan struct{}) {
	p.mu.Lock()
	if p.mu.waiters == nil {
		p.mu.waiters = make(map[chan struct{}]struct{})
	}
	p.mu.waiters[ch] = struct{}{}
	p.mu.Unlock()
}

func (p *tpkg_Partition) Unwatch(ch chan struct{}) {
	p.mu.Lock()
	delete(p.mu.waiters, ch)
	p.mu.Unlock()
}

// Notify wakes every waiter.
func (p *tpkg_Partition) Notify() {
	p.mu.Lock()
	for ch := range p.mu.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
}

// tpkg_Topic is a tpkg_Topic and its partitions. Name and id never change;
// partitions only grow (CreatePartitions) and configs change through
// AlterConfigs, both under topicRegistry.mu.
type tpkg_Topic struct {
	Name       string
	ID         [16]byte
	configs    map[string]string // explicit topic overrides
	partitions []*tpkg_Partition
}

func (t *tpkg_Topic) record() topicRecord {
	return topicRecord{Name: t.Name, ID: t.ID, Partitions: int32(len(t.partitions)), Configs: t.configs}
}

// tpkg_Registry owns the set of topics. Lock order: tpkg_Registry.mu
// before partition.mu. No disk I/O happens under mu except topic
// creation and deletion, which are rare admin operations serialised by
// adminMu instead.
type tpkg_Registry struct {
	mu struct {
		sync.RWMutex
		byName map[string]*tpkg_Topic
		byID   map[[16]byte]*tpkg_Topic
	}
}

func tpkg_NewRegistry() *tpkg_Registry {
	r := &tpkg_Registry{}
	r.mu.byName = map[string]*tpkg_Topic{}
	r.mu.byID = map[[16]byte]*tpkg_Topic{}
	return r
}

func (r *tpkg_Registry) Get(name string) *tpkg_Topic {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.byName[name]
}

func (r *tpkg_Registry) GetID(id [16]byte) *tpkg_Topic {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.byID[id]
}

// Partition returns the Partition or nil.
func (r *tpkg_Registry) Partition(name string, idx int32) *tpkg_Partition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t := r.mu.byName[name]
	if t == nil || idx < 0 || int(idx) >= len(t.partitions) {
		return nil
	}
	return t.partitions[idx]
}

// All returns the topics sorted by nothing in particular; callers sort.
func (r *tpkg_Registry) All() []*tpkg_Topic {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*tpkg_Topic, 0, len(r.mu.byName))
	for _, t := range r.mu.byName {
		out = append(out, t)
	}
	return out
}

// Snapshot returns a copy of a topic's mutable fields under the lock.
func (r *tpkg_Registry) Snapshot(t *tpkg_Topic) (parts []*tpkg_Partition, configs map[string]string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	parts = append([]*tpkg_Partition(nil), t.partitions...)
	configs = make(map[string]string, len(t.configs))
	for k, v := range t.configs {
		configs[k] = v
	}
	return parts, configs
}

// PartitionOf returns partition idx of t, nil if t is nil or has no
// such partition (looked up by t's name, as partition does).
func (r *tpkg_Registry) PartitionOf(t *tpkg_Topic, idx int32) *tpkg_Partition {
	if t == nil {
		return nil
	}
	return r.Partition(t.Name, idx)
}

// PartitionByID resolves a topic id and partition index.
func (r *tpkg_Registry) PartitionByID(id [16]byte, idx int32) (*tpkg_Topic, *tpkg_Partition, int16) {
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

// PartitionCount returns the number of partitions of t.
func (r *tpkg_Registry) PartitionCount(t *tpkg_Topic) int32 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return int32(len(t.partitions))
}

// tpkg_ValidName applies Kafka's rules: 1..249 chars of [a-zA-Z0-9._-],
// not "." or "..".
func tpkg_ValidName(name string) error {
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

func tpkg_newID() [16]byte {
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
func (b *Broker) openPartition(t *tpkg_Topic, idx int32, configs map[string]string) (*tpkg_Partition, error) {
	lp, err := slog.Open(b.fs, b.partitionDir(t.Name, idx), b.logConfig(configs), b.lg.Named("log").With(zap.String("topic", t.Name), zap.Int32("partition", idx)))
	if err != nil {
		return nil, fmt.Errorf("broker: open %s-%d: %w", t.Name, idx, err)
	}
	return &tpkg_Partition{Topic: t.Name, Index: idx, Log: lp, M: b.metrics.Topic(t.Name)}, nil
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
	topics := make([]*tpkg_Topic, len(recs))
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		errs  []error
	)
	sem := make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))
	for ti, rec := range recs {
		t := &tpkg_Topic{Name: rec.Name, ID: rec.ID, configs: rec.Configs}
		if t.configs == nil {
			t.configs = map[string]string{}
		}
		t.partitions = make([]*tpkg_Partition, rec.Partitions)
		topics[ti] = t
		for i := int32(0); i < rec.Partitions; i++ {
			known[filepath.Base(b.partitionDir(t.Name, i))] = true
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
					p.Log.Close()
				}
			}
		}
		return errors.Join(errs...)
	}
	for _, t := range topics {
		b.topics.mu.byName[t.Name] = t
		b.topics.mu.byID[t.ID] = t
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
func (b *Broker) createTopic(name string, partitions int32, configs map[string]string, validateOnly bool) (*tpkg_Topic, error) {
	if err := tpkg_ValidName(name); err != nil {
		return nil, err
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.topics.Get(name) != nil {
		return nil, kafkaerr.ErrTopicExists
	}
	if validateOnly {
		return &tpkg_Topic{Name: name, configs: configs}, nil
	}
	// A deletion of this name whose clean-up failed (its offsets are
	// still there) is finished first, or the name stays taken.
	if err := b.finishTopicDeletions(name); err != nil {
		return nil, fmt.Errorf("the deletion of an earlier topic %s is not finished: %w", name, err)
	}
	if configs == nil {
		configs = map[string]string{}
	}
	t := &tpkg_Topic{Name: name, ID: tpkg_newID(), configs: configs}
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
	b.topics.mu.byID[t.ID] = t
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
func (b *Broker) deleteTopic(t *tpkg_Topic) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.topics.Get(t.Name) != t {
		return kafkaerr.ErrUnknownTopic // deleted (and maybe re-created) meanwhile
	}
	if err := b.meta.deleteTopic(t.Name, t.ID); err != nil {
		return err
	}
	b.topics.mu.Lock()
	delete(b.topics.mu.byName, t.Name)
	delete(b.topics.mu.byID, t.ID)
	parts := t.partitions
	b.topics.mu.Unlock()
	var errs []error
	for _, p := range parts {
		p.Notify()
		errs = append(errs, p.Log.Delete())
	}
	b.metrics.ForgetTopic(t.Name)
	b.dedup.forget(t.ID)
	b.lg.Info("deleted topic", zap.String("topic", t.Name))
	errs = append(errs, b.finishTopicDeletion(deletedTopic{t.Name, t.ID}))
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
	if b.topics.Get(d.name) == nil {
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
func (b *Broker) addPartitions(t *tpkg_Topic, count int32, validateOnly bool) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.topics.Get(t.Name) != t {
		return kafkaerr.ErrUnknownTopic
	}
	parts, configs := b.topics.Snapshot(t)
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
	var added []*tpkg_Partition
	for i := cur; i < count; i++ {
		if err := os.RemoveAll(b.partitionDir(t.Name, i)); err != nil {
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
