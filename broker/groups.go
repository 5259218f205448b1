package broker

// The group coordinator: consumer groups of the classic protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup; groups_classic.go), of
// the KIP-848 protocol (ConsumerGroupHeartbeat; groups_consumer.go), and
// the committed offsets of every group (OffsetCommit, OffsetFetch,
// OffsetDelete; groups_offsets.go), all durable in the metadata store
// (groups_store.go). Shoal is a single node, so it coordinates every
// group. A group id names one group of one type at a time; an empty
// group converts to the other type when a member of that protocol joins.
//
// # Ownership
//
// groupCoordinator.mu guards only the map of groups; it is never held
// while a group's lock is taken, nor during I/O. Each group has its own
// lock, group.mu, guarding all of its state (members, generation,
// offsets, timer). A group's owner may do I/O on its own behalf under
// group.mu (persisting its metadata or offsets to badger before a
// response goes out: "persist, then answer"), which blocks only that
// group. Lock order: group.mu → groupCoordinator.mu → broker.dyn (read
// through settings) and topics.Registry.mu (read through topicExists).
//
// A group is removed from the map only with its lock held, after its
// state became Dead; a caller that locks a group and finds it Dead looks
// the name up again (lockGroup).
//
// # Time
//
// Each group has at most one timer, armed for its earliest deadline
// (a member's session, the end of the join phase, the sync deadline, a
// pending member id's expiry). The timer callback takes group.mu and runs
// tickLocked with the current time, which handles everything that is due
// and re-arms. Heartbeats only move deadlines later, so they never reset
// the timer: an early firing finds nothing due and re-arms. Every state
// change takes now from the caller (one time.Now per request).
//
// # Parked requests
//
// JoinGroup and SyncGroup may have to wait for other members. The handler
// then returns its response with a wait function (conn.go's two-phase
// handling): the group later sends the finished response on a channel
// with room for exactly one value, so the group never blocks on a slow or
// dead connection, and the connection's writer keeps responses in
// request order. Every parked request is answered exactly once: on
// completion, on an error, when its member is removed, or with
// NOT_COORDINATOR when the broker shuts down.
//
// Rejected designs: one goroutine per group fed by a queue (kfake runs
// every group on one loop): a per-group mutex gives the same
// serialisation with less machinery, and all waiting happens on the
// connection's writer, not in the group.

import (
	"crypto/rand"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/topics"
)

// groupState is a classic group's state, named as Kafka names them on
// the wire (DescribeGroups, ListGroups).
type groupState int8

const (
	groupEmpty groupState = iota
	groupPreparingRebalance
	groupCompletingRebalance
	groupStable
	groupDead
)

func (s groupState) String() string {
	switch s {
	case groupEmpty:
		return "Empty"
	case groupPreparingRebalance:
		return "PreparingRebalance"
	case groupCompletingRebalance:
		return "CompletingRebalance"
	case groupStable:
		return "Stable"
	default:
		return "Dead"
	}
}

// Group types as ListGroups v5 reports and filters them (KIP-848).
const (
	groupTypeClassic  = "classic"
	groupTypeConsumer = "consumer"
)

// groupTP names one partition's committed offset within a group.
type groupTP struct {
	topic     string
	partition int32
}

// byTopic groups the partitions of tps by topic: the topic names in
// order, and each topic's partitions in order.
func byTopic[V any](tps map[groupTP]V) (names []string, parts map[string][]int32) {
	parts = map[string][]int32{}
	for tp := range tps {
		parts[tp.topic] = append(parts[tp.topic], tp.partition)
	}
	names = make([]string, 0, len(parts))
	for n, ps := range parts {
		names = append(names, n)
		slices.Sort(ps)
	}
	slices.Sort(names)
	return names, parts
}

// offsetCommit is one committed offset. Metadata is kept as committed; a
// null metadata string is stored as "" as in Kafka (OffsetFetch answers
// "" for it).
type offsetCommit struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitTime  time.Time
	// expireTime is set by OffsetCommit v2-v4 with an explicit
	// RetentionTimeMillis; zero means the broker's retention rules.
	expireTime time.Time
	// stamp orders a transactional commit among all offset commits, as
	// the position of its record in Kafka's offsets log does: the badger
	// version of the TxnOffsetCommit's write (txn_offsets.go). Zero for
	// a plain commit, whose own badger version is its stamp.
	stamp uint64
	// pendingSeq (a pending transactional offset only) is the count of
	// its partition's deletions when it was added (pendingTP.seq): a
	// later deletion supersedes it. Not stored.
	pendingSeq uint64
}

// groupMember is one member of a classic group. Guarded by its group's mu.
type groupMember struct {
	id           string
	instanceID   *string // group.instance.id of a static member
	clientID     string
	clientHost   string
	protocolType string
	// protocols are the member's protocols in its order of preference.
	protocols        []kmsg.JoinGroupRequestProtocol
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	assignment       []byte
	// lastHeartbeat starts the session: the member is removed once
	// sessionTimeout passes without a heartbeat, unless it is parked.
	lastHeartbeat time.Time
	// joinSeq orders members by their first join, to pick a leader
	// deterministically.
	joinSeq uint64
	// joinWait is set while a JoinGroup is parked, syncWait while a
	// SyncGroup is; each has room for exactly the one answer.
	joinWait chan *kmsg.JoinGroupResponse
	syncWait chan *kmsg.SyncGroupResponse
}

// metadataFor returns the member's metadata for protocol.
func (m *groupMember) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// sameProtocols reports whether a rejoin carries exactly the protocols
// (names, order and metadata) the member joined with.
func (m *groupMember) sameProtocols(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].Name != m.protocols[i].Name || string(ps[i].Metadata) != string(m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// group is one consumer group. All fields under mu are owned by whoever
// holds it.
type group struct {
	c    *groupCoordinator
	name string

	mu struct {
		sync.Mutex
		state groupState
		// stateTime is when the state last changed (Kafka's
		// currentStateTimestamp); offsets of an empty group expire
		// retention after it.
		stateTime    time.Time
		protocolType string
		protocol     string
		generation   int32
		leader       string
		members      map[string]*groupMember
		// pending are member ids handed out with MEMBER_ID_REQUIRED
		// (JoinGroup v4+) and not yet used, with their expiry.
		pending map[string]time.Time
		// static maps group.instance.id to the member id holding it.
		static map[string]string
		// awaitingSync are the members that got their JoinGroup answer
		// for this generation but have not sent SyncGroup; they must by
		// syncDeadline.
		awaitingSync map[string]struct{}
		syncDeadline time.Time
		// joinDeadline ends the join phase (PreparingRebalance) at the
		// latest; delayUntil holds the first rebalance of an empty group
		// open for more members (group.initial.rebalance.delay.ms).
		joinDeadline time.Time
		delayUntil   time.Time
		initialJoin  bool
		joinSeq      uint64
		offsets      map[groupTP]offsetCommit
		// persisted is true when a group record exists in the store.
		persisted bool
		timer     *time.Timer
		timerAt   time.Time
		// stopped is set when the coordinator closes: timers do nothing.
		stopped bool
		// cg is set when this is a KIP-848 consumer group
		// (groups_consumer.go); the classic fields above are then idle
		// (state stays Empty, no members) except offsets.
		cg *consumerGroup
	}
}

// groupClient is the client a request came from, as groups report its
// members: the client id and the host ("/127.0.0.1", clientHost).
type groupClient struct {
	ID, Host string
}

// groupOptions are what the group coordinator needs, given once
// (newGroupCoordinator): handles from below, and functions for what the
// packages beside and above it decide.
type groupOptions struct {
	// Topics resolves the topics offsets are committed for and KIP-848
	// groups subscribe to.
	Topics *topics.Registry
	// Store holds the groups' records and offsets.
	Store  *metaStore
	Logger *zap.Logger
	// Done is closed when the broker shuts down (expireLoop returns).
	Done <-chan struct{}
	// IsShareGroup reports whether a share group holds the name (one
	// name space for every group type).
	IsShareGroup func(name string) bool
	// BrokerConfig is a dynamic or static broker config's value, ok
	// false when Kafka's default applies; GroupConfigInt a group
	// config's effective value for a group, GroupBrokerInt a broker-wide
	// group config's.
	BrokerConfig   func(name string) (string, bool)
	GroupConfigInt func(group, name string) int64
	GroupBrokerInt func(name string) int64
	// OffsetFetchAfterStable and ExpiryBeforeDelete, if set (tests),
	// run at those points of an OffsetFetch and of offset expiry.
	OffsetFetchAfterStable func(group string)
	ExpiryBeforeDelete     func(group string)
}

// groupCoordinator owns the map of groups.
type groupCoordinator struct {
	o     groupOptions
	store *metaStore
	lg    *zap.Logger
	// retentionWake re-arms expireLoop after
	// offsets.retention.check.interval.ms changed (capacity 1).
	retentionWake chan struct{}

	// pending indexes the open transactions' offsets per group and
	// partition (groups_pending.go); its lock is a leaf.
	pending *pendingIndex

	mu struct {
		sync.RWMutex
		groups map[string]*group
		closed bool
	}
}

func newGroupCoordinator(o groupOptions) *groupCoordinator {
	c := &groupCoordinator{o: o, store: o.Store, lg: o.Logger.Named("groups"), retentionWake: make(chan struct{}, 1), pending: newPendingIndex()}
	c.mu.groups = map[string]*group{}
	return c
}

func (c *groupCoordinator) newGroup(name string) *group {
	g := &group{c: c, name: name}
	g.mu.members = map[string]*groupMember{}
	g.mu.pending = map[string]time.Time{}
	g.mu.static = map[string]string{}
	g.mu.offsets = map[groupTP]offsetCommit{}
	g.mu.stateTime = time.Now()
	return g
}

// lockGroup returns the named group locked, creating it if create is
// true, or nil if it does not exist. A group found Dead was deleted
// meanwhile; the name is looked up again.
func (c *groupCoordinator) lockGroup(name string, create bool) *group {
	g, _ := c.lockGroupCreated(name, create)
	return g
}

// holdGroupName locks the group called name, making a placeholder if
// there is none (one DeleteGroups removed), which release then forgets:
// what is done under a group's lock (a TxnOffsetCommit adding pending
// offsets, a deletion writing marks) is done under it even for a group
// that does not exist.
func (c *groupCoordinator) holdGroupName(name string) (g *group, release func()) {
	g, created := c.lockGroupCreated(name, true)
	return g, func() {
		if created {
			g.removeLocked()
		}
		g.mu.Unlock()
	}
}

// lockGroupCreated is lockGroup, also reporting whether this call
// created the group.
func (c *groupCoordinator) lockGroupCreated(name string, create bool) (*group, bool) {
	for {
		created := false
		c.mu.RLock()
		g := c.mu.groups[name]
		c.mu.RUnlock()
		if g == nil {
			if !create {
				return nil, false
			}
			c.mu.Lock()
			if g = c.mu.groups[name]; g == nil {
				g = c.newGroup(name)
				g.mu.stopped = c.mu.closed
				c.mu.groups[name] = g
				created = true
			}
			c.mu.Unlock()
		}
		g.mu.Lock()
		if g.mu.state != groupDead {
			return g, created
		}
		g.mu.Unlock()
	}
}

// exists reports whether a classic or consumer group of that name exists
// (share groups use it to keep group ids exclusive across types).
func (c *groupCoordinator) exists(name string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.mu.groups[name] != nil
}

// all returns every group, in no order.
func (c *groupCoordinator) all() []*group {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*group, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		out = append(out, g)
	}
	return out
}

// removeLocked marks g Dead and drops it from the map. g.mu held.
func (g *group) removeLocked() {
	g.mu.state = groupDead
	if g.mu.timer != nil {
		g.mu.timer.Stop()
		g.mu.timer = nil
	}
	g.c.mu.Lock()
	if g.c.mu.groups[g.name] == g {
		delete(g.c.mu.groups, g.name)
	}
	g.c.mu.Unlock()
}

// dropIfUnusedLocked removes a group that holds nothing worth keeping:
// created by a request that then failed. A group an open transaction
// holds offsets for is kept: as in Kafka, a TxnOffsetCommit makes the
// group exist (offset expiry removes it once nothing is left). g.mu held.
func (g *group) dropIfUnusedLocked() {
	if g.mu.state == groupEmpty && !g.mu.persisted && len(g.mu.members) == 0 &&
		len(g.mu.pending) == 0 && len(g.mu.offsets) == 0 && g.mu.generation == 0 &&
		(g.mu.cg == nil || len(g.mu.cg.members) == 0 && g.mu.cg.epoch == 0) &&
		!g.c.pending.hasGroup(g.name) {
		g.removeLocked()
	}
}

// unlock re-arms the group's timer for its next deadline and releases
// the lock. Every locked operation that may change a deadline ends here.
func (g *group) unlock(now time.Time) {
	g.armLocked(now)
	g.mu.Unlock()
}

// nextDeadlineLocked is the earliest time tickLocked has work to do.
func (g *group) nextDeadlineLocked(now time.Time) time.Time {
	var next time.Time
	at := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, exp := range g.mu.pending {
		at(exp)
	}
	for _, m := range g.mu.members {
		if m.joinWait == nil && m.syncWait == nil {
			at(m.lastHeartbeat.Add(m.sessionTimeout))
		}
	}
	if g.mu.cg != nil {
		g.consumerDeadlinesLocked(at)
	}
	switch g.mu.state {
	case groupPreparingRebalance:
		at(g.mu.joinDeadline)
		// Once the initial delay is over the join phase completes as
		// soon as the last member joins, which a join does itself.
		if g.mu.delayUntil.After(now) {
			at(g.mu.delayUntil)
		}
	case groupCompletingRebalance, groupStable:
		if len(g.mu.awaitingSync) > 0 {
			at(g.mu.syncDeadline)
		}
	}
	return next
}

// armLocked makes sure the timer fires no later than the next deadline.
func (g *group) armLocked(now time.Time) {
	if g.mu.stopped || g.mu.state == groupDead {
		return
	}
	next := g.nextDeadlineLocked(now)
	if next.IsZero() {
		return // nothing due; a stale timer finds nothing and stops
	}
	if g.mu.timer != nil && !g.mu.timerAt.IsZero() && !next.Before(g.mu.timerAt) {
		return // armed early enough
	}
	d := next.Sub(now)
	if d < 0 {
		d = 0
	}
	// A millisecond of slack so a timer never fires a hair before the
	// deadline it was armed for and has to re-arm.
	d += time.Millisecond
	g.mu.timerAt = next
	if g.mu.timer == nil {
		g.mu.timer = time.AfterFunc(d, g.fire)
	} else {
		g.mu.timer.Reset(d)
	}
}

// fire is the timer callback: it runs whatever is due through the owner.
func (g *group) fire() {
	g.mu.Lock()
	if g.mu.stopped || g.mu.state == groupDead {
		g.mu.Unlock()
		return
	}
	now := time.Now()
	g.mu.timerAt = time.Time{}
	if g.mu.cg != nil {
		g.consumerTickLocked(now)
	} else {
		g.tickLocked(now)
	}
	g.unlock(now)
}

// close stops every group's timer and answers every parked request; no
// timer runs after it returns. Called by Broker.Close once no connection
// is left, before the metadata store closes.
func (c *groupCoordinator) close() {
	c.mu.Lock()
	c.mu.closed = true
	c.mu.Unlock()
	for _, g := range c.all() {
		g.mu.Lock()
		g.mu.stopped = true
		if g.mu.timer != nil {
			g.mu.timer.Stop()
		}
		for _, m := range g.mu.members {
			g.answerJoinErrLocked(m, kerr.NotCoordinator.Code)
			g.answerSyncErrLocked(m, kerr.NotCoordinator.Code)
		}
		g.mu.Unlock()
	}
}

// groupSettings are the broker configs the coordinator follows, with
// Kafka's names and defaults. Each may be overridden as a dynamic broker
// config (Broker.dyn); they are read at the moment they are needed.
type groupSettings struct {
	initialRebalanceDelay  time.Duration // group.initial.rebalance.delay.ms
	minSessionTimeout      time.Duration // group.min.session.timeout.ms
	maxSessionTimeout      time.Duration // group.max.session.timeout.ms
	maxSize                int           // group.max.size
	offsetsRetention       time.Duration // offsets.retention.minutes
	retentionCheckInterval time.Duration // offsets.retention.check.interval.ms
	metadataMaxBytes       int           // offset.metadata.max.bytes
}

// groupConfigDefaults are Kafka's defaults for the settings above.
var groupConfigDefaults = map[string]int64{
	"group.initial.rebalance.delay.ms":    3000,
	"group.min.session.timeout.ms":        6000,
	"group.max.session.timeout.ms":        1800000,
	"group.max.size":                      2147483647,
	"offsets.retention.minutes":           10080,
	"offsets.retention.check.interval.ms": 600000,
	"offset.metadata.max.bytes":           4096,
}

func (c *groupCoordinator) settings() groupSettings {
	get := func(name string) int64 {
		def := groupConfigDefaults[name]
		if v, ok := c.o.BrokerConfig(name); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
				return n
			}
		}
		return def
	}
	ms := func(name string) time.Duration { return time.Duration(get(name)) * time.Millisecond }
	return groupSettings{
		initialRebalanceDelay:  ms("group.initial.rebalance.delay.ms"),
		minSessionTimeout:      ms("group.min.session.timeout.ms"),
		maxSessionTimeout:      ms("group.max.session.timeout.ms"),
		maxSize:                int(get("group.max.size")),
		offsetsRetention:       time.Duration(get("offsets.retention.minutes")) * time.Minute,
		retentionCheckInterval: ms("offsets.retention.check.interval.ms"),
		metadataMaxBytes:       int(get("offset.metadata.max.bytes")),
	}
}

// newMemberID makes a member id the way Kafka does: the client id (or the
// group.instance.id of a static member), a dash, and a random UUID.
func newMemberID(clientID string, instanceID *string) string {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// sortedMembersLocked returns the members by join order.
func (g *group) sortedMembersLocked() []*groupMember {
	ms := make([]*groupMember, 0, len(g.mu.members))
	for _, m := range g.mu.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].joinSeq < ms[j].joinSeq })
	return ms
}

// typeLocked is the group's type for ListGroups.
func (g *group) typeLocked() string {
	if g.mu.cg != nil {
		return groupTypeConsumer
	}
	return groupTypeClassic
}

// stateLocked is the group's state as DescribeGroups and ListGroups
// report it.
func (g *group) stateLocked() string {
	if g.mu.cg != nil {
		return g.mu.cg.stateName()
	}
	return g.mu.state.String()
}

// emptyLocked reports whether the group has no members (of either
// protocol): only then may it be deleted.
func (g *group) emptyLocked() bool {
	if g.mu.cg != nil {
		return len(g.mu.cg.members) == 0
	}
	return g.mu.state == groupEmpty
}

// subscribedTopicsLocked returns the topics the members of a "consumer"
// protocol group subscribe to, parsed from their metadata for the
// selected protocol (the consumer protocol's v0 prefix, as Kafka does),
// and whether they are known. g.mu held.
func (g *group) subscribedTopicsLocked() (map[string]bool, bool) {
	if g.mu.protocolType != "consumer" || g.mu.protocol == "" {
		return nil, false
	}
	topics := map[string]bool{}
	for _, m := range g.mu.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.mu.protocol)); err != nil {
			return nil, false
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics, true
}
