package integration

// Lost answers of consumer-group requests. Each test scripts a group with
// raw requests through the fault proxy, has the proxy lose the answer to
// one request (the broker handles it; the answer is dropped and the
// connection closed before the client reads any of it), retries the
// request on a new connection as a client does, and checks the answer and
// the group against what Kafka's group coordinator does
// (group-coordinator/.../GroupMetadataManager.java in apache/kafka).
//
// Members ask for session and rebalance timeouts of 30 s (KIP-848
// sessions are 45 s), so no session, join phase or revocation runs out
// during a test: what a test waits for comes from the group's rules, not
// from a timer, except where a test says so.

import (
	"errors"
	"net"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/integration/faultproxy"
)

const (
	lgSession   = 30000 // classic session timeout, ms
	lgRebalance = 30000 // classic and KIP-848 rebalance timeout, ms
	lgWait      = 10 * time.Second
	lgGroup     = "lost-group"
	lgNewest    = int16(0x7fff) // lgSend: the highest version both sides know
)

// lgEnv is one test's broker; every group request goes through the proxy.
type lgEnv struct {
	t     *testing.T
	proxy *faultproxy.Proxy
	b     *testBroker
	topic string
	adm   *kadm.Client
	desc  *rawConn // for DescribeGroups and ConsumerGroupDescribe, never faulted
}

func newLostGroups(t *testing.T, partitions int32) *lgEnv {
	t.Helper()
	proxy, b, topic, ctx := proxiedBroker(t, partitions)
	adm := b.admin(t)
	noRebalanceDelay(ctx, t, adm)
	e := &lgEnv{t: t, proxy: proxy, b: b, topic: topic, adm: adm}
	e.desc = e.dial()
	return e
}

func (e *lgEnv) dial() *rawConn { return dialRaw(e.t, e.proxy.Addr()) }

// setBrokerConfig sets a dynamic broker config.
func (e *lgEnv) setBrokerConfig(name, value string) {
	e.t.Helper()
	res, err := e.adm.AlterBrokerConfigs(testContext(e.t), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: strp(value)}})
	require.NoError(e.t, err)
	for _, r := range res {
		require.NoError(e.t, r.Err, r.ErrMessage)
	}
}

// lgCall is a request written whose answer is read later.
type lgCall struct {
	c    *rawConn
	req  kmsg.Request
	corr int32
}

// lgSend writes req on c at the highest version both sides know, at most
// maxVersion, and does not wait for the answer.
func lgSend(c *rawConn, req kmsg.Request, maxVersion int16) lgCall {
	c.t.Helper()
	c.pick(req)
	if req.GetVersion() > maxVersion {
		req.SetVersion(maxVersion)
	}
	c.corr++
	c.writeRaw(c.fmtr.AppendRequest(nil, req, c.corr))
	return lgCall{c: c, req: req, corr: c.corr}
}

func (p lgCall) answerWithin(d time.Duration) kmsg.Response {
	p.c.t.Helper()
	got, resp, err := p.c.readResponse(p.req, d)
	require.NoError(p.c.t, err, "%s v%d", kmsg.NameForKey(p.req.Key()), p.req.GetVersion())
	require.Equal(p.c.t, p.corr, got, "correlation id of %s response", kmsg.NameForKey(p.req.Key()))
	return resp
}

func (p lgCall) answer() kmsg.Response {
	p.c.t.Helper()
	return p.answerWithin(lgWait)
}

// lost waits for the proxy to close the connection with no answer.
func (p lgCall) lost() {
	p.c.t.Helper()
	_, resp, err := p.c.readResponse(p.req, lgWait)
	require.Error(p.c.t, err, "an answer (%+v) reached the client; the proxy was to lose it", resp)
	var ne net.Error
	require.False(p.c.t, errors.As(err, &ne) && ne.Timeout(), "no answer, but the connection is still open after %v", lgWait)
}

// lose sends req, at most at maxVersion, on a new connection with its
// answer lost, and returns once the proxy has closed that connection.
func (e *lgEnv) lose(req kmsg.Request, maxVersion int16) {
	e.t.Helper()
	e.proxy.Next(req.Key(), faultproxy.LoseResponse, 0)
	lgSend(e.dial(), req, maxVersion).lost()
	require.Zero(e.t, e.proxy.Pending(), "the lost answer landed")
}

// ---- classic groups ----

// lgMember is one classic member and its connection.
type lgMember struct {
	c        *rawConn
	id       string
	instance *string
	gen      int32
}

func lgAssignment(memberID string) []byte { return []byte("assignment of " + memberID) }

func (e *lgEnv) joinReq(memberID string, instance *string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.InstanceID = lgGroup, memberID, instance
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = lgSession, lgRebalance
	req.ProtocolType = "consumer"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{e.topic}
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	return req
}

func (e *lgEnv) join(c *rawConn, memberID string, instance *string) *kmsg.JoinGroupResponse {
	e.t.Helper()
	return lgSend(c, e.joinReq(memberID, instance), lgNewest).answer().(*kmsg.JoinGroupResponse)
}

func lgSyncReq(m *lgMember, gen int32, assign map[string][]byte) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation, req.InstanceID = lgGroup, m.id, gen, m.instance
	ids := make([]string, 0, len(assign))
	for id := range assign {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: assign[id]})
	}
	return req
}

func (e *lgEnv) sync(c *rawConn, m *lgMember, gen int32, assign map[string][]byte) *kmsg.SyncGroupResponse {
	e.t.Helper()
	return lgSend(c, lgSyncReq(m, gen, assign), lgNewest).answer().(*kmsg.SyncGroupResponse)
}

func lgHeartbeatReq(memberID string, instance *string, gen int32) *kmsg.HeartbeatRequest {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.InstanceID, req.Generation = lgGroup, memberID, instance, gen
	return req
}

func (e *lgEnv) heartbeat(c *rawConn, memberID string, instance *string, gen int32) int16 {
	e.t.Helper()
	return lgSend(c, lgHeartbeatReq(memberID, instance, gen), lgNewest).answer().(*kmsg.HeartbeatResponse).ErrorCode
}

func (e *lgEnv) requireHeartbeat(c *rawConn, m *lgMember, gen int32, want int16) {
	e.t.Helper()
	code := e.heartbeat(c, m.id, m.instance, gen)
	require.Equal(e.t, codeName(want), codeName(code), "heartbeat of %s at generation %d", m.id, gen)
}

// lgLeaveReq names one member; before v3 only its member id is sent.
func lgLeaveReq(memberID string, instance *string) *kmsg.LeaveGroupRequest {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = lgGroup, memberID
	req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: memberID, InstanceID: instance}}
	return req
}

func (e *lgEnv) describe() kmsg.DescribeGroupsResponseGroup {
	e.t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{lgGroup}
	resp := e.desc.roundTrip(req).(*kmsg.DescribeGroupsResponse)
	require.Len(e.t, resp.Groups, 1)
	require.Zero(e.t, resp.Groups[0].ErrorCode, codeName(resp.Groups[0].ErrorCode))
	return resp.Groups[0]
}

func (e *lgEnv) waitState(state string) {
	e.t.Helper()
	waitUntil(e.t, "group "+state, func() bool { return e.describe().State == state })
}

// requireMembers checks the group's state and members (member id →
// instance id, "" for a dynamic member).
func (e *lgEnv) requireMembers(state string, want map[string]string) kmsg.DescribeGroupsResponseGroup {
	e.t.Helper()
	g := e.describe()
	require.Equal(e.t, state, g.State)
	got := map[string]string{}
	for _, m := range g.Members {
		got[m.MemberID] = ""
		if m.InstanceID != nil {
			got[m.MemberID] = *m.InstanceID
		}
	}
	require.Equal(e.t, want, got, "members of the group")
	return g
}

func lgJoinedMembers(r *kmsg.JoinGroupResponse) map[string]string {
	out := map[string]string{}
	for _, m := range r.Members {
		out[m.MemberID] = ""
		if m.InstanceID != nil {
			out[m.MemberID] = *m.InstanceID
		}
	}
	return out
}

func lgRequireJoined(t *testing.T, r *kmsg.JoinGroupResponse) {
	t.Helper()
	require.Equal(t, "NONE", codeName(r.ErrorCode), "JoinGroup error")
	require.NotNil(t, r.Protocol)
	require.Equal(t, "range", *r.Protocol)
}

// joined forms a group through its join phase, members joining in order,
// each on its own connection; the first is the leader. instances[i]
// non-nil makes member i static. The group is left CompletingRebalance.
func (e *lgEnv) joined(instances ...*string) []*lgMember {
	e.t.Helper()
	var ms []*lgMember
	for i, inst := range instances {
		m := &lgMember{c: e.dial(), instance: inst}
		call := lgSend(m.c, e.joinReq("", inst), lgNewest)
		if inst == nil {
			r := call.answer().(*kmsg.JoinGroupResponse)
			require.Equal(e.t, codeName(kerr.MemberIDRequired.Code), codeName(r.ErrorCode))
			m.id = r.MemberID
			call = lgSend(m.c, e.joinReq(m.id, nil), lgNewest)
		}
		joining := []*lgMember{m}
		calls := []lgCall{call}
		if i > 0 {
			// Everyone else rejoins once m's join has started the
			// rebalance (a follower rejoining in Stable would just get
			// the current generation back).
			e.waitState("PreparingRebalance")
			for _, o := range ms {
				joining = append(joining, o)
				calls = append(calls, lgSend(o.c, e.joinReq(o.id, o.instance), lgNewest))
			}
		}
		ms = append(ms, m)
		for j, call := range calls {
			r := call.answer().(*kmsg.JoinGroupResponse)
			lgRequireJoined(e.t, r)
			joining[j].id, joining[j].gen = r.MemberID, r.Generation
			require.Equal(e.t, ms[0].id, r.LeaderID, "the first member stays the leader")
		}
	}
	for _, m := range ms {
		require.Equal(e.t, ms[0].gen, m.gen)
	}
	return ms
}

// syncAll completes the sync phase: followers wait, then the leader
// assigns lgAssignment(id) to every member.
func (e *lgEnv) syncAll(ms []*lgMember) {
	e.t.Helper()
	assign := map[string][]byte{}
	for _, m := range ms {
		assign[m.id] = lgAssignment(m.id)
	}
	var calls []lgCall
	for _, m := range ms[1:] {
		calls = append(calls, lgSend(m.c, lgSyncReq(m, m.gen, nil), lgNewest))
	}
	r := e.sync(ms[0].c, ms[0], ms[0].gen, assign)
	require.Equal(e.t, "NONE", codeName(r.ErrorCode))
	require.Equal(e.t, lgAssignment(ms[0].id), r.MemberAssignment)
	for i, call := range calls {
		r := call.answer().(*kmsg.SyncGroupResponse)
		require.Equal(e.t, "NONE", codeName(r.ErrorCode))
		require.Equal(e.t, lgAssignment(ms[i+1].id), r.MemberAssignment)
	}
}

// stable forms a Stable group (see joined).
func (e *lgEnv) stable(instances ...*string) []*lgMember {
	e.t.Helper()
	ms := e.joined(instances...)
	e.syncAll(ms)
	e.waitState("Stable")
	return ms
}

func lgMembers(ms ...*lgMember) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		out[m.id] = ""
		if m.instance != nil {
			out[m.id] = *m.instance
		}
	}
	return out
}

// TestLostGroupsJoinMemberIDRequired: a new dynamic member's first
// JoinGroup (empty member id, v9) is answered MEMBER_ID_REQUIRED with a
// member id, and that answer is lost. The client never saw the id, so it
// joins again with an empty member id, gets a second id and joins with
// it; the first id stays pending (KIP-394) until its session timeout. In
// Kafka the first rebalance of an empty group ends when
// group.initial.rebalance.delay.ms (0 here) has passed, whatever ids are
// still pending (GroupMetadataManager.tryCompleteInitialRebalanceElseSchedule
// completes the join without looking at hasAllMembersJoined), so the
// member gets generation 1 at once and the lost id never becomes a member.
//
// Shoal used to end the initial join phase only once no pending id was
// left, so this join waited for the rebalance timeout.
func TestLostGroupsJoinMemberIDRequired(t *testing.T) {
	t.Parallel()
	e := newLostGroups(t, 1)
	e.lose(e.joinReq("", nil), lgNewest)

	c := e.dial()
	r := e.join(c, "", nil)
	require.Equal(t, codeName(kerr.MemberIDRequired.Code), codeName(r.ErrorCode))
	m := &lgMember{c: c, id: r.MemberID}
	r = lgSend(c, e.joinReq(m.id, nil), lgNewest).answerWithin(5 * time.Second).(*kmsg.JoinGroupResponse)
	lgRequireJoined(t, r)
	require.Equal(t, int32(1), r.Generation)
	require.Equal(t, m.id, r.MemberID)
	require.Equal(t, m.id, r.LeaderID)
	require.Equal(t, lgMembers(m), lgJoinedMembers(r))
	e.requireMembers("CompletingRebalance", lgMembers(m))
	m.gen = r.Generation
	e.syncAll([]*lgMember{m})
	e.requireMembers("Stable", lgMembers(m))
}

// TestLostGroupsJoinFirst: a new dynamic member gets its member id
// (MEMBER_ID_REQUIRED) and joins with it; that join completes the first
// rebalance at once (generation 1, the member leads) and its answer is
// lost. The retry with the same member id finds the group in
// CompletingRebalance with the member's protocols unchanged, and Kafka
// answers it with the current generation, leader and member list again
// (classicGroupJoinExistingMember, "it failed to receive the initial
// JoinGroup response"): no new generation, no other member.
func TestLostGroupsJoinFirst(t *testing.T) {
	t.Parallel()
	e := newLostGroups(t, 1)
	c := e.dial()
	r := e.join(c, "", nil)
	require.Equal(t, codeName(kerr.MemberIDRequired.Code), codeName(r.ErrorCode))
	m := &lgMember{c: c, id: r.MemberID}
	e.lose(e.joinReq(m.id, nil), lgNewest)
	e.requireMembers("CompletingRebalance", lgMembers(m))

	m.c = e.dial()
	r = e.join(m.c, m.id, nil)
	lgRequireJoined(t, r)
	require.Equal(t, int32(1), r.Generation, "the same generation")
	require.Equal(t, m.id, r.MemberID)
	require.Equal(t, m.id, r.LeaderID)
	require.Equal(t, lgMembers(m), lgJoinedMembers(r))
	e.requireMembers("CompletingRebalance", lgMembers(m))

	m.gen = r.Generation
	e.syncAll([]*lgMember{m})
	e.requireHeartbeat(m.c, m, 1, 0)
	g := e.requireMembers("Stable", lgMembers(m))
	require.Equal(t, lgAssignment(m.id), g.Members[0].MemberAssignment)
}

// TestLostGroupsJoinLeaderRejoin: in a Stable group of A (leader) and B,
// A rejoins with unchanged protocols, which in Kafka forces a rebalance
// (a leader's JoinGroup in Stable always does). B learns of it from its
// heartbeat and rejoins; the join phase completes at the next generation
// and A's answer is lost. A's retry finds the group CompletingRebalance
// with its protocols unchanged and gets that generation again, with the
// member list it needs as leader; nothing rebalances again, and both
// members sync and heartbeat at that generation.
func TestLostGroupsJoinLeaderRejoin(t *testing.T) {
	t.Parallel()
	e := newLostGroups(t, 1)
	ms := e.stable(nil, nil)
	a, b := ms[0], ms[1]
	gen := a.gen

	e.proxy.Next(11, faultproxy.LoseResponse, 0)
	rejoin := lgSend(a.c, e.joinReq(a.id, nil), lgNewest)
	e.waitState("PreparingRebalance")
	require.Zero(t, e.proxy.Pending())
	e.requireHeartbeat(b.c, b, gen, kerr.RebalanceInProgress.Code)
	rb := e.join(b.c, b.id, nil)
	lgRequireJoined(t, rb)
	require.Equal(t, gen+1, rb.Generation)
	require.Equal(t, a.id, rb.LeaderID)
	rejoin.lost()

	a.c = e.dial()
	ra := e.join(a.c, a.id, nil)
	lgRequireJoined(t, ra)
	require.Equal(t, gen+1, ra.Generation, "the generation the lost answer carried")
	require.Equal(t, a.id, ra.LeaderID)
	require.Equal(t, lgMembers(a, b), lgJoinedMembers(ra), "the leader gets every member again")
	e.requireMembers("CompletingRebalance", lgMembers(a, b))

	a.gen, b.gen = gen+1, gen+1
	e.syncAll([]*lgMember{a, b})
	e.requireHeartbeat(a.c, a, gen+1, 0)
	e.requireHeartbeat(b.c, b, gen+1, 0)
	e.requireMembers("Stable", lgMembers(a, b))
}

// TestLostGroupsJoinFollowerRejoin: in a Stable group of A (leader) and
// B, B rejoins with unchanged protocols. Kafka answers a follower's such
// join at once with the current generation and no rebalance; the answer
// is lost, and the retry gets the same answer. A keeps heartbeating at
// that generation without being asked to rejoin, and B's SyncGroup gets
// its assignment back.
func TestLostGroupsJoinFollowerRejoin(t *testing.T) {
	t.Parallel()
	e := newLostGroups(t, 1)
	ms := e.stable(nil, nil)
	a, b := ms[0], ms[1]
	gen := a.gen

	e.lose(e.joinReq(b.id, nil), lgNewest)
	e.requireMembers("Stable", lgMembers(a, b))
	b.c = e.dial()
	r := e.join(b.c, b.id, nil)
	lgRequireJoined(t, r)
	require.Equal(t, gen, r.Generation)
	require.Equal(t, a.id, r.LeaderID)
	require.Empty(t, r.Members, "a follower gets no member list")
	e.requireHeartbeat(a.c, a, gen, 0)
	sr := e.sync(b.c, b, gen, nil)
	require.Equal(t, "NONE", codeName(sr.ErrorCode))
	require.Equal(t, lgAssignment(b.id), sr.MemberAssignment)
	e.requireMembers("Stable", lgMembers(a, b))
}

// TestLostGroupsJoinStaticFirst: a static member (group.instance.id)
// joins an empty group with an empty member id. Kafka adds it at once
// (no MEMBER_ID_REQUIRED for static members) and the first rebalance
// completes at generation 1; that answer is lost. The client never saw
// its member id and joins again with an empty one: the instance id is
// known, so Kafka gives it a new member id in the old one's place and
// fences the old id; the group being CompletingRebalance, the leader may
// have been given the old id, so Kafka rebalances
// (updateStaticMemberThenRebalanceOrCompleteJoin): generation 2, the
// only extra rebalance. The group holds one member, the new id.
func TestLostGroupsJoinStaticFirst(t *testing.T) {
	t.Parallel()
	e := newLostGroups(t, 1)
	inst := "instance-a"
	e.lose(e.joinReq("", &inst), lgNewest)
	g := e.describe()
	require.Equal(t, "CompletingRebalance", g.State)
	require.Len(t, g.Members, 1)
	ghost := &lgMember{c: e.dial(), id: g.Members[0].MemberID, instance: &inst}
	e.requireMembers("CompletingRebalance", lgMembers(ghost))

	m := &lgMember{c: e.dial(), instance: &inst}
	r := e.join(m.c, "", &inst)
	lgRequireJoined(t, r)
	m.id, m.gen = r.MemberID, r.Generation
	require.NotEqual(t, ghost.id, m.id, "a new member id")
	require.Equal(t, int32(2), r.Generation, "one rebalance for the replaced member id")
	require.Equal(t, m.id, r.LeaderID)
	require.Equal(t, lgMembers(m), lgJoinedMembers(r))
	e.requireMembers("CompletingRebalance", lgMembers(m))
	e.requireHeartbeat(ghost.c, ghost, 1, kerr.FencedInstanceID.Code)

	e.syncAll([]*lgMember{m})
	e.requireHeartbeat(m.c, m, 2, 0)
	e.requireMembers("Stable", lgMembers(m))
}

// TestLostGroupsJoinStaticRestart: a Stable group of A (static, leader)
// and B. A restarts: it joins with an empty member id and its instance
// id. Kafka gives it a new member id in the old one's place, fences the
// old id and, the selected protocol being unchanged, does not rebalance:
// the answer carries the current generation and, from v9, SkipAssignment
// for the leader (KIP-814). That answer is lost, and the retry does the
// same again: a third member id, the same generation, still no
// rebalance (B heartbeats without being asked to rejoin). Both older ids
// are fenced, the group holds A's newest id and B, and A's SyncGroup
// gets the assignment its instance had.
func TestLostGroupsJoinStaticRestart(t *testing.T) {
	t.Parallel()
	e := newLostGroups(t, 1)
	inst := "instance-a"
	ms := e.stable(&inst, nil)
	a, b := ms[0], ms[1]
	gen := a.gen

	e.lose(e.joinReq("", &inst), lgNewest)
	g := e.describe()
	require.Equal(t, "Stable", g.State)
	var lostID string
	for _, m := range g.Members {
		if m.MemberID != b.id {
			lostID = m.MemberID
		}
	}
	require.NotEmpty(t, lostID)
	require.NotEqual(t, a.id, lostID)
	lostA := &lgMember{id: lostID, instance: &inst}
	e.requireMembers("Stable", lgMembers(lostA, b))

	a2 := &lgMember{c: e.dial(), instance: &inst}
	r := e.join(a2.c, "", &inst)
	lgRequireJoined(t, r)
	a2.id = r.MemberID
	require.NotContains(t, []string{a.id, lostID}, a2.id, "a new member id")
	require.Equal(t, gen, r.Generation, "no rebalance")
	require.Equal(t, a2.id, r.LeaderID, "the new id leads in the old one's place")
	require.True(t, r.SkipAssignment, "the leader keeps the current assignment (KIP-814)")
	require.Equal(t, lgMembers(a2, b), lgJoinedMembers(r))

	e.requireHeartbeat(b.c, b, gen, 0)
	e.requireHeartbeat(a.c, a, gen, kerr.FencedInstanceID.Code)
	e.requireHeartbeat(a.c, lostA, gen, kerr.FencedInstanceID.Code)
	sr := e.sync(a2.c, a2, gen, nil)
	require.Equal(t, "NONE", codeName(sr.ErrorCode))
	require.Equal(t, lgAssignment(a.id), sr.MemberAssignment, "the instance keeps its assignment")
	e.requireHeartbeat(a2.c, a2, gen, 0)
	e.requireMembers("Stable", lgMembers(a2, b))
}

// TestLostGroupsSync: A (leader) and B have joined; B's SyncGroup waits
// for the leader's, A's carries the assignment, and both answers are
// lost. The group is Stable at that generation, and Kafka answers a
// SyncGroup in Stable with the member's stored assignment: each retry
// gets what the lost answer carried, at the same generation, and the
// heartbeats that follow need no rebalance.
func TestLostGroupsSync(t *testing.T) {
	t.Parallel()
	e := newLostGroups(t, 1)
	ms := e.joined(nil, nil)
	a, b := ms[0], ms[1]
	gen := a.gen
	assign := map[string][]byte{a.id: lgAssignment(a.id), b.id: lgAssignment(b.id)}

	e.proxy.Next(14, faultproxy.LoseResponse, 0)
	e.proxy.Next(14, faultproxy.LoseResponse, 0)
	bs := lgSend(b.c, lgSyncReq(b, gen, nil), lgNewest)
	as := lgSend(a.c, lgSyncReq(a, gen, assign), lgNewest)
	as.lost()
	bs.lost()
	require.Zero(t, e.proxy.Pending())
	e.requireMembers("Stable", lgMembers(a, b))

	a.c, b.c = e.dial(), e.dial()
	ra := e.sync(a.c, a, gen, assign)
	require.Equal(t, "NONE", codeName(ra.ErrorCode))
	require.Equal(t, lgAssignment(a.id), ra.MemberAssignment)
	rb := e.sync(b.c, b, gen, nil)
	require.Equal(t, "NONE", codeName(rb.ErrorCode))
	require.Equal(t, lgAssignment(b.id), rb.MemberAssignment)

	e.requireHeartbeat(a.c, a, gen, 0)
	e.requireHeartbeat(b.c, b, gen, 0)
	g := e.requireMembers("Stable", lgMembers(a, b))
	for _, m := range g.Members {
		require.Equal(t, lgAssignment(m.MemberID), m.MemberAssignment)
	}
}

// TestLostGroupsHeartbeat: in a Stable group of A (dynamic, leader) and S
// (static), each member's heartbeat answer is lost once. A heartbeat only
// refreshes the session; the retry at the same generation gets no error
// in Kafka, and the group stays Stable with both members.
func TestLostGroupsHeartbeat(t *testing.T) {
	t.Parallel()
	e := newLostGroups(t, 1)
	inst := "instance-s"
	ms := e.stable(nil, &inst)
	gen := ms[0].gen
	for _, m := range ms {
		e.lose(lgHeartbeatReq(m.id, m.instance, gen), lgNewest)
		m.c = e.dial()
		e.requireHeartbeat(m.c, m, gen, 0)
	}
	for _, m := range ms {
		e.requireHeartbeat(m.c, m, gen, 0)
	}
	e.requireMembers("Stable", lgMembers(ms...))
}

// TestLostGroupsLeave: in a Stable group of A (leader) and B, B leaves
// and the answer is lost. B is removed at once and the group starts to
// rebalance. Kafka answers the retry as for any unknown member: from v3
// the top-level error is NONE and B's entry has UNKNOWN_MEMBER_ID
// (classicGroupLeaveToClassicGroup); before v3 the member's error is the
// top-level one (LeaveGroupResponse). A static member leaving with its
// instance id gets the same: its instance is no longer known. The retry
// removes nobody, so the group rebalances once: A learns of it from its
// heartbeat, rejoins alone at the next generation, and stays Stable,
// even when the retry comes again after the rebalance.
func TestLostGroupsLeave(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		version int16
		static  bool
	}{
		{"v5", 5, false},
		{"v5-static", 5, true},
		{"v2", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newLostGroups(t, 1)
			var inst *string
			if tc.static {
				inst = strp("instance-b")
			}
			ms := e.stable(nil, inst)
			a, b := ms[0], ms[1]
			gen := a.gen

			e.lose(lgLeaveReq(b.id, b.instance), tc.version)
			e.requireMembers("PreparingRebalance", lgMembers(a))

			retry := func() {
				t.Helper()
				r := lgSend(e.dial(), lgLeaveReq(b.id, b.instance), tc.version).answer().(*kmsg.LeaveGroupResponse)
				require.Equal(t, tc.version, r.GetVersion())
				if tc.version < 3 {
					require.Equal(t, codeName(kerr.UnknownMemberID.Code), codeName(r.ErrorCode))
					return
				}
				require.Equal(t, "NONE", codeName(r.ErrorCode), "top-level error")
				require.Len(t, r.Members, 1)
				require.Equal(t, b.id, r.Members[0].MemberID)
				require.Equal(t, b.instance, r.Members[0].InstanceID)
				require.Equal(t, codeName(kerr.UnknownMemberID.Code), codeName(r.Members[0].ErrorCode))
			}
			retry()
			e.requireMembers("PreparingRebalance", lgMembers(a))

			e.requireHeartbeat(a.c, a, gen, kerr.RebalanceInProgress.Code)
			r := e.join(a.c, a.id, nil)
			lgRequireJoined(t, r)
			require.Equal(t, gen+1, r.Generation, "one rebalance")
			require.Equal(t, a.id, r.LeaderID)
			require.Equal(t, lgMembers(a), lgJoinedMembers(r))
			a.gen = r.Generation
			e.syncAll([]*lgMember{a})

			retry()
			e.requireHeartbeat(a.c, a, gen+1, 0)
			e.requireMembers("Stable", lgMembers(a))
		})
	}
}

// ---- KIP-848 consumer groups ----

// lgHB is one ConsumerGroupHeartbeat. A full request (epoch 0, or full
// set) sends the rebalance timeout, the subscription and the owned
// partitions, as clients do when joining and after any error; a partial
// one sends only the owned partitions (nil: null, not sent).
type lgHB struct {
	member   string
	epoch    int32
	instance *string
	topics   []string
	owned    []kmsg.ConsumerGroupHeartbeatRequestTopic
	full     bool
}

func (h lgHB) req() *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = lgGroup, h.member, h.epoch, h.instance
	req.RebalanceTimeoutMillis = -1
	req.Topics = h.owned
	if h.epoch == 0 || h.full {
		req.RebalanceTimeoutMillis = lgRebalance
		req.SubscribedTopicNames = h.topics
		if req.Topics == nil {
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
	}
	return req
}

func (e *lgEnv) cgHeartbeatAt(c *rawConn, h lgHB, maxVersion int16) *kmsg.ConsumerGroupHeartbeatResponse {
	e.t.Helper()
	return lgSend(c, h.req(), maxVersion).answer().(*kmsg.ConsumerGroupHeartbeatResponse)
}

func (e *lgEnv) cgHeartbeat(c *rawConn, h lgHB) *kmsg.ConsumerGroupHeartbeatResponse {
	e.t.Helper()
	return e.cgHeartbeatAt(c, h, lgNewest)
}

// lgRequireCG checks a heartbeat answer without error at epoch.
func lgRequireCG(t *testing.T, r *kmsg.ConsumerGroupHeartbeatResponse, member string, epoch int32) {
	t.Helper()
	msg := ""
	if r.ErrorMessage != nil {
		msg = *r.ErrorMessage
	}
	require.Equal(t, "NONE", codeName(r.ErrorCode), msg)
	require.NotNil(t, r.MemberID)
	if member != "" {
		require.Equal(t, member, *r.MemberID)
	}
	require.Equal(t, epoch, r.MemberEpoch, "member epoch")
}

// lgTP is a set of partitions by topic id, sorted.
type lgTP map[[16]byte][]int32

func lgAssigned(r *kmsg.ConsumerGroupHeartbeatResponse) lgTP {
	if r.Assignment == nil {
		return nil
	}
	out := lgTP{}
	for _, t := range r.Assignment.Topics {
		if len(t.Partitions) > 0 {
			out[t.TopicID] = append(out[t.TopicID], t.Partitions...)
			slices.Sort(out[t.TopicID])
		}
	}
	return out
}

func lgDescribed(a kmsg.Assignment) lgTP {
	out := lgTP{}
	for _, t := range a.TopicPartitions {
		if len(t.Partitions) > 0 {
			out[t.TopicID] = append(out[t.TopicID], t.Partitions...)
			slices.Sort(out[t.TopicID])
		}
	}
	return out
}

func (s lgTP) owned() []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for id, ps := range s {
		out = append(out, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id, Partitions: ps})
	}
	sort.Slice(out, func(i, j int) bool { return string(out[i].TopicID[:]) < string(out[j].TopicID[:]) })
	return out
}

func (e *lgEnv) cgDescribe() kmsg.ConsumerGroupDescribeResponseGroup {
	e.t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{lgGroup}
	resp := e.desc.roundTrip(req).(*kmsg.ConsumerGroupDescribeResponse)
	require.Len(e.t, resp.Groups, 1)
	require.Zero(e.t, resp.Groups[0].ErrorCode, codeName(resp.Groups[0].ErrorCode))
	return resp.Groups[0]
}

// lgCGMembers is member id → member epoch, from ConsumerGroupDescribe.
func lgCGMembers(g kmsg.ConsumerGroupDescribeResponseGroup) map[string]int32 {
	out := map[string]int32{}
	for _, m := range g.Members {
		out[m.MemberID] = m.MemberEpoch
	}
	return out
}

func lgCGMember(t *testing.T, g kmsg.ConsumerGroupDescribeResponseGroup, id string) kmsg.ConsumerGroupDescribeResponseGroupMember {
	t.Helper()
	for _, m := range g.Members {
		if m.MemberID == id {
			return m
		}
	}
	t.Fatalf("member %s not in the group", id)
	return kmsg.ConsumerGroupDescribeResponseGroupMember{}
}

func lgParts(n int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

// lgStaticCases runs a KIP-848 test for dynamic and for static members.
func lgStaticCases(t *testing.T, run func(t *testing.T, instance func(name string) *string)) {
	for _, static := range []bool{false, true} {
		name := "dynamic"
		if static {
			name = "static"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run(t, func(n string) *string {
				if !static {
					return nil
				}
				return strp("instance-" + n)
			})
		})
	}
}

// TestLostGroupsConsumerHeartbeatFirst: a member's first
// ConsumerGroupHeartbeat (epoch 0, v1, the member id chosen by the
// client as KIP-1082 requires) is handled, the member joins at epoch 1
// with every partition, and the answer is lost. The client still has no
// epoch and retries the same request. For a dynamic member Kafka treats
// epoch 0 from a known member id as a rejoin of that member (KAFKA-19233
// made it always accepted; before it, epoch 0 passed as the previous
// epoch): the retry gets epoch 1 and the full assignment, the group epoch
// does not move, and the group holds one member.
//
// For a static member this differs from Kafka: the retry comes with the
// instance id of a member that has not left (epoch 1, not -2), and Kafka
// answers UNRELEASED_INSTANCE_ID even though it is the same member id
// (getOrMaybeSubscribeStaticConsumerGroupMember calls
// throwIfInstanceIdIsUnreleased without comparing member ids; fatal for
// the Java client). apache/kafka PR #23542 (open) changes Kafka to treat
// a known member id as that member, like a dynamic one; Shoal already
// does (broker/groups_consumer.go, the oldID != id test), and this test
// asserts that behaviour.
func TestLostGroupsConsumerHeartbeatFirst(t *testing.T) {
	t.Parallel()
	lgStaticCases(t, func(t *testing.T, instance func(string) *string) {
		e := newLostGroups(t, 4)
		tid := e.desc.topicID(e.topic)
		join := lgHB{member: "member-a", instance: instance("a"), topics: []string{e.topic}}
		e.lose(join.req(), lgNewest)
		g := e.cgDescribe()
		require.Equal(t, map[string]int32{"member-a": 1}, lgCGMembers(g), "the lost join was handled")
		require.Equal(t, int32(1), g.Epoch)

		c := e.dial()
		r := e.cgHeartbeat(c, join)
		lgRequireCG(t, r, "member-a", 1)
		require.Equal(t, lgTP{tid: lgParts(4)}, lgAssigned(r))
		g = e.cgDescribe()
		require.Equal(t, map[string]int32{"member-a": 1}, lgCGMembers(g), "no other member")
		require.Equal(t, int32(1), g.Epoch, "no new group epoch")
		require.Equal(t, "Stable", g.State)

		r = e.cgHeartbeat(c, lgHB{member: "member-a", epoch: 1, instance: instance("a"), owned: lgTP{tid: lgParts(4)}.owned()})
		lgRequireCG(t, r, "member-a", 1)
	})
}

// TestLostGroupsConsumerHeartbeatFirstV0: with v0 the coordinator names
// a member joining with an empty member id, so when the answer to the
// first heartbeat is lost the client retries with an empty id and Kafka
// creates a second member; the first holds the partitions until its
// session times out (the reason KIP-1082 has clients choose their ids).
// The retry joins at the next group epoch with nothing (the ghost still
// owns the partitions); once the ghost's session expires (3 s here,
// group.consumer.session.timeout.ms) it is fenced and the member gets
// every partition on a later heartbeat.
func TestLostGroupsConsumerHeartbeatFirstV0(t *testing.T) {
	t.Parallel()
	e := newLostGroups(t, 2)
	e.setBrokerConfig("group.consumer.session.timeout.ms", "3000") // the ghost's, and the live member's
	tid := e.desc.topicID(e.topic)
	join := lgHB{topics: []string{e.topic}}
	e.lose(join.req(), 0)
	g := e.cgDescribe()
	require.Len(t, g.Members, 1)
	ghost := g.Members[0].MemberID
	require.Equal(t, lgTP{tid: lgParts(2)}, lgDescribed(g.Members[0].Assignment))

	c := e.dial()
	r := e.cgHeartbeatAt(c, join, 0)
	lgRequireCG(t, r, "", 2)
	id := *r.MemberID
	require.NotEqual(t, ghost, id, "a second member")
	require.Empty(t, lgAssigned(r), "the ghost still owns every partition")
	require.Equal(t, map[string]int32{ghost: 1, id: 2}, lgCGMembers(e.cgDescribe()))

	epoch, owns := r.MemberEpoch, lgTP{}
	waitUntil(t, "the ghost fenced and its partitions assigned", func() bool {
		r := e.cgHeartbeatAt(c, lgHB{member: id, epoch: epoch, owned: owns.owned()}, 0)
		lgRequireCG(t, r, id, r.MemberEpoch)
		epoch = r.MemberEpoch
		if a := lgAssigned(r); a != nil {
			owns = a
		}
		return len(owns[tid]) == 2
	})
	g = e.cgDescribe()
	require.Equal(t, map[string]int32{id: epoch}, lgCGMembers(g))
}

// TestLostGroupsConsumerHeartbeatNewAssignment: member A (epoch 1, every
// partition of T) subscribes to U as well. The heartbeat bumps the group
// epoch to 2 and moves A to epoch 2 with T and U, and that answer is
// lost. A, still at epoch 1, retries with a full request (as clients do
// after an error) owning T's partitions: epoch 1 is A's previous epoch
// and what it owns is a subset of its assignment, which Kafka accepts
// because the answer with the bumped epoch may have been lost
// (throwIfConsumerGroupMemberEpochIsInvalid); the answer carries epoch 2
// and the whole assignment. A partial retry is accepted too and carries
// epoch 2 but no assignment, since the assignment did not change on that
// heartbeat and the request was not full (Kafka sends it only then).
func TestLostGroupsConsumerHeartbeatNewAssignment(t *testing.T) {
	t.Parallel()
	lgStaticCases(t, func(t *testing.T, instance func(string) *string) {
		e := newLostGroups(t, 2)
		other := e.b.createTopic(t, 2, nil)
		tid, uid := e.desc.topicID(e.topic), e.desc.topicID(other)
		c := e.dial()
		inst := instance("a")
		r := e.cgHeartbeat(c, lgHB{member: "member-a", instance: inst, topics: []string{e.topic}})
		lgRequireCG(t, r, "member-a", 1)
		owns := lgTP{tid: lgParts(2)}
		require.Equal(t, owns, lgAssigned(r))

		grow := lgHB{member: "member-a", epoch: 1, instance: inst, topics: []string{e.topic, other}, owned: owns.owned(), full: true}
		e.lose(grow.req(), lgNewest)
		g := e.cgDescribe()
		require.Equal(t, int32(2), g.Epoch)
		require.Equal(t, map[string]int32{"member-a": 2}, lgCGMembers(g))

		c = e.dial()
		r = e.cgHeartbeat(c, grow)
		lgRequireCG(t, r, "member-a", 2)
		want := lgTP{tid: lgParts(2), uid: lgParts(2)}
		require.Equal(t, want, lgAssigned(r), "the assignment the lost answer carried")

		r = e.cgHeartbeat(c, lgHB{member: "member-a", epoch: 1, instance: inst, owned: owns.owned()})
		lgRequireCG(t, r, "member-a", 2)
		require.Nil(t, r.Assignment, "a partial request gets no unchanged assignment")

		r = e.cgHeartbeat(c, lgHB{member: "member-a", epoch: 2, instance: inst, owned: want.owned()})
		lgRequireCG(t, r, "member-a", 2)
		g = e.cgDescribe()
		require.Equal(t, int32(2), g.Epoch, "no new group epoch")
		require.Equal(t, "Stable", g.State)
		require.Equal(t, map[string]int32{"member-a": 2}, lgCGMembers(g))
	})
}

// TestLostGroupsConsumerHeartbeatRevocation: A holds the four partitions
// at epoch 1; B joins, the group epoch becomes 2 and B waits at epoch 2
// for the partitions A must give up. A is told to revoke two (staying at
// epoch 1), revokes them, and the heartbeat saying so moves it to epoch 2
// with the two it kept; that answer is lost. A retry at epoch 1 that
// still claims a revoked partition is not a subset of A's assignment and
// Kafka answers FENCED_MEMBER_EPOCH (and changes nothing); the retry as
// sent (a full request, owning what A kept) is accepted and gets epoch 2
// and A's assignment. B then gets the two revoked partitions, and no
// partition is held by both.
func TestLostGroupsConsumerHeartbeatRevocation(t *testing.T) {
	t.Parallel()
	lgStaticCases(t, func(t *testing.T, instance func(string) *string) {
		e := newLostGroups(t, 4)
		tid := e.desc.topicID(e.topic)
		topics := []string{e.topic}
		ca, cb := e.dial(), e.dial()
		ia, ib := instance("a"), instance("b")

		r := e.cgHeartbeat(ca, lgHB{member: "member-a", instance: ia, topics: topics})
		lgRequireCG(t, r, "member-a", 1)
		require.Equal(t, lgTP{tid: lgParts(4)}, lgAssigned(r))
		rb := e.cgHeartbeat(cb, lgHB{member: "member-b", instance: ib, topics: topics})
		lgRequireCG(t, rb, "member-b", 2)
		require.Empty(t, lgAssigned(rb), "A still holds B's partitions")

		r = e.cgHeartbeat(ca, lgHB{member: "member-a", epoch: 1, instance: ia, owned: lgTP{tid: lgParts(4)}.owned()})
		lgRequireCG(t, r, "member-a", 1)
		kept := lgAssigned(r)
		require.Len(t, kept[tid], 2, "A keeps two partitions")
		var revoked []int32
		for _, p := range lgParts(4) {
			if !slices.Contains(kept[tid], p) {
				revoked = append(revoked, p)
			}
		}

		revokedHB := lgHB{member: "member-a", epoch: 1, instance: ia, topics: topics, owned: kept.owned(), full: true}
		e.lose(revokedHB.req(), lgNewest)
		require.Equal(t, int32(2), lgCGMembers(e.cgDescribe())["member-a"], "the lost heartbeat moved A to epoch 2")

		ca = e.dial()
		stale := revokedHB
		stale.owned = lgTP{tid: append(slices.Clone(kept[tid]), revoked[0])}.owned()
		r = e.cgHeartbeat(ca, stale)
		require.Equal(t, codeName(kerr.FencedMemberEpoch.Code), codeName(r.ErrorCode), "owned partitions outside the assignment")
		require.Equal(t, int32(2), lgCGMembers(e.cgDescribe())["member-a"], "a fenced heartbeat changes nothing")

		r = e.cgHeartbeat(ca, revokedHB)
		lgRequireCG(t, r, "member-a", 2)
		require.Equal(t, kept, lgAssigned(r))

		rb = e.cgHeartbeat(cb, lgHB{member: "member-b", epoch: 2, instance: ib, owned: lgTP{}.owned()})
		lgRequireCG(t, rb, "member-b", 2)
		require.Equal(t, lgTP{tid: revoked}, lgAssigned(rb), "B gets what A revoked")

		g := e.cgDescribe()
		require.Equal(t, int32(2), g.Epoch)
		require.Equal(t, "Stable", g.State)
		require.Equal(t, map[string]int32{"member-a": 2, "member-b": 2}, lgCGMembers(g))
		require.Equal(t, kept, lgDescribed(lgCGMember(t, g, "member-a").Assignment))
		require.Equal(t, lgTP{tid: revoked}, lgDescribed(lgCGMember(t, g, "member-b").Assignment))
	})
}

// TestLostGroupsConsumerHeartbeatLostTwice: two answers in a row lost
// while a member waits for a partition another member still holds. A
// holds T's four partitions and B U's one, both at epoch 2. B subscribes
// to T as well: the group epoch becomes 3 and B's target takes a
// partition of T that A holds, so B moves to epoch 3 with U's partition
// only (UNRELEASED_PARTITIONS); that answer is lost. B retries at epoch
// 2, its previous epoch, owning a subset of its assignment: accepted,
// answered epoch 3, and that answer is lost too. In Kafka every
// reconciliation step sets the previous epoch to the epoch the member
// had before the step, even when the step keeps the epoch
// (CurrentAssignmentBuilder.computeNextAssignment, updateMemberEpoch in
// ConsumerGroupMember.Builder), so the accepted retry at epoch 3 made 3
// the previous epoch as well, and B's second retry at epoch 2 is
// FENCED_MEMBER_EPOCH. Shoal moves the previous epoch only when the
// epoch changes, so it accepts the second retry too, answering epoch 3:
// a deliberate difference (docs/EXACTLY_ONCE.md). It is safe because a
// retry at the previous epoch must own a subset of the member's current
// assignment, so no partition is owned by two members, and it spares B a
// rejoin that would give up its partitions.
func TestLostGroupsConsumerHeartbeatLostTwice(t *testing.T) {
	t.Parallel()
	e := newLostGroups(t, 4)
	other := e.b.createTopic(t, 1, nil)
	tid, uid := e.desc.topicID(e.topic), e.desc.topicID(other)
	ca, cb := e.dial(), e.dial()

	r := e.cgHeartbeat(ca, lgHB{member: "member-a", topics: []string{e.topic}})
	lgRequireCG(t, r, "member-a", 1)
	aOwns := lgTP{tid: lgParts(4)}
	require.Equal(t, aOwns, lgAssigned(r))
	rb := e.cgHeartbeat(cb, lgHB{member: "member-b", topics: []string{other}})
	lgRequireCG(t, rb, "member-b", 2)
	bOwns := lgTP{uid: lgParts(1)}
	require.Equal(t, bOwns, lgAssigned(rb))
	r = e.cgHeartbeat(ca, lgHB{member: "member-a", epoch: 1, owned: aOwns.owned()})
	lgRequireCG(t, r, "member-a", 2)

	both := lgHB{member: "member-b", epoch: 2, topics: []string{e.topic, other}, owned: bOwns.owned(), full: true}
	e.lose(both.req(), lgNewest)
	g := e.cgDescribe()
	require.Equal(t, int32(3), g.Epoch)
	mb := lgCGMember(t, g, "member-b")
	require.Equal(t, int32(3), mb.MemberEpoch)
	require.Equal(t, bOwns, lgDescribed(mb.Assignment), "B waits for a partition A holds")
	require.NotEmpty(t, lgDescribed(mb.TargetAssignment)[tid], "B's target has a partition of T")

	e.lose(both.req(), lgNewest) // accepted (previous epoch 2, a subset), and lost again
	require.Equal(t, int32(3), lgCGMembers(e.cgDescribe())["member-b"])

	rb = e.cgHeartbeat(e.dial(), both)
	require.Equal(t, "NONE", codeName(rb.ErrorCode), "epoch 2 is still B's previous epoch")
	lgRequireCG(t, rb, "member-b", 3)
	g = e.cgDescribe()
	require.Equal(t, bOwns, lgDescribed(lgCGMember(t, g, "member-b").Assignment), "B still waits for A's partition")
	require.Equal(t, aOwns, lgDescribed(lgCGMember(t, g, "member-a").Assignment), "A holds T's partitions until it revokes")
}
