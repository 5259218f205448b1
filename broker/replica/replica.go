package replica

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/log/raftlog"
	"github.com/shoal-mq/shoal/protocol"
)

// ErrNotLeader is a produce on a replica that is not the leader, or
// whose leadership ended before the produce committed (Kafka
// NOT_LEADER_OR_FOLLOWER: the client refreshes metadata and retries;
// an idempotent retry gets the original offsets if the batch survived).
var ErrNotLeader = errors.New("replica: not the leader")

// ErrNotEnoughReplicas is a produce asking for more replicas in sync
// (min.insync.replicas) than the leader has: nothing was appended.
// ErrNotEnoughReplicasAfterAppend: it was appended and committed, but
// fewer replicas than asked have it and are in sync now (Kafka's
// NOT_ENOUGH_REPLICAS_AFTER_APPEND: the client may retry, and an
// idempotent retry gets the original offsets).
var (
	ErrNotEnoughReplicas            = errors.New("replica: fewer replicas in sync than min.insync.replicas")
	ErrNotEnoughReplicasAfterAppend = errors.New("replica: appended, but fewer replicas in sync than min.insync.replicas now")
)

// ErrStopped is a stopped replica's answer (Stop).
var ErrStopped = errors.New("replica: stopped")

// Config configures a Replica.
type Config struct {
	// ID is this replica's raft id (the broker's node id).
	ID uint64
	// Voters is the group's initial configuration, used only by a new
	// replica (empty log, no raft.state); every replica of the group
	// must be given the same.
	Voters []uint64
	// ElectionTick and HeartbeatTick are raft's, in ticks of the
	// owner's clock (10 and 1 if zero).
	ElectionTick, HeartbeatTick int
	// MaxSizePerMsg bounds the entries of one append message (1 MiB if
	// zero).
	MaxSizePerMsg uint64
	Logger        *zap.Logger
	// Apply receives each committed internal entry's body
	// (ProposeInternal), in log order, on the owner's goroutine during
	// Process. After a restart the entries since the last stored
	// configuration are applied again: Apply must be idempotent (the
	// metadata group rebuilds its image from them).
	Apply func(index uint64, body []byte)
	// Send, when set, sends the messages that need nothing durable
	// first (a leader's appends and heartbeats, vote requests) at once,
	// before this replica's fsync, so followers write in parallel; the
	// responses that do (append acknowledgements, votes) still come
	// from Outbox, after it. It is called from Process, Produce and
	// ProposeInternal on the owner's goroutine and must not block.
	Send func(Message)
	// ForwardProposals lets followers propose internal entries (raft
	// forwards them to the leader): for groups whose entries get their
	// offsets where they land (the metadata group). Data groups keep it
	// off: only a leader prepares batches.
	ForwardProposals bool
	// Sync, when set, takes the fsync out of Process: each one comes as
	// a SyncJob, which Sync must Run on a goroutine other than the
	// owner's and then hand back to Synced on the owner's. Meanwhile
	// Process goes on writing what comes next (produces keep being
	// proposed while the log syncs), and the responses that promise
	// durability wait for their job. One job is out at a time. Unset:
	// Process syncs before it returns. It must not block.
	Sync func(*SyncJob)
	// LagMax is replica.lag.time.max.ms (30 s if zero): a follower that
	// has not caught up with the leader's log end within it is out of
	// the ISR (InSync), as in Kafka.
	LagMax time.Duration
	// PreviousISR, when set, gives the ISR the partition's last leader
	// published: a new leader counts those followers caught up when its
	// term starts, as Kafka's keeps the ISR it was handed; the others
	// join once they have the log's end.
	PreviousISR func() []uint64
}

// SyncJob is one fsync of the replica's log, handed out by Process when
// Config.Sync is set, with the responses that wait for it.
type SyncJob struct {
	once  sync.Once
	p     *log.Partition
	fsync bool // something was written since the last job
	resps []*raftpb.Message
	err   error
}

// Run fsyncs the log (everything written so far: at least what the
// job's responses acknowledge). It is safe on any goroutine and runs
// the fsync once however often it is called.
func (j *SyncJob) Run() {
	j.once.Do(func() {
		if j.fsync {
			_, j.err = j.p.Sync()
		}
	})
}

// Stats counts a replica's events since it started.
type Stats struct {
	SnapshotsSent, SnapshotsInstalled int
}

// Stats returns the replica's counters.
func (r *Replica) Stats() Stats { return r.stats }

// Done receives the outcome of a Produce: the offsets, or an error.
// It is called from Process (or Produce), on the owner's goroutine.
type Done func(log.AppendResult, error)

// waiter is a produce waiting for its last entry to commit.
type waiter struct {
	index, term uint64
	res         log.AppendResult
	done        Done
	// need, when above a majority, is the replicas that must have the
	// entry at index durable before it is answered (min.insync.replicas).
	need int
}

// Replica is one replica of one partition. See the package doc: one
// goroutine drives it.
type Replica struct {
	id     uint64
	p      *log.Partition
	s      *raftlog.Storage
	rn     *raft.RawNode
	logger *zap.Logger

	outbox  []Message
	waiters []waiter // by index
	// hwWaits are duplicates (an idempotent retry) waiting for the
	// offset of the original to commit.
	hwWaits []waiter
	lead    uint64
	state   raft.StateType
	// snapsSent are the peers a MsgSnap went to in this Ready.
	snapsSent []uint64
	stats     Stats
	// applied is the last entry raft handed back as committed (the high
	// watermark's end).
	applied uint64
	apply   func(index uint64, body []byte)
	forward bool
	send    func(Message)
	failed  error
	// dirty: entries written since the last fsync; afterSync: the
	// responses raft gave for them, delivered once they are durable.
	dirty     bool
	afterSync []*raftpb.Message
	// syncer is Config.Sync; syncing the job it has out (nil: none).
	syncer  func(*SyncJob)
	syncing *SyncJob
	// readIndex is the highest commit index a ReadIndex came back with.
	readIndex uint64
	// On the leader (Tick; reset when it wins): the log's last index at
	// each tick of the last LagMax (oldest first), and when each
	// follower last had all the log had then (InSync).
	lagMax      time.Duration
	previousISR func() []uint64
	lastAt      []indexAt
	caughtAt    map[uint64]time.Time
	leading     uint64 // the term those are of (0: not leading)
	// handed is PreviousISR as the term started, at leadSince (Handed).
	handed    []uint64
	leadSince time.Time
	// ticks counts Tick calls; heard is the tick at which each peer
	// last answered an append or a heartbeat of the current term (Step):
	// recent.
	ticks        uint64
	heard        map[uint64]uint64
	electionTick uint64
}

// indexAt is the leader's last log index at a time.
type indexAt struct {
	at    time.Time
	index uint64
}

// DefaultElectionTick is Config.ElectionTick when zero.
const DefaultElectionTick = 10

// New starts the replica of partition p (opened with log.Config.Replica)
// whose raft storage is s.
func New(p *log.Partition, s *raftlog.Storage, cfg Config) (*Replica, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.ElectionTick == 0 {
		cfg.ElectionTick = DefaultElectionTick
	}
	if cfg.HeartbeatTick == 0 {
		cfg.HeartbeatTick = 1
	}
	if cfg.MaxSizePerMsg == 0 {
		cfg.MaxSizePerMsg = 1 << 20
	}
	st := s.State()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if len(st.Conf.GetVoters()) == 0 && len(st.Conf.GetLearners()) == 0 {
		if last >= first || len(cfg.Voters) == 0 {
			return nil, fmt.Errorf("replica %d: no configuration stored and none given", cfg.ID)
		}
		// The bootstrap configuration goes into raft.state (ConfIndex 0)
		// rather than raft's Bootstrap, which writes ConfChange v1
		// entries.
		if err := s.SetConfState(&raftpb.ConfState{Voters: cfg.Voters}, 0); err != nil {
			return nil, err
		}
		st = s.State()
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        cfg.ID,
		ElectionTick:              cfg.ElectionTick,
		HeartbeatTick:             cfg.HeartbeatTick,
		Storage:                   s,
		Applied:                   max(st.ConfIndex, first-1),
		MaxSizePerMsg:             cfg.MaxSizePerMsg,
		MaxInflightMsgs:           256,
		AsyncStorageWrites:        true,
		CheckQuorum:               true,
		PreVote:                   true,
		DisableProposalForwarding: !cfg.ForwardProposals,
		StepDownOnRemoval:         true,
		Logger:                    newRaftLogger(cfg.Logger),
	})
	if err != nil {
		return nil, err
	}
	if cfg.LagMax == 0 {
		cfg.LagMax = 30 * time.Second
	}
	// A follower's log is written and seldom read: its fsyncs drop what
	// they made durable from the page cache while it follows (write).
	p.SetDropCache(true)
	return &Replica{id: cfg.ID, p: p, s: s, rn: rn, logger: cfg.Logger, state: raft.StateFollower, applied: max(st.ConfIndex, first-1),
		apply: cfg.Apply, forward: cfg.ForwardProposals, send: cfg.Send, syncer: cfg.Sync, lagMax: cfg.LagMax,
		previousISR: cfg.PreviousISR, heard: map[uint64]uint64{}, electionTick: uint64(cfg.ElectionTick)}, nil
}

// Tick advances raft's logical clock by one tick, and on the leader
// notes which followers have caught up (InSync).
func (r *Replica) Tick() error {
	if err := r.guard(func() error { r.rn.Tick(); return nil }); err != nil {
		return err
	}
	r.ticks++
	r.trackCatchUp(time.Now())
	return nil
}

// trackCatchUp records, on the leader, the log's last index now and when
// each follower last had everything the log had at some tick: Kafka's
// lastCaughtUpTime, where a follower is caught up once it has fetched
// up to the leader's log end as of its fetch.
func (r *Replica) trackCatchUp(now time.Time) {
	st, ok := r.catchUpState(now)
	if !ok {
		return
	}
	last, _ := r.s.LastIndex()
	r.lastAt = append(r.lastAt, indexAt{now, last})
	drop := 0
	for drop < len(r.lastAt)-1 && now.Sub(r.lastAt[drop].at) > r.lagMax {
		drop++
	}
	r.lastAt = r.lastAt[drop:]
	for id, pr := range st.Progress {
		// The latest tick whose last index the follower has.
		i := sort.Search(len(r.lastAt), func(i int) bool { return r.lastAt[i].index > pr.Match }) - 1
		if i >= 0 && r.lastAt[i].at.After(r.caughtAt[id]) {
			r.caughtAt[id] = r.lastAt[i].at
		}
	}
}

// recent reports, on the leader, whether peer id is live: it answered
// an append or a heartbeat of this term (Step) within the last election
// timeout, as raft's RecentActive does. That flag is not used itself:
// CheckQuorum clears it for every follower once an election timeout, so
// until the next heartbeat answer every follower looked inactive.
func (r *Replica) recent(id uint64) bool {
	if id == r.id {
		return true
	}
	at, ok := r.heard[id]
	return ok && r.ticks-at <= r.electionTick
}

// catchUpState returns raft's status on the leader, and starts the
// catch-up times afresh when this replica leads a new term: the
// followers of PreviousISR (the ISR the last leader published, as Kafka's
// new leader keeps the ISR it was handed) caught up now, the others
// never (they join once they have the log's end). ok is false on a
// follower, whose times are dropped.
func (r *Replica) catchUpState(now time.Time) (st raft.Status, ok bool) {
	if r.state != raft.StateLeader || r.failed != nil {
		r.leading, r.lastAt, r.caughtAt, r.handed = 0, nil, nil, nil
		return st, false
	}
	st = r.rn.Status()
	if term := st.HardState.GetTerm(); r.leading != term {
		r.leading, r.lastAt, r.caughtAt, r.handed, r.leadSince = term, r.lastAt[:0], map[uint64]time.Time{}, nil, now
		if r.previousISR != nil {
			r.handed = r.previousISR()
			for _, id := range r.handed {
				r.caughtAt[id] = now
			}
		}
	}
	return st, true
}

// Handed returns, on the leader, the ISR it was handed as its term
// started (PreviousISR) and when that was (its first Tick or InSync as
// leader); nil and the zero time on a follower.
func (r *Replica) Handed() ([]uint64, time.Time) {
	if _, ok := r.catchUpState(time.Now()); !ok {
		return nil, time.Time{}
	}
	return r.handed, r.leadSince
}

// Campaign starts an election now (tests; a new group's first leader
// is otherwise elected after an election timeout).
func (r *Replica) Campaign() error { return r.guard(r.rn.Campaign) }

// guard runs f on the RawNode. Raft panics when its Storage fails (a
// read error while it builds a message, say): the panic becomes the
// replica's failure, final like any storage error, and the RawNode is
// not used again.
func (r *Replica) guard(f func() error) (err error) {
	if r.failed != nil {
		return r.failed
	}
	defer func() {
		if v := recover(); v != nil {
			if e, ok := v.(error); ok {
				err = fmt.Errorf("replica %d: raft stopped: %w", r.id, e)
			} else {
				err = fmt.Errorf("replica %d: raft stopped: %v", r.id, v)
			}
			r.fail(err)
		}
	}()
	return f()
}

// Message is a raft message between two replicas of the group,
// marshalled: the transport carries bytes, and nothing outside this
// package and log/raftlog sees raft's types.
type Message struct {
	From, To uint64
	// Parts is the message's wire form in parts, entry data not
	// copied: the transport sends them one after the other (Bytes
	// joins them).
	Parts [][]byte
}

// Step hands raft a message from a peer (Message.Bytes); the entries it
// carries keep pointing into data, which the caller must not change. One that does
// not decode is an error; one from a removed peer is dropped.
func (r *Replica) Step(data []byte) error {
	var m raftpb.Message
	if err := decode(data, &m); err != nil {
		return fmt.Errorf("replica %d: bad raft message: %w", r.id, err)
	}
	if m.GetTo() != r.id || isLocal(m.GetType()) && !(r.forward && m.GetType() == raftpb.MsgProp) {
		return fmt.Errorf("replica %d: message %v for %d", r.id, m.GetType(), m.GetTo())
	}
	err := r.guard(func() error { return r.rn.Step(&m) })
	if t := m.GetType(); err == nil && (t == raftpb.MsgAppResp || t == raftpb.MsgHeartbeatResp) && m.GetTerm() == r.Term() {
		r.heard[m.GetFrom()] = r.ticks
	}
	if errors.Is(err, raft.ErrStepPeerNotFound) || errors.Is(err, raft.ErrStepLocalMsg) {
		return nil // a message from a removed peer, or a local one: dropped
	}
	return err
}

// Leader returns the leader's id as this replica knows it (0: none) and
// whether this replica is the leader.
func (r *Replica) Leader() (uint64, bool) { return r.lead, r.state == raft.StateLeader }

// Term returns the current raft term (the partition's leader epoch).
func (r *Replica) Term() uint64 { return r.rn.BasicStatus().HardState.GetTerm() }

// EndOffsetFor answers OffsetForLeaderEpoch from the term cache (see
// raftlog.Terms.EndOffsetFor). Unlike the other methods, it may be
// called from any goroutine.
func (r *Replica) EndOffsetFor(term uint64) (uint64, int64, bool) { return r.s.EndOffsetFor(term) }

// Applied returns the last entry raft handed back as committed (the
// high watermark's end).
func (r *Replica) Applied() uint64 { return r.applied }

// TransferLeader hands leadership to voter to (raft's leadership
// transfer): once to has every entry it is told to campaign at once;
// proposals are refused meanwhile (ErrNotLeader), and the transfer is
// given up after an election timeout. Nothing happens on a follower.
func (r *Replica) TransferLeader(to uint64) error {
	return r.guard(func() error {
		if r.state == raft.StateLeader {
			r.rn.TransferLeader(to)
		}
		return nil
	})
}

// CaughtUp reports, on the leader, whether voter id has every committed
// entry durable (its Match at least the commit index): in sync in
// Kafka's sense, where InSync only says it is streaming appends (a
// follower just back, far behind, is too). False on a follower.
func (r *Replica) CaughtUp(id uint64) bool {
	if r.state != raft.StateLeader || r.failed != nil {
		return false
	}
	st, _ := r.catchUpState(time.Now())
	pr, ok := st.Progress[id]
	return ok && r.recent(id) && pr.State == tracker.StateReplicate && pr.Match >= st.HardState.GetCommit()
}

// Transferring reports, on the leader, whether a leadership transfer
// is pending (raft refuses proposals meanwhile).
func (r *Replica) Transferring() bool {
	return r.state == raft.StateLeader && r.rn.BasicStatus().LeadTransferee != 0
}

// AbortTransfer cancels a pending leadership transfer (raft's transfer
// to the leader itself), so proposals are taken again.
func (r *Replica) AbortTransfer() error { return r.TransferLeader(r.id) }

// ReadIndex asks the leader for its commit index, confirmed by a
// quorum of heartbeats (raft's ReadIndex, ReadOnlySafe): the answer
// comes in a later Process, as ReadIndexed. Nothing comes back while
// no leader is known, or the leader cannot reach a quorum: the caller
// asks again.
func (r *Replica) ReadIndex() error {
	return r.guard(func() error { r.rn.ReadIndex(nil); return nil })
}

// ReadIndexed returns the highest commit index a ReadIndex came back
// with (0: none yet). Once Applied reaches it, this replica has applied
// every entry committed before that ReadIndex was asked: a restarted
// replica knows it caught up, where its own commit index may be one the
// leader gave it before it heard of later entries.
func (r *Replica) ReadIndexed() uint64 { return r.readIndex }

// Commit returns raft's commit index as this replica knows it.
func (r *Replica) Commit() uint64 { return r.rn.BasicStatus().HardState.GetCommit() }

// InSync returns, on the leader, the replicas in sync with it: itself
// and the followers it heard from within the last election timeout
// that are streaming appends (raft's StateReplicate, not probing or
// waiting for a snapshot) and have caught up with the leader's log end
// within LagMax (trackCatchUp) — Kafka's ISR, whose followers are
// caught up within replica.lag.time.max.ms: one streaming but far
// behind (back after a while, say) is not in it. Nil on a follower.
func (r *Replica) InSync() []uint64 {
	if r.state != raft.StateLeader || r.failed != nil {
		return nil
	}
	now := time.Now()
	st, _ := r.catchUpState(now)
	last, _ := r.s.LastIndex()
	var out []uint64
	for id, pr := range st.Progress {
		if pr.Match >= last { // caught up now: it has the whole log
			r.caughtAt[id] = now
		}
		if id == r.id || r.recent(id) && pr.State == tracker.StateReplicate && now.Sub(r.caughtAt[id]) <= r.lagMax {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Active returns, on the leader, the voters it heard from within the
// last election timeout (recent), itself included. Nil on a follower.
func (r *Replica) Active() []uint64 {
	if r.state != raft.StateLeader || r.failed != nil {
		return nil
	}
	var out []uint64
	r.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		if typ == raft.ProgressTypePeer && r.recent(id) {
			out = append(out, id)
		}
	})
	slices.Sort(out)
	return out
}

// Partition returns the replica's log.
func (r *Replica) Partition() *log.Partition { return r.p }

// isLocal reports the message types raft only generates for itself,
// which no peer may send (raft panics on some of them).
func isLocal(t raftpb.MessageType) bool {
	switch t {
	case raftpb.MsgHup, raftpb.MsgBeat, raftpb.MsgUnreachable, raftpb.MsgSnapStatus, raftpb.MsgCheckQuorum,
		raftpb.MsgStorageAppend, raftpb.MsgStorageAppendResp, raftpb.MsgStorageApply, raftpb.MsgStorageApplyResp,
		raftpb.MsgProp:
		return true
	}
	return false
}

// Outbox returns and clears the messages Process produced for peers.
func (r *Replica) Outbox() []Message {
	out := r.outbox
	r.outbox = nil
	return out
}

// Produce proposes a produce's batches (concatenated RecordBatch v2) on
// the leader: validated and given offsets and the term as leader epoch
// (log.Partition.Prepare), then proposed one entry per batch. done is
// called once, when the last batch commits (acks=all: a majority has
// it durable) or the produce fails: validation errors at once,
// ErrNotLeader if this replica is not the leader or loses leadership
// first. A retry of a batch the log already has waits for that batch's
// commit and reports its original offsets.
//
// minInSync is min.insync.replicas for acks=all (0 or 1: none). Above a
// majority of the voters, a produce with fewer replicas in sync
// (InSync) is ErrNotEnoughReplicas, and done waits until that many
// replicas have the batches durable, not just a majority (or answers
// ErrNotEnoughReplicasAfterAppend once they are committed and too few
// replicas are in sync to get there).
func (r *Replica) Produce(records []byte, now time.Time, minInSync int, done Done) {
	// Offsets are assigned from the log end: every entry raft has must
	// be in the log first (a leader's empty entry of a new term, the
	// produces before this one), written but not synced: Process syncs
	// them all at once. A failed replica answers its failure here.
	if err := r.guard(r.write); err != nil {
		done(log.AppendResult{}, err)
		return
	}
	if r.state != raft.StateLeader {
		done(log.AppendResult{}, ErrNotLeader)
		return
	}
	// Up to a majority, raft's commit is min.insync.replicas already: a
	// produce is answered once a majority has it durable, and waits (the
	// client's timeout) while no majority is in sync, where Kafka answers
	// NOT_ENOUGH_REPLICAS at once; refusing up front by InSync would also
	// refuse every produce in a new leader's first heartbeats, before its
	// followers have answered it. Above a majority it is checked first
	// and waited for.
	need := 0
	if minInSync > 1 && minInSync > r.majority() {
		if len(r.InSync()) < minInSync {
			done(log.AppendResult{}, ErrNotEnoughReplicas)
			return
		}
		need = minInSync
	}
	res, err := r.p.Prepare(records, now)
	if err != nil {
		done(res, err)
		return
	}
	if res.Duplicate {
		r.hwWaits = append(r.hwWaits, waiter{res: res, done: done})
		r.resolve()
		return
	}
	term := r.Term()
	batches, err := protocol.SplitBatches(records)
	if err != nil {
		done(log.AppendResult{}, err) // Prepare validated the framing: cannot happen
		return
	}
	last, _ := r.s.LastIndex()
	for i, b := range batches {
		protocol.SetPartitionLeaderEpoch(b, int32(term))
		if err := r.guard(func() error { return r.rn.Propose(b) }); err != nil {
			// Dropped (leadership moving): the batches proposed so far
			// stand or fall on their own; the client retries them all.
			if i == 0 {
				done(log.AppendResult{}, ErrNotLeader)
				return
			}
			r.waiters = append(r.waiters, waiter{index: last + uint64(i), term: term, done: func(log.AppendResult, error) {
				done(log.AppendResult{}, ErrNotLeader)
			}})
			return
		}
	}
	r.waiters = append(r.waiters, waiter{index: last + uint64(len(batches)), term: term, res: res, done: done, need: need})
}

// majority is the smallest majority of the voters.
func (r *Replica) majority() int {
	voters := 0
	r.rn.WithProgress(func(_ uint64, typ raft.ProgressType, _ tracker.Progress) {
		if typ == raft.ProgressTypePeer {
			voters++
		}
	})
	return voters/2 + 1
}

// durableOn counts the replicas (this leader included) that have the
// entry at index durable: raft's Match of each, which a follower's
// append response (sent once its fsync ran) and the leader's own storage
// response raise.
func (r *Replica) durableOn(index uint64) int {
	n := 0
	r.rn.WithProgress(func(_ uint64, typ raft.ProgressType, pr tracker.Progress) {
		if typ == raft.ProgressTypePeer && pr.Match >= index {
			n++
		}
	})
	return n
}

// ProposeInternal proposes an internal entry carrying body, applied by
// every replica's Config.Apply once committed. On a follower it is
// forwarded to the leader when Config.ForwardProposals is set. An error
// means it was dropped (no leader known, say); a nil error promises
// nothing either: the proposer learns the outcome from Apply, and
// retries after a while without it (so bodies must be idempotent).
func (r *Replica) ProposeInternal(body []byte) error {
	if err := r.guard(r.write); err != nil { // as for Produce: raft's entries in the log first
		return err
	}
	if r.state != raft.StateLeader && !r.forward {
		return ErrNotLeader
	}
	err := r.guard(func() error { return r.rn.Propose(raftlog.Internal(body)) })
	if errors.Is(err, raft.ErrProposalDropped) {
		return ErrNotLeader
	}
	return err
}

// Process handles everything raft has ready and makes it durable:
// entries are written to the log and fsynced once for all of them,
// term and vote persisted, then the responses that promise durability
// (append acknowledgements, votes) queued for the Outbox (only after),
// committed entries applied (configuration changes; the high watermark
// follows the applied index) and produces answered. An error is final:
// the replica must be closed and reopened (recovery).
//
// Raft runs with AsyncStorageWrites: its storage work comes as
// messages, and a write's responses wait for the fsync instead of the
// next Ready. That is what lets Produce write raft's entries without
// syncing (it needs them in the log to assign offsets) and many
// produces share one fsync here.
func (r *Replica) Process() error {
	return r.guard(func() error {
		if r.syncer != nil {
			if err := r.write(); err != nil {
				return err
			}
			r.startSync()
			r.resolve()
			return nil
		}
		for {
			if err := r.write(); err != nil {
				return err
			}
			if !r.dirty && len(r.afterSync) == 0 {
				break
			}
			if err := r.sync(); err != nil {
				return err
			}
		}
		r.resolve()
		return nil
	})
}

// fail makes err the replica's final error.
func (r *Replica) fail(err error) error {
	r.failed = err
	r.failAll(err)
	return err
}

// write handles every Ready without syncing: entries, snapshots and
// hard state are written (not yet durable, except what raftlog makes
// durable itself), committed entries applied, messages that need no
// durability sent or queued; responses that do wait in afterSync.
// Called inside guard.
func (r *Replica) write() error {
	for r.rn.HasReady() {
		rd := r.rn.Ready()
		if rd.SoftState != nil {
			r.lead = rd.SoftState.Lead
			if r.state == raft.StateLeader && rd.SoftState.RaftState != raft.StateLeader {
				r.failAll(ErrNotLeader)
			}
			r.state = rd.SoftState.RaftState
			r.p.SetDropCache(r.state != raft.StateLeader)
		}
		for _, rs := range rd.ReadStates {
			r.readIndex = max(r.readIndex, rs.Index)
		}
		for _, m := range rd.Messages {
			var err error
			switch m.GetTo() {
			case raft.LocalAppendThread:
				err = r.storageAppend(m)
			case raft.LocalApplyThread:
				err = r.storageApply(m)
			default:
				err = r.sendNow(m)
			}
			if err != nil {
				return r.fail(err)
			}
		}
		for _, to := range r.snapsSent {
			r.rn.ReportSnapshot(to, raft.SnapshotFinish)
		}
		r.snapsSent = r.snapsSent[:0]
	}
	return nil
}

// storageAppend writes a MsgStorageAppend's snapshot, entries and hard
// state, and keeps its responses for after the fsync.
func (r *Replica) storageAppend(m *raftpb.Message) error {
	if r.syncing != nil && r.replaces(m) {
		// The job out may acknowledge entries this message overwrites
		// (or a snapshot replaces): it finishes first, so the order of
		// durability is raft's, as if the fsync had run inline. The log
		// itself would cope (TruncateFrom and ResetTo fsync what they
		// keep and serialise with a running Sync), so this is a belt;
		// it costs a wait only on a follower whose tail is replaced.
		if err := r.finishSync(); err != nil {
			return err
		}
	}
	if snap := m.GetSnapshot(); !raft.IsEmptySnap(snap) {
		// The leader's log begins past this one's end: start over
		// there (raftlog.Storage.Snapshot says what a snapshot is).
		// ApplySnapshot is durable when it returns.
		if err := r.s.ApplySnapshot(snap, time.Now()); err != nil {
			return err
		}
		r.applied = snap.GetMetadata().GetIndex()
		r.stats.SnapshotsInstalled++
	}
	if ents := m.GetEntries(); len(ents) > 0 {
		append := r.s.Append
		if r.ownEntries(ents) {
			append = r.s.AppendOwn
		}
		if err := append(ents, time.Now()); err != nil {
			return err
		}
		r.dirty = true
	}
	if m.Term != nil { // a HardState: raftlog writes (and syncs) term and vote changes
		hs := &raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
		if err := r.s.SetHardState(hs); err != nil {
			return err
		}
	}
	r.afterSync = append(r.afterSync, m.GetResponses()...)
	return nil
}

// replaces reports whether a MsgStorageAppend changes what the log
// already holds: a snapshot, or entries from an index the log has.
func (r *Replica) replaces(m *raftpb.Message) bool {
	if !raft.IsEmptySnap(m.GetSnapshot()) {
		return true
	}
	ents := m.GetEntries()
	if len(ents) == 0 {
		return false
	}
	last, err := r.s.LastIndex()
	return err != nil || ents[0].GetIndex() <= last
}

// ownEntries reports whether this replica made every one of ents: it
// leads, every entry is of its term (raft's leader of a term is the only
// maker of that term's entries), and it takes no proposal forwarded by a
// follower (Config.ForwardProposals), so each data entry went through
// Produce, whose log.Partition.Prepare checked the batch's CRC.
func (r *Replica) ownEntries(ents []*raftpb.Entry) bool {
	if r.forward || r.state != raft.StateLeader {
		return false
	}
	term := r.Term()
	for _, e := range ents {
		if e.GetTerm() != term {
			return false
		}
	}
	return true
}

// storageApply applies a MsgStorageApply's committed entries (raft
// hands over only entries this replica has durable) and steps its
// responses at once: applying needs no fsync of its own.
func (r *Replica) storageApply(m *raftpb.Message) error {
	ents := m.GetEntries()
	confIndex := r.s.State().ConfIndex
	for _, e := range ents {
		if e.GetType() == raftpb.EntryNormal && r.apply != nil {
			if body, ok := raftlog.InternalBody(e.Data); ok {
				r.apply(e.GetIndex(), body)
			}
			continue
		}
		if e.GetType() != raftpb.EntryConfChangeV2 || e.GetIndex() <= confIndex {
			continue
		}
		var cc raftpb.ConfChangeV2
		if err := proto.Unmarshal(e.Data, &cc); err != nil {
			return fmt.Errorf("replica %d: entry %d: %w", r.id, e.GetIndex(), err)
		}
		if err := r.s.SetConfState(r.rn.ApplyConfChange(&cc), e.GetIndex()); err != nil {
			return err
		}
	}
	if n := len(ents); n > 0 {
		r.applied = ents[n-1].GetIndex()
		if err := r.s.SetApplied(r.applied); err != nil {
			return err
		}
	}
	for _, resp := range m.GetResponses() {
		if err := r.deliver(resp); err != nil {
			return err
		}
	}
	return nil
}

// sync makes what write wrote durable, then delivers the responses
// that waited for it: to raft itself, or to peers through the Outbox.
// Called inside guard.
func (r *Replica) sync() error {
	if r.dirty {
		if _, err := r.p.Sync(); err != nil {
			return r.fail(err)
		}
		r.dirty = false
	}
	resps := r.afterSync
	r.afterSync = nil
	for _, m := range resps {
		if err := r.deliver(m); err != nil {
			return r.fail(err)
		}
	}
	return nil
}

// startSync hands out a SyncJob for what was written since the last
// one, with the responses that wait for it, unless one is out already
// (it then goes with the next): jobs complete in order, so responses
// are delivered in the order raft gave them. Called inside guard.
func (r *Replica) startSync() {
	if r.syncing != nil || !r.dirty && len(r.afterSync) == 0 {
		return
	}
	j := &SyncJob{p: r.p, fsync: r.dirty, resps: r.afterSync}
	r.dirty, r.afterSync = false, nil
	r.syncing = j
	r.syncer(j)
}

// Synced takes back a SyncJob that has Run: its responses are delivered
// (to raft, or to the Outbox); the caller then calls Process, which
// answers what committed and hands out the next job. A failed fsync is
// the replica's failure. A job already taken back (finishSync) is
// ignored.
func (r *Replica) Synced(j *SyncJob) error {
	return r.guard(func() error {
		if r.syncing != j {
			return nil
		}
		return r.finishSync()
	})
}

// finishSync waits for the job out to have Run (running it here if it
// has not started) and delivers its responses. Called inside guard.
func (r *Replica) finishSync() error {
	j := r.syncing
	if j == nil {
		return nil
	}
	j.Run()
	r.syncing = nil
	if j.err != nil {
		return r.fail(j.err)
	}
	for _, m := range j.resps {
		if err := r.deliver(m); err != nil {
			return r.fail(err)
		}
	}
	return nil
}

// deliver steps a storage response addressed to this replica, or
// queues one for a peer in the Outbox.
func (r *Replica) deliver(m *raftpb.Message) error {
	if m.GetTo() == r.id {
		err := r.rn.Step(m)
		if errors.Is(err, raft.ErrStepPeerNotFound) {
			return nil // from a peer removed meanwhile (or this replica): dropped, as Advance dropped it
		}
		return err
	}
	return r.queue(m, false)
}

// sendNow sends a message that needs nothing durable first (a leader's
// appends and heartbeats, vote requests): through Config.Send, so
// followers write while this replica syncs, or else the Outbox.
func (r *Replica) sendNow(m *raftpb.Message) error {
	if m.GetType() == raftpb.MsgSnap {
		// A snapshot travels in its message (it is a few bytes): sent
		// is as good as delivered for raft's bookkeeping; if it is
		// lost, probing finds that out and sends another.
		r.snapsSent = append(r.snapsSent, m.GetTo())
		r.stats.SnapshotsSent++
	}
	return r.queue(m, r.send != nil)
}

// queue marshals m and sends it through Config.Send (now) or appends
// it to the Outbox.
func (r *Replica) queue(m *raftpb.Message, now bool) error {
	parts, err := encode(m)
	if err != nil {
		return fmt.Errorf("replica %d: encode %v: %w", r.id, m.GetType(), err)
	}
	msg := Message{From: m.GetFrom(), To: m.GetTo(), Parts: parts}
	if now {
		r.send(msg)
	} else {
		r.outbox = append(r.outbox, msg)
	}
	return nil
}

// resolve answers the produces whose entries committed, or were
// replaced by another term's (then ErrNotLeader), and the duplicates
// whose original committed.
func (r *Replica) resolve() {
	commit := r.applied // answered once the high watermark covers them
	n := 0
	for _, w := range r.waiters {
		if w.index > commit {
			r.waiters[n] = w
			n++
			continue
		}
		t, err := r.s.Term(w.index)
		switch {
		case err == nil && t == w.term && w.need > 0 && r.state == raft.StateLeader && r.durableOn(w.index) < w.need:
			// Committed, not yet on min.insync.replicas of them.
			if len(r.InSync()) < w.need {
				w.done(log.AppendResult{}, ErrNotEnoughReplicasAfterAppend)
				continue
			}
			r.waiters[n] = w
			n++
		case err == nil && t == w.term:
			w.done(w.res, nil)
		case err == nil:
			w.done(log.AppendResult{}, ErrNotLeader)
		case errors.Is(err, raft.ErrCompacted):
			w.done(w.res, nil) // committed, and deleted since by retention
		default:
			w.done(log.AppendResult{}, err)
		}
	}
	clear(r.waiters[n:])
	r.waiters = r.waiters[:n]
	hw := r.p.HighWatermark()
	n = 0
	for _, w := range r.hwWaits {
		if w.res.LastOffset >= hw {
			r.hwWaits[n] = w
			n++
			continue
		}
		w.done(w.res, nil)
	}
	clear(r.hwWaits[n:])
	r.hwWaits = r.hwWaits[:n]
}

// Stop ends the replica for good, as a failure does: every waiting
// produce is answered ErrStopped, and so is every call after (the
// broker is shutting down, or the group's goroutine gave up on it). A
// replica that failed keeps its failure.
func (r *Replica) Stop() {
	if r.failed == nil {
		r.fail(ErrStopped)
	}
}

// failAll answers every waiting produce with err.
func (r *Replica) failAll(err error) {
	for _, w := range r.waiters {
		w.done(log.AppendResult{}, err)
	}
	for _, w := range r.hwWaits {
		w.done(log.AppendResult{}, err)
	}
	r.waiters, r.hwWaits = nil, nil
}
