package share

// Dead-letter topics for share groups (KIP-1191; kip932.md §8).
//
// # Configs
//
// A share group gets a dead-letter topic with the group config
// errors.deadletterqueue.topic.name (blank: none) and copies the original
// key, value and headers into it with
// errors.deadletterqueue.copy.record.enable=true (default: a "pointer"
// record, headers only). The name is validated as KIP-1191 does, when it
// is set and again before every write: it must be a valid topic name, must
// not start with "__", must start with the broker config
// errors.deadletterqueue.topic.name.prefix (default "dlq."; empty allows
// any name), and an existing topic must have opted in with the topic
// config errors.deadletterqueue.group.enable=true; a missing one is
// created (num.partitions partitions, opted in) at the first write only if
// the broker config errors.deadletterqueue.auto.create.topics.enable is
// true. A refusal is INVALID_CONFIG. Why: the broker writes with its own
// rights; the opt-in and the prefix keep an application from writing
// into topics it has no business in.
//
// # Write path
//
// With a dead-letter topic the state machine (sharegroup) moves a
// rejected record, and one released or expired at the delivery limit,
// Acquired → Archiving, which is persisted and not terminal (the SPSO
// stops there). The share-partition's owner notices new Archiving ranges
// in the records it has just persisted (or finds them when it loads the
// Partition) and starts one writer goroutine for that share-partition,
// never more than one at a time. The writer works outside the owner's
// lock, so fetches and acknowledgements go on meanwhile; at most
// dlqConcurrency attempts run at once broker-wide, and each attempt
// takes at most dlqMaxRecords Archiving offsets, reads their source
// records from the log, appends one DLQ record per offset to partition
// sourcePartition % numDlqPartitions of the dead-letter topic (uncompressed
// batches within its max.message.bytes; timestamp = now), waits until
// that append is fsynced, then takes the lock, calls CompleteArchiving and
// persists the result. A failed attempt (topic missing or refused, log
// failure) is retried with exponential backoff (1 s doubling to 30 s,
// jittered) up to dlqMaxAttempts attempts, logged with zap; after the
// last one the records are archived without a dead-letter copy, as
// KIP-1191 does, so a broken dead-letter topic never stalls the group.
//
// Headers, after the original headers when copying (UTF-8 strings):
// __dlq.errors.topic, __dlq.errors.partition, __dlq.errors.offset,
// __dlq.errors.group, __dlq.errors.delivery.count and
// __dlq.errors.message. The state machine does not record why a record
// was archived, so the message says "rejected" below the delivery limit
// and "rejected or delivery count limit reached" at it.
//
// # Exactly once across crashes
//
// The DLQ append (a log) and the Archived state (badger) cannot commit
// together, so each attempt writes an intent to badger first:
//
//	meta/dlq/pending/<group>/<topic id>/<partition> =
//	    {DLQ topic id, DLQ partition, From: its log end offset before the
//	     append, Ranges: the offsets being written, Written: false}
//
// then appends, waits for the fsync, and in one badger transaction sets
// Written and adds len(Ranges) to the durable count
// meta/dlq/count/<group>/<topic id>/<partition>. Then CompleteArchiving is
// persisted and the intent deleted. Every attempt starts by reading the
// intent of its share-partition:
//
//   - Written: the records are in the DLQ and counted; only the
//     CompleteArchiving (and the intent's deletion) may be missing: do
//     that, write nothing.
//   - pending: an earlier attempt (or run, before a crash) may have
//     appended some or all of Ranges. The writer scans the DLQ partition
//     from From to its end for records whose __dlq.errors.group, .topic,
//     .partition name this share-partition and whose .offset is in
//     Ranges, skips those offsets, and keeps From in its new intent so a
//     second crash still sees them. The scan is bounded by what was
//     appended to that DLQ partition since the intent was written.
//
// So a crash anywhere loses no record (it stays Archiving until its DLQ
// copy is durable and the Written mark persisted) and never writes one
// twice into the same DLQ partition. If the group's dead-letter topic
// changes while a write is pending, the new topic gets its own copy.
// After a restart the writers resume when a share-partition with
// Archiving records is loaded: at startup for every share-partition of a
// group that has a dead-letter topic (resumeDLQ), otherwise at its next
// use.
//
// # Counts
//
// The count keys are durable per (group, topic, partition); ShareDLQCounts
// and ShareDLQTotals expose them (for shoal_share_dlq_records_total{group}).
// Deleting the share-partition's state deletes them.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/configs"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/topics"
	"github.com/shoal-mq/shoal/sharegroup"
	"github.com/shoal-mq/shoal/sharegroup/store"
)

// KIP-1191's config names: the group configs naming a share group's
// dead-letter topic and whether a copy carries the record, the broker
// configs bounding dead-letter topic names and auto-creating them, and
// the topic config opting a topic in; then the headers of a copy.
const (
	DLQTopicNameConfig  = "errors.deadletterqueue.topic.name"
	DLQCopyRecordConfig = "errors.deadletterqueue.copy.record.enable"
	DLQPrefixConfig     = "errors.deadletterqueue.topic.name.prefix"
	DLQAutoCreateConfig = "errors.deadletterqueue.auto.create.topics.enable"
	DLQGroupEnableTopic = "errors.deadletterqueue.group.enable"

	// dlqMaxRecords bounds one attempt (and the memory it holds).
	dlqMaxRecords = 500
	// dlqReadBytes bounds one read of the source log.
	dlqReadBytes = 1 << 20
	// dlqConcurrency bounds the attempts running at once, broker-wide
	// (each holds at most dlqMaxRecords records).
	dlqConcurrency = 8

	DLQHeaderTopic         = "__dlq.errors.topic"
	DLQHeaderPartition     = "__dlq.errors.partition"
	DLQHeaderOffset        = "__dlq.errors.offset"
	DLQHeaderGroup         = "__dlq.errors.group"
	DLQHeaderDeliveryCount = "__dlq.errors.delivery.count"
	DLQHeaderMessage       = "__dlq.errors.message"
)

// Defaults of the retry policy (Kafka's ShareGroupDLQStateManager: 5
// attempts, 1 s to 30 s).
const (
	dlqDefaultAttempts   = 5
	dlqDefaultBackoff    = time.Second
	dlqDefaultMaxBackoff = 30 * time.Second
)

var (
	// errDLQUnavailable is a dead-letter topic that cannot be written now
	// (missing without auto-create, not opted in, refused by the prefix).
	errDLQUnavailable = errors.New("broker: dead-letter topic unavailable")
)

// DLQBrokerConfigDef is one broker config of KIP-1191: its name, type,
// default, validation and doc (the broker config table takes them,
// broker_configs.go).
type DLQBrokerConfigDef struct {
	Name  string
	Type  kmsg.ConfigType
	Def   string
	Check func(string) error
	Doc   string
}

// DLQBrokerConfigDefs are the broker configs of KIP-1191 (dynamic).
var DLQBrokerConfigDefs = []DLQBrokerConfigDef{
	{Name: DLQAutoCreateConfig, Type: kmsg.ConfigTypeBoolean, Def: "false", Check: configs.IsBool,
		Doc: "Create a share group's missing dead-letter topic at its first write (num.partitions partitions, opted in)."},
	{Name: DLQPrefixConfig, Type: kmsg.ConfigTypeString, Def: "dlq.", Check: func(string) error { return nil },
		Doc: "Names of share-group dead-letter topics must start with this prefix (empty: any name)."},
}

// dlqBrokerValue is the effective value of a KIP-1191 broker config.
func (c *Coordinator) dlqBrokerValue(name string) string {
	if v, ok := c.o.BrokerConfig(name); ok {
		return v
	}
	for i := range DLQBrokerConfigDefs {
		if DLQBrokerConfigDefs[i].Name == name {
			return DLQBrokerConfigDefs[i].Def
		}
	}
	panic("broker: unknown dead-letter broker config " + name) // programming error
}

// checkDLQTopicName validates a group's errors.deadletterqueue.topic.name
// (KIP-1191's ShareGroupDLQValidator rules; see the file comment).
func (c *Coordinator) checkDLQTopicName(name string) error {
	if name == "" {
		return nil
	}
	_, err := c.dlqTopicCheck(name)
	return err
}

// dlqTopicCheck applies the rules and returns the topic if it exists.
func (c *Coordinator) dlqTopicCheck(name string) (*topics.Topic, error) {
	bad := func(format string, args ...any) (*topics.Topic, error) {
		return nil, kafkaerr.Refuse(kafkaerr.ErrInvalidConfig, "Invalid value %s for configuration %s: %s", name, DLQTopicNameConfig, fmt.Sprintf(format, args...))
	}
	if err := topics.ValidName(name); err != nil {
		return bad("not a valid topic name")
	}
	if strings.HasPrefix(name, "__") {
		return bad("dead-letter topic names must not start with __")
	}
	if prefix := c.dlqBrokerValue(DLQPrefixConfig); !strings.HasPrefix(name, prefix) {
		return bad("dead-letter topic names must start with %q (%s)", prefix, DLQPrefixConfig)
	}
	t := c.o.Topics.Get(name)
	if t == nil {
		if c.dlqBrokerValue(DLQAutoCreateConfig) != "true" {
			return bad("topic does not exist and %s is false", DLQAutoCreateConfig)
		}
		return nil, nil
	}
	_, cfgs := c.o.Topics.Snapshot(t)
	if cfgs[DLQGroupEnableTopic] != "true" {
		return bad("topic has not opted in with %s=true", DLQGroupEnableTopic)
	}
	return t, nil
}

// dlqTarget resolves (creating if allowed) the dead-letter topic for a
// write. Failures wrap errDLQUnavailable.
func (c *Coordinator) dlqTarget(name string) (*topics.Topic, error) {
	t, err := c.dlqTopicCheck(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errDLQUnavailable, err)
	}
	if t != nil {
		return t, nil
	}
	t, err = c.o.Admin.Create(name, c.o.DefaultPartitions, map[string]string{DLQGroupEnableTopic: "true"}, false)
	if errors.Is(err, kafkaerr.ErrTopicExists) {
		return c.dlqTopicCheck(name) // raced with another creation: check it again
	}
	if err != nil {
		return nil, fmt.Errorf("%w: create %s: %v", errDLQUnavailable, name, err)
	}
	c.lg.Info("created dead-letter topic", zap.String("topic", name))
	return t, nil
}

// DLQHooks are the dead-letter writer's test hooks (Options.DLQ).
type DLQHooks struct {
	// MaxAttempts, Backoff and MaxBackoff, when nonzero, replace the
	// retry policy of a write (Kafka's defaults otherwise).
	MaxAttempts         int
	Backoff, MaxBackoff time.Duration
	// CrashAt is asked at the crash points "durable" (the DLQ append is
	// fsynced, not yet marked written) and "written" (marked, not yet
	// archived); true stops the writer there as a crash would (a
	// SIGKILL test kills the process).
	CrashAt func(stage string) bool
	// FailAttempt fails an attempt at its start when it returns an
	// error (retried, then given up).
	FailAttempt func() error
}

// dlqCoordinator tracks the writer goroutines. Close waits for them.
type dlqCoordinator struct {
	mu      sync.Mutex
	closed  bool
	wg      sync.WaitGroup
	stop    chan struct{} // closed by close
	sem     chan struct{} // dlqConcurrency slots, made with stop
	attempt struct {      // retry policy; zero = defaults (tests shorten it)
		max                 int
		backoff, maxBackoff time.Duration
	}
	// crashAt and failAttempt are DLQHooks.CrashAt and FailAttempt.
	crashAt     func(stage string) bool
	failAttempt func() error
}

func (d *dlqCoordinator) crashed(stage string) bool {
	return d.crashAt != nil && d.crashAt(stage)
}

// start registers a writer; false once closing.
func (d *dlqCoordinator) start() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	if d.stop == nil {
		d.stop = make(chan struct{})
		d.sem = make(chan struct{}, dlqConcurrency)
	}
	d.wg.Add(1)
	return true
}

// close stops new writers and waits for the running ones (they stop at
// their next wait).
func (d *dlqCoordinator) close() {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		if d.stop == nil {
			d.stop = make(chan struct{})
		}
		close(d.stop)
	}
	d.mu.Unlock()
	d.wg.Wait()
}

func (d *dlqCoordinator) policy() (attempts int, backoff, maxBackoff time.Duration) {
	attempts, backoff, maxBackoff = dlqDefaultAttempts, dlqDefaultBackoff, dlqDefaultMaxBackoff
	if d.attempt.max > 0 {
		attempts = d.attempt.max
	}
	if d.attempt.backoff > 0 {
		backoff = d.attempt.backoff
	}
	if d.attempt.maxBackoff > 0 {
		maxBackoff = d.attempt.maxBackoff
	}
	return
}

// dlqPartState is a share-partition's writer state, guarded by
// sharePart.mu.
type dlqPartState struct {
	running bool // a writer goroutine owns this share-partition's DLQ work
	// gen changes when the share-partition's state is deleted
	// (deleteState): a writer that started before must not write its
	// intent or count back (fencedDLQ).
	gen uint64
}

// hasArchiving reports whether persisted records put offsets into
// Archiving (a cheap test on what the owner just wrote).
func hasArchiving(recs []sharegroup.Record) bool {
	for i := range recs {
		for _, b := range recs[i].Batches {
			if b.State == sharegroup.StateArchiving {
				return true
			}
		}
	}
	return false
}

// kickDLQLocked starts the writer if the Partition has Archiving records
// and none runs. mu held.
func (sp *sharePart) kickDLQLocked() {
	if sp.mu.stopped || sp.mu.p == nil || sp.mu.dlq.running {
		return
	}
	if len(sp.mu.p.Archiving()) == 0 {
		return
	}
	if !sp.c.dlq.start() {
		return
	}
	sp.mu.dlq.running = true
	go sp.runDLQ()
}

// runDLQ is the writer: attempts until no Archiving record is left.
func (sp *sharePart) runDLQ() {
	c := sp.c
	defer c.dlq.wg.Done()
	maxAttempts, backoff, maxBackoff := c.dlq.policy()
	failures := 0
	for {
		// Snapshot the work under the owner's lock.
		sp.mu.Lock()
		now := time.Now()
		st := c.shareSettings(sp.key.Group)
		var ranges []sharegroup.StateRange
		var epoch int32
		var inFlight *store.Pending // the last acknowledgement write not known durable
		gen := sp.mu.dlq.gen
		err := sp.prepareLocked(now, st, false)
		switch {
		case err == nil:
			ranges = capRanges(sp.mu.p.Archiving(), dlqMaxRecords)
			epoch = sp.mu.p.StateEpoch()
			inFlight = sp.lastAckWriteLocked()
			if len(ranges) == 0 {
				sp.mu.dlq.running = false
				sp.mu.Unlock()
				return
			}
		case errors.Is(err, errNoShareState), errors.Is(err, errShareClosed):
			sp.mu.dlq.running = false
			sp.mu.Unlock()
			return
		default:
			err = fmt.Errorf("loading share-partition: %w", err) // retried below
		}
		sp.mu.Unlock()
		// A record rejected by an acknowledgement whose write is in
		// flight is copied only once that rejection is durable: if the
		// write fails, the record is delivered again instead.
		if inFlight != nil && inFlight.Wait() != nil {
			continue // prepareLocked reloads what is stored
		}

		var done []sharegroup.StateRange
		var keep *dlqIntent // give-up only: what stays of the intent
		if err == nil {
			select {
			case c.dlq.sem <- struct{}{}:
			case <-c.dlq.stop:
				sp.stopDLQ()
				return
			}
			done, err = c.writeDLQ(sp.key, st, ranges, gen, epoch)
			<-c.dlq.sem
		}
		if errors.Is(err, errDLQCrashed) {
			sp.haltDLQ() // a simulated crash: leave everything to the restart
			return
		}
		if errors.Is(err, errDLQFenced) {
			sp.stopDLQ()
			return
		}
		if err != nil {
			failures++
			// An owned group's (an SQS queue's) dead-letter write never
			// gives up: its messages wait in the source (as SQS keeps
			// them) rather than be archived without a copy.
			if failures < maxAttempts || st.dlqOwned {
				d := min(backoff<<(failures-1), maxBackoff)
				d = d/2 + rand.N(d/2+1) // jitter
				c.lg.Warn("dead-letter write failed; retrying", zapShareKey(sp.key), zap.String("topic", st.dlqTopic),
					zap.Int("attempt", failures), zap.Duration("retry_in", d), zap.Error(err))
				select {
				case <-time.After(d):
					continue
				case <-c.dlq.stop:
					sp.stopDLQ()
					return
				}
			}
			if ranges == nil {
				// It never loaded: its next load restarts the writer.
				c.lg.Error("dead-letter writer gives up: share-partition does not load", zapShareKey(sp.key), zap.Error(err))
				sp.stopDLQ()
				return
			}
			c.lg.Error("dead-letter write failed; archiving the records without a dead-letter copy", zapShareKey(sp.key),
				zap.String("topic", st.dlqTopic), zap.Int("attempts", failures), zap.Any("offsets", ranges), zap.Error(err))
			done = ranges
			// An earlier attempt's intent may list offsets this window no
			// longer does, some of whose copies it appended: keep the
			// intent for those (not the given-up window), so the next
			// writer still scans for them and writes only the missing ones.
			if in, ierr := c.loadDLQIntentAt(sp.key, epoch); ierr == nil && in != nil {
				if in.Written {
					done = append(slices.Clone(ranges), intentRanges(in)...)
				} else {
					keep = intentWithout(in, ranges)
				}
			}
		}
		failures = 0
		if !sp.completeDLQ(epoch, done, keep, gen) {
			sp.stopDLQ()
			return
		}
		select {
		case <-c.dlq.stop:
			sp.stopDLQ()
			return
		default:
		}
	}
}

// stopDLQ ends this writer. Under the same lock it starts a new one if
// Archiving records are there: a kick while this writer ran did nothing,
// and those records (rejected after a reset, or found by a reload) would
// otherwise wait for the next kick, which may never come.
func (sp *sharePart) stopDLQ() {
	sp.mu.Lock()
	sp.mu.dlq.running = false
	sp.kickDLQLocked()
	sp.mu.Unlock()
}

// haltDLQ ends this writer without looking for more work.
func (sp *sharePart) haltDLQ() {
	sp.mu.Lock()
	sp.mu.dlq.running = false
	sp.mu.Unlock()
}

// completeDLQ marks done Archived and persists it, then drops the
// intent, or, when keep has ranges (a give-up left offsets of an
// unwritten intent outside its window), replaces it with keep. It
// returns false when the writer should stop (share-partition gone or its
// write failed: the next load restarts the writer).
func (sp *sharePart) completeDLQ(epoch int32, done []sharegroup.StateRange, keep *dlqIntent, gen uint64) bool {
	sp.mu.Lock()
	p := sp.mu.p
	if p == nil || sp.mu.stopped {
		// Not loaded (a failed write or load): the next load restarts
		// the writer, which finds the intent.
		sp.mu.Unlock()
		return false
	}
	if p.StateEpoch() != epoch {
		// Reset meanwhile (AlterShareGroupOffsets): the intent no longer
		// describes this state.
		sp.mu.Unlock()
		_ = sp.c.deleteDLQIntent(sp.key)
		return false
	}
	var recs []sharegroup.Record
	for _, r := range done {
		recs = append(recs, p.CompleteArchiving(r.First, r.Last).Records...)
	}
	now := time.Now()
	err := sp.writeLocked(recs)
	sp.armLocked(now)
	sp.mu.Unlock()
	if err != nil {
		return false
	}
	sp.waiters.notify() // the SPSO may have moved: room to acquire
	if keep != nil && len(keep.Ranges) > 0 {
		if err := sp.c.fencedDLQ(sp.key, gen, func() error { return sp.c.putDLQIntent(sp.key, keep) }); err != nil {
			sp.c.lg.Warn("rewriting dead-letter intent failed", zapShareKey(sp.key), zap.Error(err))
		}
		return true
	}
	if err := sp.c.deleteDLQIntent(sp.key); err != nil {
		sp.c.lg.Warn("deleting dead-letter intent failed", zapShareKey(sp.key), zap.Error(err))
	}
	return true
}

// capRanges keeps the first max offsets of ranges.
func capRanges(ranges []sharegroup.StateRange, max int) []sharegroup.StateRange {
	var out []sharegroup.StateRange
	for _, r := range ranges {
		if max <= 0 {
			break
		}
		if n := r.Last - r.First + 1; n > int64(max) {
			r.Last = r.First + int64(max) - 1
		}
		max -= int(r.Last - r.First + 1)
		out = append(out, r)
	}
	return out
}
