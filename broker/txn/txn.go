package txn

import (
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/groups"
	"github.com/shoal-mq/shoal/broker/meta"
	"github.com/shoal-mq/shoal/broker/topics"
)

// State is Kafka's TransactionState.
type State int8

const (
	Empty State = iota
	Ongoing
	PrepareCommit
	PrepareAbort
	CompleteCommit
	CompleteAbort
	Dead
)

var txnStateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead"}

func (s State) String() string {
	if int(s) < len(txnStateNames) {
		return txnStateNames[s]
	}
	return "Unknown"
}

func parseTxnState(name string) (State, bool) {
	for i, n := range txnStateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// Record is a txn as stored in badger (JSON) and the state the
// coordinator keeps in memory.
type Record struct {
	ID             string `json:"id"`
	ProducerID     int64  `json:"pid"`
	Epoch          int16  `json:"epoch"`
	LastProducerID int64  `json:"last_pid"`
	LastEpoch      int16  `json:"last_epoch"`
	TimeoutMs      int32  `json:"timeout_ms"`
	State          State  `json:"state"`
	// StartMs is when the transaction became Ongoing (-1: none); UpdateMs
	// when the txn last changed.
	StartMs    int64       `json:"start_ms"`
	UpdateMs   int64       `json:"update_ms"`
	Partitions []groups.TP `json:"-"`
	Parts      []Part      `json:"partitions,omitempty"`
	Groups     []string    `json:"groups,omitempty"`
	// Offsets are the transaction's pending offset commits
	// (TxnOffsetCommit), applied to their groups at commit.
	Offsets []Offset `json:"offsets,omitempty"`
	// Next is the producer id and epoch the txn moves to once its
	// completion is done, set by an EndTxn v5+ whose epoch bump found
	// the epoch exhausted (KIP-890 part 2: the markers carry the old
	// producer id, the answer the new one).
	Next *Producer `json:"next,omitempty"`
	// LastEnd says LastProducerID and LastEpoch were left by an EndTxn
	// v5+ (so a request with them may be its retry), not by a fencing
	// bump.
	LastEnd bool `json:"last_end,omitempty"`
	// Bumped (Prepare* only): the decision moved the epoch, so its
	// markers carry an epoch above every batch of the transaction. A
	// partition whose producer is already at that epoch holds the marker
	// (or batches of a later transaction, written after it): replaying
	// the completion skips it.
	Bumped bool `json:"bumped,omitempty"`
}

// Producer is a producer id and epoch.
type Producer struct {
	ProducerID int64 `json:"pid"`
	Epoch      int16 `json:"epoch"`
}

type Part struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
}

type Offset struct {
	Group       string `json:"g"`
	Topic       string `json:"t"`
	Partition   int32  `json:"p"`
	Offset      int64  `json:"o"`
	LeaderEpoch int32  `json:"e"`
	Metadata    string `json:"m,omitempty"`
	CommitMs    int64  `json:"c"`
	// Stamp is groups.OffsetCommit.Stamp; absent in a record written before
	// the stamp was known, whose own version then is the stamp (load).
	Stamp uint64 `json:"s,omitempty"`
}

// Txn is one transactional id.
type Txn struct {
	id string
	mu struct {
		sync.Mutex
		Record
		partitions map[groups.TP]struct{}
		groups     map[string]struct{}
		offsets    map[string]map[groups.TP]groups.OffsetCommit // group → pending
		removed    bool                                         // expired: look the id up again
		// completing is the completion of the last decided transaction
		// while it runs in the background or after it failed; nil once
		// it is durable (settleLocked).
		completing *completion
	}
}

// completion is what remains of a decided transaction once its txn shows
// it as Complete*: fsyncing its markers, applying its offsets to their
// groups (commit) and writing Complete* to badger, done in the
// background by finish, or only the write (completeLocked's way). Until
// done is closed, and redone by settleLocked if err says it failed,
// badger may still hold the Prepare* decision.
type completion struct {
	done chan struct{}
	err  error // set before done is closed

	// bumped: the markers carry an epoch above the transaction's
	// batches (Record.Bumped), so replaying them skips partitions
	// already marked and a new transaction need not wait for this one.
	bumped  bool
	commit  bool
	pid     int64
	epoch   int16
	tps     []groups.TP
	offsets map[string]map[groups.TP]groups.OffsetCommit
	// marked, applied and cleared record progress, for a redo: the
	// markers are durable, the offsets applied (commit), the offsets no
	// longer pending.
	marked, applied, cleared bool
	record                   []byte // the Complete* txn record
}

// Options are what the transaction coordinator needs, given once
// (New): handles from below, the config lookup, and test
// hooks.
type Options struct {
	// Store holds the txn records and allocates producer ids.
	Store *meta.Store
	// Topics and Syncer: the partitions markers are appended to, and
	// their fsyncs.
	Topics *topics.Registry
	Syncer *topics.Syncer
	// Groups applies committed offsets and indexes pending ones.
	Groups *groups.Coordinator
	Logger *zap.Logger
	// Done is closed when the broker shuts down (expireLoop returns).
	Done <-chan struct{}
	// Setting returns a transaction broker config in milliseconds
	// (the root's txnBrokerConfigDefs).
	Setting func(name string) int64
	// MarkerSyncDelay, if nonzero, replaces markerSyncDelay (negative:
	// none). The hooks, if set (tests), run at the points their names
	// say (Config's fields of the same names document them).
	MarkerSyncDelay                   time.Duration
	OffsetBeforeLock, OffsetBeforeAdd func(group string)
	BeforeApply                       func(id string)
	BeforeDropMarks                   func(group string)
	BeforeStep                        func(id, step string) error
	StampedBeforeWrite                func() error
}

// Coordinator owns every txn.
type Coordinator struct {
	o  Options
	lg *zap.Logger
	// finishing counts background completions (finish) and Complete*
	// writes in flight; Close waits for them.
	finishing sync.WaitGroup
	// markerDelay is markerSyncDelay unless the config replaces it.
	markerDelay time.Duration

	mu struct {
		sync.Mutex
		txns map[string]*Txn
	}
}

func Key(id string) []byte { return []byte(meta.PrefixTxn + url.PathEscape(id)) }

func New(o Options) *Coordinator {
	c := &Coordinator{o: o, lg: o.Logger.Named("txn"), markerDelay: markerSyncDelay}
	if d := o.MarkerSyncDelay; d != 0 {
		c.markerDelay = max(d, 0)
	}
	c.mu.txns = map[string]*Txn{}
	return c
}

// Load reads every txn from badger.
func (c *Coordinator) Load() error {
	var unstamped []*Txn
	err := meta.ScanJSON(c.o.Store.DB(), meta.PrefixTxn, func(_ string, rec Record) error {
		t := &Txn{id: rec.ID}
		t.mu.Record = rec
		t.mu.partitions = map[groups.TP]struct{}{}
		for _, p := range rec.Parts {
			t.mu.partitions[groups.TP{Topic: p.Topic, Partition: p.Partition}] = struct{}{}
		}
		t.mu.groups = map[string]struct{}{}
		for _, g := range rec.Groups {
			t.mu.groups[g] = struct{}{}
		}
		t.mu.offsets = map[string]map[groups.TP]groups.OffsetCommit{}
		for _, o := range rec.Offsets {
			c.addPendingOffset(t, o.Group, groups.TP{Topic: o.Topic, Partition: o.Partition},
				groups.OffsetCommit{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTime: time.UnixMilli(o.CommitMs), Stamp: o.Stamp})
		}
		if slices.ContainsFunc(rec.Offsets, func(o Offset) bool { return o.Stamp == 0 }) {
			unstamped = append(unstamped, t)
		}
		c.mu.txns[rec.ID] = t
		return nil
	})
	if err != nil {
		return err
	}
	// An offset without a stamp was written by the record's own write
	// (the TxnOffsetCommit, before its stamp was read back) or before
	// stamps existed: the record's version stands in for it.
	for _, t := range unstamped {
		v, err := c.recordVersion(t.id)
		if err != nil {
			return err
		}
		for _, offs := range t.mu.offsets {
			for tp, oc := range offs {
				if oc.Stamp == 0 {
					oc.Stamp = v
					offs[tp] = oc
				}
			}
		}
	}
	if err := c.supersedeLoaded(); err != nil {
		return err
	}
	return c.loadGroups()
}

// supersedeLoaded finds, at start, the pending offsets that a deletion
// came after (pendingTP.live), as far as badger still keeps that
// deletion: a deletion mark overwritten by a plain commit may be gone
// after compaction, and the offset then counts as live again (the
// commit still skips it: the plain commit came after it). Runs alone.
func (c *Coordinator) supersedeLoaded() error {
	return c.o.Store.DB().View(func(btx *badger.Txn) error {
		for _, t := range c.mu.txns {
			for group, offs := range t.mu.offsets {
				for tp, oc := range offs {
					deleted, err := groups.DeletedSince(btx, groups.OffsetKey(group, tp), oc.Stamp)
					if err != nil {
						return err
					}
					if deleted {
						c.o.Groups.Pending.SupersededAtLoad(group, tp)
						oc.PendingSeq = groups.SupersededSeq
						offs[tp] = oc
					}
				}
			}
		}
		return nil
	})
}

// loadGroups makes, at start, the groups that open transactions hold
// offsets for and that nothing else made (a simple committer's group
// has no record): as Kafka, replaying a TxnOffsetCommit's record, makes
// its group. A group whose every pending offset a deletion came after
// is left out if that was its own deletion (DeleteGroups marks the
// group's record key), as Kafka's replay of the group's tombstone
// removes it; OffsetDelete and a deleted topic leave it. Runs alone.
func (c *Coordinator) loadGroups() error {
	newest := map[string]uint64{} // per group, its newest pending offset's stamp
	for _, t := range c.mu.txns {
		for g, offs := range t.mu.offsets {
			for _, oc := range offs {
				newest[g] = max(newest[g], oc.Stamp)
			}
		}
	}
	return c.o.Store.DB().View(func(btx *badger.Txn) error {
		for group, keep := range c.o.Groups.Pending.LiveGroups() {
			if !keep {
				deleted, err := groups.DeletedAfter(btx, group, newest[group])
				if err != nil {
					return err
				}
				keep = !deleted
			}
			if keep {
				c.o.Groups.LoadTxnGroup(group)
			}
		}
		return nil
	})
}

// recordVersion is the badger version of id's txn record: the order of
// its last write among all of badger's. Read under the txn's lock, right
// after a write of the txn, it is that write's version.
func (c *Coordinator) recordVersion(id string) (uint64, error) {
	var v uint64
	err := c.o.Store.DB().View(func(btx *badger.Txn) error {
		item, err := btx.Get(Key(id))
		if err != nil {
			return err
		}
		v = item.Version()
		return nil
	})
	return v, err
}

// Recover completes every transaction found in Prepare*: its decision
// was durable before the crash. Runs at start, before the listener opens.
func (c *Coordinator) Recover() {
	// They are completed in the order they were decided. (Their offsets
	// do not depend on it: applyTxnOffsets keeps the latest commit by
	// stamp, whatever order the transactions complete in.)
	type decidedTxn struct {
		t       *Txn
		version uint64
	}
	var decided []decidedTxn
	for _, t := range c.all() {
		t.mu.Lock()
		if st := t.mu.State; st == PrepareCommit || st == PrepareAbort {
			v, err := c.recordVersion(t.id)
			if err != nil {
				c.lg.Warn("reading a decided transaction's record failed", zap.String("transactional_id", t.id), zap.Error(err))
			}
			decided = append(decided, decidedTxn{t, v})
		}
		t.mu.Unlock()
	}
	sort.SliceStable(decided, func(i, j int) bool { return decided[i].version < decided[j].version })
	for _, d := range decided {
		t := d.t
		t.mu.Lock()
		c.lg.Info("completing a transaction decided before the restart", zap.String("transactional_id", t.id), zap.Stringer("state", t.mu.State))
		if err := c.completeLocked(t, time.Now()); err != nil {
			c.lg.Warn("completing a transaction failed; retrying later", zap.String("transactional_id", t.id), zap.Error(err))
		}
		t.mu.Unlock()
	}
	c.adoptOpenTxns(time.Now())
}

// adoptOpenTxns reconciles, at start, the transactions open in the logs
// with the coordinator's. A partition added implicitly (Produce v12+,
// admitProduceLocked) is recorded only by its batches: if the broker
// stopped before the transaction was decided, the txn found in badger
// does not list the partition, or (for the first partition of a
// transaction) is still Complete* or Empty. A transaction open in a
// partition at its producer's current epoch is therefore the txn's
// current transaction: the partition is added back, the txn made Ongoing
// (its timeout restarting now) and written, so EndTxn or the timeout
// ends it everywhere. An open transaction the coordinator cannot own
// (an unknown producer id, an older epoch, a txn still in Prepare*)
// gets an ABORT marker at the txn's epoch, so no last stable offset
// stays stuck behind it; one in a partition of a txn still in Prepare*
// is left to that txn's completion. Runs after recover completed
// Prepare*.
func (c *Coordinator) adoptOpenTxns(now time.Time) {
	byPID := map[int64]*Txn{}
	for _, t := range c.all() {
		t.mu.Lock()
		if t.mu.ProducerID >= 0 {
			byPID[t.mu.ProducerID] = t
		}
		t.mu.Unlock()
	}
	dirty := map[*Txn]bool{}
	for _, top := range c.o.Topics.All() {
		parts, _ := c.o.Topics.Snapshot(top)
		for _, p := range parts {
			for _, pi := range p.Log.Producers() {
				if pi.CurrentTxnStartOffset < 0 {
					continue
				}
				tp := groups.TP{Topic: p.Topic, Partition: p.Index}
				t := byPID[pi.ProducerID]
				epoch := pi.Epoch
				if t != nil {
					t.mu.Lock()
					st := t.mu.State
					if pi.Epoch == t.mu.Epoch && st != PrepareCommit && st != PrepareAbort && st != Dead {
						if st != Ongoing {
							t.beginLocked(now)
						}
						if _, ok := t.mu.partitions[tp]; !ok {
							t.mu.partitions[tp] = struct{}{}
							dirty[t] = true
							c.lg.Info("adopting a transaction open in a partition", zap.String("transactional_id", t.id),
								zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Int64("first_offset", pi.CurrentTxnStartOffset))
						}
						t.mu.Unlock()
						continue
					}
					if _, ok := t.mu.partitions[tp]; ok && (st == PrepareCommit || st == PrepareAbort) {
						t.mu.Unlock()
						continue // decided: the completion retry writes its marker
					}
					epoch = max(epoch, t.mu.Epoch)
					t.mu.Unlock()
				}
				c.lg.Warn("aborting a transaction open in a partition that no transaction coordinator state owns",
					zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Int64("producer_id", pi.ProducerID),
					zap.Int16("epoch", pi.Epoch), zap.Int64("first_offset", pi.CurrentTxnStartOffset))
				waits, err := c.writeMarkers(pi.ProducerID, epoch, false, false, []groups.TP{tp}, now, 0)
				if err = errors.Join(err, waitMarkers(waits)); err != nil {
					c.lg.Error("aborting an orphaned transaction failed", zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Error(err))
				}
			}
		}
	}
	for t := range dirty {
		t.mu.Lock()
		if err := c.persistLocked(t, now); err != nil {
			c.lg.Error("writing an adopted transaction failed; the timeout still ends it", zap.String("transactional_id", t.id), zap.Error(err))
		}
		t.mu.Unlock()
	}
}

func (c *Coordinator) all() []*Txn {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Txn, 0, len(c.mu.txns))
	for _, t := range c.mu.txns {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// lock returns the txn for id locked, creating it (Empty, not yet
// persisted, ProducerID -1) if create is set, or nil.
func (c *Coordinator) lock(id string, create bool) *Txn {
	for {
		c.mu.Lock()
		t := c.mu.txns[id]
		if t == nil {
			if !create {
				c.mu.Unlock()
				return nil
			}
			t = &Txn{id: id}
			t.mu.Record = Record{ID: id, ProducerID: -1, Epoch: -1, LastProducerID: -1, LastEpoch: -1, StartMs: -1}
			t.mu.partitions = map[groups.TP]struct{}{}
			t.mu.groups = map[string]struct{}{}
			t.mu.offsets = map[string]map[groups.TP]groups.OffsetCommit{}
			c.mu.txns[id] = t
		}
		c.mu.Unlock()
		t.mu.Lock()
		if !t.mu.removed {
			return t
		}
		t.mu.Unlock()
	}
}

// Lock returns id's txn locked, or nil if id has none. A transactional
// Produce holds it across its appends (AdmitProduceLocked); Unlock
// releases it.
func (c *Coordinator) Lock(id string) *Txn { return c.lock(id, false) }

// Unlock releases a txn locked by Lock.
func (t *Txn) Unlock() { t.mu.Unlock() }

// Wait waits for the background completions and Complete* writes in
// flight (Close: after the listener stopped, before the store closes).
func (c *Coordinator) Wait() { c.finishing.Wait() }

// Completion is a read-out (tests): the completion of id's last
// decision while it runs in the background or after it failed; done is
// closed once it ended, err then tells how. ok is false once the
// completion is known durable, or for an unknown id.
func (c *Coordinator) Completion(id string) (done <-chan struct{}, err func() error, ok bool) {
	t := c.lock(id, false)
	if t == nil {
		return nil, nil, false
	}
	cmp := t.mu.completing
	t.mu.Unlock()
	if cmp == nil {
		return nil, nil, false
	}
	return cmp.done, func() error { <-cmp.done; return cmp.err }, true
}

// Record is a read-out (tests): id's txn as persistLocked would store it
// now (UpdateMs aside), pending offsets included.
func (c *Coordinator) Record(id string) (Record, bool) {
	t := c.lock(id, false)
	if t == nil {
		return Record{}, false
	}
	defer t.mu.Unlock()
	v, err := c.encodeLocked(t, time.UnixMilli(t.mu.UpdateMs))
	if err != nil {
		panic(err) // a Record always encodes
	}
	var rec Record
	if err := json.Unmarshal(v, &rec); err != nil {
		panic(err)
	}
	return rec, true
}

// persistLocked writes t to badger and waits for it to be durable,
// after the last completion (settleLocked). The write is group-committed
// with other transactions' concurrent writes (meta.Committer). t.mu
// held.
func (c *Coordinator) persistLocked(t *Txn, now time.Time) error {
	return c.persistWithLocked(t, now, func(k, v []byte) error { return c.o.Store.Committer().Write(meta.Op{Key: k, Value: v}) })
}

// persistStampedLocked is persistLocked in a badger commit of its own,
// for a record whose version becomes the stamp of the offsets it adds
// (TxnOffsetCommit, stampLocked): a group commit gives every write in it
// the same version, and applyTxnOffsets takes an offset whose stamp
// equals the partition's newest write for that write itself. t.mu held.
func (c *Coordinator) persistStampedLocked(t *Txn, now time.Time) error {
	return c.persistWithLocked(t, now, func(k, v []byte) error {
		if h := c.o.StampedBeforeWrite; h != nil {
			if err := h(); err != nil {
				return err
			}
		}
		return c.o.Store.DB().Update(func(btx *badger.Txn) error { return btx.Set(k, v) })
	})
}

func (c *Coordinator) persistWithLocked(t *Txn, now time.Time, write func(k, v []byte) error) error {
	if err := c.settleLocked(t, now); err != nil {
		return err
	}
	v, err := c.encodeLocked(t, now)
	if err != nil {
		return err
	}
	if err := write(Key(t.id), v); err != nil {
		c.lg.Error("persisting transaction state failed", zap.String("transactional_id", t.id), zap.Error(err))
		return err
	}
	return nil
}

// settleLocked waits until t's last completion is durable, redoing
// what failed of it. Every write of t goes after it (persistLocked):
// while badger may still hold a Prepare*, writing t anew would lose the
// decision that completing it at start needs. t.mu held.
func (c *Coordinator) settleLocked(t *Txn, now time.Time) error {
	cmp := t.mu.completing
	if cmp == nil {
		return nil
	}
	if !closed(cmp.done) {
		// Its markers may wait for appends that t.mu, held here, keeps
		// the producer from making (markerSyncDelay).
		for _, tp := range cmp.tps {
			if p := c.o.Topics.Partition(tp.Topic, tp.Partition); p != nil {
				c.o.Syncer.Hurry(p)
			}
		}
	}
	<-cmp.done
	if cmp.err != nil {
		if err := c.redoLocked(t, cmp, now); err != nil {
			return err
		}
	}
	t.mu.completing = nil
	return nil
}

// redoLocked finishes a completion that failed: the markers not known
// durable (skipping partitions already marked when the epoch was
// bumped), the offsets, and the Complete* record, waiting for each.
// t.mu held.
func (c *Coordinator) redoLocked(t *Txn, cmp *completion, now time.Time) error {
	if !cmp.marked {
		waits, err := c.writeMarkers(cmp.pid, cmp.epoch, cmp.commit, cmp.bumped, cmp.tps, now, 0)
		if err == nil {
			err = waitMarkers(waits)
		}
		if err != nil {
			return err
		}
		cmp.marked = true
	}
	if !cmp.applied {
		if err := c.applyOffsets(t.id, cmp.offsets); err != nil {
			return err
		}
		cmp.applied = true
	}
	if !cmp.cleared {
		c.clearPending(cmp.offsets)
		cmp.cleared = true
	}
	if err := c.beforeStep(t.id, "complete"); err != nil {
		return err
	}
	if err := c.o.Store.Committer().Write(meta.Op{Key: Key(t.id), Value: cmp.record}); err != nil {
		return err
	}
	cmp.err = nil
	return nil
}

// encodeLocked returns t's badger record. t.mu held.
func (c *Coordinator) encodeLocked(t *Txn, now time.Time) ([]byte, error) {
	t.mu.UpdateMs = now.UnixMilli()
	rec := t.mu.Record
	rec.Parts, rec.Groups = nil, nil // rebuilt from the maps, which are the truth
	for tp := range t.mu.partitions {
		rec.Parts = append(rec.Parts, Part{tp.Topic, tp.Partition})
	}
	sort.Slice(rec.Parts, func(i, j int) bool {
		a, b := rec.Parts[i], rec.Parts[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	for g := range t.mu.groups {
		rec.Groups = append(rec.Groups, g)
	}
	sort.Strings(rec.Groups)
	rec.Offsets = nil
	for g, offs := range t.mu.offsets {
		for tp, oc := range offs {
			rec.Offsets = append(rec.Offsets, Offset{Group: g, Topic: tp.Topic, Partition: tp.Partition, Offset: oc.Offset,
				LeaderEpoch: oc.LeaderEpoch, Metadata: oc.Metadata, CommitMs: oc.CommitTime.UnixMilli(), Stamp: oc.Stamp})
		}
	}
	return json.Marshal(rec)
}

// txnSnapshot is a copy of a txn's state, to roll back a change whose
// write failed.
type txnSnapshot struct {
	rec        Record
	partitions map[groups.TP]struct{}
	groups     map[string]struct{}
}

// snapshotLocked copies t's state. t.mu held.
func (t *Txn) snapshotLocked() txnSnapshot {
	s := txnSnapshot{rec: t.mu.Record, partitions: make(map[groups.TP]struct{}, len(t.mu.partitions)), groups: make(map[string]struct{}, len(t.mu.groups))}
	for k := range t.mu.partitions {
		s.partitions[k] = struct{}{}
	}
	for k := range t.mu.groups {
		s.groups[k] = struct{}{}
	}
	return s
}

func (t *Txn) restoreLocked(s txnSnapshot) {
	t.mu.Record, t.mu.partitions, t.mu.groups = s.rec, s.partitions, s.groups
}
