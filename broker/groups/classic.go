package groups

// The classic group protocol's state machine: JoinGroup, SyncGroup,
// Heartbeat and LeaveGroup, session and rebalance timeouts, static
// membership. Every method here expects g.mu held (the ...Locked suffix)
// except the coordinator entry points, which lock the group themselves.
//
// States and transitions follow Kafka's classic group coordinator:
//
//	Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
//	  ▲                 ▲      │ no member left                        │ leader's SyncGroup
//	  └─────────────────┼──────┘                                       ▼ (persisted)
//	                    └─── member joins, leaves or expires ───── Stable
//
// The assignor runs in the client (the leader), so eager and cooperative
// rebalancing need nothing from us beyond passing metadata and
// assignments through unchanged.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// copyProtocols copies the protocol list out of the request frame, which
// the connection reuses for its next request.
func copyProtocols(ps []kmsg.JoinGroupRequestProtocol) []kmsg.JoinGroupRequestProtocol {
	out := make([]kmsg.JoinGroupRequestProtocol, len(ps))
	for i, p := range ps {
		out[i] = kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: append([]byte(nil), p.Metadata...)}
	}
	return out
}

func JoinError(resp *kmsg.JoinGroupResponse, code int16, memberID string) {
	resp.ErrorCode = code
	resp.MemberID = memberID
	resp.Generation = -1
	resp.LeaderID = ""
	resp.Protocol = nil
	resp.ProtocolType = nil
	resp.Members = nil
}

// Join handles a JoinGroup. It fills resp and returns nil when the answer
// is immediate, or returns the channel the answer arrives on once the
// Join phase completes.
func (c *Coordinator) Join(cl Client, req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse) chan *kmsg.JoinGroupResponse {
	now := time.Now()
	st := c.settings()
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 {
		rebalance = session // v0 has no rebalance timeout: Kafka uses the session timeout
	}
	switch {
	case req.Group == "":
		JoinError(resp, kerr.InvalidGroupID.Code, req.MemberID)
		return nil
	case session < st.minSessionTimeout || session > st.maxSessionTimeout:
		JoinError(resp, kerr.InvalidSessionTimeout.Code, req.MemberID)
		return nil
	}
	if c.o.IsShareGroup(req.Group) {
		// A group id names one group of one type (as in Kafka's
		// classicGroupJoin for a group of another type).
		JoinError(resp, kerr.InconsistentGroupProtocol.Code, "")
		return nil
	}
	unknown := req.MemberID == ""
	g := c.lockGroup(req.Group, unknown)
	if g == nil {
		JoinError(resp, kerr.UnknownMemberID.Code, req.MemberID)
		return nil
	}
	defer func() {
		g.dropIfUnusedLocked()
		g.unlock(now)
	}()
	if g.mu.cg != nil {
		if len(g.mu.cg.members) > 0 {
			// Classic members in a consumer group (KIP-848's migration
			// path) are not served.
			JoinError(resp, kerr.InconsistentGroupProtocol.Code, req.MemberID)
			return nil
		}
		g.mu.cg = nil // an empty consumer group becomes a classic group
	}
	if !g.acceptJoiningLocked(req.MemberID, st.maxSize) {
		if m := g.mu.members[req.MemberID]; m != nil {
			g.removeMemberLocked(m, kerr.GroupMaxSizeReached.Code)
			g.maybeRebalanceLocked(now, st)
		}
		delete(g.mu.pending, req.MemberID)
		JoinError(resp, kerr.GroupMaxSizeReached.Code, "")
		return nil
	}
	if !g.supportsProtocolsLocked(req.ProtocolType, req.Protocols) {
		JoinError(resp, kerr.InconsistentGroupProtocol.Code, req.MemberID)
		return nil
	}
	if unknown {
		id := newMemberID(cl.ID, req.InstanceID)
		if req.InstanceID != nil {
			if old, ok := g.mu.static[*req.InstanceID]; ok && g.mu.members[old] != nil {
				return g.replaceStaticMemberLocked(now, st, cl, req, resp, g.mu.members[old], id, session, rebalance)
			}
			return g.addMemberLocked(now, st, cl, req, id, session, rebalance)
		}
		if req.Version >= 4 {
			// KIP-394: the member must come back with this id, so a
			// client that times out before the answer does not leave a
			// ghost member behind.
			g.mu.pending[id] = now.Add(session)
			JoinError(resp, kerr.MemberIDRequired.Code, id)
			return nil
		}
		return g.addMemberLocked(now, st, cl, req, id, session, rebalance)
	}
	if _, ok := g.mu.pending[req.MemberID]; ok {
		delete(g.mu.pending, req.MemberID)
		return g.addMemberLocked(now, st, cl, req, req.MemberID, session, rebalance)
	}
	if code := g.validateMemberLocked(req.MemberID, req.InstanceID); code != 0 {
		JoinError(resp, code, req.MemberID)
		return nil
	}
	m := g.mu.members[req.MemberID]
	switch g.mu.state {
	case groupPreparingRebalance:
		return g.updateMemberLocked(now, st, m, req, session, rebalance)
	case groupCompletingRebalance:
		if m.sameProtocols(req.Protocols) {
			// It missed our answer: tell it again.
			g.fillJoinLocked(resp, m)
			return nil
		}
		return g.updateMemberLocked(now, st, m, req, session, rebalance)
	case groupStable:
		if m.id == g.mu.leader || !m.sameProtocols(req.Protocols) {
			// A leader's rejoin forces a rebalance: it is how a client
			// reacts to changes the metadata does not show (new
			// partitions of a subscribed topic).
			return g.updateMemberLocked(now, st, m, req, session, rebalance)
		}
		g.fillJoinLocked(resp, m)
		resp.Members = nil
		return nil
	default:
		JoinError(resp, kerr.UnknownMemberID.Code, req.MemberID)
		return nil
	}
}

// acceptJoiningLocked applies group.max.size as Kafka does: in the join
// phase it counts members already waiting, otherwise all members.
func (g *Group) acceptJoiningLocked(memberID string, maxSize int) bool {
	switch g.mu.state {
	case groupPreparingRebalance:
		if m := g.mu.members[memberID]; m != nil && m.joinWait != nil {
			return true
		}
		waiting := 0
		for _, m := range g.mu.members {
			if m.joinWait != nil {
				waiting++
			}
		}
		return waiting < maxSize
	case groupCompletingRebalance, groupStable:
		return g.mu.members[memberID] != nil || len(g.mu.members) < maxSize
	default:
		return true
	}
}

// supportsProtocolsLocked: an empty group takes any non-empty protocol
// list; otherwise the protocol type must match and the member must
// support a protocol every current member supports.
func (g *Group) supportsProtocolsLocked(protocolType string, ps []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType == "" || len(ps) == 0 {
		return false
	}
	if g.mu.state == groupEmpty || len(g.mu.members) == 0 {
		return true
	}
	if protocolType != g.mu.protocolType {
		return false
	}
	for _, p := range ps {
		if g.protocolSupportLocked(p.Name) == len(g.mu.members) {
			return true
		}
	}
	return false
}

// protocolSupportLocked counts the members supporting protocol.
func (g *Group) protocolSupportLocked(protocol string) int {
	n := 0
	for _, m := range g.mu.members {
		for _, p := range m.protocols {
			if p.Name == protocol {
				n++
				break
			}
		}
	}
	return n
}

// validateMemberLocked checks a member id, and the instance id of a static
// member, against the group: UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID.
func (g *Group) validateMemberLocked(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		known, ok := g.mu.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if known != memberID {
			return kerr.FencedInstanceID.Code
		}
	}
	if g.mu.members[memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// addMemberLocked adds a new member parked in the join phase.
func (g *Group) addMemberLocked(now time.Time, st groupSettings, cl Client, req *kmsg.JoinGroupRequest, id string, session, rebalance time.Duration) chan *kmsg.JoinGroupResponse {
	g.mu.joinSeq++
	m := &groupMember{
		id:               id,
		instanceID:       req.InstanceID,
		clientID:         cl.ID,
		clientHost:       cl.Host,
		protocolType:     req.ProtocolType,
		protocols:        copyProtocols(req.Protocols),
		sessionTimeout:   session,
		rebalanceTimeout: rebalance,
		lastHeartbeat:    now,
		joinSeq:          g.mu.joinSeq,
		joinWait:         make(chan *kmsg.JoinGroupResponse, 1),
	}
	if len(g.mu.members) == 0 {
		g.mu.protocolType = req.ProtocolType
	}
	g.mu.members[id] = m
	if m.instanceID != nil {
		g.mu.static[*m.instanceID] = id
	}
	// A member arriving during the initial delay extends it, up to the
	// join deadline (Kafka's InitialDelayedJoin).
	if g.mu.state == groupPreparingRebalance && g.mu.initialJoin && now.Before(g.mu.delayUntil) {
		if d := now.Add(st.initialRebalanceDelay); d.Before(g.mu.joinDeadline) {
			g.mu.delayUntil = d
		} else {
			g.mu.delayUntil = g.mu.joinDeadline
		}
	}
	ch := m.joinWait
	g.maybeRebalanceLocked(now, st)
	return ch
}

// updateMemberLocked parks a known member's rejoin with its new protocols
// and timeouts.
func (g *Group) updateMemberLocked(now time.Time, st groupSettings, m *groupMember, req *kmsg.JoinGroupRequest, session, rebalance time.Duration) chan *kmsg.JoinGroupResponse {
	g.answerJoinErrLocked(m, kerr.RebalanceInProgress.Code) // a stale duplicate join
	m.protocols = copyProtocols(req.Protocols)
	m.protocolType = req.ProtocolType
	m.sessionTimeout, m.rebalanceTimeout = session, rebalance
	m.lastHeartbeat = now
	m.joinWait = make(chan *kmsg.JoinGroupResponse, 1)
	ch := m.joinWait
	g.maybeRebalanceLocked(now, st)
	return ch
}

// replaceStaticMemberLocked handles a static member rejoining with an
// unknown member id (KIP-345): the new member id takes over the old one's
// place and assignment, and the old id is fenced. In a Stable group whose
// selected protocol does not change, no rebalance happens; the change is
// persisted before the answer.
func (g *Group) replaceStaticMemberLocked(now time.Time, st groupSettings, cl Client, req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse, old *groupMember, id string, session, rebalance time.Duration) chan *kmsg.JoinGroupResponse {
	g.answerJoinErrLocked(old, kerr.FencedInstanceID.Code)
	g.answerSyncErrLocked(old, kerr.FencedInstanceID.Code)
	oldID, oldLeader := old.id, g.mu.leader
	oldProtocols, oldSession, oldRebalance := old.protocols, old.sessionTimeout, old.rebalanceTimeout

	delete(g.mu.members, old.id)
	if _, ok := g.mu.awaitingSync[old.id]; ok {
		delete(g.mu.awaitingSync, old.id)
		g.mu.awaitingSync[id] = struct{}{}
	}
	m := old
	m.id = id
	m.clientID, m.clientHost = cl.ID, cl.Host
	m.protocols = copyProtocols(req.Protocols)
	m.protocolType = req.ProtocolType
	m.sessionTimeout, m.rebalanceTimeout = session, rebalance
	m.lastHeartbeat = now
	g.mu.members[id] = m
	g.mu.static[*req.InstanceID] = id
	if g.mu.leader == oldID {
		g.mu.leader = id
	}

	switch g.mu.state {
	case groupStable:
		if g.selectProtocolLocked() == g.mu.protocol {
			if err := g.persistLocked(now); err != nil {
				// Revert, as Kafka does when the write fails.
				delete(g.mu.members, id)
				m.id = oldID
				m.protocols, m.sessionTimeout, m.rebalanceTimeout = oldProtocols, oldSession, oldRebalance
				g.mu.members[oldID] = m
				g.mu.static[*req.InstanceID] = oldID
				g.mu.leader = oldLeader
				JoinError(resp, kerr.NotCoordinator.Code, "")
				return nil
			}
			g.fillJoinLocked(resp, m)
			isLeader := id == g.mu.leader
			if req.Version >= 9 {
				// KIP-814: the leader keeps the current assignment
				// instead of running its assignor.
				resp.SkipAssignment = isLeader
			} else {
				resp.Members = nil
				resp.LeaderID = oldLeader
			}
			return nil
		}
		m.joinWait = make(chan *kmsg.JoinGroupResponse, 1)
		ch := m.joinWait
		g.prepareRebalanceLocked(now, st)
		return ch
	case groupCompletingRebalance:
		// The leader may have been given the old id to assign to: start
		// over so the new id gets an assignment.
		m.joinWait = make(chan *kmsg.JoinGroupResponse, 1)
		ch := m.joinWait
		g.prepareRebalanceLocked(now, st)
		return ch
	default: // PreparingRebalance
		m.joinWait = make(chan *kmsg.JoinGroupResponse, 1)
		ch := m.joinWait
		g.maybeCompleteJoinLocked(now)
		return ch
	}
}

// fillJoinLocked fills a successful JoinGroup answer for m with the
// current generation; the leader gets every member's metadata.
func (g *Group) fillJoinLocked(resp *kmsg.JoinGroupResponse, m *groupMember) {
	resp.ErrorCode = 0
	resp.Generation = g.mu.generation
	pt, p := g.mu.protocolType, g.mu.protocol
	resp.ProtocolType, resp.Protocol = &pt, &p
	resp.LeaderID = g.mu.leader
	resp.MemberID = m.id
	resp.Members = nil
	if m.id == g.mu.leader {
		for _, o := range g.sortedMembersLocked() {
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID = o.id
			jm.InstanceID = o.instanceID
			jm.ProtocolMetadata = o.metadataFor(g.mu.protocol)
			resp.Members = append(resp.Members, jm)
		}
	}
}

// maybeRebalanceLocked starts a rebalance if the group is not already in
// one, else tries to complete the join phase.
func (g *Group) maybeRebalanceLocked(now time.Time, st groupSettings) {
	switch g.mu.state {
	case groupEmpty, groupStable, groupCompletingRebalance:
		g.prepareRebalanceLocked(now, st)
	case groupPreparingRebalance:
		g.maybeCompleteJoinLocked(now)
	}
}

// maxRebalanceTimeoutLocked is the longest rebalance timeout of the
// members: how long the join phase may take.
func (g *Group) maxRebalanceTimeoutLocked() time.Duration {
	var d time.Duration
	for _, m := range g.mu.members {
		if m.rebalanceTimeout > d {
			d = m.rebalanceTimeout
		}
	}
	return d
}

// prepareRebalanceLocked enters PreparingRebalance: members in sync are
// told REBALANCE_IN_PROGRESS, and the join phase lasts until every member
// rejoined or the longest rebalance timeout passed. The first rebalance
// of an empty group waits group.initial.rebalance.delay.ms for more
// members (Kafka's initial delayed join).
func (g *Group) prepareRebalanceLocked(now time.Time, st groupSettings) {
	if g.mu.state == groupCompletingRebalance {
		for _, m := range g.mu.members {
			m.assignment = nil
			g.answerSyncErrLocked(m, kerr.RebalanceInProgress.Code)
		}
	}
	g.mu.awaitingSync, g.mu.syncDeadline = nil, time.Time{}
	initial := g.mu.state == groupEmpty
	g.setStateLocked(groupPreparingRebalance, now)
	timeout := g.maxRebalanceTimeoutLocked()
	g.mu.joinDeadline = now.Add(timeout)
	g.mu.initialJoin = initial
	g.mu.delayUntil = time.Time{}
	if initial {
		delay := st.initialRebalanceDelay
		if delay > timeout {
			delay = timeout
		}
		g.mu.delayUntil = now.Add(delay)
	}
	g.maybeCompleteJoinLocked(now)
}

func (g *Group) setStateLocked(s groupState, now time.Time) {
	g.mu.state = s
	g.mu.stateTime = now
}

// allJoinedLocked: every member has a JoinGroup parked and no member id
// handed out with MEMBER_ID_REQUIRED is still unused.
func (g *Group) allJoinedLocked() bool {
	if len(g.mu.pending) > 0 {
		return false
	}
	for _, m := range g.mu.members {
		if m.joinWait == nil {
			return false
		}
	}
	return true
}

func (g *Group) maybeCompleteJoinLocked(now time.Time) {
	if g.mu.state != groupPreparingRebalance {
		return
	}
	// The first rebalance of an empty group ends with its initial delay,
	// whatever member ids handed out with MEMBER_ID_REQUIRED are still
	// unused, as Kafka's initial delayed join does: a member whose
	// MEMBER_ID_REQUIRED answer was lost retries without the id, and the
	// lost id would otherwise hold the join until the rebalance timeout.
	// Later rebalances wait for every member and pending id (Kafka's
	// hasAllMembersJoined), or the rebalance timeout.
	delayed := !now.Before(g.mu.delayUntil)
	if !now.Before(g.mu.joinDeadline) || (delayed && g.mu.initialJoin) || (delayed && g.allJoinedLocked()) {
		g.completeJoinLocked(now)
	}
}

// completeJoinLocked ends the join phase: dynamic members that did not
// rejoin are removed, the generation advances, a protocol is chosen and
// every parked JoinGroup is answered (the leader with all members'
// metadata). A group left without members becomes Empty.
func (g *Group) completeJoinLocked(now time.Time) {
	for _, m := range g.mu.members {
		if m.joinWait == nil && m.instanceID == nil {
			g.removeMemberLocked(m, kerr.UnknownMemberID.Code)
		}
	}
	joined := false
	for _, m := range g.mu.members {
		if m.joinWait != nil {
			joined = true
			break
		}
	}
	if !joined && len(g.mu.members) > 0 {
		// Only static members that have not rejoined: wait another
		// round; their sessions remove them if they are gone.
		g.mu.joinDeadline = now.Add(g.maxRebalanceTimeoutLocked())
		return
	}
	if l := g.mu.members[g.mu.leader]; l == nil || l.joinWait == nil {
		g.mu.leader = ""
		for _, m := range g.sortedMembersLocked() {
			if m.joinWait != nil {
				g.mu.leader = m.id
				break
			}
		}
	}
	g.mu.generation++
	if g.mu.generation < 0 {
		g.mu.generation = 1
	}
	g.mu.joinDeadline, g.mu.delayUntil, g.mu.initialJoin = time.Time{}, time.Time{}, false
	if len(g.mu.members) == 0 {
		g.setStateLocked(groupEmpty, now)
		g.mu.protocol, g.mu.leader = "", ""
		if err := g.persistLocked(now); err != nil {
			// As in Kafka: an empty generation that is lost is harmless;
			// a restart brings back the previous generation, whose
			// members are gone and time out.
			g.c.lg.Warn("persisting empty group failed", zap.String("group", g.name), zap.Error(err))
		}
		return
	}
	g.mu.protocol = g.selectProtocolLocked()
	g.setStateLocked(groupCompletingRebalance, now)
	g.mu.awaitingSync = make(map[string]struct{}, len(g.mu.members))
	g.mu.syncDeadline = now.Add(g.maxRebalanceTimeoutLocked())
	for _, m := range g.mu.members {
		g.mu.awaitingSync[m.id] = struct{}{}
		if m.joinWait == nil {
			continue
		}
		resp := kmsg.NewPtrJoinGroupResponse()
		g.fillJoinLocked(resp, m)
		m.joinWait <- resp
		m.joinWait = nil
		m.lastHeartbeat = now
	}
	g.c.lg.Debug("join phase complete", zap.String("group", g.name), zap.Int32("generation", g.mu.generation),
		zap.Int("members", len(g.mu.members)), zap.String("protocol", g.mu.protocol))
}

// selectProtocolLocked chooses the group protocol: among the protocols
// every member supports, each member votes for the first in its own
// order of preference; most votes wins, ties go to the lexically first.
func (g *Group) selectProtocolLocked() string {
	votes := map[string]int{}
	for _, m := range g.mu.members {
		for _, p := range m.protocols {
			if g.protocolSupportLocked(p.Name) == len(g.mu.members) {
				votes[p.Name]++
				break
			}
		}
	}
	best, n := "", -1
	for p, v := range votes {
		if v > n || v == n && p < best {
			best, n = p, v
		}
	}
	return best
}

// removeMemberLocked removes m, answering any parked request with code.
func (g *Group) removeMemberLocked(m *groupMember, code int16) {
	g.answerJoinErrLocked(m, code)
	g.answerSyncErrLocked(m, code)
	delete(g.mu.members, m.id)
	delete(g.mu.awaitingSync, m.id)
	if m.instanceID != nil && g.mu.static[*m.instanceID] == m.id {
		delete(g.mu.static, *m.instanceID)
	}
	if g.mu.leader == m.id {
		g.mu.leader = ""
		if ms := g.sortedMembersLocked(); len(ms) > 0 {
			g.mu.leader = ms[0].id
		}
	}
}

func (g *Group) answerJoinErrLocked(m *groupMember, code int16) {
	if m.joinWait == nil {
		return
	}
	resp := kmsg.NewPtrJoinGroupResponse()
	memberID := m.id
	if code == kerr.UnknownMemberID.Code {
		memberID = ""
	}
	JoinError(resp, code, memberID)
	m.joinWait <- resp
	m.joinWait = nil
}

func (g *Group) answerSyncErrLocked(m *groupMember, code int16) {
	if m.syncWait == nil {
		return
	}
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.ErrorCode = code
	m.syncWait <- resp
	m.syncWait = nil
}

// tickLocked does whatever is due at now: expire unused member ids and
// members whose session ran out, end the join phase, and remove members
// that did not sync in time.
func (g *Group) tickLocked(now time.Time) {
	st := g.c.settings()
	for id, exp := range g.mu.pending {
		if !now.Before(exp) {
			delete(g.mu.pending, id)
		}
	}
	expired := false
	for _, m := range g.mu.members {
		// A member parked in JoinGroup or SyncGroup is alive by
		// definition; the rebalance timeout bounds the wait instead.
		if m.joinWait == nil && m.syncWait == nil && !now.Before(m.lastHeartbeat.Add(m.sessionTimeout)) {
			g.c.lg.Info("member session expired", zap.String("group", g.name), zap.String("member", m.id))
			g.removeMemberLocked(m, kerr.UnknownMemberID.Code)
			expired = true
		}
	}
	switch g.mu.state {
	case groupCompletingRebalance, groupStable:
		if len(g.mu.awaitingSync) > 0 && !now.Before(g.mu.syncDeadline) {
			for id := range g.mu.awaitingSync {
				if m := g.mu.members[id]; m != nil {
					g.c.lg.Info("member did not sync in time", zap.String("group", g.name), zap.String("member", id))
					g.removeMemberLocked(m, kerr.UnknownMemberID.Code)
				}
			}
			expired = true
		}
		if expired {
			g.prepareRebalanceLocked(now, st)
		}
	case groupPreparingRebalance:
		g.maybeCompleteJoinLocked(now)
	}
}

// Sync handles a SyncGroup: it fills resp and returns nil, or returns the
// channel the answer arrives on once the leader's assignment is stored.
func (c *Coordinator) Sync(req *kmsg.SyncGroupRequest, resp *kmsg.SyncGroupResponse) chan *kmsg.SyncGroupResponse {
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return nil
	}
	g := c.lockGroup(req.Group, false)
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return nil
	}
	now := time.Now()
	defer g.unlock(now)
	if g.mu.state == groupEmpty {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return nil
	}
	if code := g.validateMemberLocked(req.MemberID, req.InstanceID); code != 0 {
		resp.ErrorCode = code
		return nil
	}
	if req.Generation != g.mu.generation {
		resp.ErrorCode = kerr.IllegalGeneration.Code
		return nil
	}
	if req.ProtocolType != nil && *req.ProtocolType != g.mu.protocolType ||
		req.Protocol != nil && *req.Protocol != g.mu.protocol {
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return nil
	}
	m := g.mu.members[req.MemberID]
	switch g.mu.state {
	case groupPreparingRebalance:
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return nil
	case groupStable:
		delete(g.mu.awaitingSync, m.id)
		g.fillSyncLocked(resp, m)
		m.lastHeartbeat = now
		return nil
	}
	// CompletingRebalance: wait for the leader's assignment.
	delete(g.mu.awaitingSync, m.id)
	g.answerSyncErrLocked(m, kerr.RebalanceInProgress.Code) // a stale duplicate sync
	m.syncWait = make(chan *kmsg.SyncGroupResponse, 1)
	ch := m.syncWait
	if m.id != g.mu.leader {
		return ch
	}
	assigned := make(map[string][]byte, len(req.GroupAssignment))
	for _, a := range req.GroupAssignment {
		assigned[a.MemberID] = append([]byte(nil), a.MemberAssignment...)
	}
	for _, o := range g.mu.members {
		o.assignment = assigned[o.id] // absent: an empty assignment, as Kafka sends
		if o.assignment == nil {
			o.assignment = []byte{}
		}
	}
	if err := g.persistLocked(now); err != nil {
		g.c.lg.Error("persisting group assignment failed", zap.String("group", g.name), zap.Error(err))
		for _, o := range g.mu.members {
			o.assignment = nil
			g.answerSyncErrLocked(o, kerr.NotCoordinator.Code)
		}
		g.prepareRebalanceLocked(now, c.settings())
		return ch
	}
	g.setStateLocked(groupStable, now)
	for _, o := range g.mu.members {
		if o.syncWait == nil {
			continue
		}
		r := kmsg.NewPtrSyncGroupResponse()
		g.fillSyncLocked(r, o)
		o.syncWait <- r
		o.syncWait = nil
		o.lastHeartbeat = now
	}
	return ch
}

func (g *Group) fillSyncLocked(resp *kmsg.SyncGroupResponse, m *groupMember) {
	resp.ErrorCode = 0
	pt, p := g.mu.protocolType, g.mu.protocol
	resp.ProtocolType, resp.Protocol = &pt, &p
	resp.MemberAssignment = m.assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
}

// Heartbeat handles a Heartbeat and returns its error code.
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	g := c.lockGroup(req.Group, false)
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	now := time.Now()
	defer g.unlock(now)
	if code := g.validateMemberLocked(req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	if req.Generation != g.mu.generation {
		return kerr.IllegalGeneration.Code
	}
	m := g.mu.members[req.MemberID]
	switch g.mu.state {
	case groupPreparingRebalance:
		m.lastHeartbeat = now
		return kerr.RebalanceInProgress.Code
	case groupCompletingRebalance, groupStable:
		m.lastHeartbeat = now
		return 0
	default:
		return kerr.UnknownMemberID.Code
	}
}

// Leave handles a LeaveGroup: members (by member id, or by instance id
// for static members) are removed and the group rebalances. It returns a
// group-level error code and fills one entry per member.
func (c *Coordinator) Leave(group string, members []kmsg.LeaveGroupRequestMember) (int16, []kmsg.LeaveGroupResponseMember) {
	out := make([]kmsg.LeaveGroupResponseMember, len(members))
	for i, rm := range members {
		out[i] = kmsg.NewLeaveGroupResponseMember()
		out[i].MemberID, out[i].InstanceID = rm.MemberID, rm.InstanceID
	}
	if group == "" {
		return kerr.InvalidGroupID.Code, nil
	}
	g := c.lockGroup(group, false)
	if g == nil {
		for i := range out {
			out[i].ErrorCode = kerr.UnknownMemberID.Code
		}
		return 0, out
	}
	now := time.Now()
	defer g.unlock(now)
	removed := false
	for i, rm := range members {
		switch {
		case rm.MemberID == "":
			// Administrative removal of a static member by instance id.
			id, ok := "", false
			if rm.InstanceID != nil {
				id, ok = g.mu.static[*rm.InstanceID]
			}
			if m := g.mu.members[id]; ok && m != nil {
				g.removeMemberLocked(m, kerr.UnknownMemberID.Code)
				removed = true
			} else {
				out[i].ErrorCode = kerr.UnknownMemberID.Code
			}
		case hasKey(g.mu.pending, rm.MemberID):
			delete(g.mu.pending, rm.MemberID)
			removed = true // may complete a join phase waiting on it
		default:
			if code := g.validateMemberLocked(rm.MemberID, rm.InstanceID); code != 0 {
				out[i].ErrorCode = code
				continue
			}
			g.removeMemberLocked(g.mu.members[rm.MemberID], kerr.UnknownMemberID.Code)
			removed = true
		}
	}
	if removed {
		g.maybeRebalanceAfterLeaveLocked(now)
	}
	return 0, out
}

func (g *Group) maybeRebalanceAfterLeaveLocked(now time.Time) {
	switch g.mu.state {
	case groupStable, groupCompletingRebalance:
		g.prepareRebalanceLocked(now, g.c.settings())
	case groupPreparingRebalance:
		g.maybeCompleteJoinLocked(now)
	}
}

func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}
