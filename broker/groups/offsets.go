package groups

// Committed offsets and the group-level admin operations: OffsetCommit,
// OffsetFetch, OffsetDelete, DeleteGroups, DescribeGroups, ListGroups,
// and the periodic expiry of offsets (offsets.retention.minutes).
//
// A commit is validated, written to badger in one transaction (badger
// runs with SyncWrites, so it is on disk), and only then applied to the
// group's in-memory offsets and answered. The group lock is held
// throughout, so commits to one group apply in order and a fetch never
// sees an offset that is not durable. A failed write changes nothing in
// memory and answers NOT_COORDINATOR (Kafka's answer for a storage
// failure of the coordinator), which every client retries.

import (
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/topics"
	"github.com/shoal-mq/shoal/protocol"
)

// UTF16Len is the length Kafka (Java) measures offset metadata in.
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// Commit handles an OffsetCommit. resp.Topics mirrors req.Topics in order
// (clients match answers to requests by position).
func (c *Coordinator) Commit(req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) {
	now := time.Now()
	st := c.settings()

	// Per-partition checks first, as Kafka's request layer does: unknown
	// topics and partitions, then metadata size.
	type cand struct {
		sp   *kmsg.OffsetCommitResponseTopicPartition
		tp   TP
		oc   OffsetCommit
		t    *topics.Topic // the topic checked; the write re-checks it (below)
		gone int16         // the code if it is gone by then
	}
	var cands []cand
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st2 := &resp.Topics[i]
		*st2 = kmsg.NewOffsetCommitResponseTopic()
		st2.Topic, st2.TopicID = rt.Topic, rt.TopicID
		// One lookup: the write re-checks this very topic (below).
		name, topicCode, gone := rt.Topic, int16(0), kerr.UnknownTopicOrPartition.Code
		var t *topics.Topic
		if req.Version >= 10 {
			gone = kerr.UnknownTopicID.Code
			if t = c.o.Topics.GetID(rt.TopicID); t != nil {
				name = t.Name
			} else {
				topicCode = gone
			}
		} else {
			t = c.o.Topics.Get(name)
		}
		st2.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st2.Partitions[j]
			*sp = kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case topicCode != 0:
				sp.ErrorCode = topicCode
			case t == nil || rp.Partition < 0 || rp.Partition >= c.o.Topics.PartitionCount(t):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				oc := OffsetCommit{Offset: rp.Offset, LeaderEpoch: -1, CommitTime: now}
				if req.Version >= 6 {
					oc.LeaderEpoch = rp.LeaderEpoch
				}
				if rp.Metadata != nil {
					oc.Metadata = *rp.Metadata
				}
				if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis >= 0 {
					oc.expireTime = now.Add(time.Duration(req.RetentionTimeMillis) * time.Millisecond)
				}
				cands = append(cands, cand{sp: sp, tp: TP{name, rp.Partition}, oc: oc, t: t, gone: gone})
			}
		}
	}
	fail := func(code int16) {
		for _, cd := range cands {
			cd.sp.ErrorCode = code
		}
	}
	if req.Group == "" {
		fail(kerr.InvalidGroupID.Code)
		return
	}
	if c.o.IsShareGroup(req.Group) {
		fail(kerr.GroupIDNotFound.Code) // a share group holds no committed offsets
		return
	}
	g := c.lockGroup(req.Group, req.Generation < 0)
	if g == nil {
		if req.Version >= 9 {
			fail(kerr.GroupIDNotFound.Code)
		} else {
			fail(kerr.IllegalGeneration.Code)
		}
		return
	}
	defer func() {
		g.dropIfUnusedLocked()
		g.unlock(now)
	}()
	var code int16
	var perPartition func(TP) int16
	if g.mu.cg != nil {
		code, perPartition = g.validateConsumerCommitLocked(req)
	} else {
		code = g.validateCommitLocked(req)
	}
	if code != 0 {
		fail(code)
		return
	}
	if m := g.mu.members[req.MemberID]; m != nil && (g.mu.state == groupStable || g.mu.state == groupPreparingRebalance) {
		m.lastHeartbeat = now // a commit keeps the session alive, as in Kafka
	}
	var writes []offsetWrite
	for _, cd := range cands {
		// The topic may have been deleted since it was checked: its
		// deletion drops this group's offsets of it under this lock
		// (dropTopicOffsets), either before (then it is gone from the
		// registry now) or after this write. A topic re-created under
		// the name is another topic.
		if c.o.Topics.Get(cd.tp.Topic) != cd.t {
			cd.sp.ErrorCode = cd.gone
			continue
		}
		if perPartition != nil {
			if code := perPartition(cd.tp); code != 0 {
				cd.sp.ErrorCode = code
				continue
			}
		}
		if UTF16Len(cd.oc.Metadata) > st.metadataMaxBytes {
			cd.sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			continue
		}
		writes = append(writes, offsetWrite{tp: cd.tp, oc: cd.oc})
	}
	if len(writes) == 0 {
		return
	}
	if err := c.store.putOffsets(g.name, writes, nil, nil); err != nil {
		c.lg.Error("persisting offsets failed", zap.String("group", g.name), zap.Error(err))
		for _, cd := range cands {
			if cd.sp.ErrorCode == 0 {
				cd.sp.ErrorCode = kerr.NotCoordinator.Code
			}
		}
		return
	}
	for _, w := range writes {
		g.mu.offsets[w.tp] = w.oc
	}
}

// validateCommitLocked applies Kafka's rules for who may commit to a
// classic group: anyone to an empty group with generation -1 (a "simple"
// commit, e.g. from an admin client); otherwise a current member at the
// current generation, and not while the group is completing a rebalance.
func (g *Group) validateCommitLocked(req *kmsg.OffsetCommitRequest) int16 {
	if req.Generation < 0 && g.mu.state == groupEmpty {
		return 0
	}
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil {
		if code := g.validateMemberLocked(req.MemberID, req.InstanceID); code != 0 {
			return code
		}
		if req.Generation != g.mu.generation {
			return kerr.IllegalGeneration.Code
		}
	} else if g.mu.state != groupEmpty {
		return kerr.UnknownMemberID.Code
	}
	if g.mu.state == groupCompletingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// FetchOffsets answers one group of an OffsetFetch. Topics nil asks for
// every committed offset.
//
// With requireStable (KIP-447), a partition for which an open
// transaction holds a pending offset gets UNSTABLE_OFFSET_COMMIT (offset
// -1, leader epoch -1, metadata ""), as Kafka answers. The pending
// offsets are looked up by topic name, after v10's topic ids are
// resolved, and before the committed offsets are read: a committed
// transaction's offsets are applied to the group before they stop being
// pending (txn.Coordinator.finish, completeLocked), so a partition not
// pending at the lookup has every offset committed before it applied by
// the read, and one pending at the lookup is answered unstable whatever
// the read finds. The other order, read then look up, answered "no
// offset" for a partition whose offsets were applied between the two.
func (c *Coordinator) FetchOffsets(rg *kmsg.OffsetFetchRequestGroup, version int16, requireStable bool) kmsg.OffsetFetchResponseGroup {
	sg := kmsg.NewOffsetFetchResponseGroup()
	sg.Group = rg.Group
	if rg.Group == "" {
		sg.ErrorCode = kerr.InvalidGroupID.Code
		return sg
	}
	// Resolve topic ids (v10) before taking the group lock.
	names := make([]string, len(rg.Topics))
	codes := make([]int16, len(rg.Topics))
	for i, t := range rg.Topics {
		names[i] = t.Topic
		if version >= 10 {
			if tt := c.o.Topics.GetID(t.TopicID); tt != nil {
				names[i] = tt.Name
			} else {
				codes[i] = kerr.UnknownTopicID.Code
			}
		}
	}
	var unstable map[TP]bool
	if requireStable {
		unstable = c.Pending.unstable(rg.Group)
		if h := c.o.OffsetFetchAfterStable; h != nil {
			h(rg.Group)
		}
	}
	offsets := map[TP]OffsetCommit{}
	if g := c.lockGroup(rg.Group, false); g != nil {
		if g.mu.cg != nil && version >= 9 {
			if code := g.validateConsumerFetchLocked(rg.MemberID, rg.MemberEpoch); code != 0 {
				g.mu.Unlock()
				sg.ErrorCode = code
				return sg
			}
		}
		if rg.Topics == nil {
			for tp, oc := range g.mu.offsets {
				offsets[tp] = oc
			}
		}
		for i, t := range rg.Topics {
			for _, p := range t.Partitions {
				if oc, ok := g.mu.offsets[TP{names[i], p}]; ok {
					offsets[TP{names[i], p}] = oc
				}
			}
		}
		g.mu.Unlock()
	}
	fill := func(sp *kmsg.OffsetFetchResponseGroupTopicPartition, tp TP, oc OffsetCommit, ok bool) {
		if unstable[tp] {
			sp.ErrorCode = kerr.UnstableOffsetCommit.Code
			ok = false
		}
		if !ok {
			sp.Offset, sp.LeaderEpoch = -1, -1
			empty := ""
			sp.Metadata = &empty
			return
		}
		md := oc.Metadata
		sp.Offset, sp.LeaderEpoch, sp.Metadata = oc.Offset, oc.LeaderEpoch, &md
	}
	if rg.Topics == nil {
		names, parts := ByTopic(offsets)
		for _, n := range names {
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic = n
			if version >= 10 {
				t := c.o.Topics.Get(n)
				if t == nil {
					continue // the topic is gone: it has no id to report
				}
				st.TopicID = t.ID
			}
			for _, p := range parts[n] {
				sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				sp.Partition = p
				fill(&sp, TP{n, p}, offsets[TP{n, p}], true)
				st.Partitions = append(st.Partitions, sp)
			}
			sg.Topics = append(sg.Topics, st)
		}
		return sg
	}
	for i, t := range rg.Topics {
		st := kmsg.NewOffsetFetchResponseGroupTopic()
		st.Topic, st.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			sp.Partition = p
			tp := TP{names[i], p}
			oc, ok := offsets[tp]
			fill(&sp, tp, oc, ok && codes[i] == 0)
			if codes[i] != 0 {
				sp.ErrorCode = codes[i]
			}
			st.Partitions = append(st.Partitions, sp)
		}
		sg.Topics = append(sg.Topics, st)
	}
	return sg
}

// DeleteOffsets handles an OffsetDelete.
func (c *Coordinator) DeleteOffsets(req *kmsg.OffsetDeleteRequest, resp *kmsg.OffsetDeleteResponse) {
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return
	}
	g := c.lockGroup(req.Group, false)
	if g == nil {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return
	}
	now := time.Now()
	defer g.unlock(now)
	var subscribed map[string]bool
	empty := g.emptyLocked()
	switch {
	case empty:
	case g.mu.cg != nil:
		subscribed = g.mu.cg.subscribedTopics()
	case g.mu.protocolType != "consumer":
		resp.ErrorCode = kerr.NonEmptyGroup.Code
		return
	default:
		var known bool
		if subscribed, known = g.subscribedTopicsLocked(); !known {
			subscribed = nil // unknown subscriptions: every topic counts as subscribed
		}
	}
	isSubscribed := func(topic string) bool {
		if empty {
			return false
		}
		return subscribed == nil || subscribed[topic]
	}
	var dels, marks []TP
	var ok []*kmsg.OffsetDeleteResponseTopicPartition
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetDeleteResponseTopicPartition, len(rt.Partitions))
		resp.Topics = append(resp.Topics, st)
		stp := &resp.Topics[len(resp.Topics)-1]
		for j, rp := range rt.Partitions {
			sp := &stp.Partitions[j]
			*sp = kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case !c.o.Topics.HasPartition(rt.Topic, rp.Partition):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case isSubscribed(rt.Topic):
				sp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			default:
				// A partition an open transaction holds an offset for
				// gets a deletion mark, which that offset then does
				// not overtake (applyTxnOffsets), as in Kafka.
				tp := TP{rt.Topic, rp.Partition}
				switch {
				case c.Pending.has(g.name, tp):
					marks = append(marks, tp)
				case hasKey(g.mu.offsets, tp):
					dels = append(dels, tp)
				}
				ok = append(ok, sp)
			}
		}
	}
	if len(dels)+len(marks) == 0 {
		return
	}
	if err := c.deleteOffsetsLocked(g, dels, marks); err != nil {
		c.lg.Error("deleting offsets failed", zap.String("group", g.name), zap.Error(err))
		for _, sp := range ok {
			sp.ErrorCode = kerr.NotCoordinator.Code
		}
	}
}

// deleteOffsetsLocked deletes g's committed offsets of dels, and writes
// deletion marks for marks, the partitions open transactions hold
// offsets for (their commit must not overtake the deletion): durably,
// then in memory, then superseding those pending offsets for
// RequireStable (pending.go pendingTP). On failure nothing changes in
// memory. g.mu held, as a TxnOffsetCommit adds its offsets under it.
func (c *Coordinator) deleteOffsetsLocked(g *Group, dels, marks []TP) error {
	if err := c.store.putOffsets(g.name, nil, dels, marks); err != nil {
		return err
	}
	for _, tp := range dels {
		delete(g.mu.offsets, tp)
	}
	for _, tp := range marks {
		delete(g.mu.offsets, tp)
	}
	c.Pending.supersede(g.name, marks)
	return nil
}

// DeleteGroup handles one group of a DeleteGroups: only an empty group
// may be deleted; its metadata and offsets go in one step.
func (c *Coordinator) DeleteGroup(name string) (int16, string) {
	if name == "" {
		return kerr.InvalidGroupID.Code, "The group id is empty."
	}
	g := c.lockGroup(name, false)
	if g == nil {
		return kerr.GroupIDNotFound.Code, "Group " + name + " not found."
	}
	defer g.mu.Unlock()
	if !g.emptyLocked() {
		return kerr.NonEmptyGroup.Code, "The group is not empty."
	}
	pending := c.Pending.tps(name)
	if err := c.store.deleteGroup(name, pending); err != nil {
		c.lg.Error("deleting group failed", zap.String("group", name), zap.Error(err))
		return kerr.NotCoordinator.Code, err.Error()
	}
	c.Pending.supersede(name, pending)
	g.removeLocked()
	c.lg.Info("deleted group", zap.String("group", name))
	return 0, ""
}

// Describe answers one group of a DescribeGroups. An unknown group is
// reported Dead (v6+: with GROUP_ID_NOT_FOUND), as Kafka does.
func (c *Coordinator) Describe(name string, version int16, withOps bool) kmsg.DescribeGroupsResponseGroup {
	sg := kmsg.NewDescribeGroupsResponseGroup()
	sg.Group = name
	sg.AuthorizedOperations = -2147483648
	if withOps {
		sg.AuthorizedOperations = protocol.GroupAllOperations
	}
	if name == "" {
		sg.ErrorCode = kerr.InvalidGroupID.Code
		return sg
	}
	g := c.lockGroup(name, false)
	if g == nil {
		sg.State = groupDead.String()
		if version >= 6 {
			sg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "Group " + name + " not found."
			sg.ErrorMessage = &msg
		}
		return sg
	}
	defer g.mu.Unlock()
	if g.mu.cg != nil {
		// Kafka describes only classic groups here; consumer groups
		// through ConsumerGroupDescribe.
		sg.State = groupDead.String()
		if version >= 6 {
			sg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "Group " + name + " is not a classic group."
			sg.ErrorMessage = &msg
		}
		return sg
	}
	sg.State = g.mu.state.String()
	sg.ProtocolType = g.mu.protocolType
	stable := g.mu.state == groupStable
	if stable {
		sg.Protocol = g.mu.protocol
	}
	for _, m := range g.sortedMembersLocked() {
		sm := kmsg.NewDescribeGroupsResponseGroupMember()
		sm.MemberID, sm.InstanceID = m.id, m.instanceID
		sm.ClientID, sm.ClientHost = m.clientID, m.clientHost
		sm.ProtocolMetadata, sm.MemberAssignment = []byte{}, []byte{}
		if stable {
			sm.ProtocolMetadata = m.metadataFor(g.mu.protocol)
			sm.MemberAssignment = m.assignment
		}
		sg.Members = append(sg.Members, sm)
	}
	return sg
}

// List answers ListGroups: every group matching the state filter (v4,
// case-insensitive) and type filter (v5, case-insensitive; an unknown
// type matches nothing, as in Kafka).
func (c *Coordinator) List(states, types []string) []kmsg.ListGroupsResponseGroup {
	var out []kmsg.ListGroupsResponseGroup
	for _, g := range c.all() {
		g.mu.Lock()
		if g.mu.state == groupDead {
			g.mu.Unlock()
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group = g.name
		lg.ProtocolType = g.mu.protocolType
		if g.mu.cg != nil {
			lg.ProtocolType = "consumer"
		}
		lg.GroupState = g.stateLocked()
		lg.GroupType = g.typeLocked()
		g.mu.Unlock()
		if len(states) > 0 && !protocol.ContainsFold(states, lg.GroupState) || len(types) > 0 && !protocol.ContainsFold(types, lg.GroupType) {
			continue
		}
		out = append(out, lg)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// ExpireLoop runs the offset expiry every
// offsets.retention.check.interval.ms until the broker closes. A change of
// that broker config (retentionWake) re-arms the timer at once.
func (c *Coordinator) ExpireLoop() {
	for {
		t := time.NewTimer(c.settings().retentionCheckInterval)
		select {
		case <-c.o.Done:
			t.Stop()
			return
		case <-c.retentionWake:
			t.Stop()
		case now := <-t.C:
			c.ExpireOffsets(now)
		}
	}
}

// ExpireOffsets removes expired offsets, following Kafka's rules:
//   - an empty group with a protocol type (it had members): every offset
//     once offsets.retention.minutes passed since the group became empty;
//   - a group without protocol type (simple commits only): each offset
//     retention after its commit;
//   - a Stable "consumer" group: offsets of topics no member subscribes
//     to, retention after their commit;
//   - an offset committed with an explicit retention (v2-v4) expires at
//     its own expiry time whenever one of the rules above applies.
//
// An empty group left without offsets is deleted. Each group is handled
// under its own lock, one at a time.
func (c *Coordinator) ExpireOffsets(now time.Time) {
	retention := c.settings().offsetsRetention
	for _, g := range c.all() {
		g.mu.Lock()
		if g.mu.state == groupDead || g.mu.stopped {
			g.mu.Unlock()
			continue
		}
		var base func(oc OffsetCommit) time.Time
		var subscribed map[string]bool
		switch {
		case g.mu.cg != nil:
			subscribed = g.mu.cg.subscribedTopics()
			base = func(oc OffsetCommit) time.Time { return oc.CommitTime }
		case g.mu.protocolType == "":
			base = func(oc OffsetCommit) time.Time { return oc.CommitTime }
		case g.mu.state == groupEmpty:
			base = func(oc OffsetCommit) time.Time { return g.mu.stateTime }
		case g.mu.state == groupStable && g.mu.protocolType == "consumer":
			if s, ok := g.subscribedTopicsLocked(); ok {
				subscribed = s
				base = func(oc OffsetCommit) time.Time { return oc.CommitTime }
			}
		}
		// As Kafka, partitions an open transaction holds an offset for
		// are kept (their deletion would win over it), and so is the group.
		// A TxnOffsetCommit adds its offsets under the group lock, held
		// here until the deletion is written: none lands in between.
		pending := c.Pending.tps(g.name)
		var dels []TP
		if base != nil {
			for tp, oc := range g.mu.offsets {
				if subscribed != nil && subscribed[tp.Topic] || slices.Contains(pending, tp) {
					continue
				}
				if !oc.expireTime.IsZero() && !now.Before(oc.expireTime) ||
					oc.expireTime.IsZero() && now.Sub(base(oc)) >= retention {
					dels = append(dels, tp)
				}
			}
		}
		if len(dels) > 0 {
			if h := c.o.ExpiryBeforeDelete; h != nil {
				h(g.name)
			}
			if err := c.deleteOffsetsLocked(g, dels, nil); err != nil {
				c.lg.Error("expiring offsets failed", zap.String("group", g.name), zap.Error(err))
				g.mu.Unlock()
				continue
			}
			c.lg.Info("expired offsets", zap.String("group", g.name), zap.Int("partitions", len(dels)))
		}
		if g.emptyLocked() && len(g.mu.offsets) == 0 && len(g.mu.pending) == 0 && len(pending) == 0 {
			if g.mu.persisted {
				if err := c.store.deleteGroup(g.name, nil); err != nil {
					c.lg.Error("deleting expired group failed", zap.String("group", g.name), zap.Error(err))
					g.mu.Unlock()
					continue
				}
			}
			g.removeLocked()
			c.lg.Info("removed empty group without offsets", zap.String("group", g.name))
		}
		g.mu.Unlock()
	}
}

// DropTopicOffsets removes every group's committed offsets of a deleted
// topic, as Kafka does, so a topic created again under the same name
// starts without them. Meant to be called by topic deletion once the
// topic is gone, under the topic Admin's lock so no topic of the name can be created
// meanwhile (topics.Admin.Delete); it takes each group's lock in turn.
// It returns the failures (joined); the deletion stays pending then.
// A TxnOffsetCommit checks its partitions and adds its pending offsets
// under its group's lock, so one for this topic either got
// UNKNOWN_TOPIC_OR_PARTITION or added them before that group is looked
// at here (a group it created after the list below was taken found the
// topic gone).
func (c *Coordinator) DropTopicOffsets(topic string) error {
	now := time.Now()
	seen := map[string]bool{}
	var errs []error
	for _, g := range c.all() {
		g.mu.Lock()
		seen[g.name] = true
		errs = append(errs, c.dropTopicOffsetsLocked(g, topic))
		g.unlock(now)
	}
	// A group DeleteGroups removed while an open transaction holds
	// offsets for it is gone: mark its partitions all the same, holding
	// the group's name locked as dropDeletionMarks does, so a
	// transaction's end cannot drop the marks before they are written.
	for _, name := range c.Pending.groups() {
		if seen[name] {
			continue
		}
		g, release := c.holdGroupName(name)
		errs = append(errs, c.dropTopicOffsetsLocked(g, topic))
		release()
	}
	return errors.Join(errs...)
}

// dropTopicOffsetsLocked deletes g's offsets of topic, with deletion
// marks for the partitions open transactions hold offsets for. g.mu held.
func (c *Coordinator) dropTopicOffsetsLocked(g *Group, topic string) error {
	marks := c.pendingOfTopic(g.name, topic)
	var dels []TP
	for tp := range g.mu.offsets {
		if tp.Topic == topic && !slices.Contains(marks, tp) {
			dels = append(dels, tp)
		}
	}
	if len(dels)+len(marks) == 0 {
		return nil
	}
	if err := c.deleteOffsetsLocked(g, dels, marks); err != nil {
		c.lg.Error("dropping offsets of a deleted topic failed", zap.String("group", g.name), zap.String("topic", topic), zap.Error(err))
		return err
	}
	return nil
}

// pendingOfTopic lists group's partitions of topic that an open
// transaction holds an offset for: a deletion marks them rather than
// deleting them, so the transaction's commit does not bring them back.
func (c *Coordinator) pendingOfTopic(group, topic string) []TP {
	var out []TP
	for _, tp := range c.Pending.tps(group) {
		if tp.Topic == topic {
			out = append(out, tp)
		}
	}
	return out
}

// CommittedOffsets calls fn with each group's committed offsets, copied
// under that group's lock (the state collector's consumer lag); no lock
// is held while fn runs.
func (c *Coordinator) CommittedOffsets(fn func(group string, offsets map[TP]int64)) {
	for _, g := range c.all() {
		g.mu.Lock()
		offsets := make(map[TP]int64, len(g.mu.offsets))
		for tp, oc := range g.mu.offsets {
			offsets[tp] = oc.Offset
		}
		g.mu.Unlock()
		fn(g.name, offsets)
	}
}

// HasCommitted reports whether group exists and whether it holds a
// committed offset of tp (a read-out for tests).
func (c *Coordinator) HasCommitted(group string, tp TP) (exists, committed bool) {
	g := c.lockGroup(group, false)
	if g == nil {
		return false, false
	}
	defer g.mu.Unlock()
	_, committed = g.mu.offsets[tp]
	return true, committed
}

// WakeRetention re-arms expireLoop's timer: offsets.retention.check.interval.ms
// changed.
func (c *Coordinator) WakeRetention() {
	select {
	case c.retentionWake <- struct{}{}:
	default:
	}
}

// PersistOffsetsOnly writes group's offsets to the store and nothing
// else: what a commit leaves when its write reached badger and the rest
// did not happen (a seam for crash tests).
func (c *Coordinator) PersistOffsetsOnly(group string, offs map[TP]OffsetCommit) error {
	writes := make([]offsetWrite, 0, len(offs))
	for tp, oc := range offs {
		writes = append(writes, offsetWrite{tp: tp, oc: oc})
	}
	return c.store.putOffsets(group, writes, nil, nil)
}
