package share

// Share-group membership (kip932.md §2): ShareGroupHeartbeat's join,
// epochs, leave and session timeouts, the server-side "simple" assignor,
// and the hooks ListGroups, DescribeGroups and DeleteGroups use.
//
// # Epochs and assignment
//
// The group epoch is bumped when a member joins or leaves, when a
// member's subscription changes, and when the metadata of a subscribed
// topic changes (partitions added, topic created, deleted or recreated:
// compared by topic id and partition count at every heartbeat, so no hook
// into topic administration is needed). Each bump recomputes the target
// assignment with sharegroup.AssignSimple (balance first, stickiness
// second; several members may share a partition) and sets the
// assignment epoch to the group epoch. A member's epoch advances to the
// assignment epoch during its own heartbeat; there is no revocation
// phase. A member's previous epoch is also accepted (the response that
// advanced it may have been lost); any other epoch is
// FENCED_MEMBER_EPOCH, an unknown member UNKNOWN_MEMBER_ID.
//
// Epoch 0 from a member id we know is a rejoin (kip932.md §2 "our rule",
// as kfake does; Kafka would fence it): the member starts over at epoch 0
// and gets its full assignment. The assignment goes out when the member
// (re)joins, when the request carries SubscribedTopicNames (a full
// request), and when this heartbeat changed the member's partitions;
// otherwise it is null (unchanged). Partitions are assignable at once:
// share-partitions are initialized by their first fetch.
//
// Leaving does not release acquired records (the session close, the
// connection close or the lock timeout do), nor does a session timeout.
//
// # Durability
//
// Members are not persisted: after a restart they get UNKNOWN_MEMBER_ID
// (or GROUP_ID_NOT_FOUND) and rejoin at epoch 0 with the same id, as
// both clients do after a coordinator failover. What is persisted, in
// meta/share-group/<url.PathEscape(group)> (JSON), is the group's
// existence and its epoch, written when the group is created and when
// the epoch changes; a failure to write the epoch is logged and does not
// fail the heartbeat (no member survives a restart to be confused by an
// older epoch). Share-partition state is persisted separately (share.go).
//
// # Ownership
//
// shareGroup.mu guards a group's members, epochs and timer. The timer is
// armed for the earliest member session deadline and removes expired
// members through the same lock.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/meta"
	"github.com/shoal-mq/shoal/protocol"
	"github.com/shoal-mq/shoal/sharegroup"
	"github.com/shoal-mq/shoal/sharegroup/store"
)

// shareGroupRecord is the value of meta/share-group/<group> (broker/meta/store.go).
type shareGroupRecord struct {
	Epoch int32 `json:"epoch"`
}

// groupTypeShare is the share group type in ListGroups v5.
const groupTypeShare = "share"

type shareGroup struct {
	c    *Coordinator
	name string

	mu struct {
		sync.Mutex
		dead            bool
		persisted       bool
		epoch           int32
		assignmentEpoch int32
		members         map[string]*shareMember
		// topics is the metadata of the subscribed topics at the last
		// assignment.
		topics  map[string]shareTopicMeta
		timer   *time.Timer
		timerAt time.Time
		stopped bool
	}
}

type shareTopicMeta struct {
	id         [16]byte
	partitions int32
}

type shareMember struct {
	id         string
	epoch      int32
	prevEpoch  int32
	rack       *string
	clientID   string
	clientHost string
	topics     []string                    // subscription, sorted
	assigned   []sharegroup.TopicPartition // what the member was last sent
	target     []sharegroup.TopicPartition // from the last assignment
	deadline   time.Time
}

func newShareGroup(c *Coordinator, name string) *shareGroup {
	g := &shareGroup{c: c, name: name}
	g.mu.members = map[string]*shareMember{}
	g.mu.topics = map[string]shareTopicMeta{}
	return g
}

func (c *Coordinator) loadGroups() error {
	return meta.ScanJSON(c.o.Store.DB(), meta.PrefixShareGroup, func(key string, rec shareGroupRecord) error {
		name, err := url.PathUnescape(key)
		if err != nil {
			return fmt.Errorf("broker: share group key %q: %w", meta.PrefixShareGroup+key, err)
		}
		g := newShareGroup(c, name)
		g.mu.epoch, g.mu.assignmentEpoch, g.mu.persisted = rec.Epoch, rec.Epoch, true
		c.mu.groups[name] = g
		return nil
	})
}

// lockGroup returns the named share group locked, or nil. With create a
// missing group is created and persisted first.
func (c *Coordinator) lockGroup(name string, create bool) (*shareGroup, error) {
	for {
		c.mu.Lock()
		g := c.mu.groups[name]
		if g == nil {
			if !create {
				c.mu.Unlock()
				return nil, nil
			}
			g = newShareGroup(c, name)
			g.mu.stopped = c.mu.closed
			c.mu.groups[name] = g
		}
		c.mu.Unlock()
		g.mu.Lock()
		if g.mu.dead {
			g.mu.Unlock()
			continue
		}
		if !g.mu.persisted {
			if err := g.persistLocked(); err != nil {
				g.removeLocked()
				g.mu.Unlock()
				return nil, err
			}
		}
		return g, nil
	}
}

// persistLocked writes the group record. g.mu held.
func (g *shareGroup) persistLocked() error {
	v, err := json.Marshal(shareGroupRecord{Epoch: g.mu.epoch})
	if err != nil {
		return err
	}
	err = g.c.o.Store.DB().Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(meta.PrefixShareGroup+url.PathEscape(g.name)), v)
	})
	if err != nil {
		return fmt.Errorf("broker: persist share group: %w", err)
	}
	g.mu.persisted = true
	return nil
}

// removeLocked marks g dead and drops it from the coordinator. g.mu held.
func (g *shareGroup) removeLocked() {
	g.mu.dead = true
	if g.mu.timer != nil {
		g.mu.timer.Stop()
	}
	g.c.mu.Lock()
	if g.c.mu.groups[g.name] == g {
		delete(g.c.mu.groups, g.name)
	}
	g.c.mu.Unlock()
}

// bumpLocked advances the group epoch, recomputes the target assignment
// and persists the epoch.
func (g *shareGroup) bumpLocked() {
	g.mu.epoch++
	g.recomputeLocked()
	if err := g.persistLocked(); err != nil {
		g.c.lg.Error("persisting share group epoch failed", zap.String("group", g.name), zap.Error(err))
	}
}

// refreshTopicsLocked re-reads the metadata of every subscribed topic and
// reports whether it changed since the last assignment.
func (g *shareGroup) refreshTopicsLocked() bool {
	now := map[string]shareTopicMeta{}
	for _, m := range g.mu.members {
		for _, name := range m.topics {
			if _, ok := now[name]; ok {
				continue
			}
			if t := g.c.o.Topics.Get(name); t != nil {
				now[name] = shareTopicMeta{id: t.ID, partitions: g.c.o.Topics.PartitionCount(t)}
			}
		}
	}
	if len(now) == len(g.mu.topics) {
		same := true
		for k, v := range now {
			if g.mu.topics[k] != v {
				same = false
				break
			}
		}
		if same {
			return false
		}
	}
	g.mu.topics = now
	return true
}

// recomputeLocked runs the assignor over the current members and topic
// metadata and sets the assignment epoch to the group epoch.
func (g *shareGroup) recomputeLocked() {
	g.refreshTopicsLocked()
	topics := make(map[string]sharegroup.TopicInfo, len(g.mu.topics))
	for name, tm := range g.mu.topics {
		topics[name] = sharegroup.TopicInfo{Partitions: tm.partitions}
	}
	subs := make([]sharegroup.MemberSubscription, 0, len(g.mu.members))
	for _, m := range g.mu.members {
		subs = append(subs, sharegroup.MemberSubscription{MemberID: m.id, Topics: m.topics, Assigned: m.target})
	}
	for id, tps := range sharegroup.AssignSimple(subs, topics) {
		if m := g.mu.members[id]; m != nil {
			m.target = tps
		}
	}
	g.mu.assignmentEpoch = g.mu.epoch
}

// reconcileLocked moves m to the target assignment and the assignment
// epoch; it reports whether m's partitions changed.
func (g *shareGroup) reconcileLocked(m *shareMember) bool {
	changed := !slices.Equal(m.assigned, m.target)
	if changed {
		m.assigned = slices.Clone(m.target)
	}
	if m.epoch != g.mu.assignmentEpoch {
		m.prevEpoch, m.epoch = m.epoch, g.mu.assignmentEpoch
	}
	return changed
}

// removeMemberLocked removes m and reassigns.
func (g *shareGroup) removeMemberLocked(m *shareMember) {
	delete(g.mu.members, m.id)
	g.bumpLocked()
}

// armLocked makes the timer fire no later than the earliest member
// session deadline.
func (g *shareGroup) armLocked(now time.Time) {
	if g.mu.stopped || g.mu.dead {
		return
	}
	var next time.Time
	for _, m := range g.mu.members {
		if next.IsZero() || m.deadline.Before(next) {
			next = m.deadline
		}
	}
	if next.IsZero() {
		return
	}
	if g.mu.timer != nil && !g.mu.timerAt.IsZero() && !next.Before(g.mu.timerAt) {
		return
	}
	d := max(next.Sub(now), 0) + time.Millisecond
	g.mu.timerAt = next
	if g.mu.timer == nil {
		g.mu.timer = time.AfterFunc(d, g.fire)
	} else {
		g.mu.timer.Reset(d)
	}
}

// fire removes the members whose session expired.
func (g *shareGroup) fire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.timerAt = time.Time{}
	if g.mu.stopped || g.mu.dead {
		return
	}
	now := time.Now()
	var expired []*shareMember
	for _, m := range g.mu.members {
		if !m.deadline.After(now) {
			expired = append(expired, m)
		}
	}
	for _, m := range expired {
		delete(g.mu.members, m.id)
		g.c.lg.Info("share group member session expired", zap.String("group", g.name), zap.String("member", m.id))
	}
	if len(expired) > 0 {
		g.bumpLocked()
	}
	g.armLocked(now)
}

// classicGroupExists reports whether the group coordinator (package groups)
// has a classic or consumer group of that name: share groups and other
// group types are exclusive (kip932.md §10 item 29).
func (c *Coordinator) classicGroupExists(name string) bool {
	return c.o.IsConsumerGroup(name)
}

// Heartbeat serves ShareGroupHeartbeat (76).
func (c *Coordinator) Heartbeat(cl Client, req *kmsg.ShareGroupHeartbeatRequest, resp *kmsg.ShareGroupHeartbeatResponse) {
	fail := func(code int16, format string, args ...any) {
		resp.ErrorCode = code
		if format != "" {
			msg := fmt.Sprintf(format, args...)
			resp.ErrorMessage = &msg
		}
	}
	switch {
	case strings.TrimSpace(req.MemberID) == "":
		fail(kerr.InvalidRequest.Code, "MemberId can't be empty.")
		return
	case strings.TrimSpace(req.GroupID) == "":
		fail(kerr.InvalidRequest.Code, "GroupId can't be empty.")
		return
	case req.RackID != nil && strings.TrimSpace(*req.RackID) == "":
		fail(kerr.InvalidRequest.Code, "RackId can't be empty.")
		return
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		fail(kerr.InvalidRequest.Code, "SubscribedTopicNames must be set in first request.")
		return
	case req.MemberEpoch < -1:
		fail(kerr.InvalidRequest.Code, "MemberEpoch is invalid.")
		return
	}
	if c.classicGroupExists(req.GroupID) {
		fail(kerr.GroupIDNotFound.Code, "Group %s is not a share group.", req.GroupID)
		return
	}
	st := c.shareSettings(req.GroupID)
	resp.HeartbeatIntervalMillis = int32(st.heartbeatInterval.Milliseconds())
	now := time.Now()

	g, err := c.lockGroup(req.GroupID, req.MemberEpoch == 0)
	if err != nil {
		c.lg.Error("creating share group failed", zap.String("group", req.GroupID), zap.Error(err))
		fail(kerr.CoordinatorNotAvailable.Code, "")
		return
	}
	if g == nil {
		fail(kerr.GroupIDNotFound.Code, "Group %s not found.", req.GroupID)
		return
	}
	defer g.mu.Unlock()
	defer g.armLocked(now)
	m := g.mu.members[req.MemberID]

	if req.MemberEpoch == -1 {
		if m == nil {
			fail(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", req.MemberID, req.GroupID)
			return
		}
		g.removeMemberLocked(m)
		resp.MemberID = &req.MemberID
		resp.MemberEpoch = -1
		return
	}

	changed := false
	if req.MemberEpoch == 0 {
		if m == nil {
			if len(g.mu.members) >= int(c.GroupBrokerInt("group.share.max.size")) {
				fail(kerr.GroupMaxSizeReached.Code, "The share group has reached its maximum size.")
				return
			}
			m = &shareMember{id: req.MemberID}
			g.mu.members[m.id] = m
			changed = true
		}
		m.epoch, m.prevEpoch, m.assigned = 0, 0, nil
	} else {
		switch {
		case m == nil:
			fail(kerr.UnknownMemberID.Code, "Member %s is not a member of group %s.", req.MemberID, req.GroupID)
			return
		case req.MemberEpoch != m.epoch && req.MemberEpoch != m.prevEpoch:
			fail(kerr.FencedMemberEpoch.Code, "The share group member has a member epoch (%d) different from the expected (%d).", req.MemberEpoch, m.epoch)
			return
		}
	}
	m.clientID, m.clientHost = cl.ID, cl.Host
	m.deadline = now.Add(st.sessionTimeout)
	if req.RackID != nil {
		r := *req.RackID
		m.rack = &r
	}
	if req.SubscribedTopicNames != nil {
		topics := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(topics)
		topics = slices.Compact(topics)
		if !slices.Equal(topics, m.topics) {
			m.topics = topics
			changed = true
		}
	}
	if g.refreshTopicsLocked() {
		changed = true
	}
	if changed {
		g.bumpLocked()
	}
	moved := g.reconcileLocked(m)
	resp.MemberID = &req.MemberID
	resp.MemberEpoch = m.epoch
	if req.MemberEpoch == 0 || req.SubscribedTopicNames != nil || moved {
		resp.Assignment = g.assignmentLocked(m)
	}
}

// assignmentLocked converts m's assignment to the wire form.
func (g *shareGroup) assignmentLocked(m *shareMember) *kmsg.ShareGroupHeartbeatResponseAssignment {
	a := kmsg.NewShareGroupHeartbeatResponseAssignment()
	a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
	for _, tp := range m.assigned {
		tm, ok := g.mu.topics[tp.Topic]
		if !ok {
			continue
		}
		n := len(a.TopicPartitions)
		if n == 0 || a.TopicPartitions[n-1].TopicID != tm.id {
			t := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			t.TopicID = tm.id
			a.TopicPartitions = append(a.TopicPartitions, t)
			n++
		}
		a.TopicPartitions[n-1].Partitions = append(a.TopicPartitions[n-1].Partitions, tp.Partition)
	}
	return &a
}

// Describe serves one group of ShareGroupDescribe (77).
func (c *Coordinator) Describe(name string, withOps bool) kmsg.ShareGroupDescribeResponseGroup {
	rg := kmsg.NewShareGroupDescribeResponseGroup()
	rg.GroupID = name
	rg.AuthorizedOperations = -2147483648
	g, _ := c.lockGroup(name, false)
	if g == nil {
		rg.ErrorCode = kerr.GroupIDNotFound.Code
		msg := fmt.Sprintf("Group %s not found.", name)
		if c.classicGroupExists(name) {
			msg = fmt.Sprintf("Group %s is not a share group.", name)
		}
		rg.ErrorMessage = &msg
		rg.GroupState = "Dead"
		return rg
	}
	defer g.mu.Unlock()
	rg.GroupState = g.stateLocked()
	rg.GroupEpoch, rg.AssignmentEpoch = g.mu.epoch, g.mu.assignmentEpoch
	rg.Assignor = "simple"
	if withOps {
		rg.AuthorizedOperations = protocol.GroupAllOperations
	}
	ids := make([]string, 0, len(g.mu.members))
	for id := range g.mu.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		m := g.mu.members[id]
		rm := kmsg.NewShareGroupDescribeResponseGroupMember()
		rm.MemberID, rm.RackID, rm.MemberEpoch = m.id, m.rack, m.epoch
		rm.ClientID, rm.ClientHost = m.clientID, m.clientHost
		rm.SubscribedTopicNames = slices.Clone(m.topics)
		for _, tp := range m.assigned {
			tm, ok := g.mu.topics[tp.Topic]
			if !ok {
				continue
			}
			parts := &rm.Assignment.TopicPartitions
			n := len(*parts)
			if n == 0 || (*parts)[n-1].TopicID != tm.id {
				t := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				t.TopicID, t.Topic = tm.id, tp.Topic
				*parts = append(*parts, t)
				n++
			}
			(*parts)[n-1].Partitions = append((*parts)[n-1].Partitions, tp.Partition)
		}
		rg.Members = append(rg.Members, rm)
	}
	return rg
}

func (g *shareGroup) stateLocked() string {
	if len(g.mu.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

// IsShareGroup reports whether a share group of that name exists (for
// DescribeGroups, OffsetCommit/OffsetFetch and JoinGroup: a share group
// id is GROUP_ID_NOT_FOUND there).
func (c *Coordinator) IsShareGroup(name string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.groups[name] != nil
}

// ListGroups returns the share groups for ListGroups, honouring its
// StatesFilter and TypesFilter (case-insensitive; v5 "share").
func (c *Coordinator) ListGroups(states, types []string) []kmsg.ListGroupsResponseGroup {
	if c == nil || len(types) > 0 && !protocol.ContainsFold(types, groupTypeShare) {
		return nil
	}
	c.mu.Lock()
	sgs := make([]*shareGroup, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		sgs = append(sgs, g)
	}
	c.mu.Unlock()
	var out []kmsg.ListGroupsResponseGroup
	for _, g := range sgs {
		g.mu.Lock()
		dead, state := g.mu.dead, g.stateLocked()
		g.mu.Unlock()
		if dead || len(states) > 0 && !protocol.ContainsFold(states, state) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.name, groupTypeShare, state, groupTypeShare
		out = append(out, lg)
	}
	slices.SortFunc(out, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return out
}

// DeleteGroup deletes a share group and all its share-partition
// state (DeleteGroups). isShare is false when no share group has that
// name (the caller goes on with other group types); code is
// NON_EMPTY_GROUP while members exist.
func (c *Coordinator) DeleteGroup(name string) (code int16, msg string, isShare bool) {
	if c == nil {
		return 0, "", false
	}
	g, _ := c.lockGroup(name, false)
	if g == nil {
		return 0, "", false
	}
	defer g.mu.Unlock()
	if len(g.mu.members) > 0 {
		return kerr.NonEmptyGroup.Code, "The group is not empty.", true
	}
	if err := c.deleteState(name, nil); err != nil {
		c.lg.Error("deleting share group state failed", zap.String("group", name), zap.Error(err))
		return kerr.KafkaStorageError.Code, err.Error(), true
	}
	err := c.o.Store.DB().Update(func(txn *badger.Txn) error {
		return txn.Delete([]byte(meta.PrefixShareGroup + url.PathEscape(name)))
	})
	if err != nil {
		c.lg.Error("deleting share group failed", zap.String("group", name), zap.Error(err))
		return kerr.KafkaStorageError.Code, err.Error(), true
	}
	g.removeLocked()
	c.lg.Info("deleted share group", zap.String("group", name))
	return 0, "", true
}

// deleteState deletes the share-partition state of group: every topic,
// or only those whose id is in topics. Each share-partition is deleted
// under its owner's lock, and a loaded one is discarded, so its next use
// starts over from share.auto.offset.reset.
func (c *Coordinator) deleteState(group string, topics map[[16]byte]bool) error {
	keys, err := c.store.Keys(group)
	if err != nil {
		return err
	}
	seen := map[store.Key]bool{}
	for _, k := range keys {
		seen[k] = true
	}
	for _, sp := range c.groupParts(group) {
		if !seen[sp.key] {
			seen[sp.key] = true
			keys = append(keys, sp.key)
		}
	}
	var errs []error
	for _, k := range keys {
		if topics != nil && !topics[k.TopicID] {
			continue
		}
		sp := c.part(k)
		sp.mu.Lock()
		sp.discardLocked()
		sp.mu.dlq.gen++ // fences a running dead-letter writer (fencedDLQ)
		errs = append(errs, c.store.Delete(k), c.deleteDLQState(k))
		sp.mu.Unlock()
	}
	return errors.Join(errs...)
}

// DeleteTopicState deletes every share group's share-partition state
// of a deleted topic (DeleteTopics calls it after the topic is gone, so
// no new state can appear for its id).
func (c *Coordinator) DeleteTopicState(id [16]byte) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	names := make([]string, 0, len(c.mu.groups))
	for name := range c.mu.groups {
		names = append(names, name)
	}
	c.mu.Unlock()
	var errs []error
	for _, name := range names {
		errs = append(errs, c.deleteState(name, map[[16]byte]bool{id: true}))
	}
	return errors.Join(errs...)
}
