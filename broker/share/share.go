package share

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/meta"
	"github.com/shoal-mq/shoal/broker/metrics"
	"github.com/shoal-mq/shoal/broker/quota"
	"github.com/shoal-mq/shoal/broker/topics"
	"github.com/shoal-mq/shoal/sharegroup"
	"github.com/shoal-mq/shoal/sharegroup/store"
)

// errNoShareState is an acknowledgement for a share-partition that was
// never initialized: nothing can have been acquired there
// (INVALID_RECORD_STATE).
var errNoShareState = errors.New("broker: share-partition has no state")

// errShareClosed is an operation racing broker shutdown.
var errShareClosed = errors.New("broker: share coordinator closed")

// shareErrorCode maps share errors to Kafka codes: this file's sentinels,
// then the broker's table (kafkaerr.Code).
func shareErrorCode(err error) int16 {
	switch {
	case errors.Is(err, errNoShareState):
		return kerr.InvalidRecordState.Code
	case errors.Is(err, errShareClosed):
		return kerr.NotLeaderForPartition.Code
	}
	return kafkaerr.Code(err)
}

func shareKey(group string, tp shareTP) store.Key {
	return store.Key{Group: group, TopicID: tp.topicID, Partition: tp.partition}
}

// shareLogDir is the share-group change log's directory in the data
// directory.
const shareLogDir = "share-log"

// Options are what the share coordinator needs, given once
// (New): handles from below, the lookups that come from
// above, and test hooks.
type Options struct {
	// Store holds the share groups, the group configs, the DLQ intents
	// and counts, and (under sharegroup/store) the share-partition state.
	Store *meta.Store
	// Topics, Admin and Syncer: the logs read and the DLQ topics
	// created and written, and their fsyncs.
	Topics *topics.Registry
	Admin  *topics.Admin
	Syncer *topics.Syncer
	// Metrics counts per share group; Quotas grants delivery rates.
	Metrics *metrics.Metrics
	Quotas  *quota.Manager
	Logger  *zap.Logger
	// Ctx is cancelled when the broker shuts down.
	Ctx context.Context
	// DataDir holds the share-group change log (shareLogDir).
	DataDir string
	// FsyncAlways: a DLQ copy waits for its fsync (fsync=always).
	FsyncAlways bool
	// BatchCacheBytes bounds the parsed-batch cache (trimCache);
	// DefaultPartitions is an auto-created DLQ topic's partition count.
	BatchCacheBytes   int64
	DefaultPartitions int32
	// BrokerConfig returns a dynamic broker config override, if set.
	BrokerConfig func(name string) (string, bool)
	// IsConsumerGroup reports whether a consumer group (classic or
	// KIP-848) has that name.
	IsConsumerGroup func(name string) bool
	// Owned, if set, names the groups another API owns (an SQS queue's)
	// and their settings, which replace the group configs: see Owned.
	Owned func(group string) (Owned, bool)
	// BeforeCommit (tests) runs before each share-state group commit;
	// an error fails it (store.Options.BeforeCommit).
	BeforeCommit func() error
	// DLQ holds the dead-letter writer's test hooks.
	DLQ DLQHooks
}

// Owned are the settings of a share group another API owns (an SQS
// queue's, package sqs), replacing its group configs: such a group
// delivers what was sent before its first receive (earliest), renews
// locks whatever share.renew.acknowledge.enable says, and has this
// delivery limit and dead-letter topic.
type Owned struct {
	// DeliveryLimit is the queue's maxReceiveCount (1 to 1,000), or 0 for
	// no limit (no redrive policy).
	DeliveryLimit int
	// DeadLetterTopic is the redrive policy's target queue's topic (""
	// none). The record is copied whole; the topic needs neither the
	// dead-letter prefix nor errors.deadletterqueue.group.enable.
	DeadLetterTopic string
	// OrderedBy, when set, is the header naming a record's message
	// group, each group delivered in order (a FIFO queue: the ordered
	// message-group mode).
	OrderedBy string
	// OrderedBatch is how many consecutive records of one group a
	// receive takes, locked together (sharegroup.Config.OrderedBatch).
	OrderedBatch int
}

// Coordinator owns share groups, share-partitions and share sessions.
type Coordinator struct {
	o        Options
	lg       *zap.Logger
	store    *store.Store
	configs  shareConfigStore
	sessions shareSessionCache
	dlq      dlqCoordinator // dead-letter writers (dlq.go)
	trims    trimCache      // parsed log batches of group-mode fetches (batchcache.go)

	mu struct {
		sync.Mutex
		groups map[string]*shareGroup
		parts  map[store.Key]*sharePart
		closed bool
	}
}

// New loads the share groups and group configs from the
// metadata store. Share-partition state is loaded lazily.
func New(o Options) (*Coordinator, error) {
	c := &Coordinator{
		o:  o,
		lg: o.Logger.Named("share"),
	}
	var err error
	c.store, err = store.Open(o.Store.DB(), store.Options{
		Prefix:       []byte(meta.PrefixShareGroups),
		BeforeCommit: o.BeforeCommit,
		// Acknowledgements are durable once in this change log, one
		// fdatasync each group commit; checkpoints move them into
		// badger in the background (sharegroup/store/doc.go).
		LogDir: filepath.Join(o.DataDir, shareLogDir),
		BackgroundError: func(err error) {
			c.lg.Error("share-group change log: a checkpoint into the metadata store, or a spare segment file, failed; the records stay in the log and it is retried", zap.Error(err))
		},
	})
	if err != nil {
		return nil, fmt.Errorf("broker: share-group state: %w", err)
	}
	c.trims.max = o.BatchCacheBytes
	c.dlq.attempt.max, c.dlq.attempt.backoff, c.dlq.attempt.maxBackoff = o.DLQ.MaxAttempts, o.DLQ.Backoff, o.DLQ.MaxBackoff
	c.dlq.crashAt, c.dlq.failAttempt = o.DLQ.CrashAt, o.DLQ.FailAttempt
	c.mu.groups = map[string]*shareGroup{}
	c.mu.parts = map[store.Key]*sharePart{}
	c.sessions.m = map[shareSessionKey]*shareSession{}
	if c.configs.m, err = loadShareGroupConfigs(o.Store.DB()); err == nil {
		err = c.loadGroups()
	}
	if err != nil {
		c.store.Close()
		return nil, err
	}
	return c, nil
}

// Close stops every timer; no timer does work after it returns. Called by
// Broker.Close once no connection is left, before the metadata store
// closes.
func (c *Coordinator) Close() {
	c.dlq.close()
	c.mu.Lock()
	c.mu.closed = true
	parts := make([]*sharePart, 0, len(c.mu.parts))
	for _, sp := range c.mu.parts {
		parts = append(parts, sp)
	}
	groups := make([]*shareGroup, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		groups = append(groups, g)
	}
	c.mu.Unlock()
	for _, sp := range parts {
		sp.mu.Lock()
		sp.mu.stopped = true
		sp.stopTimerLocked()
		sp.mu.Unlock()
	}
	for _, g := range groups {
		g.mu.Lock()
		g.mu.stopped = true
		if g.mu.timer != nil {
			g.mu.timer.Stop()
		}
		g.mu.Unlock()
	}
	if err := c.store.Close(); err != nil {
		c.lg.Error("closing the share-group change log failed; it is replayed at the next start", zap.Error(err))
	}
}

// part returns the owner of a share-partition, creating it (unloaded).
func (c *Coordinator) part(key store.Key) *sharePart {
	c.mu.Lock()
	defer c.mu.Unlock()
	sp := c.mu.parts[key]
	if sp == nil {
		sp = &sharePart{c: c, key: key, m: c.o.Metrics.ShareGroup(key.Group)}
		sp.mu.stopped = c.mu.closed
		c.mu.parts[key] = sp
	}
	return sp
}

// loadedParts returns every share-partition owner in memory (metrics).
func (c *Coordinator) loadedParts() []*sharePart {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*sharePart, 0, len(c.mu.parts))
	for _, sp := range c.mu.parts {
		out = append(out, sp)
	}
	return out
}

// PartStates calls fn for every share-partition loaded in memory with
// state, with its records by sharegroup.RecordState and its lag behind
// hw (when hw knows the partition's high watermark; else 0): the state
// collector's read-out (metrics_state.go). Each sharePart.mu is taken
// in turn, held for the counting only; fn runs with no lock held.
func (c *Coordinator) PartStates(hw func(topicID [16]byte, partition int32) (int64, bool), fn func(key store.Key, counts [5]int64, lag int64)) {
	for _, sp := range c.loadedParts() {
		var counts [5]int64 // by sharegroup.RecordState
		var lag int64
		sp.mu.Lock()
		p := sp.mu.p
		if p != nil {
			for _, r := range p.Ranges() {
				if int(r.State) < len(counts) {
					counts[r.State] += r.Last - r.First + 1
				}
			}
			if h, ok := hw(sp.key.TopicID, sp.key.Partition); ok {
				lag = p.Lag(h)
			}
		}
		sp.mu.Unlock()
		if p != nil {
			fn(sp.key, counts, lag)
		}
	}
}

// groupParts returns the owners of group's share-partitions that exist
// in memory.
func (c *Coordinator) groupParts(group string) []*sharePart {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*sharePart
	for k, sp := range c.mu.parts {
		if k.Group == group {
			out = append(out, sp)
		}
	}
	sortParts(out)
	return out
}

func compareKeys(a, b store.Key) int {
	if c := strings.Compare(a.Group, b.Group); c != 0 {
		return c
	}
	if c := bytes.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
		return c
	}
	switch {
	case a.Partition < b.Partition:
		return -1
	case a.Partition > b.Partition:
		return 1
	}
	return 0
}

func sortParts(ps []*sharePart) {
	sort.Slice(ps, func(i, j int) bool { return compareKeys(ps[i].key, ps[j].key) < 0 })
}

// shareWaiters are long polls waiting for a share-partition to have
// something to acquire (a release, an expiry, an acknowledgement that
// moved the window).
type shareWaiters struct {
	mu sync.Mutex
	m  map[chan struct{}]string // wake channel → the waiting member
}

func (w *shareWaiters) add(ch chan struct{}, member string) {
	w.mu.Lock()
	if w.m == nil {
		w.m = map[chan struct{}]string{}
	}
	w.m[ch] = member
	w.mu.Unlock()
}

func (w *shareWaiters) remove(ch chan struct{}) {
	w.mu.Lock()
	delete(w.m, ch)
	w.mu.Unlock()
}

// members returns the members waiting now, one per waiting fetch.
func (w *shareWaiters) members() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.m))
	for _, m := range w.m {
		out = append(out, m)
	}
	return out
}

func (w *shareWaiters) notify() {
	w.mu.Lock()
	for ch := range w.m {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
}

// sharePart owns one share-partition. See the file comment.
type sharePart struct {
	c       *Coordinator
	key     store.Key
	waiters shareWaiters
	m       *metrics.ShareGroup // the group's metric children
	// delays is what DirectCounts with a DelayScan learnt of the log past
	// the end offset (delayed.go).
	delays delayState

	mu struct {
		sync.Mutex
		// p is nil until loaded, and again after a failed write or a
		// deletion of the share-partition's state.
		p       *sharegroup.Partition
		timer   *time.Timer
		timerAt time.Time
		stopped bool
		dlq     dlqPartState // dlq.go
		rate    mgRateState  // per-message-group delivery limits, mgroups.go
		// acking lists p's writes submitted by acknowledge and
		// waited for without the lock, oldest first, each with the
		// AckSeq of its Acknowledge (sharegroup.Partition.AckSeq):
		// ordered-mode records following a record one of them ended
		// are handed out once it is durable (acquireGroups); a p one
		// failed for is discarded at the next prepareLocked. Finished
		// ones are dropped there.
		acking []ackWrite
		// offsetBytes is the log bytes per offset of the batches a plain
		// fetch last read (0: none yet), to read about what it acquires
		// (acquirePlain).
		offsetBytes int
	}
}

// ackWrite is an acknowledgement's write in flight (sharePart.mu.acking).
type ackWrite struct {
	seq uint64
	w   *store.Pending
}

// ackWriteFor returns the write in flight holding the records of
// Acknowledge seq of p, or nil when none (finished: durable, or failed
// and p about to be discarded). sp.mu held.
func (sp *sharePart) ackWriteFor(seq uint64) *store.Pending {
	if seq == 0 {
		return nil
	}
	for _, a := range sp.mu.acking {
		if a.seq >= seq {
			return a.w
		}
	}
	return nil
}

// lastAckWriteLocked returns the latest acknowledgement write of p not
// known to be finished, or nil: writes finish in order, so once it is
// durable every earlier one is. sp.mu held.
func (sp *sharePart) lastAckWriteLocked() *store.Pending {
	if n := len(sp.mu.acking); n > 0 {
		return sp.mu.acking[n-1].w
	}
	return nil
}

// prepareLocked makes sure the Partition is loaded with the settings st.
// Without persisted state it is created (create set) from
// share.auto.offset.reset, or errNoShareState is returned. mu held.
func (sp *sharePart) prepareLocked(now time.Time, st shareGroupSettings, create bool) error {
	if sp.mu.stopped {
		return errShareClosed
	}
	for len(sp.mu.acking) > 0 && sp.mu.acking[0].w.Done() {
		if sp.mu.acking[0].w.Failed() {
			sp.discardLocked() // p holds states that are not stored
			break
		}
		sp.mu.acking = sp.mu.acking[1:]
	}
	cfg := st.partitionConfig()
	if p := sp.mu.p; p != nil {
		if p.Config() != cfg {
			return p.SetConfig(cfg)
		}
		return nil
	}
	p, found, err := sp.c.store.Load(sp.key, cfg)
	if err != nil {
		sp.c.lg.Error("loading share-partition failed", zapShareKey(sp.key), zap.Error(err))
		return err
	}
	if found {
		sp.mu.p = p
		sp.kickDLQLocked() // resume dead-letter writes pending at a crash
		return nil
	}
	if !create {
		return errNoShareState
	}
	start, err := sp.c.shareStartOffset(sp.key, st, now)
	if err != nil {
		return err
	}
	p, eff, err := sharegroup.New(cfg, 0, start)
	if err != nil {
		return err
	}
	if err := sp.c.store.Write([]store.PartitionRecords{{Key: sp.key, Records: eff.Records}}); err != nil {
		sp.c.lg.Error("persisting new share-partition failed", zapShareKey(sp.key), zap.Error(err))
		return err
	}
	sp.mu.p = p
	return nil
}

// shareStartOffset resolves share.auto.offset.reset for a share-partition
// being initialized.
func (c *Coordinator) shareStartOffset(key store.Key, st shareGroupSettings, now time.Time) (int64, error) {
	_, lp, code := c.o.Topics.PartitionByID(key.TopicID, key.Partition)
	if code != 0 {
		return 0, fmt.Errorf("%w: topic id %x partition %d", kafkaerr.ErrUnknownTopicID, key.TopicID, key.Partition)
	}
	hw := lp.Log.HighWatermark()
	switch reset := st.autoOffsetReset; {
	case reset == "earliest":
		return lp.Log.LogStartOffset(), nil
	case strings.HasPrefix(reset, "by_duration:"):
		d, err := parseISODuration(strings.TrimPrefix(reset, "by_duration:"))
		if err != nil {
			return hw, nil // validated when set; unreachable
		}
		if off, _, found := lp.Log.OffsetForTimestamp(now.Add(-d).UnixMilli()); found {
			return off, nil
		}
		return hw, nil
	default: // latest
		return hw, nil
	}
}

// writeLocked persists the records of this share-partition alone. On
// failure the Partition is discarded. mu held.
func (sp *sharePart) writeLocked(recs []sharegroup.Record) error {
	if len(recs) == 0 {
		return nil
	}
	err := sp.c.store.Write([]store.PartitionRecords{{Key: sp.key, Records: recs}})
	if err != nil {
		sp.c.lg.Error("persisting share-partition state failed; reloading from disk", zapShareKey(sp.key), zap.Error(err))
		sp.discardLocked()
	} else if hasArchiving(recs) {
		sp.kickDLQLocked()
	}
	return err
}

// discardLocked drops the in-memory Partition; the next use reloads it.
func (sp *sharePart) discardLocked() {
	sp.mu.p = nil
	sp.mu.acking = nil
	sp.stopTimerLocked()
}

func (sp *sharePart) stopTimerLocked() {
	if sp.mu.timer != nil {
		sp.mu.timer.Stop()
	}
	sp.mu.timerAt = time.Time{}
}

// armLocked makes the lock timer fire no later than the Partition's next
// lock deadline. An early firing finds nothing due and re-arms.
func (sp *sharePart) armLocked(now time.Time) {
	if sp.mu.stopped || sp.mu.p == nil {
		sp.stopTimerLocked()
		return
	}
	next := sp.mu.p.NextDeadline()
	if next.IsZero() {
		return // a pending timer finds nothing due and stops
	}
	if sp.mu.timer != nil && !sp.mu.timerAt.IsZero() && !next.Before(sp.mu.timerAt) {
		return
	}
	// A millisecond of slack so the timer never fires a hair early.
	d := max(next.Sub(now), 0) + time.Millisecond
	sp.mu.timerAt = next
	if sp.mu.timer == nil {
		sp.mu.timer = time.AfterFunc(d, sp.fire)
	} else {
		sp.mu.timer.Reset(d)
	}
}

// fire is the lock timer: it expires due locks through the owner.
func (sp *sharePart) fire() {
	sp.mu.Lock()
	sp.mu.timerAt = time.Time{}
	if sp.mu.stopped || sp.mu.p == nil {
		sp.mu.Unlock()
		return
	}
	now := time.Now()
	eff := sp.mu.p.ExpireLocks(now)
	sp.m.Observe(eff.Expired, eff.Archived)
	_ = sp.writeLocked(eff.Records) // a failure discarded the Partition: the expiries reload as Available
	sp.armLocked(now)
	sp.mu.Unlock()
	// Expiries (and ended redelivery backoffs, which persist nothing) may
	// have made records available.
	sp.waiters.notify()
}

// releaseMember returns member's acquired records (session closed,
// connection dropped), without counting a delivery.
func (sp *sharePart) releaseMember(now time.Time, member string) {
	sp.mu.Lock()
	if sp.mu.stopped || sp.mu.p == nil {
		sp.mu.Unlock()
		return
	}
	eff := sp.mu.p.ReleaseMember(now, member)
	sp.m.Observe(eff.Expired, eff.Archived)
	_ = sp.writeLocked(eff.Records)
	sp.armLocked(now)
	sp.mu.Unlock()
	sp.waiters.notify()
}

func zapShareKey(k store.Key) zap.Field {
	return zap.String("share_partition", fmt.Sprintf("%s:%x:%d", k.Group, k.TopicID, k.Partition))
}
