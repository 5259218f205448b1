package groups

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

	"github.com/shoal-mq/shoal/broker/meta"
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

// TP is a topic partition: one committed offset's place within a group,
// and a transaction's partitions.
type TP struct {
	Topic     string
	Partition int32
}

// ByTopic groups the partitions of tps by topic: the topic names in
// order, and each topic's partitions in order.
func ByTopic[V any](tps map[TP]V) (names []string, parts map[string][]int32) {
	parts = map[string][]int32{}
	for tp := range tps {
		parts[tp.Topic] = append(parts[tp.Topic], tp.Partition)
	}
	names = make([]string, 0, len(parts))
	for n, ps := range parts {
		names = append(names, n)
		slices.Sort(ps)
	}
	slices.Sort(names)
	return names, parts
}

// OffsetCommit is one committed offset. Metadata is kept as committed; a
// null metadata string is stored as "" as in Kafka (OffsetFetch answers
// "" for it).
type OffsetCommit struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitTime  time.Time
	// expireTime is set by OffsetCommit v2-v4 with an explicit
	// RetentionTimeMillis; zero means the broker's retention rules.
	expireTime time.Time
	// Stamp orders a transactional commit among all offset commits, as
	// the position of its record in Kafka's offsets log does: the badger
	// version of the TxnOffsetCommit's write (txn_offsets.go). Zero for
	// a plain commit, whose own badger version is its Stamp.
	Stamp uint64
	// PendingSeq (a pending transactional offset only) is the count of
	// its partition's deletions when it was added (pendingTP.seq): a
	// later deletion supersedes it. Not stored.
	PendingSeq uint64
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

// Group is one consumer group. All fields under mu are owned by whoever
// holds it.
type Group struct {
	c    *Coordinator
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
		offsets      map[TP]OffsetCommit
		// persisted is true when a group record exists in the store.
		persisted bool
		timer     *time.Timer
		timerAt   time.Time
		// stopped is set when the coordinator closes: timers do nothing.
		stopped bool
		// cg is set when this is a KIP-848 consumer group
		// (consumer.go); the classic fields above are then idle
		// (state stays Empty, no members) except offsets.
		cg *consumerGroup
	}
}

// Client is the client a request came from, as groups report its
// members: the client id and the host ("/127.0.0.1", clientHost).
type Client struct {
	ID, Host string
	// Principal and IP are who the client authenticated as and its
	// address, as the ACLs name them: a regex subscription matches only
	// topics the member may describe (Options.MayDescribe).
	Principal, IP string
}

// Options are what the group coordinator needs, given once
// (New): handles from below, and functions for what the
// packages beside and above it decide.
type Options struct {
	// Topics resolves the topics offsets are committed for and KIP-848
	// groups subscribe to.
	Topics *topics.Registry
	// Store holds the groups' records and offsets.
	Store  *meta.Store
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
	// MayDescribe reports whether principal, from ip, may Describe a
	// topic (the ACLs, decided in the root); a KIP-848 regex
	// subscription matches only such topics, as in Kafka 4. Nil: every
	// topic.
	MayDescribe func(principal, ip, topic string) bool
}

// Coordinator is the group coordinator: it owns the map of groups.
type Coordinator struct {
	o     Options
	store *metaStore
	lg    *zap.Logger
	// retentionWake re-arms expireLoop after
	// offsets.retention.check.interval.ms changed (capacity 1).
	retentionWake chan struct{}

	// Pending indexes the open transactions' offsets per group and
	// partition (pending.go); its lock is a leaf.
	Pending *PendingIndex

	mu struct {
		sync.RWMutex
		groups map[string]*Group
		closed bool
	}
}

// New returns a coordinator with no groups; Load reads the stored ones.
func New(o Options) *Coordinator {
	c := &Coordinator{o: o, store: &metaStore{Store: o.Store}, lg: o.Logger.Named("groups"), retentionWake: make(chan struct{}, 1), Pending: newPendingIndex()}
	c.mu.groups = map[string]*Group{}
	return c
}

func (c *Coordinator) newGroup(name string) *Group {
	g := &Group{c: c, name: name}
	g.mu.members = map[string]*groupMember{}
	g.mu.pending = map[string]time.Time{}
	g.mu.static = map[string]string{}
	g.mu.offsets = map[TP]OffsetCommit{}
	g.mu.stateTime = time.Now()
	return g
}

// lockGroup returns the named group locked, creating it if create is
// true, or nil if it does not exist. A group found Dead was deleted
// meanwhile; the name is looked up again.
func (c *Coordinator) lockGroup(name string, create bool) *Group {
	g, _ := c.lockGroupCreated(name, create)
	return g
}

// holdGroupName locks the group called name, making a placeholder if
// there is none (one DeleteGroups removed), which release then forgets:
// what is done under a group's lock (a TxnOffsetCommit adding pending
// offsets, a deletion writing marks) is done under it even for a group
// that does not exist.
func (c *Coordinator) holdGroupName(name string) (g *Group, release func()) {
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
func (c *Coordinator) lockGroupCreated(name string, create bool) (*Group, bool) {
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

// Exists reports whether a classic or consumer group of that name Exists
// (share groups use it to keep group ids exclusive across types).
func (c *Coordinator) Exists(name string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.mu.groups[name] != nil
}

// all returns every group, in no order.
func (c *Coordinator) all() []*Group {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*Group, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		out = append(out, g)
	}
	return out
}

// removeLocked marks g Dead and drops it from the map. g.mu held.
func (g *Group) removeLocked() {
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
func (g *Group) dropIfUnusedLocked() {
	if g.mu.state == groupEmpty && !g.mu.persisted && len(g.mu.members) == 0 &&
		len(g.mu.pending) == 0 && len(g.mu.offsets) == 0 && g.mu.generation == 0 &&
		(g.mu.cg == nil || len(g.mu.cg.members) == 0 && g.mu.cg.epoch == 0) &&
		!g.c.Pending.hasGroup(g.name) {
		g.removeLocked()
	}
}

// unlock re-arms the group's timer for its next deadline and releases
// the lock. Every locked operation that may change a deadline ends here.
func (g *Group) unlock(now time.Time) {
	g.armLocked(now)
	g.mu.Unlock()
}

// nextDeadlineLocked is the earliest time tickLocked has work to do.
func (g *Group) nextDeadlineLocked(now time.Time) time.Time {
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
func (g *Group) armLocked(now time.Time) {
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
func (g *Group) fire() {
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

// Close stops every group's timer and answers every parked request; no
// timer runs after it returns. Called by the broker's Close once no connection
// is left, before the metadata store closes.
func (c *Coordinator) Close() {
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

func (c *Coordinator) settings() groupSettings {
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
func (g *Group) sortedMembersLocked() []*groupMember {
	ms := make([]*groupMember, 0, len(g.mu.members))
	for _, m := range g.mu.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].joinSeq < ms[j].joinSeq })
	return ms
}

// typeLocked is the group's type for ListGroups.
func (g *Group) typeLocked() string {
	if g.mu.cg != nil {
		return groupTypeConsumer
	}
	return groupTypeClassic
}

// stateLocked is the group's state as DescribeGroups and ListGroups
// report it.
func (g *Group) stateLocked() string {
	if g.mu.cg != nil {
		return g.mu.cg.stateName()
	}
	return g.mu.state.String()
}

// emptyLocked reports whether the group has no members (of either
// protocol): only then may it be deleted.
func (g *Group) emptyLocked() bool {
	if g.mu.cg != nil {
		return len(g.mu.cg.members) == 0
	}
	return g.mu.state == groupEmpty
}

// subscribedTopicsLocked returns the topics the members of a "consumer"
// protocol group subscribe to, parsed from their metadata for the
// selected protocol (the consumer protocol's v0 prefix, as Kafka does),
// and whether they are known. g.mu held.
func (g *Group) subscribedTopicsLocked() (map[string]bool, bool) {
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
