package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/shoal-mq/shoal/sharegroup"
)

// DefaultSnapshotEvery is the number of deltas per key before a new snapshot.
const DefaultSnapshotEvery = 500

// Key identifies one share-partition.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// PartitionRecords are the records of one share-partition to persist, in
// the order the Partition produced them.
type PartitionRecords struct {
	Key     Key
	Records []sharegroup.Record
}

// Options configures a Store.
type Options struct {
	// Prefix namespaces every key (e.g. "sg/"); it must not be a prefix of
	// another adapter's keys.
	Prefix []byte
	// SnapshotEvery is the number of deltas after which the store folds them
	// into a new snapshot; 0 means DefaultSnapshotEvery.
	SnapshotEvery int
	// BeforeCommit, for fault-injection tests, runs before each group
	// commit; an error fails every Write of the group as a failed badger
	// commit would (nothing is written).
	BeforeCommit func() error

	// LogDir, if set (Open only), makes writes durable in a change log
	// of segment files in this directory, moved into badger by
	// checkpoints in the background (doc.go, "Change log"). Empty: every
	// group commit is a badger transaction.
	LogDir string
	// LogSegmentBytes is the size of each change-log segment file; 0
	// means DefaultLogSegmentBytes.
	LogSegmentBytes int
	// CheckpointBytes is how many bytes of change-log frames start a
	// checkpoint; 0 means DefaultCheckpointBytes.
	CheckpointBytes int
	// MaxUncheckpointedBytes bounds the frames waiting for a checkpoint
	// while checkpoints fail: past it writes fail until one succeeds; 0
	// means DefaultMaxUncheckpointedBytes.
	MaxUncheckpointedBytes int
	// BackgroundError, if set, hears of every failure of the change
	// log's background work: a checkpoint (the frames stay in the log;
	// the next checkpoint, after a backoff, tries again) or a spare
	// segment file (the next rotation makes one itself).
	BackgroundError func(error)
}

// Store is the badger adapter for share-partition state. See doc.go.
type Store struct {
	db           *badger.DB
	prefix       []byte
	every        int
	beforeCommit func() error
	log          *changeLog // nil: writes go straight to badger

	mu struct {
		sync.Mutex
		// deltas caches, per key, the range [first, next) of delta sequence
		// numbers present in the DB. Filled on first use; updated only after
		// a commit succeeded.
		deltas map[Key]seqRange
	}

	// gc queues the Writes waiting for the committer (group commit).
	gc struct {
		sync.Mutex
		queue   []*Pending
		running bool // a commit loop is draining queue
		// last is, per key, its latest write not finished yet.
		last map[Key]*Pending
		// failed marks the keys a write failed for, until LoadRecords
		// or Delete of the key: their owner's in-memory state follows
		// records that are not stored, and any write made from it
		// (submitted before the owner learnt of the failure) fails.
		failed map[Key]bool
	}
}

// ErrEarlierWriteFailed fails a write submitted after a write of the same
// share-partition that failed: its records follow states that are not
// stored. Nothing of it is written.
var ErrEarlierWriteFailed = errors.New("an earlier write of the share-partition failed")

// Pending is a write submitted to the Store (Submit), durable or failed
// once Wait returns.
type Pending struct {
	batch  []PartitionRecords
	after  []*Pending // the previous unfinished write of each of its keys
	done   chan struct{}
	err    error
	starts bool // its Submit started the commit goroutine (StartsCommit)
}

// Wait returns once the write is durable (nil) or failed. Any number of
// goroutines may wait.
func (w *Pending) Wait() error {
	<-w.done
	return w.err
}

// Failed reports, without waiting, whether the write has failed.
func (w *Pending) Failed() bool {
	select {
	case <-w.done:
		return w.err != nil
	default:
		return false
	}
}

// StartsCommit reports whether Submit started a commit for this write: a
// new goroutine, which Go's scheduler runs on the submitter's processor
// once the submitter blocks or yields (unless an idle processor takes it
// first, which a busy machine rarely has). A submitter with more to do
// before it waits for the write (a ShareFetch acquiring and reading its
// next records) should yield (runtime.Gosched) once it holds no lock the
// commit needs, so that the write and its sync run meanwhile rather than
// after: measured in sharebench's ordered mode, a started commit waited
// 120-144 µs on average for the submitter to block, 27-35 µs with a
// ShareFetch yielding once it has acquired.
func (w *Pending) StartsCommit() bool { return w.starts }

// Done reports, without waiting, whether the write has finished.
func (w *Pending) Done() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

var finished = func() *Pending {
	w := &Pending{done: make(chan struct{})}
	close(w.done)
	return w
}()

type seqRange struct{ first, next uint64 }

func (r seqRange) count() int { return int(r.next - r.first) }

// Open returns a Store over db: New, plus the change log of
// opts.LogDir if set, replaying into badger whatever a crash left in it.
// Close it before closing db.
func Open(db *badger.DB, opts Options) (*Store, error) {
	s := New(db, opts)
	if opts.LogDir == "" {
		return s, nil
	}
	if err := s.openLog(opts); err != nil {
		return nil, err
	}
	return s, nil
}

// Close checkpoints the change log into badger and removes its segments;
// writes after it fail. Without a change log it does nothing. Writes in
// flight must have finished.
func (s *Store) Close() error {
	if s.log == nil {
		return nil
	}
	return s.closeLog()
}

// New returns a Store over db without a change log (opts.LogDir is
// ignored: see Open). db stays owned by the caller.
func New(db *badger.DB, opts Options) *Store {
	s := &Store{db: db, prefix: bytes.Clone(opts.Prefix), every: opts.SnapshotEvery, beforeCommit: opts.BeforeCommit}
	if s.every <= 0 {
		s.every = DefaultSnapshotEvery
	}
	s.mu.deltas = make(map[Key]seqRange)
	return s
}

const (
	tagSnapshot = 's'
	tagDelta    = 'd'
	tagCorrupt  = 'x' // set aside by a change-log checkpoint (quarantine)
)

func (s *Store) groupPrefix(group string) []byte {
	return appendGroup(bytes.Clone(s.prefix), group)
}

func (s *Store) keyPrefix(k Key) []byte { return appendKey(bytes.Clone(s.prefix), k) }

// appendGroup appends a group's part of a key: uvarint(len(group)) | group.
func appendGroup(b []byte, group string) []byte {
	b = binary.AppendUvarint(b, uint64(len(group)))
	return append(b, group...)
}

// appendKey appends a share-partition's identity as the key layout
// spells it after the prefix (doc.go), and change-log entries too:
// appendGroup | topicID (16 B) | partition (4 B BE).
func appendKey(b []byte, k Key) []byte {
	b = appendGroup(b, k.Group)
	b = append(b, k.TopicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.Partition))
}

func (s *Store) snapshotKey(k Key) []byte { return append(s.keyPrefix(k), tagSnapshot) }

func (s *Store) deltaPrefix(k Key) []byte { return append(s.keyPrefix(k), tagDelta) }

func (s *Store) corruptKey(k Key) []byte { return append(s.keyPrefix(k), tagCorrupt) }

// quarantine sets k aside at a change-log checkpoint, with the watermark
// mark after it: its records did not fold onto what badger holds (cause),
// so its state is unknown. Loading it fails with ErrCorruptRecord, later
// checkpoints skip it, and Delete clears it.
func (s *Store) quarantine(k Key, cause error, mark []byte) error {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	if err := txn.Set(s.corruptKey(k), []byte(cause.Error())); err != nil {
		return err
	}
	if err := txn.Set(s.markKey(), mark); err != nil {
		return err
	}
	s.forget([]PartitionRecords{{Key: k}})
	return txn.Commit()
}

// quarantined returns why k was set aside, or "" if it was not.
func (s *Store) quarantined(txn *badger.Txn, k Key) (string, error) {
	item, err := txn.Get(s.corruptKey(k))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	v, err := item.ValueCopy(nil)
	return string(v), err
}

func (s *Store) deltaKey(k Key, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(s.deltaPrefix(k), seq)
}

// Write persists the batch durably and returns once it is (or why it is
// not): Submit, then Wait.
func (s *Store) Write(batch []PartitionRecords) error {
	return s.Submit(batch).Wait()
}

// Submit queues the batch for writing and returns at once. Writes are
// applied in the order they were submitted, and concurrent ones are
// group-committed: a commit loop takes every write queued while the
// previous commit ran and persists them in one badger transaction, so
// they share one WAL sync. (Badger syncs its WAL once per request even
// when it batches requests, so eight concurrent acknowledgements cost
// eight syncs in a row without this; measured on this project's 2-core
// machine: 0.25 ms for one write, 1.6 ms p50 with eight writers.) Each
// share-partition's records stay atomic and in order. A write that
// follows a failed write of one of its share-partitions, submitted
// before that one finished, fails with ErrEarlierWriteFailed without
// writing anything, and so does any write of them submitted later, until
// Load or Delete of the key (which wait for its writes in flight): its
// records were made from states that are not stored. The caller must
// submit a share-partition's writes in the order its states changed
// (under its owner's lock) but may wait for them after letting go of
// that lock.
func (s *Store) Submit(batch []PartitionRecords) *Pending {
	batch = mergeByKey(batch)
	if len(batch) == 0 {
		return finished
	}
	w := &Pending{batch: batch, done: make(chan struct{})}
	s.gc.Lock()
	if s.gc.last == nil {
		s.gc.last = map[Key]*Pending{}
		s.gc.failed = map[Key]bool{}
	}
	for _, pr := range batch {
		if s.gc.failed[pr.Key] {
			// Refused whole: its other keys hold states that are
			// not stored now either.
			for _, pr := range batch {
				s.gc.failed[pr.Key] = true
			}
			s.gc.Unlock()
			w.batch, w.err = nil, fmt.Errorf("sharegroup/store: write: %w", ErrEarlierWriteFailed)
			close(w.done)
			return w
		}
	}
	for _, pr := range batch {
		if prev := s.gc.last[pr.Key]; prev != nil {
			w.after = append(w.after, prev)
		}
		s.gc.last[pr.Key] = w
	}
	s.gc.queue = append(s.gc.queue, w)
	w.starts = !s.gc.running
	s.gc.running = true
	s.gc.Unlock()
	if w.starts {
		go s.commitLoop()
	}
	return w
}

// settle waits until every write of a key matching match, submitted
// before it was called, has finished.
func (s *Store) settle(match func(Key) bool) {
	s.gc.Lock()
	var ws []*Pending
	for k, w := range s.gc.last {
		if match(k) {
			ws = append(ws, w)
		}
	}
	s.gc.Unlock()
	for _, w := range ws {
		<-w.done
	}
}

// commitLoop commits queued writes until the queue is empty.
func (s *Store) commitLoop() {
	for {
		s.gc.Lock()
		q := s.gc.queue
		s.gc.queue = nil
		if len(q) == 0 {
			s.gc.running = false
			s.gc.Unlock()
			return
		}
		s.gc.Unlock()
		errs := s.safeCommitGroup(q)
		// A write leaves last, marks its keys failed and is done in
		// one step: a Submit never finds it gone from last but not
		// done (its owner would not know yet), and so unchained.
		s.gc.Lock()
		for i, w := range q {
			w.err = errs[i]
			for _, pr := range w.batch {
				if s.gc.last[pr.Key] == w {
					delete(s.gc.last, pr.Key)
				}
				if w.err != nil {
					s.gc.failed[pr.Key] = true
				}
			}
			w.batch, w.after = nil, nil
			close(w.done)
		}
		s.gc.Unlock()
	}
}

// forgive clears the failure marks of the keys matching match: their
// owners reload them (LoadRecords) or delete them.
func (s *Store) forgive(match func(Key) bool) {
	s.gc.Lock()
	for k := range s.gc.failed {
		if match(k) {
			delete(s.gc.failed, k)
		}
	}
	s.gc.Unlock()
}

// safeCommitGroup is commitGroup turning a panic (a bug, in badger or in
// a fold) into an error for each Write of q, as the callers' own
// goroutines would have had it caught for their connection alone.
func (s *Store) safeCommitGroup(q []*Pending) (errs []error) {
	defer func() {
		if r := recover(); r != nil {
			err := fmt.Errorf("sharegroup/store: write panicked: %v", r)
			for _, w := range q {
				s.forget(w.batch)
			}
			errs = make([]error, len(q))
			for i := range errs {
				errs[i] = err
			}
		}
	}()
	return s.commitGroup(q)
}

// forget drops the cached delta ranges of the keys of batch, after a
// commit whose effect is unknown (it failed, or panicked midway): the
// next write of them rescans.
func (s *Store) forget(batch []PartitionRecords) {
	s.mu.Lock()
	for _, pr := range batch {
		delete(s.mu.deltas, pr.Key)
	}
	s.mu.Unlock()
}

// prepareError is a failure before the commit: nothing was written.
type prepareError struct{ err error }

func (e *prepareError) Error() string { return e.err.Error() }
func (e *prepareError) Unwrap() error { return e.err }

// commitGroup persists the batches of q in one transaction. A write
// following a failed one of its keys (Pending.after, in an earlier group
// or earlier in q) fails with ErrEarlierWriteFailed and is left out. If
// building that transaction fails (nothing written), each batch is
// retried alone, so one bad batch, or a group too big for one
// transaction, fails only its own write (and those following it on its
// keys). A failed commit fails them all: what it wrote is unknown (update
// forgets their cached delta ranges), and each caller discards its
// share-partitions and reloads them from what is stored.
func (s *Store) commitGroup(q []*Pending) []error {
	errs := make([]error, len(q))
	at := make(map[*Pending]int, len(q))
	for i, w := range q {
		at[w] = i
	}
	// failed reports whether w's predecessor p failed: p is done (an
	// earlier group) or in q before w, with its outcome in errs so far.
	failed := func(p *Pending) bool {
		if i, ok := at[p]; ok {
			return errs[i] != nil
		}
		return p.err != nil
	}
	blocked := func(i int) bool {
		for _, p := range q[i].after {
			if failed(p) {
				errs[i] = fmt.Errorf("sharegroup/store: write: %w", ErrEarlierWriteFailed)
				return true
			}
		}
		return false
	}
	var live []int
	for i := range q {
		if !blocked(i) {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		return errs
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(); err != nil {
			for _, i := range live {
				errs[i] = fmt.Errorf("sharegroup/store: write: %w", err)
			}
			return errs
		}
	}
	if s.log != nil {
		return s.commitToLog(q, live, errs, blocked)
	}
	if len(live) > 1 {
		var all []PartitionRecords
		for _, i := range live {
			all = append(all, q[i].batch...)
		}
		err := s.update(mergeByKey(all), nil)
		var pe *prepareError
		if !errors.As(err, &pe) {
			for _, i := range live {
				errs[i] = err
			}
			return errs
		}
	}
	for _, i := range live {
		if !blocked(i) {
			errs[i] = s.writeAlone(q[i].batch)
		}
	}
	return errs
}

// writeAlone persists one Write's batch in one transaction, or, if that
// is too big, one transaction per share-partition, each still atomic.
func (s *Store) writeAlone(batch []PartitionRecords) error {
	err := s.update(batch, nil)
	if errors.Is(err, badger.ErrTxnTooBig) && len(batch) > 1 {
		for i := range batch {
			if err := s.update(batch[i:i+1], nil); err != nil {
				return err
			}
		}
		return nil
	}
	return err
}

// mergeByKey concatenates the records of repeated keys, keeping order.
func mergeByKey(batch []PartitionRecords) []PartitionRecords {
	seen := make(map[Key]int, len(batch))
	out := make([]PartitionRecords, 0, len(batch))
	for _, pr := range batch {
		if len(pr.Records) == 0 {
			continue
		}
		if i, ok := seen[pr.Key]; ok {
			out[i].Records = append(out[i].Records, pr.Records...)
			continue
		}
		seen[pr.Key] = len(out)
		out = append(out, PartitionRecords{Key: pr.Key, Records: append([]sharegroup.Record(nil), pr.Records...)})
	}
	return out
}

// update persists batch in one transaction, with the change-log
// watermark mark if not nil.
func (s *Store) update(batch []PartitionRecords, mark []byte) error {
	next := make(map[Key]seqRange, len(batch))
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	for _, pr := range batch {
		r, err := s.writeOne(txn, pr)
		if err != nil {
			// Nothing was written: the caller may retry parts alone.
			return &prepareError{fmt.Errorf("sharegroup/store: write: %w", err)}
		}
		next[pr.Key] = r
	}
	if mark != nil {
		if err := txn.Set(s.markKey(), mark); err != nil {
			return &prepareError{fmt.Errorf("sharegroup/store: write: %w", err)}
		}
	}
	if err := txn.Commit(); err != nil {
		s.forget(batch) // what the commit wrote is unknown
		return fmt.Errorf("sharegroup/store: write: %w", err)
	}
	s.mu.Lock()
	for k, r := range next {
		s.mu.deltas[k] = r
	}
	s.mu.Unlock()
	return nil
}

// writeOne persists one share-partition's records and returns its new
// delta range.
func (s *Store) writeOne(txn *badger.Txn, pr PartitionRecords) (seqRange, error) {
	if s.log != nil {
		if why, err := s.quarantined(txn, pr.Key); err != nil || why != "" {
			return seqRange{}, err // set aside: its records go nowhere
		}
	}
	cur, err := s.deltaRange(txn, pr.Key)
	if err != nil {
		return cur, err
	}
	var base *sharegroup.Record // snapshot in this batch, if any
	var deltas []sharegroup.Record
	for i := range pr.Records {
		if pr.Records[i].Kind == sharegroup.KindSnapshot {
			base, deltas = &pr.Records[i], nil
		} else {
			deltas = append(deltas, pr.Records[i])
		}
	}
	if base == nil && cur.count()+len(deltas) < s.every {
		for _, d := range deltas {
			if err := s.setRecord(txn, s.deltaKey(pr.Key, cur.next), &d); err != nil {
				return cur, err
			}
			cur.next++
		}
		return cur, nil
	}
	snapshot := base
	if len(deltas) > 0 { // fold into a new snapshot
		history := deltas
		if base != nil {
			history = append([]sharegroup.Record{*base}, deltas...)
		} else {
			stored, err := s.records(txn, pr.Key)
			if err != nil {
				return cur, err
			}
			history = append(stored, deltas...)
		}
		p, err := sharegroup.Recover(sharegroup.DefaultConfig(), history)
		if err != nil {
			return cur, fmt.Errorf("key %v: %w", pr.Key, err)
		}
		snap := p.Snapshot()
		snapshot = &snap
	}
	if err := s.setRecord(txn, s.snapshotKey(pr.Key), snapshot); err != nil {
		return cur, err
	}
	for seq := cur.first; seq < cur.next; seq++ {
		if err := txn.Delete(s.deltaKey(pr.Key, seq)); err != nil {
			return cur, err
		}
	}
	return seqRange{first: cur.next, next: cur.next}, nil
}

func (s *Store) setRecord(txn *badger.Txn, key []byte, r *sharegroup.Record) error {
	v, err := r.AppendBinary(nil)
	if err != nil {
		return err
	}
	return txn.Set(key, v)
}

// deltaRange returns the cached delta range of k, scanning the DB on first use.
func (s *Store) deltaRange(txn *badger.Txn, k Key) (seqRange, error) {
	s.mu.Lock()
	r, ok := s.mu.deltas[k]
	s.mu.Unlock()
	if ok {
		return r, nil
	}
	return s.scanDeltaRange(txn, k)
}

func (s *Store) scanDeltaRange(txn *badger.Txn, k Key) (seqRange, error) {
	prefix := s.deltaPrefix(k)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	var r seqRange
	first := true
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		key := it.Item().Key()
		if len(key) != len(prefix)+8 {
			return r, fmt.Errorf("sharegroup/store: delta key %x: %w", key, sharegroup.ErrCorruptRecord)
		}
		seq := binary.BigEndian.Uint64(key[len(prefix):])
		if first {
			r.first, first = seq, false
		}
		r.next = seq + 1
	}
	return r, nil
}

// records reads the snapshot and deltas of k inside txn, in replay order.
// A key without a snapshot returns no records (and no deltas may exist).
func (s *Store) records(txn *badger.Txn, k Key) ([]sharegroup.Record, error) {
	if why, err := s.quarantined(txn, k); err != nil || why != "" {
		if err == nil {
			err = fmt.Errorf("sharegroup/store: share-partition set aside at a checkpoint (%s): %w", why, sharegroup.ErrCorruptRecord)
		}
		return nil, err
	}
	item, err := txn.Get(s.snapshotKey(k))
	if errors.Is(err, badger.ErrKeyNotFound) {
		r, err := s.scanDeltaRange(txn, k)
		if err == nil && r.count() > 0 {
			err = fmt.Errorf("sharegroup/store: %d deltas without a snapshot: %w", r.count(), sharegroup.ErrCorruptRecord)
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	var out []sharegroup.Record
	decode := func(item *badger.Item) error {
		return item.Value(func(v []byte) error { // v is only valid here: decode copies
			r, err := sharegroup.DecodeRecord(v)
			if err != nil {
				return fmt.Errorf("sharegroup/store: key %x: %w", item.Key(), err)
			}
			out = append(out, r)
			return nil
		})
	}
	if err := decode(item); err != nil {
		return nil, err
	}
	prefix := s.deltaPrefix(k)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 64})
	defer it.Close()
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		if err := decode(it.Item()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// LoadRecords returns the persisted records of k (snapshot first), or nil
// if k has no state. It waits for the writes of k in flight first, and
// clears k's failure mark: its owner is reloading it.
func (s *Store) LoadRecords(k Key) ([]sharegroup.Record, error) {
	is := func(x Key) bool { return x == k }
	s.settle(is)
	s.forgive(is)
	unlock, err := s.flushLog()
	if err != nil {
		return nil, err
	}
	defer unlock()
	var out []sharegroup.Record
	err = s.db.View(func(txn *badger.Txn) error {
		var err error
		out, err = s.records(txn, k)
		return err
	})
	return out, err
}

// Load rebuilds the share-partition k with cfg. found is false when k has
// no persisted state (the broker then creates it with sharegroup.New and
// persists the initial snapshot). Corrupt state returns an error wrapping
// sharegroup.ErrCorruptRecord.
func (s *Store) Load(k Key, cfg sharegroup.Config) (p *sharegroup.Partition, found bool, err error) {
	records, err := s.LoadRecords(k)
	if err != nil || len(records) == 0 {
		return nil, false, err
	}
	p, err = sharegroup.Recover(cfg, records)
	if err != nil {
		return nil, false, fmt.Errorf("sharegroup/store: key %v: %w", k, err)
	}
	return p, true, nil
}

// Delete removes all state of k (DeleteShareGroupOffsets, DeleteGroups,
// topic deletion), once the writes of k in flight have finished: none
// can bring any of it back.
func (s *Store) Delete(k Key) error {
	is := func(x Key) bool { return x == k }
	s.settle(is)
	s.forgive(is)
	unlock, err := s.flushLog()
	if err != nil {
		return err // it says why: a checkpoint failed, or the log is broken
	}
	defer unlock()
	return s.deletePrefix(s.keyPrefix(k), func() {
		s.mu.Lock()
		delete(s.mu.deltas, k)
		s.mu.Unlock()
	})
}

// DeleteGroup removes the state of every share-partition of group.
func (s *Store) DeleteGroup(group string) error {
	in := func(x Key) bool { return x.Group == group }
	s.settle(in)
	s.forgive(in)
	unlock, err := s.flushLog()
	if err != nil {
		return err // it says why: a checkpoint failed, or the log is broken
	}
	defer unlock()
	return s.deletePrefix(s.groupPrefix(group), func() {
		s.mu.Lock()
		for k := range s.mu.deltas {
			if k.Group == group {
				delete(s.mu.deltas, k)
			}
		}
		s.mu.Unlock()
	})
}

// deletePrefix deletes every key under prefix, in as many transactions as
// badger needs, then calls done.
func (s *Store) deletePrefix(prefix []byte, done func()) error {
	for {
		var keys [][]byte
		err := s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			defer it.Close()
			for it.Seek(prefix); it.ValidForPrefix(prefix) && len(keys) < 10_000; it.Next() {
				keys = append(keys, it.Item().KeyCopy(nil))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("sharegroup/store: delete: %w", err)
		}
		if len(keys) == 0 {
			done()
			return nil
		}
		err = s.db.Update(func(txn *badger.Txn) error {
			for _, k := range keys {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("sharegroup/store: delete: %w", err)
		}
	}
}

// Keys lists the share-partitions of group that have state, in key order.
func (s *Store) Keys(group string) ([]Key, error) {
	unlock, err := s.flushLog()
	if err != nil {
		return nil, err
	}
	defer unlock()
	prefix := s.groupPrefix(group)
	var out []Key
	err = s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
			key := it.Item().Key()
			rest := key[len(prefix):]
			if len(rest) != 16+4+1 || rest[20] != tagSnapshot {
				continue
			}
			k := Key{Group: group, Partition: int32(binary.BigEndian.Uint32(rest[16:20]))}
			copy(k.TopicID[:], rest[:16])
			out = append(out, k)
		}
		return nil
	})
	return out, err
}

// commitToLog is commitGroup with a change log: the records of the live
// writes of q go into one frame, one sync. A write whose records do not
// encode fails alone (and any write after it of the same keys: blocked).
func (s *Store) commitToLog(q []*Pending, live []int, errs []error, blocked func(int) bool) []error {
	l := s.log
	payload := append(l.buf[:0], frameVersion)
	var in []int
	records := 0
	for _, i := range live {
		if blocked(i) {
			continue
		}
		at := len(payload)
		var err error
		for _, pr := range q[i].batch {
			if payload, err = appendEntry(payload, pr); err != nil {
				break
			}
		}
		if err != nil {
			payload = payload[:at]
			errs[i] = fmt.Errorf("sharegroup/store: write: %w", err)
			continue
		}
		for _, pr := range q[i].batch {
			records += len(pr.Records)
		}
		in = append(in, i)
	}
	l.buf = payload[:0]
	if cap(payload) > 1<<20 {
		l.buf = nil // a rare big frame's buffer is not kept
	}
	if len(in) == 0 {
		return errs
	}
	if err := l.write(payload, records); err != nil {
		for _, i := range in {
			errs[i] = err
		}
	}
	return errs
}
