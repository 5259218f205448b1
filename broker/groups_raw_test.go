package broker

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn sends hand-built requests at chosen versions over one
// connection, so tests control versions and fields exactly.
type rawConn struct {
	t    *testing.T
	b    *Broker
	nc   net.Conn
	r    *bufio.Reader
	corr int32
}

func dialRaw(t *testing.T, b *Broker) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", b.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, b: b, nc: nc, r: bufio.NewReader(nc)}
}

// do sends req at version v and returns the decoded response.
func (c *rawConn) do(req kmsg.Request, v int16) kmsg.Response {
	c.t.Helper()
	req.SetVersion(v)
	c.corr++
	body := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	body = binary.BigEndian.AppendUint16(body, uint16(v))
	body = binary.BigEndian.AppendUint32(body, uint32(c.corr))
	body = binary.BigEndian.AppendUint16(body, 4)
	body = append(body, "test"...)
	if req.IsFlexible() {
		body = append(body, 0)
	}
	body = req.AppendTo(body)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	c.nc.SetDeadline(time.Now().Add(30 * time.Second))
	_, err := c.nc.Write(append(frame, body...))
	require.NoError(c.t, err)
	var hdr [8]byte
	_, err = io.ReadFull(c.r, hdr[:])
	require.NoError(c.t, err)
	buf := make([]byte, binary.BigEndian.Uint32(hdr[:4])-4)
	_, err = io.ReadFull(c.r, buf)
	require.NoError(c.t, err)
	require.Equal(c.t, c.corr, int32(binary.BigEndian.Uint32(hdr[4:])))
	resp := req.ResponseKind()
	resp.SetVersion(v)
	if resp.IsFlexible() && req.Key() != 18 {
		buf = buf[1:] // empty tagged fields of the response header
	}
	require.NoError(c.t, resp.ReadFrom(buf))
	return resp
}

func consumerProtocol(topics ...string) []kmsg.JoinGroupRequestProtocol {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = topics
	return []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
}

type joinOpts struct {
	memberID   string
	instanceID *string
	session    int32
	protocols  []kmsg.JoinGroupRequestProtocol
	version    int16
}

func (c *rawConn) join(group string, o joinOpts) *kmsg.JoinGroupResponse {
	c.t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group = group
	req.MemberID = o.memberID
	req.InstanceID = o.instanceID
	req.SessionTimeoutMillis = o.session
	if req.SessionTimeoutMillis == 0 {
		req.SessionTimeoutMillis = 10000
	}
	req.RebalanceTimeoutMillis = 5000
	req.ProtocolType = "consumer"
	req.Protocols = o.protocols
	if req.Protocols == nil {
		req.Protocols = consumerProtocol("t")
	}
	v := o.version
	if v == 0 {
		v = 9
	}
	return c.do(req, v).(*kmsg.JoinGroupResponse)
}

// joinAndSync joins a single-member group as its leader (dynamic member:
// MEMBER_ID_REQUIRED first) and syncs an assignment; it returns the
// member id and generation.
func (c *rawConn) joinAndSync(group string, o joinOpts) (string, int32) {
	c.t.Helper()
	resp := c.join(group, o)
	if resp.ErrorCode == kerr.MemberIDRequired.Code {
		o.memberID = resp.MemberID
		resp = c.join(group, o)
	}
	require.Zero(c.t, resp.ErrorCode, kerr.ErrorForCode(resp.ErrorCode))
	require.Equal(c.t, resp.MemberID, resp.LeaderID)
	sr := c.sync(group, resp.MemberID, resp.Generation, o.instanceID, map[string][]byte{resp.MemberID: []byte("assignment")})
	require.Zero(c.t, sr.ErrorCode)
	require.Equal(c.t, []byte("assignment"), sr.MemberAssignment)
	return resp.MemberID, resp.Generation
}

func (c *rawConn) sync(group, member string, gen int32, instanceID *string, assign map[string][]byte) *kmsg.SyncGroupResponse {
	c.t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation, req.InstanceID = group, member, gen, instanceID
	for m, a := range assign {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: a})
	}
	return c.do(req, 5).(*kmsg.SyncGroupResponse)
}

func (c *rawConn) heartbeat(group, member string, gen int32, instanceID *string) int16 {
	c.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation, req.InstanceID = group, member, gen, instanceID
	return c.do(req, 4).(*kmsg.HeartbeatResponse).ErrorCode
}

type commitPart struct {
	topic     string
	partition int32
	offset    int64
	epoch     int32
	metadata  string
}

// commit commits at version v (topic names; v10 resolves the topic ids
// through the broker) and returns the error codes in request order.
func (c *rawConn) commit(b *Broker, v int16, group, member string, gen int32, parts ...commitPart) []int16 {
	c.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	for _, p := range parts {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = p.topic
		if t := b.topics.Get(p.topic); t != nil {
			rt.TopicID = t.ID
		} else {
			rt.TopicID = [16]byte{1, 2, 3}
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p.partition, p.offset, p.epoch
		md := p.metadata
		rp.Metadata = &md
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp := c.do(req, v).(*kmsg.OffsetCommitResponse)
	var codes []int16
	require.Len(c.t, resp.Topics, len(parts))
	for i, t := range resp.Topics {
		if v < 10 {
			require.Equal(c.t, parts[i].topic, t.Topic)
		}
		require.Len(c.t, t.Partitions, 1)
		codes = append(codes, t.Partitions[0].ErrorCode)
	}
	return codes
}

// fetch returns group's committed offsets of topic (OffsetFetch v8) by
// partition.
func (c *rawConn) fetch(group, topic string, partitions ...int32) map[int32]kmsg.OffsetFetchResponseGroupTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: partitions}}
	req.Groups = append(req.Groups, rg)
	resp := c.do(req, 8).(*kmsg.OffsetFetchResponse)
	require.Len(c.t, resp.Groups, 1)
	require.Zero(c.t, resp.Groups[0].ErrorCode)
	out := map[int32]kmsg.OffsetFetchResponseGroupTopicPartition{}
	for _, t := range resp.Groups[0].Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p
		}
	}
	return out
}

func createTopicRaw(t *testing.T, b *Broker, name string, partitions int32) {
	t.Helper()
	_, err := b.topicAdmin.Create(name, partitions, nil, false)
	require.NoError(t, err)
}

func codeName(c int16) string {
	if c == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(c).(*kerr.Error).Message
}

func TestGroupCommitFencingAndBadInput(t *testing.T) {
	t.Parallel()
	b := startGroupTest(t)
	createTopicRaw(t, b, "t1", 2)
	c := dialRaw(t, b)
	member, gen := c.joinAndSync("g1", joinOpts{})

	ok := []int16{0, 0}
	require.Equal(t, ok, c.commit(b, 9, "g1", member, gen,
		commitPart{"t1", 0, 10, 3, "m0"}, commitPart{"t1", 1, 20, 4, "m1"}))
	require.Equal(t, ok, c.commit(b, 10, "g1", member, gen,
		commitPart{"t1", 0, 11, 3, "m0"}, commitPart{"t1", 1, 21, 4, "m1"}))

	// A simple commit to another group: must survive everything below.
	require.Equal(t, []int16{0}, c.commit(b, 9, "g2", "", -1, commitPart{"t1", 0, 77, -1, "other"}))

	for _, tc := range []struct {
		name   string
		v      int16
		group  string
		member string
		gen    int32
		want   int16
	}{
		{"stale generation", 9, "g1", member, gen - 1, kerr.IllegalGeneration.Code},
		{"future generation", 9, "g1", member, gen + 1, kerr.IllegalGeneration.Code},
		{"unknown member", 9, "g1", "nobody", gen, kerr.UnknownMemberID.Code},
		{"simple commit to a group with members", 9, "g1", "", -1, kerr.UnknownMemberID.Code},
		{"unknown group v9", 9, "nogroup", "m", 1, kerr.GroupIDNotFound.Code},
		{"unknown group v8", 8, "nogroup", "m", 1, kerr.IllegalGeneration.Code},
		{"empty group id", 9, "", "", -1, kerr.InvalidGroupID.Code},
	} {
		got := c.commit(b, tc.v, tc.group, tc.member, tc.gen, commitPart{"t1", 0, 999, -1, "bad"})
		require.Equal(t, codeName(tc.want), codeName(got[0]), tc.name)
	}

	// Per partition: unknown topic and partition, oversized metadata;
	// the valid partition in the same request is still committed.
	got := c.commit(b, 9, "g1", member, gen,
		commitPart{"t1", 0, 12, 5, "fine"},
		commitPart{"t1", 9, 1, -1, ""},
		commitPart{"missing", 0, 1, -1, ""},
		commitPart{"t1", 1, 500, -1, strings.Repeat("x", 4097)},
	)
	require.Equal(t, []string{"NONE", "UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_OR_PARTITION", "OFFSET_METADATA_TOO_LARGE"},
		[]string{codeName(got[0]), codeName(got[1]), codeName(got[2]), codeName(got[3])})
	got = c.commit(b, 10, "g1", member, gen, commitPart{"missing", 0, 1, -1, ""})
	require.Equal(t, "UNKNOWN_TOPIC_ID", codeName(got[0]))
	// Exactly the limit is fine.
	require.Equal(t, []int16{0}, c.commit(b, 9, "g1", member, gen, commitPart{"t1", 1, 22, 4, strings.Repeat("y", 4096)}))

	offs := c.fetch("g1", "t1", 0, 1, 2)
	require.Equal(t, int64(12), offs[0].Offset)
	require.Equal(t, int32(5), offs[0].LeaderEpoch)
	require.Equal(t, "fine", *offs[0].Metadata)
	require.Equal(t, int64(22), offs[1].Offset)
	require.Equal(t, strings.Repeat("y", 4096), *offs[1].Metadata)
	require.Equal(t, int64(-1), offs[2].Offset)
	other := c.fetch("g2", "t1", 0)
	require.Equal(t, int64(77), other[0].Offset)
	require.Equal(t, "other", *other[0].Metadata)
	none := c.fetch("nogroup", "t1", 0)
	require.Equal(t, int64(-1), none[0].Offset)
	require.Equal(t, "", *none[0].Metadata)

	// Heartbeat and sync fencing.
	require.Equal(t, "NONE", codeName(c.heartbeat("g1", member, gen, nil)))
	require.Equal(t, "ILLEGAL_GENERATION", codeName(c.heartbeat("g1", member, gen-1, nil)))
	require.Equal(t, "UNKNOWN_MEMBER_ID", codeName(c.heartbeat("g1", "nobody", gen, nil)))
	require.Equal(t, "UNKNOWN_MEMBER_ID", codeName(c.heartbeat("nogroup", member, gen, nil)))
	require.Equal(t, "INVALID_GROUP_ID", codeName(c.heartbeat("", member, gen, nil)))
	require.Equal(t, "UNKNOWN_MEMBER_ID", codeName(c.sync("g1", "nobody", gen, nil, nil).ErrorCode))
	require.Equal(t, "ILLEGAL_GENERATION", codeName(c.sync("g1", member, gen+1, nil, nil).ErrorCode))

	// Join errors.
	jr := c.join("g1", joinOpts{session: 100})
	require.Equal(t, "INVALID_SESSION_TIMEOUT", codeName(jr.ErrorCode))
	jr = c.join("", joinOpts{})
	require.Equal(t, "INVALID_GROUP_ID", codeName(jr.ErrorCode))
	jr = c.join("g1", joinOpts{memberID: "nobody"})
	require.Equal(t, "UNKNOWN_MEMBER_ID", codeName(jr.ErrorCode))
	jr = c.join("g1", joinOpts{memberID: member, protocols: []kmsg.JoinGroupRequestProtocol{{Name: "other"}}})
	require.Equal(t, "INCONSISTENT_GROUP_PROTOCOL", codeName(jr.ErrorCode))
	// A failed join to a new group leaves no group behind.
	jr = c.join("ghost", joinOpts{session: 100})
	require.NotZero(t, jr.ErrorCode)
	lr := c.do(kmsg.NewPtrListGroupsRequest(), 5).(*kmsg.ListGroupsResponse)
	var names []string
	for _, g := range lr.Groups {
		names = append(names, g.Group)
	}
	require.Equal(t, []string{"g1", "g2"}, names)
}

func TestGroupRestartKeepsOffsetsAndMembers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *Config) { c.DataDir = dir }
	b := startGroupTest(t, cfg)
	createTopicRaw(t, b, "rt", 3)
	c := dialRaw(t, b)
	member, gen := c.joinAndSync("live", joinOpts{session: 30000})
	require.Equal(t, []int16{0, 0}, c.commit(b, 9, "live", member, gen,
		commitPart{"rt", 0, 5, 1, "meta-0"}, commitPart{"rt", 2, 7, 2, ""}))
	require.Equal(t, []int16{0}, c.commit(b, 7, "simple", "", -1, commitPart{"rt", 1, 42, 9, "simple-meta"}))
	require.NoError(t, b.Close())

	b2 := startGroupTest(t, cfg)
	c2 := dialRaw(t, b2)
	offs := c2.fetch("live", "rt", 0, 1, 2)
	require.Equal(t, int64(5), offs[0].Offset)
	require.Equal(t, int32(1), offs[0].LeaderEpoch)
	require.Equal(t, "meta-0", *offs[0].Metadata)
	require.Equal(t, int64(-1), offs[1].Offset)
	require.Equal(t, int64(7), offs[2].Offset)
	require.Equal(t, int32(2), offs[2].LeaderEpoch)
	simple := c2.fetch("simple", "rt", 1)
	require.Equal(t, int64(42), simple[1].Offset)
	require.Equal(t, "simple-meta", *simple[1].Metadata)

	// The member survives the restart at its generation and assignment.
	require.Equal(t, "NONE", codeName(c2.heartbeat("live", member, gen, nil)))
	sr := c2.sync("live", member, gen, nil, nil)
	require.Zero(t, sr.ErrorCode)
	require.Equal(t, []byte("assignment"), sr.MemberAssignment)
	require.Equal(t, []int16{0}, c2.commit(b2, 9, "live", member, gen, commitPart{"rt", 0, 6, 1, ""}))
	dg := c2.do(&kmsg.DescribeGroupsRequest{Groups: []string{"live"}}, 5).(*kmsg.DescribeGroupsResponse)
	require.Equal(t, "Stable", dg.Groups[0].State)
	require.Len(t, dg.Groups[0].Members, 1)
	require.Equal(t, member, dg.Groups[0].Members[0].MemberID)
}

func TestGroupStaticMembership(t *testing.T) {
	t.Parallel()
	b := startGroupTest(t)
	c := dialRaw(t, b)
	inst := "instance-1"
	first, gen := c.joinAndSync("static", joinOpts{instanceID: &inst})
	require.True(t, strings.HasPrefix(first, inst+"-"), first)

	// The same instance rejoins with no member id (a restarted process):
	// a new member id, no rebalance, the old id is fenced.
	jr := c.join("static", joinOpts{instanceID: &inst})
	require.Zero(t, jr.ErrorCode)
	require.NotEqual(t, first, jr.MemberID)
	require.Equal(t, gen, jr.Generation)
	require.True(t, jr.SkipAssignment, "the leader keeps its assignment (KIP-814)")
	second := jr.MemberID
	require.Equal(t, "FENCED_INSTANCE_ID", codeName(c.heartbeat("static", first, gen, &inst)))
	require.Equal(t, "NONE", codeName(c.heartbeat("static", second, gen, &inst)))
	sr := c.sync("static", second, gen, &inst, nil)
	require.Zero(t, sr.ErrorCode)
	require.Equal(t, []byte("assignment"), sr.MemberAssignment, "the assignment carried over")
	other := "instance-2"
	require.Equal(t, "UNKNOWN_MEMBER_ID", codeName(c.heartbeat("static", second, gen, &other)))

	// Administrative removal by instance id.
	lr := c.do(&kmsg.LeaveGroupRequest{Group: "static", Members: []kmsg.LeaveGroupRequestMember{{InstanceID: &inst}, {InstanceID: &other}}}, 5).(*kmsg.LeaveGroupResponse)
	require.Zero(t, lr.ErrorCode)
	require.Equal(t, "NONE", codeName(lr.Members[0].ErrorCode))
	require.Equal(t, "UNKNOWN_MEMBER_ID", codeName(lr.Members[1].ErrorCode))
	dg := c.do(&kmsg.DescribeGroupsRequest{Groups: []string{"static"}}, 5).(*kmsg.DescribeGroupsResponse)
	require.Equal(t, "Empty", dg.Groups[0].State)
}

func TestGroupRebalanceTwoMembers(t *testing.T) {
	t.Parallel()
	b := startGroupTest(t)
	c1, c2 := dialRaw(t, b), dialRaw(t, b)
	m1, gen1 := c1.joinAndSync("two", joinOpts{})

	// A second member joins: the first is told to rejoin by its heartbeat.
	jr := c2.join("two", joinOpts{})
	require.Equal(t, "MEMBER_ID_REQUIRED", codeName(jr.ErrorCode))
	m2 := jr.MemberID
	var wg sync.WaitGroup
	var jr2 *kmsg.JoinGroupResponse
	wg.Add(1)
	go func() {
		defer wg.Done()
		jr2 = c2.join("two", joinOpts{memberID: m2})
	}()
	require.Eventually(t, func() bool {
		return c1.heartbeat("two", m1, gen1, nil) == kerr.RebalanceInProgress.Code
	}, 5*time.Second, 10*time.Millisecond)
	// Commits are still accepted at the old generation while rebalancing.
	createTopicRaw(t, b, "t", 1)
	require.Equal(t, []int16{0}, c1.commit(b, 9, "two", m1, gen1, commitPart{"t", 0, 1, -1, ""}))
	jr1 := c1.join("two", joinOpts{memberID: m1})
	wg.Wait()
	require.Zero(t, jr1.ErrorCode)
	require.Zero(t, jr2.ErrorCode)
	gen2 := jr1.Generation
	require.Equal(t, gen1+1, gen2)
	require.Equal(t, gen2, jr2.Generation)
	require.Equal(t, m1, jr1.LeaderID, "the old leader stays leader")
	require.Len(t, jr1.Members, 2)
	require.Empty(t, jr2.Members)

	// CompletingRebalance: commits are refused, the follower's sync
	// waits for the leader's.
	require.Equal(t, []int16{kerr.RebalanceInProgress.Code}, c2.commit(b, 9, "two", m2, gen2, commitPart{"t", 0, 1, -1, ""}))
	var sr2 *kmsg.SyncGroupResponse
	wg.Add(1)
	go func() {
		defer wg.Done()
		sr2 = c2.sync("two", m2, gen2, nil, nil)
	}()
	time.Sleep(50 * time.Millisecond)
	sr1 := c1.sync("two", m1, gen2, nil, map[string][]byte{m1: []byte("a1"), m2: []byte("a2")})
	wg.Wait()
	require.Equal(t, []byte("a1"), sr1.MemberAssignment)
	require.Equal(t, []byte("a2"), sr2.MemberAssignment)
	require.Equal(t, "ILLEGAL_GENERATION", codeName(c1.heartbeat("two", m1, gen1, nil)))

	// The leader leaves: the follower rejoins alone and becomes leader.
	lr := c1.do(&kmsg.LeaveGroupRequest{Group: "two", MemberID: m1}, 2).(*kmsg.LeaveGroupResponse)
	require.Zero(t, lr.ErrorCode)
	require.Equal(t, "REBALANCE_IN_PROGRESS", codeName(c2.heartbeat("two", m2, gen2, nil)))
	jr = c2.join("two", joinOpts{memberID: m2})
	require.Zero(t, jr.ErrorCode)
	require.Equal(t, m2, jr.LeaderID)
	require.Equal(t, gen2+1, jr.Generation)
}

func TestGroupSessionExpiry(t *testing.T) {
	t.Parallel()
	b := startGroupTest(t)
	c := dialRaw(t, b)
	// Taken before the session starts (at the sync), so a slow answer
	// cannot make the expiry look early.
	start := time.Now()
	member, gen := c.joinAndSync("expiring", joinOpts{session: 600})
	require.Eventually(t, func() bool {
		dg := c.do(&kmsg.DescribeGroupsRequest{Groups: []string{"expiring"}}, 5).(*kmsg.DescribeGroupsResponse)
		return dg.Groups[0].State == "Empty"
	}, 5*time.Second, 20*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(start), 500*time.Millisecond)
	require.Equal(t, "UNKNOWN_MEMBER_ID", codeName(c.heartbeat("expiring", member, gen, nil)))

	// A v4+ member id handed out but never used expires too, and does not
	// hold up the next rebalance.
	jr := c.join("expiring", joinOpts{session: 600})
	require.Equal(t, "MEMBER_ID_REQUIRED", codeName(jr.ErrorCode))
	m2, _ := c.joinAndSync("expiring", joinOpts{session: 10000})
	require.NotEqual(t, jr.MemberID, m2)
}

func TestGroupAdminAPIs(t *testing.T) {
	t.Parallel()
	b := startGroupTest(t)
	createTopicRaw(t, b, "a", 2)
	createTopicRaw(t, b, "b", 1)
	c := dialRaw(t, b)
	member, gen := c.joinAndSync("busy", joinOpts{protocols: consumerProtocol("a")})
	require.Equal(t, []int16{0, 0, 0}, c.commit(b, 9, "busy", member, gen,
		commitPart{"a", 0, 1, -1, ""}, commitPart{"a", 1, 1, -1, ""}, commitPart{"b", 0, 3, -1, ""}))
	require.Equal(t, []int16{0}, c.commit(b, 9, "idle", "", -1, commitPart{"a", 0, 9, -1, ""}))

	// ListGroups with filters.
	list := func(v int16, states, types []string) []string {
		resp := c.do(&kmsg.ListGroupsRequest{StatesFilter: states, TypesFilter: types}, v).(*kmsg.ListGroupsResponse)
		require.Zero(t, resp.ErrorCode)
		var out []string
		for _, g := range resp.Groups {
			out = append(out, g.Group+":"+g.GroupState+":"+g.GroupType+":"+g.ProtocolType)
		}
		return out
	}
	require.Equal(t, []string{"busy:Stable:classic:consumer", "idle:Empty:classic:"}, list(5, nil, nil))
	require.Equal(t, []string{"busy:Stable:classic:consumer"}, list(5, []string{"stable"}, nil))
	require.Equal(t, []string{"idle:Empty::"}, list(4, []string{"Empty", "Dead"}, nil)) // v4 has no group type
	require.Equal(t, []string{"busy:Stable:classic:consumer", "idle:Empty:classic:"}, list(5, nil, []string{"Classic"}))
	require.Empty(t, list(5, nil, []string{"consumer"}))
	require.Empty(t, list(5, nil, []string{"no-such-type"}))

	// DescribeGroups.
	dg := c.do(&kmsg.DescribeGroupsRequest{Groups: []string{"busy", "idle", "nope"}, IncludeAuthorizedOperations: true}, 6).(*kmsg.DescribeGroupsResponse)
	require.Len(t, dg.Groups, 3)
	require.Equal(t, "Stable", dg.Groups[0].State)
	require.Equal(t, "range", dg.Groups[0].Protocol)
	require.Equal(t, "consumer", dg.Groups[0].ProtocolType)
	require.Len(t, dg.Groups[0].Members, 1)
	require.Equal(t, "test", dg.Groups[0].Members[0].ClientID)
	require.Equal(t, "/127.0.0.1", dg.Groups[0].Members[0].ClientHost)
	require.Equal(t, []byte("assignment"), dg.Groups[0].Members[0].MemberAssignment)
	require.Equal(t, "Empty", dg.Groups[1].State)
	require.Equal(t, "Dead", dg.Groups[2].State)
	require.Equal(t, "GROUP_ID_NOT_FOUND", codeName(dg.Groups[2].ErrorCode))
	dg = c.do(&kmsg.DescribeGroupsRequest{Groups: []string{"nope"}}, 5).(*kmsg.DescribeGroupsResponse)
	require.Zero(t, dg.Groups[0].ErrorCode)
	require.Equal(t, "Dead", dg.Groups[0].State)

	// OffsetDelete: subscribed topic refused while the group is active.
	od := c.do(&kmsg.OffsetDeleteRequest{Group: "busy", Topics: []kmsg.OffsetDeleteRequestTopic{
		{Topic: "a", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		{Topic: "b", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}, {Partition: 5}}},
	}}, 0).(*kmsg.OffsetDeleteResponse)
	require.Zero(t, od.ErrorCode)
	require.Equal(t, "GROUP_SUBSCRIBED_TO_TOPIC", codeName(od.Topics[0].Partitions[0].ErrorCode))
	require.Equal(t, "NONE", codeName(od.Topics[1].Partitions[0].ErrorCode))
	require.Equal(t, "UNKNOWN_TOPIC_OR_PARTITION", codeName(od.Topics[1].Partitions[1].ErrorCode))
	require.Equal(t, int64(-1), c.fetch("busy", "b", 0)[0].Offset)
	require.Equal(t, int64(1), c.fetch("busy", "a", 0)[0].Offset)
	od = c.do(&kmsg.OffsetDeleteRequest{Group: "nope"}, 0).(*kmsg.OffsetDeleteResponse)
	require.Equal(t, "GROUP_ID_NOT_FOUND", codeName(od.ErrorCode))

	// DeleteGroups.
	del := c.do(&kmsg.DeleteGroupsRequest{Groups: []string{"busy", "idle", "nope", ""}}, 3).(*kmsg.DeleteGroupsResponse)
	require.Equal(t, "NON_EMPTY_GROUP", codeName(del.Groups[0].ErrorCode))
	require.Equal(t, "NONE", codeName(del.Groups[1].ErrorCode))
	require.Equal(t, "GROUP_ID_NOT_FOUND", codeName(del.Groups[2].ErrorCode))
	require.Equal(t, "INVALID_GROUP_ID", codeName(del.Groups[3].ErrorCode))
	require.Equal(t, int64(-1), c.fetch("idle", "a", 0)[0].Offset)
	require.Equal(t, []string{"busy:Stable:classic:consumer"}, list(5, nil, nil))

	// Once empty, the group can be deleted and its offsets go with it.
	lr := c.do(&kmsg.LeaveGroupRequest{Group: "busy", Members: []kmsg.LeaveGroupRequestMember{{MemberID: member}}}, 5).(*kmsg.LeaveGroupResponse)
	require.Zero(t, lr.Members[0].ErrorCode)
	del = c.do(&kmsg.DeleteGroupsRequest{Groups: []string{"busy"}}, 2).(*kmsg.DeleteGroupsResponse)
	require.Equal(t, "NONE", codeName(del.Groups[0].ErrorCode))
	require.Equal(t, int64(-1), c.fetch("busy", "a", 0)[0].Offset)
	require.Empty(t, list(5, nil, nil))
}

func TestFindCoordinator(t *testing.T) {
	t.Parallel()
	b := startGroupTest(t)
	c := dialRaw(t, b)
	for v := int16(0); v <= 3; v++ {
		resp := c.do(&kmsg.FindCoordinatorRequest{CoordinatorKey: "g"}, v).(*kmsg.FindCoordinatorResponse)
		require.Zero(t, resp.ErrorCode, "v%d", v)
		require.Equal(t, b.listeners[0].advPort, resp.Port)
		require.Equal(t, b.listeners[0].advHost, resp.Host)
	}
	resp := c.do(&kmsg.FindCoordinatorRequest{CoordinatorType: 1, CoordinatorKey: "txn"}, 3).(*kmsg.FindCoordinatorResponse)
	require.Zero(t, resp.ErrorCode)
	require.Equal(t, b.listeners[0].advPort, resp.Port)
	resp = c.do(&kmsg.FindCoordinatorRequest{CoordinatorType: 1, CoordinatorKey: ""}, 3).(*kmsg.FindCoordinatorResponse)
	require.Equal(t, "INVALID_REQUEST", codeName(resp.ErrorCode))
	resp = c.do(&kmsg.FindCoordinatorRequest{CoordinatorType: 0, CoordinatorKeys: []string{"a", "b"}}, 4).(*kmsg.FindCoordinatorResponse)
	require.Len(t, resp.Coordinators, 2)
	for i, k := range []string{"a", "b"} {
		require.Equal(t, k, resp.Coordinators[i].Key)
		require.Zero(t, resp.Coordinators[i].ErrorCode)
		require.Equal(t, b.cfg.NodeID, resp.Coordinators[i].NodeID)
	}
	resp = c.do(&kmsg.FindCoordinatorRequest{CoordinatorType: 2, CoordinatorKeys: []string{"g:AAAAAAAAAAAAAAAAAAAAAA:0", "bare"}}, 6).(*kmsg.FindCoordinatorResponse)
	require.Zero(t, resp.Coordinators[0].ErrorCode)
	require.Equal(t, "INVALID_REQUEST", codeName(resp.Coordinators[1].ErrorCode))
	resp = c.do(&kmsg.FindCoordinatorRequest{CoordinatorType: 7, CoordinatorKeys: []string{"x"}}, 5).(*kmsg.FindCoordinatorResponse)
	require.Equal(t, "INVALID_REQUEST", codeName(resp.Coordinators[0].ErrorCode))
}

func TestGroupOffsetExpiry(t *testing.T) {
	t.Parallel()
	b := startGroupTest(t)
	createTopicRaw(t, b, "e", 2)
	c := dialRaw(t, b)
	member, gen := c.joinAndSync("had-members", joinOpts{protocols: consumerProtocol("e")})
	require.Equal(t, []int16{0}, c.commit(b, 9, "had-members", member, gen, commitPart{"e", 0, 3, -1, ""}))
	require.Equal(t, []int16{0}, c.commit(b, 9, "simple", "", -1, commitPart{"e", 1, 4, -1, ""}))
	// v2-v4 commits can carry their own retention.
	req := &kmsg.OffsetCommitRequest{Group: "short", Generation: -1, RetentionTimeMillis: 1000,
		Topics: []kmsg.OffsetCommitRequestTopic{{Topic: "e", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}}}}
	cr := c.do(req, 4).(*kmsg.OffsetCommitResponse)
	require.Zero(t, cr.Topics[0].Partitions[0].ErrorCode)

	now := time.Now()
	b.groups.ExpireOffsets(now.Add(2 * time.Second))
	require.Equal(t, int64(-1), c.fetch("short", "e", 0)[0].Offset, "explicit retention passed")
	require.Equal(t, int64(4), c.fetch("simple", "e", 1)[1].Offset)

	// Retention (7 days) after the last commit: the simple group goes;
	// the group with a live member keeps its subscribed topic.
	b.groups.ExpireOffsets(now.Add(7*24*time.Hour + time.Minute))
	require.Equal(t, int64(-1), c.fetch("simple", "e", 1)[1].Offset)
	require.Equal(t, int64(3), c.fetch("had-members", "e", 0)[0].Offset)
	lr := c.do(&kmsg.ListGroupsRequest{}, 5).(*kmsg.ListGroupsResponse)
	require.Len(t, lr.Groups, 1, "emptied groups are removed")

	// Once the group is empty, retention counts from then.
	c.do(&kmsg.LeaveGroupRequest{Group: "had-members", Members: []kmsg.LeaveGroupRequestMember{{MemberID: member}}}, 5)
	left := time.Now()
	b.groups.ExpireOffsets(left.Add(7*24*time.Hour - time.Minute))
	require.Equal(t, int64(3), c.fetch("had-members", "e", 0)[0].Offset)
	b.groups.ExpireOffsets(left.Add(7*24*time.Hour + time.Minute))
	require.Equal(t, int64(-1), c.fetch("had-members", "e", 0)[0].Offset)
	lr = c.do(&kmsg.ListGroupsRequest{}, 5).(*kmsg.ListGroupsResponse)
	require.Empty(t, lr.Groups)
}

func TestGroupDropTopicOffsets(t *testing.T) {
	t.Parallel()
	b := startGroupTest(t)
	createTopicRaw(t, b, "gone", 1)
	createTopicRaw(t, b, "kept", 1)
	c := dialRaw(t, b)
	require.Equal(t, []int16{0, 0}, c.commit(b, 9, "g", "", -1, commitPart{"gone", 0, 5, -1, ""}, commitPart{"kept", 0, 6, -1, ""}))
	require.NoError(t, b.topicAdmin.Delete(b.topics.Get("gone")))
	createTopicRaw(t, b, "gone", 1)
	require.Equal(t, int64(-1), c.fetch("g", "gone", 0)[0].Offset)
	require.Equal(t, int64(6), c.fetch("g", "kept", 0)[0].Offset)
}

func TestGroupCloseAnswersParkedJoin(t *testing.T) {
	t.Parallel()
	b := startGroupTest(t)
	c1, c2 := dialRaw(t, b), dialRaw(t, b)
	c1.joinAndSync("parked", joinOpts{})
	jr := c2.join("parked", joinOpts{})
	require.Equal(t, "MEMBER_ID_REQUIRED", codeName(jr.ErrorCode))
	done := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { done <- c2.join("parked", joinOpts{memberID: jr.MemberID}) }()
	// The join waits for the first member to rejoin (up to 5s).
	select {
	case <-done:
		t.Fatal("join answered before the rebalance completed")
	case <-time.After(200 * time.Millisecond):
	}
	start := time.Now()
	require.NoError(t, b.Close())
	require.Less(t, time.Since(start), 2*time.Second, "Close does not wait for parked joins")
	r := <-done
	require.Equal(t, "NOT_COORDINATOR", codeName(r.ErrorCode))
}
