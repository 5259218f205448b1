package topics

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/meta"
	"github.com/shoal-mq/shoal/broker/metrics"
	slog "github.com/shoal-mq/shoal/log"
)

// Options are what an Admin needs, given once (NewAdmin): handles from
// below, and the functions through which a topic deletion reaches the
// packages above that keep state of the topic.
type Options struct {
	// Registry is the set of topics the Admin changes.
	Registry *Registry
	// Store holds the topic records.
	Store *meta.Store
	// DataDir holds the logs, in DataDir/logs/<topic>-<n> as in Kafka.
	DataDir string
	// FS is the file system the logs are opened on.
	FS slog.FS
	// LogConfig resolves a topic's overrides to its log config (the
	// broker defaults sit behind every topic without an override).
	LogConfig func(overrides map[string]string) slog.Config
	// Metrics gives each topic its metric children and forgets them.
	Metrics *metrics.Metrics
	Logger  *zap.Logger
	// Forget runs once a deleted topic's logs are gone (the dedup
	// window's table of the id).
	Forget func(id [16]byte)
	// DropOffsets removes every group's committed offsets of a deleted
	// topic (by name), DropShareState its share-group state (by id).
	// They run under the Admin's lock, which callers of theirs never
	// hold; an error leaves the deletion's clean-up pending.
	DropOffsets    func(topic string) error
	DropShareState func(id [16]byte) error
	// BeforeCleanup, if set (tests), runs before a deletion's clean-up;
	// an error leaves it pending as a failed clean-up would.
	BeforeCleanup func(topic string) error
	// Clustered: topics come from the cluster's metadata log (Adopt);
	// Create refuses, and a replicated topic cannot be grown here. Its
	// configs change through ReplicateConfigs, its deletion through
	// ReplicateDelete.
	Clustered bool
	// ReplicateDelete, in a cluster, deletes a replicated topic through
	// the metadata log, returning once this broker applied the deletion
	// (AdoptDeletion, called meanwhile without the Admin's lock held by
	// Delete). Nil: replicated topics cannot be deleted.
	ReplicateDelete func(t *Topic) error
	// ReplicateConfigs, in a cluster, changes a replicated topic's
	// configs through the metadata log: it reads the current ones,
	// update validates and returns the next, and the change is applied
	// on every broker (AdoptConfigs) before it returns. Nil: they
	// cannot be changed.
	ReplicateConfigs func(t *Topic, validateOnly bool, update func(cur map[string]string) (map[string]string, error)) error
}

// errClustered refuses a change the cluster does not replicate yet.
func errClustered(what string) error {
	return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "%s is not supported in a cluster yet (docs/CLUSTER.md).", what)
}

// Admin creates, deletes, grows and reconfigures topics: each durable in
// the metadata store before it is answered, one at a time under mu (they
// do disk I/O; they are rare).
type Admin struct {
	o     Options
	r     *Registry
	store store
	mu    sync.Mutex
}

// NewAdmin returns the Admin of o.Registry; Load opens what is stored.
func NewAdmin(o Options) *Admin {
	return &Admin{o: o, r: o.Registry, store: store{o.Store}}
}

// Adopt puts a replicated topic into the registry: in a cluster the
// topic (name, id, partition count) comes from the cluster's metadata
// log, not the metadata store, and the logs of the partitions placed on
// this broker (hosted, by index) are opened and written by their raft
// groups (package cluster), which close them. The other partitions are
// in the topic's count but have no Partition here: Registry.Partition
// returns nil for them and Snapshot leaves them out (their leaders are
// other brokers). Adopting a topic again changes nothing.
func (a *Admin) Adopt(name string, id [16]byte, count int32, configs map[string]string, hosted map[int32]*slog.Partition) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cur := a.r.Get(name); cur != nil {
		a.growLocked(cur, count, hosted)
		return
	}
	// A name is used again only once a deleted topic's offsets of it
	// are gone, as in Create: a clean-up that failed is tried again.
	if err := a.FinishDeletions(name); err != nil {
		a.o.Logger.Error("serving a topic whose name's earlier topic is not cleaned up yet", zap.String("topic", name), zap.Error(err))
	}
	t := &Topic{Name: name, ID: id, configs: maps.Clone(configs), partitions: make([]*Partition, count), replicated: true}
	if t.configs == nil {
		t.configs = map[string]string{}
	}
	for idx, lp := range hosted {
		if idx >= 0 && idx < count {
			t.partitions[idx] = &Partition{Topic: name, Index: idx, Log: lp, M: a.o.Metrics.Topic(name)}
		}
	}
	a.r.mu.Lock()
	a.r.mu.byName[name] = t
	a.r.mu.byID[id] = t
	a.r.mu.Unlock()
	a.o.Logger.Info("serving a replicated topic", zap.String("topic", name), zap.Int32("partitions", count),
		zap.Int("hosted", len(hosted)))
}

// growLocked gives a replicated topic the partitions the cluster's
// metadata log added (CreatePartitions): count of them, those hosted
// here with their logs. a.mu held.
func (a *Admin) growLocked(t *Topic, count int32, hosted map[int32]*slog.Partition) {
	a.r.mu.Lock()
	defer a.r.mu.Unlock()
	old := int32(len(t.partitions))
	if !t.replicated || count <= old {
		return
	}
	parts := make([]*Partition, count)
	copy(parts, t.partitions)
	for idx, lp := range hosted {
		// The new ones, and an old one whose group only started now
		// (it failed to at the topic's creation).
		if idx >= 0 && idx < count && parts[idx] == nil {
			parts[idx] = &Partition{Topic: t.Name, Index: idx, Log: lp, M: a.o.Metrics.Topic(t.Name)}
		}
	}
	t.partitions = parts
	a.o.Logger.Info("grew a replicated topic", zap.String("topic", t.Name), zap.Int32("from", old), zap.Int32("partitions", count))
}

// Replicated says whether t is a cluster's replicated topic.
func (t *Topic) Replicated() bool { return t.replicated }

// AdoptConfigs sets a replicated topic's configs as the cluster's
// metadata log changed them (the logs of its partitions here have them
// already: package cluster sets those).
func (a *Admin) AdoptConfigs(name string, configs map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.r.Get(name)
	if t == nil || !t.replicated {
		return
	}
	next := maps.Clone(configs)
	if next == nil {
		next = map[string]string{}
	}
	a.r.mu.Lock()
	t.configs = next
	a.r.mu.Unlock()
	a.o.Logger.Info("altered topic configs", zap.String("topic", name), zap.Any("configs", next))
}

// Exclusive runs fn under the Admin's lock: no topic is created,
// deleted, grown or reconfigured while it runs (a dynamic broker config
// change re-applying every partition's log config).
func (a *Admin) Exclusive(fn func() error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fn()
}

// UpdateConfigs replaces t's overrides with update(current) (update gets
// a private copy and validates), persists them, and applies them to
// every partition log. Nothing changes when update fails or validateOnly
// is set. It holds the Admin's lock throughout, so concurrent
// read-modify-writes of the same topic cannot lose updates and a topic
// deleted meanwhile is reported unknown instead of being written back.
func (a *Admin) UpdateConfigs(t *Topic, validateOnly bool, update func(cur map[string]string) (map[string]string, error)) error {
	if t.replicated {
		if a.o.ReplicateConfigs == nil {
			return errClustered("Changing a topic's configs")
		}
		return a.o.ReplicateConfigs(t, validateOnly, update)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.r.Get(t.Name) != t {
		return kafkaerr.Refuse(kafkaerr.ErrUnknownTopic, "The topic '%s' does not exist.", t.Name)
	}
	parts, cur := a.r.Snapshot(t)
	next, err := update(cur)
	if err != nil || validateOnly {
		return err
	}
	rec := record{Name: t.Name, ID: t.ID, Partitions: int32(len(parts)), Configs: next}
	if err := a.store.putTopic(rec); err != nil {
		a.o.Logger.Error("persisting topic configs failed", zap.String("topic", t.Name), zap.Error(err))
		return err
	}
	a.r.mu.Lock()
	t.configs = next
	a.r.mu.Unlock()
	lc := a.o.LogConfig(next)
	for _, p := range parts {
		p.Log.SetConfig(lc)
	}
	a.o.Logger.Info("altered topic configs", zap.String("topic", t.Name), zap.Any("configs", next))
	return nil
}

// PendingDeletions names the deleted topics whose clean-up has not
// finished (a read-out for tests and operators).
func (a *Admin) PendingDeletions() ([]string, error) {
	ds, err := a.store.deletingTopics()
	var names []string
	for _, d := range ds {
		names = append(names, d.name)
	}
	return names, err
}

// partitionDir is where a partition's log lives: <data>/logs/<topic>-<n>,
// as in Kafka.
func (a *Admin) partitionDir(topicName string, idx int32) string {
	return filepath.Join(a.o.DataDir, "logs", topicName+"-"+strconv.Itoa(int(idx)))
}

// openPartition opens (recovering) or creates a partition log.
func (a *Admin) openPartition(t *Topic, idx int32, configs map[string]string) (*Partition, error) {
	lp, err := slog.Open(a.o.FS, a.partitionDir(t.Name, idx), a.o.LogConfig(configs), a.o.Logger.Named("log").With(zap.String("topic", t.Name), zap.Int32("partition", idx)))
	if err != nil {
		return nil, fmt.Errorf("topics: open %s-%d: %w", t.Name, idx, err)
	}
	return &Partition{Topic: t.Name, Index: idx, Log: lp, M: a.o.Metrics.Topic(t.Name)}, nil
}

// Load opens every topic recorded in the metadata store and removes
// log directories that belong to no topic (left by a crash during topic
// deletion).
func (a *Admin) Load() error {
	recs, err := a.store.topics()
	if err != nil {
		return err
	}
	// Partitions recover in parallel: after a crash each re-reads the
	// unflushed tail of its newest segment, CPU (CRC) and disk bound.
	known := map[string]bool{}
	topics := make([]*Topic, len(recs))
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		errs  []error
	)
	sem := make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))
	for ti, rec := range recs {
		t := &Topic{Name: rec.Name, ID: rec.ID, configs: rec.Configs}
		if t.configs == nil {
			t.configs = map[string]string{}
		}
		t.partitions = make([]*Partition, rec.Partitions)
		topics[ti] = t
		for i := int32(0); i < rec.Partitions; i++ {
			known[filepath.Base(a.partitionDir(t.Name, i))] = true
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				p, err := a.openPartition(t, i, t.configs)
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
		a.r.mu.byName[t.Name] = t
		a.r.mu.byID[t.ID] = t
	}
	// The sweep reads the OS's directory, not Options.FS: it must tell
	// directories from files, which FS does not. An in-memory FS (tests)
	// starts empty, so it has nothing to sweep.
	logs := filepath.Join(a.o.DataDir, "logs")
	entries, err := os.ReadDir(logs)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, e := range entries {
		if e.IsDir() && !known[e.Name()] && !strings.HasPrefix(e.Name(), ".") {
			a.o.Logger.Warn("removing log directory of a deleted topic", zap.String("dir", e.Name()))
			if err := os.RemoveAll(filepath.Join(logs, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// Create validates, persists, then opens a new topic. configs must
// already be validated. The Admin's lock serialises topic creation and deletion.
func (a *Admin) Create(name string, partitions int32, configs map[string]string, validateOnly bool) (*Topic, error) {
	if a.o.Clustered {
		return nil, errClustered("Creating a topic other than by CreateTopics")
	}
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if err := Reserved(name); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.r.Get(name) != nil {
		return nil, kafkaerr.ErrTopicExists
	}
	if validateOnly {
		return &Topic{Name: name, configs: configs}, nil
	}
	// A deletion of this name whose clean-up failed (its offsets are
	// still there) is finished first, or the name stays taken.
	if err := a.FinishDeletions(name); err != nil {
		return nil, fmt.Errorf("the deletion of an earlier topic %s is not finished: %w", name, err)
	}
	configs = maps.Clone(configs) // the topic's own, changed only under Registry.mu
	if configs == nil {
		configs = map[string]string{}
	}
	t := &Topic{Name: name, ID: newID(), configs: configs}
	for i := int32(0); i < partitions; i++ {
		// A directory left by a deleted topic of the same name must not be
		// adopted.
		if err := a.o.FS.RemoveAll(a.partitionDir(name, i)); err != nil {
			return nil, err
		}
	}
	rec := t.record()
	rec.Partitions = partitions
	// Persist, then open: a crash in between leaves a topic whose
	// partitions are created empty on the next start.
	if err := a.store.putTopic(rec); err != nil {
		return nil, err
	}
	for i := int32(0); i < partitions; i++ {
		p, err := a.openPartition(t, i, configs)
		if err != nil {
			// Undone, so that a topic the client was told failed does not
			// come back at the next start: the logs opened so far are
			// closed and the record removed (its directories are cleared
			// by the next Create of the name).
			return nil, errors.Join(err, a.closeAll(t.partitions), a.store.dropTopic(name))
		}
		t.partitions = append(t.partitions, p)
	}
	a.r.mu.Lock()
	a.r.mu.byName[name] = t
	a.r.mu.byID[t.ID] = t
	a.r.mu.Unlock()
	a.o.Logger.Info("created topic", zap.String("topic", name), zap.Int32("partitions", partitions))
	return t, nil
}

// Delete removes a topic durably, then deletes its logs, then every
// group's committed offsets of it and its share-group state, so a topic
// created again under the same name starts fresh (Kafka does the same).
// All of it runs under the Admin's lock: a topic of the same name cannot be
// created, and its consumers cannot commit offsets for it, before the old
// one's offsets are gone (they are removed by name). The deletion of the
// topic record also records the clean-up as pending (store.deleteTopic)
// until it has finished; a start-up finishes one a crash interrupted, and
// creating the name again one that failed (FinishDeletions).
func (a *Admin) Delete(t *Topic) error {
	if t.replicated {
		if a.o.ReplicateDelete == nil {
			return errClustered("Deleting a topic")
		}
		return a.o.ReplicateDelete(t)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.r.Get(t.Name) != t {
		return kafkaerr.ErrUnknownTopic // deleted (and maybe re-created) meanwhile
	}
	if err := a.store.deleteTopic(t.Name, t.ID); err != nil {
		return err
	}
	a.r.mu.Lock()
	delete(a.r.mu.byName, t.Name)
	delete(a.r.mu.byID, t.ID)
	parts := t.partitions
	a.r.mu.Unlock()
	var errs []error
	for _, p := range parts {
		p.Notify()
		errs = append(errs, p.Log.Delete())
	}
	a.o.Metrics.ForgetTopic(t.Name)
	a.o.Forget(t.ID)
	a.o.Logger.Info("deleted topic", zap.String("topic", t.Name))
	errs = append(errs, a.finishDeletion(deletedTopic{t.Name, t.ID}))
	return errors.Join(errs...)
}

// AdoptDeletion takes out a replicated topic whose deletion the
// cluster's metadata log applied (on every broker, from the metadata
// group's goroutine, before the topic's groups here stop and delete
// their logs), and again each time a restart applies the log: the topic
// leaves the registry (its long polls woken), and, once per topic id,
// its committed offsets and share-group state here go as a deletion's
// do (the clean-up pending durably until done, so a start-up finishes
// one a crash or a failure left).
func (a *Admin) AdoptDeletion(name string, id [16]byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.r.Get(name); t != nil && t.ID == id && t.replicated {
		a.r.mu.Lock()
		delete(a.r.mu.byName, t.Name)
		delete(a.r.mu.byID, t.ID)
		parts := t.partitions
		a.r.mu.Unlock()
		for _, p := range parts {
			if p != nil {
				p.Notify()
			}
		}
		a.o.Metrics.ForgetTopic(t.Name)
		a.o.Forget(t.ID)
	}
	first, err := a.store.seeReplicatedDeletion(name, id)
	if err != nil {
		a.o.Logger.Error("cannot record a replicated topic's deletion; its offsets stay until the next start", zap.String("topic", name), zap.Error(err))
		return
	}
	if !first {
		return
	}
	a.o.Logger.Info("deleted topic", zap.String("topic", name))
	if err := a.finishDeletion(deletedTopic{name, id}); err != nil {
		a.o.Logger.Error("a deleted topic's clean-up failed; the next start retries it", zap.String("topic", name), zap.Error(err))
	}
}

// finishDeletion removes a deleted topic's committed offsets (by
// name) and share-group state (by id), then clears its pending record
// (store.deleteTopic). The Admin's lock held, or start-up before serving.
func (a *Admin) finishDeletion(d deletedTopic) error {
	if a.o.BeforeCleanup != nil {
		if err := a.o.BeforeCleanup(d.name); err != nil {
			return err
		}
	}
	var dropErr error
	if a.r.Get(d.name) == nil {
		dropErr = a.o.DropOffsets(d.name)
	} else {
		// Cannot happen (a name is used again only once this is done),
		// but if it does the offsets may be the new topic's.
		a.o.Logger.Warn("a deleted topic's name is in use again; keeping its offsets", zap.String("topic", d.name))
	}
	if err := errors.Join(dropErr, a.o.DropShareState(d.id)); err != nil {
		return err // still pending
	}
	return a.store.clearTopicDeletion(d.id)
}

// FinishDeletions finishes the pending clean-ups of deleted topics
// called name, or of every deleted topic when name is "": at start-up,
// before serving, for those a crash interrupted, and in Create for
// its name (the Admin's lock held), so a name is used again only once the old
// topic's offsets are gone even if its clean-up failed.
func (a *Admin) FinishDeletions(name string) error {
	ds, err := a.store.deletingTopics()
	if err != nil {
		return err
	}
	for _, d := range ds {
		if name != "" && d.name != name {
			continue
		}
		a.o.Logger.Info("finishing a topic deletion's clean-up", zap.String("topic", d.name))
		if err := a.finishDeletion(d); err != nil {
			return err
		}
	}
	return nil
}

// AddPartitions grows a topic to count partitions.
func (a *Admin) AddPartitions(t *Topic, count int32, validateOnly bool) error {
	if t.replicated {
		return errClustered("Adding partitions")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.r.Get(t.Name) != t {
		return kafkaerr.ErrUnknownTopic
	}
	parts, configs := a.r.Snapshot(t)
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
	if err := a.store.putTopic(rec); err != nil {
		return err
	}
	var added []*Partition
	// undo is what a failure after the write leaves: the added logs
	// closed, the record back at the partitions the topic has.
	undo := func(err error) error {
		rec.Partitions = cur
		return errors.Join(err, a.closeAll(added), a.store.putTopic(rec))
	}
	for i := cur; i < count; i++ {
		if err := a.o.FS.RemoveAll(a.partitionDir(t.Name, i)); err != nil {
			return undo(err)
		}
		p, err := a.openPartition(t, i, configs)
		if err != nil {
			return undo(err)
		}
		added = append(added, p)
	}
	a.r.mu.Lock()
	t.partitions = append(t.partitions, added...)
	a.r.mu.Unlock()
	return nil
}

// closeAll closes the logs of parts (a change undone).
func (a *Admin) closeAll(parts []*Partition) error {
	var errs []error
	for _, p := range parts {
		errs = append(errs, p.Log.Close())
	}
	return errors.Join(errs...)
}
