package clustertest

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/shoal-mq/shoal/broker/replica"
	"github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/log/raftlog"
	"github.com/shoal-mq/shoal/protocol"
)

const dir = "/data/topic-0"

// Options shape a run. The zero value of a probability disables it.
type Options struct {
	Seed  uint64
	Nodes int // 3 if zero
	Steps int // simulated ticks
	Drop  float64
	Dup   float64
	Delay int     // a message takes 1..Delay+1 steps
	Crash float64 // per step: power loss of a random node
	Split float64 // per step: a new random network partition (healed as often)
	// Retention, per step: a random node deletes records below about
	// its high watermark and the segments under them, so that lagging
	// replicas must be sent snapshots.
	Retention float64
	Writes    int // batches the producer writes (stops early when done)
}

type node struct {
	id uint64
	fs *log.MemFS
	p  *log.Partition
	s  *raftlog.Storage
	r  *replica.Replica
	up bool
	// checked is the ordinal below which this node's committed log was
	// compared with the cluster's.
	checked int64
}

// syncJob is a replica's fsync handed out (replica.Config.Sync), run
// and handed back at a random later step, or lost with the power.
type syncJob struct {
	n *node
	r *replica.Replica // the replica that handed it out
	j *replica.SyncJob
}

type envelope struct {
	at int
	m  replica.Message
}

// Sim is one simulated run.
type Sim struct {
	opt   Options
	rng   *mrand.Rand
	nodes []*node
	net   []envelope
	jobs  []syncJob
	step  int
	group map[uint64]int // the side of the current partition each node is on
	// leaders: the leader seen for each term.
	leaders map[uint64]uint64
	// committed: the cluster's committed log, ordinal by ordinal, as the
	// first node to commit each ordinal had it.
	committed [][]byte
	prod      producer
	errs      []error
	trace     []string
	crashes   int
	snapshots int // installed by nodes that have since crashed
}

// producer is one idempotent producer with up to maxInflight batches
// in flight to one leader, as Kafka's allows five. When one fails or
// times out it gives up on all of them and sends again from the first
// unacknowledged sequence (answers to what it gave up on are ignored).
type producer struct {
	next        int32 // next sequence to send
	gen         int   // bumped by reset: answers from before are ignored
	outstanding int   // sent in this generation and not answered
	target      uint64
	sentAt      int             // when the batches in flight last made progress
	acked       []int64         // offset acknowledged per sequence, the acknowledged prefix
	early       map[int32]int64 // acknowledged past that prefix
	everAcked   map[int32]int64 // every acknowledgement, in any generation
}

const maxInflight = 4

// reset gives up on the batches in flight.
func (p *producer) reset() {
	p.gen++
	p.outstanding = 0
	p.next = int32(len(p.acked))
	clear(p.early)
}

// ack records sequence seq acknowledged at offset off: answers come
// in log order, except a duplicate's, which waits for the high
// watermark and may come after the batches behind it.
func (p *producer) ack(seq int32, off int64) {
	if p.early == nil {
		p.early = map[int32]int64{}
	}
	p.early[seq] = off
	for {
		o, ok := p.early[int32(len(p.acked))]
		if !ok {
			return
		}
		delete(p.early, int32(len(p.acked)))
		p.acked = append(p.acked, o)
	}
}

// Stats summarizes a run.
type Stats struct {
	Acked   int // batches acknowledged to the producer
	Terms   int // terms that had a leader
	Crashes int
	// Snapshots installed by followers whose leader's log had moved on.
	Snapshots int
}

// Run simulates opt and returns the invariant violations found (none:
// nil), the run's trace and its figures.
func Run(opt Options) (errs []error, trace []string, stats Stats) {
	if opt.Nodes == 0 {
		opt.Nodes = 3
	}
	s := &Sim{opt: opt, rng: mrand.New(mrand.NewPCG(opt.Seed, opt.Seed^0x5eed)), leaders: map[uint64]uint64{}}
	// etcd raft draws election timeouts from crypto/rand: from the seed
	// here, so a run replays.
	saved := rand.Reader
	rand.Reader = mrand.NewChaCha8(seed32(opt.Seed))
	defer func() { rand.Reader = saved }()
	voters := make([]uint64, opt.Nodes)
	for i := range voters {
		voters[i] = uint64(i + 1)
	}
	for _, id := range voters {
		n := &node{id: id, fs: log.NewMemFS()}
		if err := s.start(n, voters); err != nil {
			return []error{err}, s.trace, Stats{}
		}
		s.nodes = append(s.nodes, n)
	}
	for s.step = 0; s.step < opt.Steps && len(s.errs) == 0; s.step++ {
		s.tick()
		if len(s.prod.acked) >= opt.Writes {
			break
		}
	}
	s.settle()
	snaps := s.snapshots
	for _, n := range s.nodes {
		if n.up {
			snaps += n.r.Stats().SnapshotsInstalled
		}
	}
	return s.errs, s.trace, Stats{Acked: len(s.prod.acked), Terms: len(s.leaders), Crashes: s.crashes, Snapshots: snaps}
}

func seed32(seed uint64) [32]byte {
	var b [32]byte
	binary.BigEndian.PutUint64(b[:], seed)
	return b
}

func (s *Sim) logf(format string, args ...any) {
	s.trace = append(s.trace, fmt.Sprintf("%5d ", s.step)+fmt.Sprintf(format, args...))
}

func (s *Sim) violation(format string, args ...any) {
	err := fmt.Errorf("seed %d step %d: "+format, append([]any{s.opt.Seed, s.step}, args...)...)
	s.errs = append(s.errs, err)
	s.logf("VIOLATION %v", err)
}

// start opens a node's log and replica from its file system.
func (s *Sim) start(n *node, voters []uint64) error {
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 256
	cfg.Replica = true
	p, err := log.Open(n.fs, dir, cfg, nil)
	if err != nil {
		return fmt.Errorf("node %d: open log: %w", n.id, err)
	}
	st, err := raftlog.Open(n.fs, dir, p)
	if err != nil {
		return fmt.Errorf("node %d: open storage: %w", n.id, err)
	}
	rc := replica.Config{ID: n.id, Voters: voters, Send: s.post}
	// Half the nodes (drawn at each start) sync asynchronously, as a
	// broker's groups do: Process writes and hands the fsync out, and the
	// responses that wait for it go once the job comes back.
	if s.rng.IntN(2) == 0 {
		rc.Sync = func(j *replica.SyncJob) { s.jobs = append(s.jobs, syncJob{n: n, r: n.r, j: j}) }
	}
	r, err := replica.New(p, st, rc)
	if err != nil {
		return fmt.Errorf("node %d: replica: %w", n.id, err)
	}
	n.p, n.s, n.r, n.up = p, st, r, true
	n.checked = p.FirstOrdinal()
	return nil
}

// tick is one step: faults, clocks, the network, the producer, checks.
func (s *Sim) tick() {
	if s.opt.Crash > 0 && s.rng.Float64() < s.opt.Crash {
		n := s.nodes[s.rng.IntN(len(s.nodes))]
		switch {
		case !n.up:
			s.restart(n)
		case s.rng.IntN(2) == 0:
			s.crash(n, n.fs.CrashCloneTorn(s.rng))
		default:
			// Power goes in the middle of one of the node's next file
			// operations: a write, an fsync, a truncation, a rename.
			k := 1 + s.rng.IntN(40)
			s.logf("power loss of node %d armed in %d file operations", n.id, k)
			n.fs.SetCrashPoint(k, s.rng)
		}
	}
	if s.opt.Split > 0 && s.rng.Float64() < s.opt.Split {
		if s.group == nil {
			s.group = map[uint64]int{}
			for _, n := range s.nodes {
				s.group[n.id] = s.rng.IntN(2)
			}
			s.logf("partition %v", s.group)
		} else {
			s.group = nil
			s.logf("healed")
		}
	}
	if s.opt.Retention > 0 && s.rng.Float64() < s.opt.Retention {
		if n := s.nodes[s.rng.IntN(len(s.nodes))]; n.up {
			s.retain(n)
		}
	}
	s.syncs()
	for _, n := range s.nodes {
		if n.up {
			if err := n.r.Tick(); err != nil {
				s.fault(n, "tick", err)
				continue
			}
			s.process(n)
		}
	}
	s.deliver()
	s.produce()
	s.check()
}

// syncs runs some of the fsyncs handed out, in random order (a node has
// one out at a time), and hands them back; the others wait. Those of a
// replica that lost its power are gone with what they would have synced.
func (s *Sim) syncs() {
	keep := s.jobs[:0]
	var due []syncJob
	for _, sj := range s.jobs {
		switch {
		case !sj.n.up || sj.n.r != sj.r:
		case s.rng.IntN(3) == 0:
			due = append(due, sj)
		default:
			keep = append(keep, sj)
		}
	}
	s.jobs = keep
	s.rng.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	for _, sj := range due {
		if !sj.n.up || sj.n.r != sj.r { // crashed at an earlier job's fsync
			continue
		}
		sj.j.Run()
		if err := sj.r.Synced(sj.j); err != nil {
			s.fault(sj.n, "synced", err)
			continue
		}
		s.process(sj.n)
	}
}

// crash replaces a node's file system with what power loss left (fs).
func (s *Sim) crash(n *node, fs *log.MemFS) {
	s.logf("power loss of node %d", n.id)
	s.crashes++
	n.fs = fs
	s.snapshots += n.r.Stats().SnapshotsInstalled
	n.up, n.p, n.s, n.r = false, nil, nil, nil
	if s.prod.outstanding > 0 && s.prod.target == n.id {
		s.prod.reset() // the connection died: the producer retries
	}
}

func (s *Sim) restart(n *node) {
	s.logf("restart of node %d", n.id)
	if err := s.start(n, nil); err != nil {
		s.fault(n, "restart", err)
	}
}

// retain runs retention on a node: records below a point near its high
// watermark go, with the segments wholly below it.
func (s *Sim) retain(n *node) {
	hw := n.p.HighWatermark()
	to := max(n.p.LogStartOffset(), hw-int64(s.rng.IntN(40)))
	if _, err := n.p.DeleteRecordsBefore(to); err != nil {
		s.fault(n, "delete records", err)
		return
	}
	if _, err := n.p.EnforceRetention(time.UnixMilli(1_700_000_000_000)); err != nil {
		s.fault(n, "retention", err)
		return
	}
	s.logf("node %d log starts at offset %d, entry %d", n.id, n.p.LogStartOffset(), n.p.FirstOrdinal())
}

// fault handles an error from a node: power lost at its crash point
// takes the node down; anything else is a violation.
func (s *Sim) fault(n *node, what string, err error) {
	if errors.Is(err, log.ErrPowerLost) {
		if n.up {
			s.crash(n, n.fs.Crashed())
		}
		return
	}
	s.violation("node %d: %s: %v", n.id, what, err)
}

// process drains a node's Ready and posts its messages.
func (s *Sim) process(n *node) {
	if !n.up {
		return
	}
	if err := n.r.Process(); err != nil {
		s.fault(n, "process", err)
		return
	}
	s.observe(n)
	for _, m := range n.r.Outbox() {
		s.post(m)
	}
}

func (s *Sim) observe(n *node) {
	if _, leader := n.r.Leader(); leader {
		term := n.r.Term()
		if prev, ok := s.leaders[term]; ok && prev != n.id {
			s.violation("two leaders in term %d: %d and %d", term, prev, n.id)
		}
		if _, ok := s.leaders[term]; !ok {
			s.logf("node %d leads term %d", n.id, term)
		}
		s.leaders[term] = n.id
	}
}

func (s *Sim) post(m replica.Message) {
	if s.opt.Drop > 0 && s.rng.Float64() < s.opt.Drop {
		return
	}
	copies := 1
	if s.opt.Dup > 0 && s.rng.Float64() < s.opt.Dup {
		copies = 2
	}
	for range copies {
		s.net = append(s.net, envelope{at: s.step + 1 + s.rng.IntN(s.opt.Delay+1), m: m})
	}
}

// deliver hands the messages due this step to their nodes, in random
// order (reordering), unless a partition separates the two ends.
func (s *Sim) deliver() {
	var due []envelope
	keep := s.net[:0]
	for _, e := range s.net {
		if e.at <= s.step {
			due = append(due, e)
		} else {
			keep = append(keep, e)
		}
	}
	s.net = keep
	s.rng.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	for _, e := range due {
		to := s.nodes[e.m.To-1]
		if !to.up || (s.group != nil && s.group[e.m.From] != s.group[e.m.To]) {
			continue
		}
		if err := to.r.Step(e.m.Bytes()); err != nil {
			s.fault(to, "step", err)
			continue
		}
		// Processed at once one time in three, else with what else
		// arrives before the next tick: a broker drains many messages
		// between two syncs.
		if s.rng.IntN(3) == 0 {
			s.process(to)
		}
	}
}

// produce sends the producer's next batches (or retries) to a leader:
// one to three of them, all written before the leader syncs.
func (s *Sim) produce() {
	p := &s.prod
	if p.outstanding > 0 && s.step-p.sentAt > 100 {
		p.reset() // timed out: retry (the same sequences)
	}
	room := min(maxInflight-p.outstanding, s.opt.Writes-int(p.next))
	if room <= 0 {
		return
	}
	var leader *node
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		if _, ok := n.r.Leader(); ok {
			leader = n
		}
	}
	if leader == nil || p.outstanding > 0 && p.target != leader.id {
		return // what is in flight elsewhere fails or times out first
	}
	if p.outstanding == 0 {
		p.target, p.sentAt = leader.id, s.step
	}
	gen := p.gen
	for range min(room, 1+s.rng.IntN(3)) {
		seq := p.next
		p.next++
		p.outstanding++
		leader.r.Produce(Batch(seq), time.UnixMilli(1_700_000_000_000), 0, func(res log.AppendResult, err error) {
			if err == nil { // every acknowledgement is checked, even one the producer gave up on
				if prev, ok := p.everAcked[seq]; ok && prev != res.BaseOffset {
					s.violation("sequence %d acknowledged at offset %d and at %d", seq, prev, res.BaseOffset)
				}
				if p.everAcked == nil {
					p.everAcked = map[int32]int64{}
				}
				p.everAcked[seq] = res.BaseOffset
			}
			if gen != p.gen {
				return // an answer after the producer gave up on it
			}
			p.outstanding--
			if err != nil {
				s.logf("produce seq %d at node %d: %v", seq, leader.id, err)
				p.reset()
				return
			}
			s.logf("acked seq %d at offset %d (node %d)", seq, res.BaseOffset, leader.id)
			p.ack(seq, res.BaseOffset)
			p.sentAt = s.step // progress: the timeout counts from here
		})
		if gen != p.gen {
			break // answered at once with an error
		}
	}
	if s.rng.IntN(2) == 0 { // else synced with the next tick's processing
		s.process(leader)
	}
}

// check compares each node's newly committed entries with the
// cluster's committed log.
func (s *Sim) check() {
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		// Up to what the node applied: its commit index may run ahead
		// of its log while a Ready waits to be processed (an
		// overwritten tail still there).
		commit := n.r.Applied()
		first := n.p.FirstOrdinal()
		n.checked = max(n.checked, first)
		for n.checked <= int64(commit) {
			b, cnt, err := n.p.ReadOrdinals(nil, n.checked, int64(commit)+1, 1<<20)
			if err != nil {
				s.fault(n, fmt.Sprintf("read entries from %d", n.checked), err)
				break
			}
			for range cnt {
				h, _ := protocol.ParseBatchHeader(b)
				one := b[:h.Size()]
				i := n.checked - 1
				switch {
				case i < int64(len(s.committed)):
					if !bytes.Equal(s.committed[i], one) {
						s.violation("node %d holds another batch at committed ordinal %d", n.id, n.checked)
						return
					}
				case i == int64(len(s.committed)):
					s.committed = append(s.committed, slices.Clone(one))
				default:
					s.violation("node %d committed ordinal %d past the cluster's %d", n.id, n.checked, len(s.committed))
					return
				}
				b = b[h.Size():]
				n.checked++
			}
		}
	}
}

// settle heals the network, restarts every node, runs until the cluster
// is quiet, and checks the end state: the producer's acknowledged
// batches, once each, at their offsets, in order; every replica equal to
// the committed log.
func (s *Sim) settle() {
	if len(s.errs) > 0 {
		return
	}
	s.group = nil
	s.opt.Drop, s.opt.Dup, s.opt.Crash, s.opt.Split, s.opt.Retention = 0, 0, 0, 0, 0
	s.opt.Writes = int(s.prod.next) // the producer stops after the batches it is writing
	for _, n := range s.nodes {
		n.fs.SetCrashPoint(0, nil)
		if c := n.fs.Crashed(); n.up && c != nil { // its power went, unnoticed so far
			s.crash(n, c)
		}
		if !n.up {
			s.restart(n)
		}
	}
	for range 200 {
		s.tick()
		s.step++
	}
	s.prod.reset()
	// The committed log holds each sequence once, in order, and each
	// acknowledged one at its acknowledged offset.
	next := int32(0)
	for ord, b := range s.committed {
		h, _ := protocol.ParseBatchHeader(b)
		if h.IsControl() {
			continue
		}
		if h.BaseSequence != next {
			s.violation("committed ordinal %d has sequence %d, expected %d (duplicated, lost or misordered)", ord+1, h.BaseSequence, next)
			return
		}
		if off, ok := s.prod.everAcked[next]; ok && off != h.BaseOffset {
			s.violation("sequence %d acknowledged at offset %d, committed at %d", next, off, h.BaseOffset)
			return
		}
		next++
	}
	for seq := range s.prod.everAcked {
		if seq >= next {
			s.violation("sequence %d acknowledged, %d committed", seq, next)
			break
		}
	}
	for _, n := range s.nodes {
		if !n.up {
			s.violation("node %d down after settling", n.id)
			continue
		}
		if n.r.Commit() < uint64(len(s.committed)) {
			s.violation("node %d commit %d behind the cluster's %d after settling", n.id, n.r.Commit(), len(s.committed))
		}
	}
}

// Batch is the producer's batch of sequence seq: one record whose value
// is the sequence, producer id 1, epoch 0.
func Batch(seq int32) []byte {
	rec := []byte{0}                   // attributes
	rec = binary.AppendVarint(rec, 0)  // timestamp delta
	rec = binary.AppendVarint(rec, 0)  // offset delta
	rec = binary.AppendVarint(rec, -1) // key: null
	rec = binary.AppendVarint(rec, 4)  // value length
	rec = binary.BigEndian.AppendUint32(rec, uint32(seq))
	rec = binary.AppendVarint(rec, 0) // headers
	b := make([]byte, protocol.BatchHeaderSize)
	be := binary.BigEndian
	be.PutUint32(b[12:], 0xffffffff) // leader epoch -1
	b[16] = 2
	be.PutUint64(b[27:], 1_700_000_000_000)
	be.PutUint64(b[35:], 1_700_000_000_000)
	be.PutUint64(b[43:], 1) // producer id
	be.PutUint32(b[53:], uint32(seq))
	be.PutUint32(b[57:], 1)
	b = binary.AppendVarint(b, int64(len(rec)))
	b = append(b, rec...)
	be.PutUint32(b[8:], uint32(len(b)-protocol.BatchLengthPrefix))
	protocol.SetBatchCRC(b)
	return b
}
