package sharegroup

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Partition is the share-partition state machine for one (group, topic,
// partition). It is not safe for concurrent use: the broker gives each
// Partition exactly one owner. It performs no I/O and never reads a clock;
// time arrives as the now argument. See doc.go for the model.
type Partition struct {
	cfg         Config
	initialized bool
	stateEpoch  int32

	spso int64 // share-partition start offset: first non-terminal offset
	speo int64 // share-partition end offset, exclusive: next offset never fetched
	base int64 // runs[i].start() is relative to base; base <= spso

	runs    []run   // cover [spso, speo) contiguously
	scratch []run   // reused by rewrite
	em      emitter // rewrite's, while one runs

	available int64 // StateAvailable offsets in the window
	availHint int64 // no StateAvailable offset in [spso, availHint)
	complete  int64 // terminal offsets in the window (deliveryCompleteCount)
	acquired  int64 // StateAcquired offsets in the window
	// expired and archived count records whose lock expired and records
	// that became Archived since begin (Effects.Expired, Effects.Archived).
	expired, archived int64

	acqs    acquisitions
	members interned  // member ids
	mg      msgGroups // group modes only; see groups.go

	// ackSeq counts the Acknowledge calls (AckSeq); acqAfter is the last
	// AcquireGroups call's AcquiredAfter.
	ackSeq, acqAfter uint64

	// nextLock, when set (lockSet), is the lock of the next acquisition
	// call instead of RecordLockDuration (LockNext).
	nextLock time.Duration
	lockSet  bool

	// opNow is the time of the operation in progress (set by expire), for
	// redelivery backoff deadlines; backoffs caches this operation's
	// backoff acquisitions by deadline.
	opNow    int64
	backoffs []backoffHandle

	// touched collects, during one operation, the ranges whose persisted
	// view changed; finish turns them into the operation's Record.
	touched []span
	// administrative is set while a change may bypass canBecome (replay,
	// archiving offsets absent from the log).
	administrative bool
}

type span struct{ lo, hi int64 }

type backoffHandle struct {
	deadline int64
	h        uint32
}

// backoffMember holds records waiting out a redelivery backoff: they are
// Acquired by it with their delivery count plus one, so their durable view
// is Available with their count, they block their message group in ordered
// mode, and its lock expiry returns them Available without counting a
// delivery (as ReleaseMember does). A NUL byte keeps it apart from client
// member ids, which the broker checks are printable.
const backoffMember = "\x00redelivery-backoff"

// LogBatch describes one log batch the broker read for Acquire. The broker
// passes the batches it read starting at NextFetchOffset(), in log order;
// offsets between them (or before the first) are absent from the log
// (compacted, aborted, below the log start) and get archived.
type LogBatch struct {
	First, Last int64
	// Skip marks a batch that must never be delivered: a control batch, or
	// an aborted transaction's batch under read_committed. Its offsets are
	// archived (Kafka: control records are GAP-acked, aborted batches
	// archived) and excluded from Acquired ranges.
	Skip bool
	// Groups lists the message groups of the batch's records, ascending,
	// in a group mode (Config.Groups); ignored otherwise.
	Groups []GroupSpan
}

// Acquired is one AcquiredRecords entry of a ShareFetch response.
type Acquired struct {
	First, Last   int64
	DeliveryCount int16
}

// AckBatch is one AcknowledgementBatches entry: either one type for the
// whole range or exactly Last-First+1 types, one per offset.
type AckBatch struct {
	First, Last int64
	Types       []AckType
	// DeliveryCount, when positive, must be every offset's delivery
	// count, else the batch is ErrInvalidRecordState: an acknowledgement
	// meant for an earlier delivery of the record (a stale SQS receipt
	// handle) is refused even when the same member holds it again, and
	// so is one of an offset below the SPSO. Counts saturate at 1,023
	// (doc.go), beyond which deliveries look alike.
	DeliveryCount int16
	// Lock is the lock a RENEW takes (0: RecordLockDuration; at most
	// MaxLock): SQS's ChangeMessageVisibility.
	Lock time.Duration
}

// Effects is what the owner must do after an operation, in this order:
// persist Records (durably, in order), then answer, then re-arm the lock
// timer for NextDeadline (zero when no lock is outstanding). If persisting
// fails, the Partition must be discarded and rebuilt with Recover: the core
// does not roll back.
type Effects struct {
	Records      []Record
	NextDeadline time.Time
	// Expired counts the records of this operation whose acquisition lock
	// expired; Archived the records that became Archived (rejected,
	// delivery count limit, absent from the log). For the owner's metrics.
	Expired, Archived int64
}

// StateRange describes a range of offsets with identical state (Ranges,
// Archiving).
type StateRange struct {
	First, Last   int64
	State         RecordState
	DeliveryCount int16
	Member        string    // StateAcquired only
	Deadline      time.Time // StateAcquired only
}

// New creates the share-partition at startOffset (the SPSO the broker
// resolved from share.auto.offset.reset). The returned Effects carry the
// initial snapshot to persist.
func New(cfg Config, stateEpoch int32, startOffset int64) (*Partition, Effects, error) {
	if err := cfg.Validate(); err != nil {
		return nil, Effects{}, err
	}
	if startOffset < 0 {
		return nil, Effects{}, fmt.Errorf("%w: negative start offset %d", ErrInvalidRequest, startOffset)
	}
	p := &Partition{cfg: cfg}
	p.reset(stateEpoch, startOffset)
	return p, Effects{Records: []Record{p.Snapshot()}}, nil
}

// Recover rebuilds a Partition by replaying persisted records (a snapshot,
// then deltas) through Apply. Everything at or above the SPSO that is not
// recorded terminal comes back Available with its last persisted delivery
// count (KIP-932: acquisitions are not persisted).
func Recover(cfg Config, records []Record) (*Partition, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Partition{cfg: cfg}
	for i := range records {
		if err := p.Apply(records[i]); err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
	}
	if !p.initialized {
		return nil, fmt.Errorf("%w: no snapshot", ErrCorruptRecord)
	}
	return p, nil
}

func (p *Partition) reset(stateEpoch int32, startOffset int64) {
	*p = Partition{cfg: p.cfg, initialized: true, stateEpoch: stateEpoch,
		spso: startOffset, speo: startOffset, base: startOffset, availHint: startOffset}
}

// Config returns the current configuration.
func (p *Partition) Config() Config { return p.cfg }

// SetConfig changes the configuration. Existing locks keep their deadlines;
// a smaller window only stops new acquisitions; a smaller delivery limit
// applies at the next release or expiry.
func (p *Partition) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	switchGroups := (cfg.Groups == GroupsNone) != (p.cfg.Groups == GroupsNone)
	switchOrdered := (cfg.Groups == GroupsOrdered) != (p.cfg.Groups == GroupsOrdered)
	p.cfg = cfg
	switch {
	case switchGroups:
		p.resetGroups()
	case switchOrdered:
		p.recountHeld()
	}
	return nil
}

// SPSO returns the share-partition start offset.
func (p *Partition) SPSO() int64 { return p.spso }

// SPEO returns the share-partition end offset as the next offset never yet
// fetched (exclusive; Kafka's inclusive endOffset is SPEO()-1).
func (p *Partition) SPEO() int64 { return p.speo }

// StateEpoch returns the state epoch.
func (p *Partition) StateEpoch() int32 { return p.stateEpoch }

// DeliveryCompleteCount returns the terminal records at or above the SPSO.
func (p *Partition) DeliveryCompleteCount() int64 { return p.complete }

// Lag is KIP-1226's lag for a partition end offset (high watermark).
func (p *Partition) Lag(endOffset int64) int64 {
	return max(endOffset-p.spso-p.complete, 0)
}

// InFlight returns the window size SPEO-SPSO.
func (p *Partition) InFlight() int64 { return p.speo - p.spso }

// NextFetchOffset is where the broker reads the log for the next Acquire:
// the first Available offset inside the window, else SPEO. In a group mode
// it is ClassifyOffset.
func (p *Partition) NextFetchOffset() int64 {
	if p.groupMode() {
		return p.ClassifyOffset()
	}
	if p.available == 0 {
		return p.speo
	}
	off := max(p.availHint, p.spso)
	for i := p.find(off); i < len(p.runs); i++ {
		if p.runs[i].meta().state() == StateAvailable {
			off = max(p.runStart(i), off)
			p.availHint = off
			return off
		}
	}
	panic("sharegroup: available count out of sync") // programming error
}

// CanAcquire reports whether an Acquire could return anything: Available
// records in the window, or room to extend it. The broker skips the log
// read (and long-polls) when false.
func (p *Partition) CanAcquire() bool {
	if p.groupMode() {
		return p.available > 0 || p.CanClassify()
	}
	return p.available > 0 || p.speo-p.spso < int64(p.cfg.MaxInFlight)
}

// Acquirable reports whether an acquisition might hand out a record now,
// the log starting at logStart and readable below readLimit. False means
// none can until the window changes: records acknowledged, released,
// expired (the broker's lock timer fires at a deadline: a lock due but not
// expired yet still counts as held, as does a released record waiting out
// its redelivery backoff, which is Acquired until then), appended, or the
// log start moving past the SPSO (an acquisition first advances the window,
// AdvanceLogStart). So a long poll need not be woken to look. True may
// still find nothing: a rate limit, records in flight whose group is not
// known yet after a switch to ordered mode, the fragmentation guard, the
// cap on locks (MaxInFlight), or log batches that turn out to be aborted
// or control batches. Ordered mode counts only the groups none of whose
// records is in flight, unlike CanAcquire: with every group's head held
// by its consumer, which takes the next one with its acknowledgement, a
// consumer waiting for work would otherwise be woken by every
// acknowledgement to find nothing.
func (p *Partition) Acquirable(logStart, readLimit int64) bool {
	if p.spso < logStart {
		return true
	}
	if !p.groupMode() {
		return p.available > 0 || p.speo < readLimit && p.speo-p.spso < int64(p.cfg.MaxInFlight)
	}
	if p.CanClassify() && p.ClassifyOffset() < readLimit {
		return true
	}
	if p.cfg.Groups == GroupsOrdered {
		return p.mg.ready > 0 || p.mg.loose > p.mg.looseHeld
	}
	return p.available > 0
}

// NextDeadline returns the earliest lock deadline, or the zero time.
func (p *Partition) NextDeadline() time.Time {
	if h := p.acqs.earliest(); h != 0 {
		return clockTime(p.acqs.entries[h].deadline)
	}
	return time.Time{}
}

// begin starts an operation that may produce a Record.
func (p *Partition) begin() (startSPSO int64) {
	p.touched = p.touched[:0]
	p.backoffs = p.backoffs[:0]
	p.expired, p.archived = 0, 0
	return p.spso
}

// finish advances the window and turns the touched ranges into at most one
// delta Record.
func (p *Partition) finish(startSPSO int64) Effects {
	p.advance()
	if p.groupMode() {
		p.trimGroups()
	}
	var eff Effects
	if batches := p.touchedBatches(); len(batches) > 0 || p.spso != startSPSO {
		eff.Records = []Record{{
			Kind:                  KindDelta,
			StateEpoch:            p.stateEpoch,
			StartOffset:           p.spso,
			DeliveryCompleteCount: p.complete,
			Batches:               batches,
		}}
	}
	p.clearTouched()
	eff.NextDeadline = p.NextDeadline()
	eff.Expired, eff.Archived = p.expired, p.archived
	return eff
}

// view is the persisted view of a live state: Acquired(c) was Available
// with count c-1 before it was acquired, and that is what recovery sees.
func (m meta) view() (RecordState, int) {
	if m.state() == StateAcquired {
		return StateAvailable, max(m.count()-1, 0)
	}
	return m.state(), m.count()
}

// clearTouched empties touched, dropping a large backing array (a replay or
// a huge acknowledgement must not pin memory for the partition's lifetime).
func (p *Partition) clearTouched() {
	if cap(p.touched) > 256 {
		p.touched = nil
	} else {
		p.touched = p.touched[:0]
	}
}

func (p *Partition) touch(lo, hi int64) {
	if n := len(p.touched); n > 0 && p.touched[n-1].hi+1 >= lo && p.touched[n-1].lo <= lo {
		p.touched[n-1].hi = max(p.touched[n-1].hi, hi)
		return
	}
	p.touched = append(p.touched, span{lo, hi})
}

func (p *Partition) touchedBatches() []StateBatch {
	if len(p.touched) == 0 {
		return nil
	}
	slices.SortFunc(p.touched, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	var out []StateBatch
	lo, hi := p.touched[0].lo, p.touched[0].hi
	flush := func() {
		p.pieces(lo, hi, func(a, b int64, m meta) bool {
			s, c := m.view()
			if n := len(out); n > 0 && out[n-1].Last+1 == a && out[n-1].State == s && int(out[n-1].DeliveryCount) == c {
				out[n-1].Last = b
			} else {
				out = append(out, StateBatch{First: a, Last: b, State: s, DeliveryCount: int16(c)})
			}
			return true
		})
	}
	for _, t := range p.touched[1:] {
		if t.lo <= hi+1 {
			hi = max(hi, t.hi)
			continue
		}
		flush()
		lo, hi = t.lo, t.hi
	}
	flush()
	return out
}

func (p *Partition) archivedMeta(count int) meta {
	if p.cfg.DeadLetter {
		return pack(StateArchiving, count, 0)
	}
	return pack(StateArchived, count, 0)
}

// releasedMeta is the state after a RELEASE or lock expiry: Available, or
// archived once the record has been delivered DeliveryCountLimit times.
// With a redelivery backoff the record waits, held by backoffMember.
func (p *Partition) releasedMeta(count int) meta {
	if p.cfg.DeliveryCountLimit > 0 && count >= p.cfg.DeliveryCountLimit {
		return p.archivedMeta(count)
	}
	if p.cfg.RedeliveryBackoff > 0 && !p.administrative {
		return pack(StateAcquired, count+1, p.backoffAcquisition(count))
	}
	return pack(StateAvailable, count, 0)
}

// backoffAcquisition returns the backoff holding records released after
// count deliveries: RedeliveryBackoff * 2^(count-1), capped.
func (p *Partition) backoffAcquisition(count int) uint32 {
	d := p.cfg.RedeliveryBackoff
	for i := 1; i < count && d < p.cfg.RedeliveryBackoffMax; i++ {
		d *= 2
	}
	if p.cfg.RedeliveryBackoffMax > 0 {
		d = min(d, p.cfg.RedeliveryBackoffMax)
	}
	return p.backoffUntil(p.opNow + int64(d))
}

// backoffUntil returns the backoff acquisition ending at deadline.
func (p *Partition) backoffUntil(deadline int64) uint32 {
	for _, b := range p.backoffs {
		if b.deadline == deadline {
			return b.h
		}
	}
	mh := p.members.intern(backoffMember)
	p.members.ref(mh)
	h := p.acqs.alloc(mh, deadline)
	p.backoffs = append(p.backoffs, backoffHandle{deadline, h})
	return h
}

// isBackoff reports whether acquisition h is a redelivery backoff.
func (p *Partition) isBackoff(h uint32) bool {
	return p.members.names[p.acqs.entries[h].member] == backoffMember
}

// Defer gives back records member acquired in their delivery count
// that must not be delivered before until (an SQS message's delay): they
// wait, held as a redelivery backoff is, and become Available at until
// without their acquisition counted as a delivery. Records of [first,
// last] not Acquired by member in that delivery are left alone. Locks due
// at now expire first, as in every operation: the caller acquires with a
// lock that outlasts its way here. Nothing durable changes (Effects carry no record but
// expiries'): after a restart they are Available, and the broker defers
// them again when it reads them. until is rounded up to a whole second,
// so a burst of delays shares few backoff acquisitions.
func (p *Partition) Defer(now time.Time, member string, first, last int64, count int16, until time.Time) Effects {
	start := p.begin()
	p.expire(clockNanos(now))
	h, ok := p.members.lookup(member)
	lo, hi := max(first, p.spso), min(last, p.speo-1)
	if ok && lo <= hi {
		deadline := clockNanos(until)
		if r := deadline % int64(time.Second); r != 0 {
			deadline += int64(time.Second) - r
		}
		p.rewrite(lo, hi, func(e *emitter, ps, pe int64, old meta) {
			if old.state() == StateAcquired && p.acqs.entries[old.acq()].member == h && old.count() == min(int(count), maxStoredCount) {
				e.emit(ps, pe, pack(StateAcquired, old.count(), p.backoffUntil(deadline)))
			} else {
				e.emit(ps, pe, old)
			}
		})
	}
	return p.finish(start)
}

// LockNext makes the next Acquire or AcquireGroups* call lock what it
// acquires for d instead of RecordLockDuration: SQS's per-receive
// visibility timeout. d is clamped to [0, MaxLock]; 0 locks until the
// next operation, which expires it (the record is visible again at once,
// its delivery counted).
func (p *Partition) LockNext(d time.Duration) {
	p.nextLock, p.lockSet = min(max(d, 0), MaxLock), true
}

// takeLock is the lock of this acquisition call, consuming LockNext's.
func (p *Partition) takeLock() time.Duration {
	if p.lockSet {
		p.lockSet = false
		return p.nextLock
	}
	return p.cfg.RecordLockDuration
}

// Acquire hands records to member. batches are the log batches the broker
// read from NextFetchOffset(). Available records inside the window are
// re-acquired first, then new records from SPEO on, as long as the window
// stays within MaxInFlight, at most MaxMaxInFlight records are Acquired at
// once (backoffs included), and maxRecords allows (BatchOptimized: whole log
// batches, stopping after the batch that reached maxRecords; RecordLimit:
// exactly). maxRecords <= 0 means no limit but the window. Each acquired
// record's delivery count is incremented. The result is sorted and
// non-overlapping; a malformed batch (First > Last, not ascending) ends the
// input. Acquisitions are never persisted; Effects carries records only for
// expired locks and offsets found absent from the log.
func (p *Partition) Acquire(now time.Time, member string, batches []LogBatch, maxRecords int, mode AcquireMode) ([]Acquired, Effects) {
	if p.groupMode() { // Classify, then AcquireGroups (always record-limited)
		eff := p.Classify(batches)
		acq, eff2 := p.AcquireGroups(now, member, maxRecords)
		eff.Records = append(eff.Records, eff2.Records...)
		eff.NextDeadline = eff2.NextDeadline
		return acq, eff
	}
	start := p.begin()
	nowNS := clockNanos(now)
	lock := p.takeLock()
	p.expire(nowNS)
	if maxRecords <= 0 {
		maxRecords = math.MaxInt
	}
	var (
		out    []Acquired
		got    int
		handle uint32
		cursor = p.NextFetchOffset()
		prev   = int64(-1)
	)
	acquisition := func() uint32 {
		if handle == 0 {
			mh := p.members.intern(member)
			p.members.ref(mh)
			handle = p.acqs.alloc(mh, nowNS+int64(lock))
		}
		return handle
	}
	take := func(lo, hi int64, count int) {
		got += int(hi - lo + 1)
		if n := len(out); n > 0 && out[n-1].Last+1 == lo && int(out[n-1].DeliveryCount) == count {
			out[n-1].Last = hi
			return
		}
		out = append(out, Acquired{First: lo, Last: hi, DeliveryCount: int16(count)})
	}
	// Records inside the window are re-acquired whatever MaxInFlight is now
	// (as Kafka does after share.partition.max.record.locks is lowered),
	// and a window that grew in a group mode, then switched to GroupsNone,
	// may hold far more than MaxInFlight: MaxMaxInFlight bounds the records
	// Acquired at once, exactly, and with it the live acquisition handles
	// (see maxAcqHandle).
	room := int64(MaxMaxInFlight) - p.acquired
	full := func() bool { return int64(got) >= room || (mode == RecordLimit && got >= maxRecords) }
	quota := func(lo, hi int64) int64 { // last offset of [lo, hi] the limits allow
		left := room - int64(got)
		if mode == RecordLimit {
			left = min(left, int64(maxRecords-got))
		}
		if left <= hi-lo {
			return lo + left - 1
		}
		return hi
	}
	for _, b := range batches {
		if b.First > b.Last || b.First <= prev || b.First < 0 {
			break
		}
		prev = b.Last
		if b.Last < cursor {
			continue
		}
		lo := max(b.First, cursor)
		if lo > cursor && !p.archiveAbsent(cursor, lo-1) {
			break
		}
		if b.Skip {
			if !p.archiveAbsent(lo, b.Last) {
				break
			}
			cursor = b.Last + 1
			continue
		}
		// Re-acquire Available records of this batch inside the window.
		if lo < p.speo && p.available > 0 && p.hasAvailable(lo, min(b.Last, p.speo-1)) {
			p.rewrite(lo, min(b.Last, p.speo-1), func(e *emitter, ps, pe int64, old meta) {
				if old.state() != StateAvailable || full() {
					e.emit(ps, pe, old)
					return
				}
				end, c := quota(ps, pe), old.count()+1
				e.emit(ps, end, pack(StateAcquired, c, acquisition()))
				take(ps, end, c)
				if end < pe {
					e.emit(end+1, pe, old)
				}
			})
		}
		if full() {
			break
		}
		// New records from SPEO on, within the window limit.
		if b.Last >= p.speo {
			lo := max(lo, p.speo)
			hi := quota(lo, min(b.Last, p.spso+int64(p.cfg.MaxInFlight)-1))
			if hi >= lo {
				p.extendTo(hi + 1)
				p.rewrite(lo, hi, func(e *emitter, ps, pe int64, old meta) {
					c := old.count() + 1
					e.emit(ps, pe, pack(StateAcquired, c, acquisition()))
					take(ps, pe, c)
				})
			}
			if hi < b.Last {
				break // window full or record limit reached inside the batch
			}
		}
		cursor = b.Last + 1
		if got >= maxRecords {
			break
		}
	}
	return out, p.finish(start)
}

func (p *Partition) hasAvailable(lo, hi int64) bool {
	found := false
	p.pieces(lo, hi, func(_, _ int64, m meta) bool {
		found = m.state() == StateAvailable
		return !found
	})
	return found
}

// archiveAbsent archives [lo, hi], offsets the log does not (or must never)
// deliver: Available records inside the window become Archived (the one
// transition outside canBecome); beyond SPEO the window is extended with
// Archived offsets, or simply moved when it is empty. It returns false if
// the window limit stopped it before hi.
func (p *Partition) archiveAbsent(lo, hi int64) bool {
	p.administrative = true
	defer func() { p.administrative = false }()
	if lo < p.speo {
		whi := min(hi, p.speo-1)
		if p.available > 0 && p.hasAvailable(lo, whi) {
			p.rewrite(lo, whi, func(e *emitter, ps, pe int64, old meta) {
				if old.state() == StateAvailable {
					e.emit(ps, pe, pack(StateArchived, old.count(), 0))
				} else {
					e.emit(ps, pe, old)
				}
			})
		}
		if lo = whi + 1; lo > hi {
			return true
		}
	}
	p.advance()
	if p.spso == p.speo { // nothing in flight: the window just moves on
		p.dropBelow(hi + 1)
		return true
	}
	limit := p.spso + int64(p.cfg.MaxInFlight) - 1
	if p.groupMode() { // bounded by cost, see CanClassify
		limit = p.spso + maxSpan/2 - 1
	}
	end := min(hi, limit)
	if end >= lo {
		p.extendTo(end + 1)
		p.rewrite(lo, end, func(e *emitter, ps, pe int64, old meta) {
			e.emit(ps, pe, pack(StateArchived, old.count(), 0))
		})
	}
	return end == hi
}

// Acknowledge applies a member's acknowledgements, all or nothing: if any
// batch is malformed (ErrInvalidRequest), reaches past the window
// (ErrInvalidRequest), or touches an offset at or above the SPSO that is not
// Acquired by member (ErrInvalidRecordState), nothing is acknowledged.
// Offsets below the SPSO are ignored. ACCEPT → Acknowledged, RELEASE →
// Available (archived at the delivery limit), REJECT → Archived (Archiving
// with a dead-letter queue), GAP → Archived, RENEW → a fresh lock of
// RecordLockDuration, state and count unchanged. Expired locks are expired
// first, so a late acknowledgement fails even if the timer has not fired.
// Effects must be honoured even when err != nil (expiries).
func (p *Partition) Acknowledge(now time.Time, member string, acks []AckBatch) (Effects, error) {
	start := p.begin()
	p.ackSeq++
	p.mg.ending = p.ackSeq // records ended below note it in their group (AcquiredAfter)
	defer func() { p.mg.ending = 0 }()
	nowNS := clockNanos(now)
	p.expire(nowNS)
	if err := p.checkAcks(member, acks); err != nil {
		return p.finish(start), err
	}
	for _, b := range acks {
		lo := max(b.First, p.spso)
		if lo > b.Last {
			continue
		}
		var renew uint32 // a batch's RENEWs share one lock of its duration
		lock := p.cfg.RecordLockDuration
		if b.Lock > 0 {
			lock = min(b.Lock, MaxLock)
		}
		p.rewrite(lo, b.Last, func(e *emitter, ps, pe int64, old meta) {
			for off := ps; off <= pe; {
				t, end := b.Types[0], pe
				if len(b.Types) > 1 {
					t, end = b.Types[off-b.First], off
					for end < pe && b.Types[end+1-b.First] == t {
						end++
					}
				}
				var m meta
				switch c := old.count(); t {
				case AckAccept:
					m = pack(StateAcknowledged, c, 0)
				case AckRelease:
					m = p.releasedMeta(c)
				case AckReject:
					m = p.archivedMeta(c)
				case AckGap:
					m = pack(StateArchived, c, 0)
				case AckRenew:
					if renew == 0 {
						mh := p.acqs.entries[old.acq()].member
						p.members.ref(mh)
						renew = p.acqs.alloc(mh, nowNS+int64(lock))
					}
					m = pack(StateAcquired, c, renew)
				}
				e.emit(off, end, m)
				off = end + 1
			}
		})
	}
	return p.finish(start), nil
}

func (p *Partition) checkAcks(member string, acks []AckBatch) error {
	prev := int64(-1)
	renew := false
	for i, b := range acks {
		switch {
		case b.First < 0 || b.First > b.Last:
			return fmt.Errorf("%w: batch %d range %d-%d", ErrInvalidRequest, i, b.First, b.Last)
		case i > 0 && b.First <= prev:
			return fmt.Errorf("%w: batch %d overlaps or is not ascending", ErrInvalidRequest, i)
		case len(b.Types) == 0:
			return fmt.Errorf("%w: batch %d has no acknowledge types", ErrInvalidRequest, i)
		case len(b.Types) > 1 && int64(len(b.Types)) != b.Last-b.First+1:
			return fmt.Errorf("%w: batch %d has %d types for %d offsets", ErrInvalidRequest, i, len(b.Types), b.Last-b.First+1)
		}
		for _, t := range b.Types {
			if t > maxAckType {
				return fmt.Errorf("%w: batch %d acknowledge type %d", ErrInvalidRequest, i, t)
			}
			renew = renew || t == AckRenew
		}
		prev = b.Last
	}
	if renew && p.cfg.RenewDisabled {
		return fmt.Errorf("%w: renew acknowledgements are disabled", ErrInvalidRecordState)
	}
	h, known := p.members.lookup(member)
	for i, b := range acks {
		if b.DeliveryCount > 0 && b.First < p.spso {
			// Of a delivery that is over: the record is done.
			return fmt.Errorf("%w: offset %d is below the SPSO %d", ErrInvalidRecordState, b.First, p.spso)
		}
		lo := max(b.First, p.spso)
		if lo > b.Last {
			continue // entirely below the SPSO: already done
		}
		if b.Last >= p.speo {
			return fmt.Errorf("%w: batch %d ends at %d, past the last in-flight offset %d", ErrInvalidRequest, i, b.Last, p.speo-1)
		}
		var err error
		p.pieces(lo, b.Last, func(a, _ int64, m meta) bool {
			switch {
			case m.state() != StateAcquired || !known || p.acqs.entries[m.acq()].member != h:
				err = fmt.Errorf("%w: offset %d is %v", ErrInvalidRecordState, a, p.describe(m))
			case b.DeliveryCount > 0 && m.count() != min(int(b.DeliveryCount), maxStoredCount):
				err = fmt.Errorf("%w: offset %d is in its delivery %d, not %d", ErrInvalidRecordState, a, m.count(), b.DeliveryCount)
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (p *Partition) describe(m meta) string {
	if m.state() == StateAcquired && p.isBackoff(m.acq()) {
		return "waiting for its redelivery backoff"
	}
	if m.state() == StateAcquired {
		return "acquired by another member"
	}
	return m.state().String()
}

// ExpireLocks moves every record whose lock deadline is at or before now
// from Acquired to Available (Archived at the delivery limit). Lock expiry
// counts as a delivery attempt.
func (p *Partition) ExpireLocks(now time.Time) Effects {
	start := p.begin()
	p.expire(clockNanos(now))
	return p.finish(start)
}

// expire releases every lock due at now, then advances the window so the
// operation that follows sees the SPSO those expiries produce.
func (p *Partition) expire(now int64) {
	p.opNow = now
	defer p.advance()
	for {
		h := p.acqs.earliest()
		if h == 0 || p.acqs.entries[h].deadline > now {
			return
		}
		if p.isBackoff(h) { // backoff over: Available, not a delivery
			p.releaseAcquisition(h, func(c int) meta { return pack(StateAvailable, c-1, 0) })
		} else {
			p.expired += p.releaseAcquisition(h, func(c int) meta { return p.releasedMeta(c) })
		}
		if p.acqs.earliest() == h {
			panic("sharegroup: expired acquisition still referenced") // programming error
		}
	}
}

// releaseAcquisition rewrites every record still Acquired under h and
// returns how many it rewrote.
func (p *Partition) releaseAcquisition(h uint32, to func(count int) meta) (n int64) {
	a := p.acqs.entries[h]
	lo, hi := max(a.first, p.spso), min(a.last, p.speo-1)
	if lo > hi {
		return 0
	}
	p.rewrite(lo, hi, func(e *emitter, ps, pe int64, old meta) {
		if old.state() == StateAcquired && old.acq() == h {
			n += pe - ps + 1
			e.emit(ps, pe, to(old.count()))
		} else {
			e.emit(ps, pe, old)
		}
	})
	return n
}

// ReleaseMember releases every record member holds (share session closed,
// connection dropped): Acquired → Available with the delivery count
// decremented, since the records were fetched but not delivered; this path
// never archives.
func (p *Partition) ReleaseMember(now time.Time, member string) Effects {
	start := p.begin()
	p.expire(clockNanos(now))
	if h, ok := p.members.lookup(member); ok {
		var mine []uint32
		for _, a := range p.acqs.byDeadline {
			if p.acqs.entries[a].member == h {
				mine = append(mine, a)
			}
		}
		for _, a := range mine {
			p.releaseAcquisition(a, func(c int) meta { return pack(StateAvailable, c-1, 0) })
		}
	}
	return p.finish(start)
}

// AdvanceLogStart handles the log start offset moving (retention,
// DeleteRecords): records below it are gone, so the SPSO jumps to it and
// their state is dropped; acknowledgements for them then succeed silently.
// The Record only moves the SPSO; persisting it may wait for the next write
// (the log start never moves back).
func (p *Partition) AdvanceLogStart(logStartOffset int64) Effects {
	start := p.begin()
	p.dropBelow(logStartOffset)
	return p.finish(start)
}

// Archiving returns the records waiting for their dead-letter write (state
// Archiving), e.g. to resume the writes after recovery.
func (p *Partition) Archiving() []StateRange {
	var out []StateRange
	for i := range p.runs {
		if m := p.runs[i].meta(); m.state() == StateArchiving {
			out = append(out, StateRange{First: p.runStart(i), Last: p.runEnd(i) - 1, State: StateArchiving, DeliveryCount: int16(m.count())})
		}
	}
	return out
}

// CompleteArchiving marks [first, last]'s Archiving records Archived once
// their dead-letter write is durable. Other offsets are left alone.
func (p *Partition) CompleteArchiving(first, last int64) Effects {
	start := p.begin()
	first = max(first, p.spso)
	last = min(last, p.speo-1)
	if first <= last {
		p.rewrite(first, last, func(e *emitter, ps, pe int64, old meta) {
			if old.state() == StateArchiving {
				e.emit(ps, pe, pack(StateArchived, old.count(), 0))
			} else {
				e.emit(ps, pe, old)
			}
		})
	}
	return p.finish(start)
}

// Reset discards all in-flight state and restarts at startOffset with a new
// state epoch (AlterShareGroupOffsets). The Effects carry a snapshot.
func (p *Partition) Reset(stateEpoch int32, startOffset int64) Effects {
	p.reset(stateEpoch, max(startOffset, 0))
	return Effects{Records: []Record{p.Snapshot()}}
}

// Snapshot returns the complete persisted view: SPSO, state epoch and every
// range that is not Available with count 0 (Acquired shows as Available
// with its count before the acquisition).
func (p *Partition) Snapshot() Record {
	r := Record{Kind: KindSnapshot, StateEpoch: p.stateEpoch, StartOffset: p.spso, DeliveryCompleteCount: p.complete}
	for i := range p.runs {
		s, c := p.runs[i].meta().view()
		if s == StateAvailable && c == 0 {
			continue
		}
		lo, hi := p.runStart(i), p.runEnd(i)-1
		if n := len(r.Batches); n > 0 && r.Batches[n-1].Last+1 == lo && r.Batches[n-1].State == s && int(r.Batches[n-1].DeliveryCount) == c {
			r.Batches[n-1].Last = hi
			continue
		}
		r.Batches = append(r.Batches, StateBatch{First: lo, Last: hi, State: s, DeliveryCount: int16(c)})
	}
	return r
}

// Apply replays one persisted record, through the same run rewriting as the
// live operations. A snapshot replaces everything; a delta first moves the
// SPSO to its StartOffset, then overwrites its ranges. Records that
// contradict the state (a terminal record changing, a delta from another
// state epoch or before any snapshot) fail with ErrCorruptRecord and change
// nothing.
func (p *Partition) Apply(r Record) error {
	if err := r.validate(); err != nil {
		return err
	}
	switch {
	case r.Kind == KindDelta && !p.initialized:
		return fmt.Errorf("%w: delta before any snapshot", ErrCorruptRecord)
	case r.Kind == KindDelta && r.StateEpoch != p.stateEpoch:
		return fmt.Errorf("%w: delta for state epoch %d, partition is at %d", ErrCorruptRecord, r.StateEpoch, p.stateEpoch)
	}
	from := r.StartOffset
	if r.Kind == KindDelta {
		from = max(from, p.spso)
	}
	// Relative run starts hold 30 bits: a state reaching 2^30-1 offsets
	// past its start is refused. Shoal never writes one (windows stay
	// within MaxInFlight, or maxSpan/2 in a group mode).
	if n := len(r.Batches); n > 0 && r.Batches[n-1].Last-from >= maxSpan-1 {
		return fmt.Errorf("%w: range ends at %d, too far past start offset %d", ErrCorruptRecord, r.Batches[n-1].Last, from)
	}
	if r.Kind == KindDelta {
		for _, b := range r.Batches {
			if err := p.checkOverwrite(b, from); err != nil {
				return err
			}
		}
	}
	p.administrative = true
	defer func() { p.administrative = false; p.clearTouched() }()
	if r.Kind == KindSnapshot {
		p.reset(r.StateEpoch, r.StartOffset)
		p.administrative = true
	} else {
		p.dropBelow(r.StartOffset)
	}
	for _, b := range r.Batches {
		lo := max(b.First, p.spso)
		if lo > b.Last {
			continue
		}
		p.extendTo(b.Last + 1)
		m := pack(b.State, int(b.DeliveryCount), 0)
		p.rewrite(lo, b.Last, func(e *emitter, ps, pe int64, _ meta) { e.emit(ps, pe, m) })
	}
	p.advance()
	return nil
}

// checkOverwrite rejects a replayed range that would change a terminal
// record or finish an Archiving record other than by archiving it.
func (p *Partition) checkOverwrite(b StateBatch, from int64) error {
	var err error
	p.pieces(max(b.First, from), b.Last, func(lo, _ int64, m meta) bool {
		s, c := m.view()
		switch {
		case s.Terminal() && (b.State != s || int(b.DeliveryCount) != c):
			err = fmt.Errorf("%w: offset %d is %v, record says %v", ErrCorruptRecord, lo, s, b.State)
		case s == StateArchiving && b.State != StateArchiving && b.State != StateArchived:
			err = fmt.Errorf("%w: offset %d is archiving, record says %v", ErrCorruptRecord, lo, b.State)
		}
		return err == nil
	})
	return err
}

// Ranges returns the window as maximal ranges of identical state, count
// and acquisition (for DescribeShareGroupOffsets-style tooling and tests).
func (p *Partition) Ranges() []StateRange {
	out := make([]StateRange, 0, len(p.runs))
	for i := range p.runs {
		m := p.runs[i].meta()
		r := StateRange{First: p.runStart(i), Last: p.runEnd(i) - 1, State: m.state(), DeliveryCount: int16(m.count())}
		if m.state() == StateAcquired {
			a := p.acqs.entries[m.acq()]
			r.Member = p.members.names[a.member]
			r.Deadline = clockTime(a.deadline)
			if r.Member == backoffMember { // Available again at Deadline
				r.State, r.DeliveryCount, r.Member = StateAvailable, r.DeliveryCount-1, ""
			}
		}
		out = append(out, r)
	}
	return out
}
