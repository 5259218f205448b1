package groups

// KIP-848 consumer groups ("next generation" rebalance protocol): the
// broker assigns partitions, members reconcile towards their target
// assignment through ConsumerGroupHeartbeat.
//
// The model, following Kafka's group coordinator:
//   - The group epoch advances whenever membership, a subscription, or
//     the metadata of a subscribed topic (its id or partition count)
//     changes. The target assignment is then recomputed at once by the
//     group's server-side assignor (uniform, the default, or range), so
//     the assignment epoch always catches up with the group epoch (the
//     group is never observed "Assigning").
//   - Each member has an epoch and moves towards its target one step per
//     heartbeat (reconcileLocked): partitions it must give up are revoked
//     first (the member stays at its epoch, UNREVOKED_PARTITIONS, until a
//     heartbeat no longer lists them as owned); only then does it move to
//     the assignment epoch and get its new partitions, except those
//     another member still holds (UNRELEASED_PARTITIONS: they come on a
//     later heartbeat, once released). So a partition is never owned by
//     two members at once: incremental revocation before reassignment.
//   - A member that does not heartbeat within the session timeout
//     (group.consumer.session.timeout.ms, default 45s), or does not
//     revoke within its rebalance timeout, is fenced: removed, its
//     partitions freed, the group epoch bumped.
//   - A static member (group.instance.id) that leaves with epoch -2 keeps
//     its partitions until its session expires or its instance rejoins;
//     the rejoining member takes over its place and assignment.
//   - Offsets: commits from members carry the member epoch; a commit with
//     an epoch newer than the member's is STALE_MEMBER_EPOCH, and, as in
//     KIP-1251, a partition assigned to the member at an epoch newer than
//     the commit's is STALE_MEMBER_EPOCH for that partition only.
//
// The group's state is written to the metadata store whenever it changes,
// before the heartbeat is answered. If that write fails the heartbeat
// gets NOT_COORDINATOR and the in-memory state stays ahead of the store
// (a badger write failure means the store is failing for everyone; after
// a restart members reconcile from the older stored state or are fenced).
//
// Not served: classic-protocol members in a consumer group and the
// online upgrade or downgrade between the protocols (KIP-848's migration
// path). A ConsumerGroupHeartbeat for a classic group with members gets
// GROUP_ID_NOT_FOUND, a JoinGroup for a consumer group with members
// INCONSISTENT_GROUP_PROTOCOL; an empty group of either type converts.

import (
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/protocol"
)

type memberState int8

const (
	memberStable     memberState = iota
	memberUnrevoked              // UNREVOKED_PARTITIONS
	memberUnreleased             // UNRELEASED_PARTITIONS
)

// Server-side assignors, in order of preference (Kafka's
// group.consumer.assignors default): the first is the default.
var serverAssignors = []string{"uniform", "range"}

// Member epochs with a meaning of their own in ConsumerGroupHeartbeat.
const (
	LeaveEpoch       = -1
	StaticLeaveEpoch = -2
)

type idParts struct {
	id    [16]byte
	parts []int32
}

type topicPart struct {
	id [16]byte
	p  int32
}

// resolvedTopic is a subscribed topic as it was when the target
// assignment was last computed.
type resolvedTopic struct {
	id         [16]byte
	partitions int32
}

type consumerMember struct {
	id                   string
	instanceID           *string
	rackID               *string
	clientID, clientHost string
	rebalanceTimeout     time.Duration
	topics               []string // subscribed names, sorted
	regex                string   // subscribed regex, "" for none
	re                   *regexp.Regexp
	assignor             string // preferred server assignor, "" for none
	epoch, prevEpoch     int32
	state                memberState
	assigned             partSet // what the member may use now
	pendingRevoke        partSet // what it was told to give up
	target               partSet // where it is going
	lastHeartbeat        time.Time
	revokeDeadline       time.Time // while memberUnrevoked
	// principal and ip are the member's last heartbeat's (ACLs);
	// describable, bound by Coordinator.bindDescribe, asks whether they
	// may Describe a topic (nil: any).
	principal, ip string
	describable   func(topic string) bool
}

// subscribes reports whether the member subscribes to topic: by name, or
// by its regex if it may describe the topic (a regex never reaches a
// topic the member could not see, as Kafka 4 resolves them). A name it
// may not describe never gets here: the heartbeat refuses it.
func (m *consumerMember) subscribes(topic string) bool {
	if _, ok := slices.BinarySearch(m.topics, topic); ok {
		return true
	}
	return m.re != nil && m.re.MatchString(topic) && (m.describable == nil || m.describable(topic))
}

// bindDescribe binds m's describable to the coordinator's MayDescribe
// and m's principal, read at each call.
func (c *Coordinator) bindDescribe(m *consumerMember) {
	if c.o.MayDescribe == nil {
		return
	}
	m.describable = func(topic string) bool { return c.o.MayDescribe(m.principal, m.ip, topic) }
}

// consumerGroup is the KIP-848 state of a group; guarded by the group's
// mu like everything else of the group.
type consumerGroup struct {
	epoch           int32 // group epoch
	assignmentEpoch int32 // epoch of the target assignment
	assignor        string
	members         map[string]*consumerMember
	static          map[string]string // group.instance.id → member id
	// owners maps each partition to the member holding it (assigned or
	// pending revocation).
	owners   map[topicPart]string
	resolved map[string]resolvedTopic
	// reach is, per regex member, the resolved topics its regex reaches
	// (ACLs included), as of the last check; recheck makes the next check
	// report a change (set after a restart found a target outside it).
	reach   map[string]string
	recheck bool
	// nextMetadataCheck rate-limits re-resolving subscribed topics (and
	// regexes) against the topic registry on plain heartbeats.
	nextMetadataCheck time.Time
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		members:  map[string]*consumerMember{},
		static:   map[string]string{},
		owners:   map[topicPart]string{},
		resolved: map[string]resolvedTopic{},
		assignor: serverAssignors[0],
	}
}

// stateName is the consumer group state as Kafka reports it.
func (cg *consumerGroup) stateName() string {
	if len(cg.members) == 0 {
		return "Empty"
	}
	if cg.epoch > cg.assignmentEpoch {
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.state != memberStable || m.epoch != cg.assignmentEpoch {
			return "Reconciling"
		}
	}
	return "Stable"
}

// setOwnersLocked records which partitions m holds.
func (cg *consumerGroup) setOwners(m *consumerMember) {
	for tp, id := range cg.owners {
		if id == m.id {
			delete(cg.owners, tp)
		}
	}
	for _, s := range []partSet{m.assigned, m.pendingRevoke} {
		for id, ps := range s {
			for p := range ps {
				cg.owners[topicPart{id, p}] = m.id
			}
		}
	}
}

func (cg *consumerGroup) removeMember(m *consumerMember) {
	delete(cg.members, m.id)
	for tp, id := range cg.owners {
		if id == m.id {
			delete(cg.owners, tp)
		}
	}
	if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
		delete(cg.static, *m.instanceID)
	}
}

// subscribedTopics is every topic some member subscribes to, among the
// resolved ones.
func (cg *consumerGroup) subscribedTopics() map[string]bool {
	out := map[string]bool{}
	for name := range cg.resolved {
		out[name] = true
	}
	return out
}

// consumerSettings are the KIP-848 configs of one group (Kafka's names
// and defaults): the group configs consumer.* (share/configs.go), whose
// defaults are the dynamic broker configs group.consumer.*.
type consumerSettings struct {
	SessionTimeout    time.Duration // consumer.session.timeout.ms
	heartbeatInterval time.Duration // consumer.heartbeat.interval.ms
	maxSize           int           // group.consumer.max.size
}

func (c *Coordinator) ConsumerSettings(group string) consumerSettings {
	ms := func(name string) time.Duration {
		return time.Duration(c.o.GroupConfigInt(group, name)) * time.Millisecond
	}
	return consumerSettings{
		SessionTimeout:    ms("consumer.session.timeout.ms"),
		heartbeatInterval: ms("consumer.heartbeat.interval.ms"),
		maxSize:           int(c.o.GroupBrokerInt("group.consumer.max.size")),
	}
}

// heartbeatError fills an error answer.
func heartbeatError(resp *kmsg.ConsumerGroupHeartbeatResponse, code int16, msg string) {
	resp.ErrorCode = code
	if msg != "" {
		resp.ErrorMessage = &msg
	}
	resp.MemberEpoch = 0
	resp.Assignment = nil
}

// validateHeartbeat checks the request on its own, as Kafka does before
// looking at the group.
func validateHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	invalid := func(msg string) (int16, string) { return kerr.InvalidRequest.Code, msg }
	switch {
	case req.Group == "":
		return invalid("GroupId can't be empty.")
	case req.InstanceID != nil && *req.InstanceID == "":
		return invalid("InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return invalid("RackId can't be empty.")
	}
	switch e := req.MemberEpoch; {
	case e > 0 || e == LeaveEpoch:
		if req.MemberID == "" {
			return invalid("MemberId can't be empty.")
		}
	case e == 0:
		if req.Version >= 1 && req.MemberID == "" {
			return invalid("MemberId can't be empty.")
		}
		if req.RebalanceTimeoutMillis == -1 {
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		}
		if req.Topics == nil || len(req.Topics) > 0 {
			return invalid("TopicPartitions must be empty when (re-)joining.")
		}
		if len(req.SubscribedTopicNames) == 0 && (req.SubscribedTopicRegex == nil || *req.SubscribedTopicRegex == "") {
			return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
		}
	case e == StaticLeaveEpoch:
		if req.MemberID == "" {
			return invalid("MemberId can't be empty.")
		}
		if req.InstanceID == nil {
			return invalid("InstanceId can't be null.")
		}
	default:
		return invalid("MemberEpoch is invalid.")
	}
	if req.ServerAssignor != nil && !slices.Contains(serverAssignors, *req.ServerAssignor) {
		return kerr.UnsupportedAssignor.Code, "ServerAssignor " + *req.ServerAssignor + " is not supported. Supported assignors: " + strings.Join(serverAssignors, ", ") + "."
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := regexp.Compile(*req.SubscribedTopicRegex); err != nil {
			return kerr.InvalidRegularExpression.Code, "SubscribedTopicRegex `" + *req.SubscribedTopicRegex + "` is not a valid regular expression: " + err.Error() + "."
		}
	}
	return 0, ""
}

// compileSubscription compiles a subscription regex to match whole topic
// names, as Kafka (RE2/J, matches()) does.
func compileSubscription(re string) *regexp.Regexp {
	if re == "" {
		return nil
	}
	r, err := regexp.Compile("^(?:" + re + ")$")
	if err != nil {
		return nil // validated before; unreachable
	}
	return r
}

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat.
func (c *Coordinator) ConsumerHeartbeat(cl Client, req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	if code, msg := validateHeartbeat(req); code != 0 {
		heartbeatError(resp, code, msg)
		return
	}
	if c.o.IsShareGroup(req.Group) {
		heartbeatError(resp, kerr.GroupIDNotFound.Code, "Group "+req.Group+" is not a consumer group.")
		return
	}
	now := time.Now()
	st := c.ConsumerSettings(req.Group)
	g := c.lockGroup(req.Group, req.MemberEpoch == 0)
	if g == nil {
		heartbeatError(resp, kerr.GroupIDNotFound.Code, "Consumer group "+req.Group+" not found.")
		return
	}
	defer func() {
		g.dropIfUnusedLocked()
		g.unlock(now)
	}()
	if g.mu.cg == nil {
		if len(g.mu.members) > 0 || len(g.mu.pending) > 0 {
			heartbeatError(resp, kerr.GroupIDNotFound.Code, "Group "+req.Group+" is not a consumer group.")
			return
		}
		// An empty classic group becomes a consumer group.
		g.mu.cg = newConsumerGroup()
	}
	cg := g.mu.cg
	resp.HeartbeatIntervalMillis = int32(st.heartbeatInterval.Milliseconds())
	resp.MemberEpoch = req.MemberEpoch

	switch req.MemberEpoch {
	case LeaveEpoch:
		m, code, msg := g.consumerMemberLocked(req)
		if code != 0 {
			heartbeatError(resp, code, msg)
			return
		}
		c.lg.Info("consumer group member left", zap.String("group", g.name), zap.String("member", m.id))
		cg.removeMember(m)
		g.bumpConsumerEpochLocked(now)
		id := m.id
		resp.MemberID, resp.MemberEpoch = &id, LeaveEpoch
		g.persistConsumerOrFailLocked(now, resp)
		return
	case StaticLeaveEpoch:
		m, code, msg := g.consumerMemberLocked(req)
		if code != 0 {
			heartbeatError(resp, code, msg)
			return
		}
		// Kept, with its partitions, until its session expires or its
		// instance rejoins.
		m.epoch = StaticLeaveEpoch
		id := m.id
		resp.MemberID, resp.MemberEpoch = &id, StaticLeaveEpoch
		g.persistConsumerOrFailLocked(now, resp)
		return
	}

	var m *consumerMember
	changed := false
	if req.MemberEpoch == 0 {
		id := req.MemberID
		if id == "" {
			id = newUUID() // v0: the coordinator names the member
		}
		if req.InstanceID != nil {
			if oldID, ok := cg.static[*req.InstanceID]; ok && (oldID != id || cg.members[oldID].epoch == StaticLeaveEpoch) {
				old := cg.members[oldID]
				if old.epoch != StaticLeaveEpoch {
					heartbeatError(resp, kerr.UnreleasedInstanceID.Code, "Static member "+oldID+" with instance id "+*req.InstanceID+" is not released.")
					return
				}
				// The rejoining instance takes over the old member's
				// place and assignment under its new member id.
				cg.removeMember(old)
				old.id = id
				old.epoch, old.prevEpoch = 0, 0
				cg.members[id] = old
				cg.static[*req.InstanceID] = id
				cg.setOwners(old)
				m = old
				changed = true
			}
		}
		if m == nil {
			m = cg.members[id]
		}
		if m == nil {
			if len(cg.members) >= st.maxSize {
				heartbeatError(resp, kerr.GroupMaxSizeReached.Code, "The consumer group has reached its maximum capacity.")
				return
			}
			m = &consumerMember{id: id, assigned: partSet{}, pendingRevoke: partSet{}, target: partSet{}}
			c.bindDescribe(m)
			cg.members[id] = m
			if req.InstanceID != nil {
				cg.static[*req.InstanceID] = id
			}
			changed = true
			c.lg.Info("consumer group member joined", zap.String("group", g.name), zap.String("member", id))
		}
		// A known member joining again with epoch 0 (after it was
		// fenced, or to start over) keeps its place: it reported no
		// owned partitions, so it is reconciled from nothing owned.
	} else {
		var code int16
		var msg string
		if m, code, msg = g.consumerMemberLocked(req); code != 0 {
			heartbeatError(resp, code, msg)
			return
		}
	}

	// Update the member from the request; a changed subscription bumps
	// the group epoch.
	bump := changed
	if req.InstanceID != nil {
		m.instanceID = req.InstanceID
	}
	if req.RackID != nil {
		m.rackID = req.RackID
	}
	if req.RebalanceTimeoutMillis != -1 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		m.assignor = *req.ServerAssignor
		bump = true
	}
	if req.SubscribedTopicNames != nil {
		topics := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(topics)
		topics = slices.Compact(topics)
		if !slices.Equal(topics, m.topics) {
			m.topics = topics
			bump = true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		m.regex = *req.SubscribedTopicRegex
		m.re = compileSubscription(m.regex)
		bump = true
	}
	m.clientID, m.clientHost = cl.ID, cl.Host
	if cl.Principal != m.principal || cl.IP != m.ip {
		// What its regex may reach may change: looked at below, now.
		m.principal, m.ip = cl.Principal, cl.IP
		if m.re != nil {
			cg.nextMetadataCheck = time.Time{}
		}
	}
	m.lastHeartbeat = now

	// The subscribed topics are looked at again at most once a second
	// unless the subscription changed.
	if !bump && !now.Before(cg.nextMetadataCheck) {
		bump = g.refreshConsumerMetadataLocked(now)
	}
	dirty := bump
	if bump {
		g.bumpConsumerEpochLocked(now)
	}

	before := m.assigned.clone()
	beforeEpoch, beforeState := m.epoch, m.state
	g.reconcileLocked(m, ownedFromRequest(req.Topics), now)
	if !m.assigned.sameParts(before) || m.epoch != beforeEpoch || m.state != beforeState {
		dirty = true
	}

	id := m.id
	resp.MemberID, resp.MemberEpoch = &id, m.epoch
	full := req.MemberEpoch == 0 || req.RebalanceTimeoutMillis != -1 &&
		(req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	if full || !m.assigned.sameParts(before) {
		a := &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
		for _, ip := range m.assigned.sorted() {
			a.Topics = append(a.Topics, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: ip.id, Partitions: ip.parts})
		}
		if a.Topics == nil {
			a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		}
		resp.Assignment = a
	}
	if dirty {
		g.persistConsumerOrFailLocked(now, resp)
	}
}

// consumerMemberLocked finds the member a heartbeat (epoch != 0) or a
// leave names, applying Kafka's static member and epoch checks.
func (g *Group) consumerMemberLocked(req *kmsg.ConsumerGroupHeartbeatRequest) (*consumerMember, int16, string) {
	cg := g.mu.cg
	var m *consumerMember
	if req.InstanceID != nil {
		id, ok := cg.static[*req.InstanceID]
		if !ok {
			return nil, kerr.UnknownMemberID.Code, "Instance id " + *req.InstanceID + " is unknown."
		}
		if id != req.MemberID {
			return nil, kerr.FencedInstanceID.Code, "Static member " + req.MemberID + " with instance id " + *req.InstanceID + " was fenced by member " + id + "."
		}
		m = cg.members[id]
	} else {
		m = cg.members[req.MemberID]
		if m == nil {
			return nil, kerr.UnknownMemberID.Code, "Member " + req.MemberID + " is not a member of group " + g.name + "."
		}
	}
	if req.MemberEpoch > 0 {
		if code, msg := checkMemberEpoch(m, req); code != 0 {
			return nil, code, msg
		}
	}
	return m, 0, ""
}

// checkMemberEpoch: a heartbeat must carry the member's epoch, or its
// previous one with owned partitions that are a subset of its assignment
// (the answer that moved it on may have been lost).
func checkMemberEpoch(m *consumerMember, req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	e := req.MemberEpoch
	if e == m.epoch {
		return 0, ""
	}
	if e < m.epoch && e == m.prevEpoch && req.Topics != nil {
		subset := true
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if !m.assigned.has(t.TopicID, p) {
					subset = false
				}
			}
		}
		if subset {
			return 0, ""
		}
	}
	return kerr.FencedMemberEpoch.Code, "The consumer group member has a member epoch (" + itoa32(e) + ") other than the one known by the group coordinator (" + itoa32(m.epoch) + "). The member must abandon all its partitions and rejoin."
}

// ownedFromRequest converts the owned partitions of a heartbeat; nil
// means unknown (not sent).
func ownedFromRequest(ts []kmsg.ConsumerGroupHeartbeatRequestTopic) partSet {
	if ts == nil {
		return nil
	}
	s := partSet{}
	for _, t := range ts {
		for _, p := range t.Partitions {
			s.add(t.TopicID, p, 0)
		}
	}
	return s
}

// ownsAny reports whether the member may still own one of set: unknown
// ownership (nil) counts as owning.
func ownsAny(owned, set partSet) bool {
	if owned == nil {
		return set.count() > 0
	}
	for id, ps := range set {
		for p := range ps {
			if owned.has(id, p) {
				return true
			}
		}
	}
	return false
}

// refreshConsumerMetadataLocked re-resolves every member's subscription
// against the topics, and reports whether anything the assignment
// depends on changed (a topic appeared, vanished, was recreated or grew).
func (g *Group) refreshConsumerMetadataLocked(now time.Time) bool {
	cg := g.mu.cg
	cg.nextMetadataCheck = now.Add(time.Second)
	resolved := map[string]resolvedTopic{}
	hasRegex := false
	for _, m := range cg.members {
		if m.re != nil {
			hasRegex = true
		}
		for _, name := range m.topics {
			if _, ok := resolved[name]; ok {
				continue
			}
			if t := g.c.o.Topics.Get(name); t != nil {
				resolved[name] = resolvedTopic{id: t.ID, partitions: g.c.o.Topics.PartitionCount(t)}
			}
		}
	}
	if hasRegex {
		for _, t := range g.c.o.Topics.All() {
			if _, ok := resolved[t.Name]; ok {
				continue
			}
			for _, m := range cg.members {
				if m.re != nil && m.subscribes(t.Name) {
					resolved[t.Name] = resolvedTopic{id: t.ID, partitions: g.c.o.Topics.PartitionCount(t)}
					break
				}
			}
		}
	}
	same := len(resolved) == len(cg.resolved)
	for name, rt := range resolved {
		if cg.resolved[name] != rt {
			same = false
		}
	}
	cg.resolved = resolved
	// A regex member's reach depends on its ACLs too: one that lost or
	// gained Describe on a topic another member keeps resolved changes
	// the assignment without changing the resolved set.
	reach := map[string]string{}
	if hasRegex {
		names := make([]string, 0, len(resolved))
		for name := range resolved {
			names = append(names, name)
		}
		sort.Strings(names)
		for id, m := range cg.members {
			if m.re == nil {
				continue
			}
			var b strings.Builder
			for _, name := range names {
				if m.subscribes(name) {
					b.WriteString(name)
					b.WriteByte(0)
				}
			}
			reach[id] = b.String()
		}
	}
	if !maps.Equal(reach, cg.reach) {
		same = false
	}
	cg.reach = reach
	if cg.recheck {
		cg.recheck, same = false, false
	}
	return !same
}

// targetsOutsideReach reports whether a member holds or is headed for a
// topic it no longer subscribes to, or that is gone: after a restart,
// what changed while the broker was down (a topic deleted, an ACL
// revoked) must reach the assignment.
func (cg *consumerGroup) targetsOutsideReach() bool {
	nameOf := map[[16]byte]string{}
	for n, rt := range cg.resolved {
		nameOf[rt.id] = n
	}
	for _, m := range cg.members {
		for _, s := range []partSet{m.target, m.assigned} {
			for id := range s {
				if name, ok := nameOf[id]; !ok || !m.subscribes(name) {
					return true
				}
			}
		}
	}
	return false
}

// bumpConsumerEpochLocked advances the group epoch and computes the new
// target assignment right away, from freshly resolved subscriptions.
func (g *Group) bumpConsumerEpochLocked(now time.Time) {
	cg := g.mu.cg
	g.refreshConsumerMetadataLocked(now)
	cg.epoch++
	cg.assignor = pickAssignor(cg)
	computeTarget(cg)
	cg.assignmentEpoch = cg.epoch
	g.c.lg.Debug("consumer group epoch bumped", zap.String("group", g.name), zap.Int32("epoch", cg.epoch),
		zap.Int("members", len(cg.members)), zap.String("assignor", cg.assignor))
}

// consumerDeadlinesLocked feeds nextDeadlineLocked: sessions and
// revocation timeouts.
func (g *Group) consumerDeadlinesLocked(at func(time.Time)) {
	st := g.c.ConsumerSettings(g.name)
	for _, m := range g.mu.cg.members {
		at(m.lastHeartbeat.Add(st.SessionTimeout))
		if m.state == memberUnrevoked {
			at(m.revokeDeadline)
		}
	}
}

// consumerTickLocked fences members whose session expired or who did not
// revoke in time.
func (g *Group) consumerTickLocked(now time.Time) {
	cg := g.mu.cg
	st := g.c.ConsumerSettings(g.name)
	fenced := false
	for _, m := range cg.members {
		switch {
		case !now.Before(m.lastHeartbeat.Add(st.SessionTimeout)):
			g.c.lg.Info("consumer group member session expired", zap.String("group", g.name), zap.String("member", m.id))
		case m.state == memberUnrevoked && !now.Before(m.revokeDeadline):
			g.c.lg.Info("consumer group member did not revoke in time", zap.String("group", g.name), zap.String("member", m.id))
		default:
			continue
		}
		cg.removeMember(m)
		fenced = true
	}
	if fenced {
		g.bumpConsumerEpochLocked(now)
		if err := g.persistLocked(now); err != nil {
			g.c.lg.Error("persisting consumer group failed", zap.String("group", g.name), zap.Error(err))
		}
	}
}

// persistConsumerOrFailLocked persists the group and turns a failure
// into NOT_COORDINATOR.
func (g *Group) persistConsumerOrFailLocked(now time.Time, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	if err := g.persistLocked(now); err != nil {
		g.c.lg.Error("persisting consumer group failed", zap.String("group", g.name), zap.Error(err))
		heartbeatError(resp, kerr.NotCoordinator.Code, "")
		resp.MemberID = nil
	}
}

// validateConsumerCommitLocked applies the commit rules of a consumer
// group; perPartition answers STALE_MEMBER_EPOCH for partitions assigned
// to the member at an epoch newer than the commit's (KIP-1251).
func (g *Group) validateConsumerCommitLocked(req *kmsg.OffsetCommitRequest) (int16, func(TP) int16) {
	cg := g.mu.cg
	if req.Generation < 0 && len(cg.members) == 0 {
		return 0, nil
	}
	m := cg.members[req.MemberID]
	if m == nil {
		return kerr.UnknownMemberID.Code, nil
	}
	if req.Version < 9 {
		return kerr.UnsupportedVersion.Code, nil
	}
	if req.Generation > m.epoch {
		return kerr.StaleMemberEpoch.Code, nil
	}
	return 0, func(tp TP) int16 {
		t := g.c.o.Topics.Get(tp.Topic)
		if t == nil {
			return 0
		}
		if e, ok := m.assigned[t.ID][tp.Partition]; ok && e > req.Generation {
			return kerr.StaleMemberEpoch.Code
		}
		return 0
	}
}

// validateConsumerFetchLocked: OffsetFetch v9 from a member must carry
// its id and current epoch; admin fetches (no member id, epoch < 0) pass.
func (g *Group) validateConsumerFetchLocked(memberID *string, epoch int32) int16 {
	if memberID == nil && epoch < 0 {
		return 0
	}
	if memberID == nil {
		return kerr.UnknownMemberID.Code
	}
	m := g.mu.cg.members[*memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if m.epoch != epoch {
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// ConsumerDescribe answers one group of a ConsumerGroupDescribe.
func (c *Coordinator) ConsumerDescribe(name string, version int16, withOps bool) kmsg.ConsumerGroupDescribeResponseGroup {
	sg := kmsg.NewConsumerGroupDescribeResponseGroup()
	sg.Group = name
	if withOps {
		sg.AuthorizedOperations = protocol.GroupAllOperations
	}
	fail := func(code int16, msg string) kmsg.ConsumerGroupDescribeResponseGroup {
		sg.ErrorCode = code
		sg.ErrorMessage = &msg
		return sg
	}
	if name == "" {
		return fail(kerr.InvalidGroupID.Code, "The group id is empty.")
	}
	g := c.lockGroup(name, false)
	if g == nil {
		return fail(kerr.GroupIDNotFound.Code, "Group "+name+" not found.")
	}
	defer g.mu.Unlock()
	cg := g.mu.cg
	if cg == nil {
		return fail(kerr.GroupIDNotFound.Code, "Group "+name+" is not a consumer group.")
	}
	sg.State = cg.stateName()
	sg.Epoch, sg.AssignmentEpoch, sg.AssignorName = cg.epoch, cg.assignmentEpoch, cg.assignor
	nameOf := map[[16]byte]string{}
	for n, rt := range cg.resolved {
		nameOf[rt.id] = n
	}
	toAssignment := func(s partSet) kmsg.Assignment {
		var a kmsg.Assignment
		for _, ip := range s.sorted() {
			name, ok := nameOf[ip.id]
			if !ok { // still held, no longer resolved: named by id, left out if gone (as Kafka)
				t := c.o.Topics.GetID(ip.id)
				if t == nil {
					continue
				}
				name = t.Name
			}
			a.TopicPartitions = append(a.TopicPartitions, kmsg.AssignmentTopicPartition{TopicID: ip.id, Topic: name, Partitions: ip.parts})
		}
		return a
	}
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := cg.members[id]
		sm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		sm.MemberID, sm.InstanceID, sm.RackID = m.id, m.instanceID, m.rackID
		sm.MemberEpoch = m.epoch
		sm.ClientID, sm.ClientHost = m.clientID, m.clientHost
		sm.SubscribedTopics = slices.Clone(m.topics)
		if sm.SubscribedTopics == nil {
			sm.SubscribedTopics = []string{}
		}
		if m.regex != "" {
			re := m.regex
			sm.SubscribedTopicRegex = &re
		}
		sm.Assignment = toAssignment(m.assigned)
		sm.TargetAssignment = toAssignment(m.target)
		sm.MemberType = 1 // a consumer-protocol member
		sg.Members = append(sg.Members, sm)
	}
	return sg
}

// newUUID is a random (version 4) UUID in its usual text form.
func newUUID() string {
	id := newMemberID("", nil)
	return id[1:] // newMemberID with no prefix starts with the dash
}

func itoa32(n int32) string { return strconv.FormatInt(int64(n), 10) }
