package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/groups"
)

// startConsumerGroupTest also shortens the KIP-848 heartbeat interval.
func startConsumerGroupTest(t *testing.T, mut ...func(*Config)) *Broker {
	t.Helper()
	b := startGroupTest(t, mut...)
	setBrokerConfigs(b, "group.consumer.heartbeat.interval.ms", "100")
	return b
}

func TestGroupConsumerProtocolClients(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
		assignor string
	}{
		{"uniform", kgo.CooperativeStickyBalancer(), "uniform"},
		{"range", kgo.RangeBalancer(), "range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := startConsumerGroupTest(t)
			const n = 10000
			produceN(t, b, "next", 6, n)
			group := "kip848-" + tc.name
			consumeInGroup(t, b, group, "next", n, 3, kgo.Balancers(tc.balancer), kgo.ServerSideBalancer())
			requireCommittedAtEnd(t, b, group, "next")

			c := dialRaw(t, b)
			lr := c.do(&kmsg.ListGroupsRequest{TypesFilter: []string{"consumer"}}, 5).(*kmsg.ListGroupsResponse)
			require.Len(t, lr.Groups, 1)
			require.Equal(t, group, lr.Groups[0].Group)
			require.Equal(t, "Empty", lr.Groups[0].GroupState, "every member left")
			dr := c.do(&kmsg.ConsumerGroupDescribeRequest{Groups: []string{group}}, 1).(*kmsg.ConsumerGroupDescribeResponse)
			require.Zero(t, dr.Groups[0].ErrorCode)
			require.Equal(t, tc.assignor, dr.Groups[0].AssignorName)
			require.Positive(t, dr.Groups[0].Epoch)
		})
	}
}

// cgHeartbeat is a ConsumerGroupHeartbeat helper; owned nil sends null.
type cgHeartbeat struct {
	member   string
	epoch    int32
	topics   []string
	regex    *string
	assignor *string
	instance *string
	owned    []kmsg.ConsumerGroupHeartbeatRequestTopic
	full     bool // send rebalance timeout, subscription and owned
}

func (c *rawConn) cgHeartbeat(group string, h cgHeartbeat) *kmsg.ConsumerGroupHeartbeatResponse {
	c.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = group, h.member, h.epoch, h.instance
	if h.epoch == 0 || h.full {
		req.RebalanceTimeoutMillis = 5000
		req.SubscribedTopicNames = h.topics
		if req.SubscribedTopicNames == nil && h.regex == nil {
			req.SubscribedTopicNames = []string{}
		}
		req.SubscribedTopicRegex = h.regex
		req.Topics = h.owned
		if req.Topics == nil {
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
	} else {
		req.Topics = h.owned
	}
	req.ServerAssignor = h.assignor
	return c.do(req, 1).(*kmsg.ConsumerGroupHeartbeatResponse)
}

// assigned flattens an assignment to sorted partitions of one topic id.
func assigned(resp *kmsg.ConsumerGroupHeartbeatResponse, id [16]byte) []int32 {
	if resp.Assignment == nil {
		return nil
	}
	var out []int32
	for _, t := range resp.Assignment.Topics {
		if t.TopicID == id {
			out = append(out, t.Partitions...)
		}
	}
	slices.Sort(out)
	return out
}

func owned(id [16]byte, parts []int32) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	return []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: id, Partitions: parts}}
}

func TestGroupConsumerReconciliation(t *testing.T) {
	t.Parallel()
	b := startConsumerGroupTest(t)
	createTopicRaw(t, b, "r", 4)
	tid := b.topics.Get("r").ID
	c := dialRaw(t, b)

	a := c.cgHeartbeat("cg", cgHeartbeat{member: "member-a", topics: []string{"r"}})
	require.Zero(t, a.ErrorCode, codeName(a.ErrorCode))
	require.Equal(t, int32(1), a.MemberEpoch)
	require.Equal(t, []int32{0, 1, 2, 3}, assigned(a, tid))
	require.Equal(t, int32(100), a.HeartbeatIntervalMillis)

	// B joins: the target moves two partitions to B, but A holds them.
	bj := c.cgHeartbeat("cg", cgHeartbeat{member: "member-b", topics: []string{"r"}})
	require.Zero(t, bj.ErrorCode)
	require.Equal(t, int32(2), bj.MemberEpoch)
	require.Empty(t, assigned(bj, tid), "B must wait until A revokes")
	// A is asked to revoke, staying at epoch 1.
	a = c.cgHeartbeat("cg", cgHeartbeat{member: "member-a", epoch: 1, owned: owned(tid, []int32{0, 1, 2, 3})})
	require.Zero(t, a.ErrorCode)
	require.Equal(t, int32(1), a.MemberEpoch)
	keep := assigned(a, tid)
	require.Len(t, keep, 2)
	dr := c.do(&kmsg.ConsumerGroupDescribeRequest{Groups: []string{"cg"}}, 1).(*kmsg.ConsumerGroupDescribeResponse)
	require.Equal(t, "Reconciling", dr.Groups[0].State)
	// Still owning them: nothing for B yet.
	bh := c.cgHeartbeat("cg", cgHeartbeat{member: "member-b", epoch: 2, owned: owned(tid, nil)})
	require.Zero(t, bh.ErrorCode)
	require.Nil(t, bh.Assignment, "unchanged assignment is not resent")
	// A acknowledges the revocation and moves to epoch 2.
	a = c.cgHeartbeat("cg", cgHeartbeat{member: "member-a", epoch: 1, owned: owned(tid, keep)})
	require.Zero(t, a.ErrorCode)
	require.Equal(t, int32(2), a.MemberEpoch)
	// Now B gets the released partitions.
	bh = c.cgHeartbeat("cg", cgHeartbeat{member: "member-b", epoch: 2, owned: owned(tid, nil)})
	require.Zero(t, bh.ErrorCode)
	got := assigned(bh, tid)
	require.Len(t, got, 2)
	all := append(slices.Clone(keep), got...)
	slices.Sort(all)
	require.Equal(t, []int32{0, 1, 2, 3}, all)
	dr = c.do(&kmsg.ConsumerGroupDescribeRequest{Groups: []string{"cg"}}, 1).(*kmsg.ConsumerGroupDescribeResponse)
	require.Equal(t, "Stable", dr.Groups[0].State)
	require.Equal(t, int32(2), dr.Groups[0].Epoch)
	require.Len(t, dr.Groups[0].Members, 2)
	require.Equal(t, "r", dr.Groups[0].Members[0].Assignment.TopicPartitions[0].Topic)

	// Partitions added to the subscribed topic are reconciled (after the
	// once-a-second metadata check).
	require.NoError(t, b.topicAdmin.AddPartitions(b.topics.Get("r"), 6, false))
	require.Eventually(t, func() bool {
		a = c.cgHeartbeat("cg", cgHeartbeat{member: "member-a", epoch: a.MemberEpoch, owned: owned(tid, keep)})
		bh = c.cgHeartbeat("cg", cgHeartbeat{member: "member-b", epoch: bh.MemberEpoch, owned: owned(tid, got)})
		if a.Assignment != nil {
			keep = assigned(a, tid)
		}
		if bh.Assignment != nil {
			got = assigned(bh, tid)
		}
		return len(keep)+len(got) == 6
	}, 5*time.Second, 50*time.Millisecond)
	require.Equal(t, int32(3), a.MemberEpoch)

	// Fencing and errors.
	e := c.cgHeartbeat("cg", cgHeartbeat{member: "member-a", epoch: 7})
	require.Equal(t, "FENCED_MEMBER_EPOCH", codeName(e.ErrorCode))
	// A fenced member rejoins with epoch 0 under the same id and gets its
	// assignment back (it reports owning nothing).
	rj := c.cgHeartbeat("cg", cgHeartbeat{member: "member-a", topics: []string{"r"}})
	require.Zero(t, rj.ErrorCode, codeName(rj.ErrorCode))
	require.Equal(t, a.MemberEpoch, rj.MemberEpoch)
	require.Equal(t, keep, assigned(rj, tid))
	e = c.cgHeartbeat("cg", cgHeartbeat{member: "nobody", epoch: 3})
	require.Equal(t, "UNKNOWN_MEMBER_ID", codeName(e.ErrorCode))
	e = c.cgHeartbeat("nogroup", cgHeartbeat{member: "x", epoch: 3})
	require.Equal(t, "GROUP_ID_NOT_FOUND", codeName(e.ErrorCode))
	bad := "nope"
	e = c.cgHeartbeat("cg", cgHeartbeat{member: "member-c", topics: []string{"r"}, assignor: &bad})
	require.Equal(t, "UNSUPPORTED_ASSIGNOR", codeName(e.ErrorCode))
	badRe := "("
	e = c.cgHeartbeat("cg", cgHeartbeat{member: "member-c", regex: &badRe})
	require.Equal(t, "INVALID_REGULAR_EXPRESSION", codeName(e.ErrorCode))
	e = c.cgHeartbeat("cg", cgHeartbeat{member: "member-c"})
	require.Equal(t, "INVALID_REQUEST", codeName(e.ErrorCode))
	require.NotNil(t, e.ErrorMessage)

	// Commits carry the member epoch.
	codes := c.commit(b, 9, "cg", "member-a", a.MemberEpoch, commitPart{"r", keep[0], 5, -1, ""})
	require.Equal(t, "NONE", codeName(codes[0]))
	codes = c.commit(b, 9, "cg", "member-a", a.MemberEpoch+1, commitPart{"r", keep[0], 5, -1, ""})
	require.Equal(t, "STALE_MEMBER_EPOCH", codeName(codes[0]))
	codes = c.commit(b, 8, "cg", "member-a", a.MemberEpoch, commitPart{"r", keep[0], 5, -1, ""})
	require.Equal(t, "UNSUPPORTED_VERSION", codeName(codes[0]))
	codes = c.commit(b, 9, "cg", "nobody", 1, commitPart{"r", 0, 5, -1, ""})
	require.Equal(t, "UNKNOWN_MEMBER_ID", codeName(codes[0]))
	// KIP-1251: a partition assigned at a newer epoch than the commit's.
	var newest int32 = -1
	for _, p := range keep {
		if p >= 4 {
			newest = p
		}
	}
	if newest >= 0 {
		codes = c.commit(b, 9, "cg", "member-a", 2, commitPart{"r", newest, 5, -1, ""})
		require.Equal(t, "STALE_MEMBER_EPOCH", codeName(codes[0]))
	}
	// OffsetFetch v9 from a member checks its epoch.
	freq := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group, rg.MemberID, rg.MemberEpoch = "cg", kmsg.StringPtr("member-a"), a.MemberEpoch-1
	freq.Groups = append(freq.Groups, rg)
	fr := c.do(freq, 9).(*kmsg.OffsetFetchResponse)
	require.Equal(t, "STALE_MEMBER_EPOCH", codeName(fr.Groups[0].ErrorCode))

	// The other protocol's APIs see the group's type.
	dg := c.do(&kmsg.DescribeGroupsRequest{Groups: []string{"cg"}}, 6).(*kmsg.DescribeGroupsResponse)
	require.Equal(t, "GROUP_ID_NOT_FOUND", codeName(dg.Groups[0].ErrorCode))
	jr := c.join("cg", joinOpts{})
	require.Equal(t, "INCONSISTENT_GROUP_PROTOCOL", codeName(jr.ErrorCode))
	del := c.do(&kmsg.DeleteGroupsRequest{Groups: []string{"cg"}}, 2).(*kmsg.DeleteGroupsResponse)
	require.Equal(t, "NON_EMPTY_GROUP", codeName(del.Groups[0].ErrorCode))

	// Leaving: B's partitions go to A.
	l := c.cgHeartbeat("cg", cgHeartbeat{member: "member-b", epoch: groups.LeaveEpoch})
	require.Zero(t, l.ErrorCode)
	require.Equal(t, int32(groups.LeaveEpoch), l.MemberEpoch)
	a = c.cgHeartbeat("cg", cgHeartbeat{member: "member-a", epoch: a.MemberEpoch, owned: owned(tid, keep)})
	require.Zero(t, a.ErrorCode)
	require.Equal(t, []int32{0, 1, 2, 3, 4, 5}, assigned(a, tid))
}

func TestGroupConsumerClassicInterplay(t *testing.T) {
	t.Parallel()
	b := startConsumerGroupTest(t)
	createTopicRaw(t, b, "x", 1)
	c := dialRaw(t, b)
	c.joinAndSync("classic", joinOpts{})
	e := c.cgHeartbeat("classic", cgHeartbeat{member: "m", topics: []string{"x"}})
	require.Equal(t, "GROUP_ID_NOT_FOUND", codeName(e.ErrorCode))
	dr := c.do(&kmsg.ConsumerGroupDescribeRequest{Groups: []string{"classic", "none", ""}}, 0).(*kmsg.ConsumerGroupDescribeResponse)
	require.Equal(t, "GROUP_ID_NOT_FOUND", codeName(dr.Groups[0].ErrorCode))
	require.Equal(t, "GROUP_ID_NOT_FOUND", codeName(dr.Groups[1].ErrorCode))
	require.Equal(t, "INVALID_GROUP_ID", codeName(dr.Groups[2].ErrorCode))

	// An empty classic group with offsets becomes a consumer group and
	// keeps its offsets.
	require.Equal(t, []int16{0}, c.commit(b, 9, "conv", "", -1, commitPart{"x", 0, 3, -1, "kept"}))
	h := c.cgHeartbeat("conv", cgHeartbeat{member: "m", topics: []string{"x"}})
	require.Zero(t, h.ErrorCode)
	require.Equal(t, int64(3), c.fetch("conv", "x", 0)[0].Offset)
	lr := c.do(&kmsg.ListGroupsRequest{TypesFilter: []string{"consumer"}, StatesFilter: []string{"stable"}}, 5).(*kmsg.ListGroupsResponse)
	require.Len(t, lr.Groups, 1)
	require.Equal(t, "conv", lr.Groups[0].Group)
	// Once empty again, a classic member converts it back.
	l := c.cgHeartbeat("conv", cgHeartbeat{member: "m", epoch: groups.LeaveEpoch})
	require.Zero(t, l.ErrorCode)
	c.joinAndSync("conv", joinOpts{})
	require.Equal(t, int64(3), c.fetch("conv", "x", 0)[0].Offset)
}

func TestGroupConsumerRestartStaticRegexExpiry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *Config) { c.DataDir = dir }
	b := startConsumerGroupTest(t, cfg)
	createTopicRaw(t, b, "re-1", 2)
	c := dialRaw(t, b)
	re := "re-.*"
	inst := "static-1"
	h := c.cgHeartbeat("rg", cgHeartbeat{member: "m1", regex: &re, instance: &inst})
	require.Zero(t, h.ErrorCode, codeName(h.ErrorCode))
	id1 := b.topics.Get("re-1").ID
	require.Equal(t, []int32{0, 1}, assigned(h, id1))
	epoch := h.MemberEpoch
	require.NoError(t, b.Close())

	b2 := startConsumerGroupTest(t, cfg)
	setBrokerConfigs(b2, "group.consumer.session.timeout.ms", "1500")
	c2 := dialRaw(t, b2)
	h = c2.cgHeartbeat("rg", cgHeartbeat{member: "m1", epoch: epoch, instance: &inst, owned: owned(id1, []int32{0, 1})})
	require.Zero(t, h.ErrorCode, codeName(h.ErrorCode))
	require.Equal(t, epoch, h.MemberEpoch, "the member survives the restart without a new epoch")

	// A topic created later that matches the regex is assigned.
	createTopicRaw(t, b2, "re-2", 1)
	id2 := b2.topics.Get("re-2").ID
	require.Eventually(t, func() bool {
		h = c2.cgHeartbeat("rg", cgHeartbeat{member: "m1", epoch: h.MemberEpoch, instance: &inst, owned: owned(id1, []int32{0, 1})})
		return h.ErrorCode == 0 && len(assigned(h, id2)) == 1
	}, 5*time.Second, 50*time.Millisecond)

	// Static leave keeps the assignment for the instance; a new member id
	// for the same instance takes it over.
	h = c2.cgHeartbeat("rg", cgHeartbeat{member: "m1", epoch: groups.StaticLeaveEpoch, instance: &inst})
	require.Zero(t, h.ErrorCode)
	require.Equal(t, int32(groups.StaticLeaveEpoch), h.MemberEpoch)
	other := c2.cgHeartbeat("rg", cgHeartbeat{member: "m-other", instance: &inst, regex: &re})
	require.Zero(t, other.ErrorCode, codeName(other.ErrorCode))
	require.Equal(t, []int32{0, 1}, assigned(other, id1))
	require.Equal(t, []int32{0}, assigned(other, id2))
	again := c2.cgHeartbeat("rg", cgHeartbeat{member: "m-third", instance: &inst, regex: &re})
	require.Equal(t, "UNRELEASED_INSTANCE_ID", codeName(again.ErrorCode))
	f := c2.cgHeartbeat("rg", cgHeartbeat{member: "m1", epoch: h.MemberEpoch, instance: &inst})
	require.Equal(t, "FENCED_INSTANCE_ID", codeName(f.ErrorCode))

	// Session expiry fences the member and empties the group.
	require.Eventually(t, func() bool {
		dr := c2.do(&kmsg.ConsumerGroupDescribeRequest{Groups: []string{"rg"}}, 1).(*kmsg.ConsumerGroupDescribeResponse)
		return dr.Groups[0].State == "Empty"
	}, 5*time.Second, 20*time.Millisecond)
	e := c2.cgHeartbeat("rg", cgHeartbeat{member: "m-other", epoch: other.MemberEpoch, instance: &inst})
	require.Equal(t, "UNKNOWN_MEMBER_ID", codeName(e.ErrorCode))
	del := c2.do(&kmsg.DeleteGroupsRequest{Groups: []string{"rg"}}, 2).(*kmsg.DeleteGroupsResponse)
	require.Equal(t, "NONE", codeName(del.Groups[0].ErrorCode))
}

func TestGroupShareGroupExclusive(t *testing.T) {
	t.Parallel()
	b := startConsumerGroupTest(t)
	createTopicRaw(t, b, "sh", 1)
	c := dialRaw(t, b)
	sh := kmsg.NewPtrShareGroupHeartbeatRequest()
	sh.GroupID, sh.MemberID, sh.MemberEpoch, sh.SubscribedTopicNames = "shared", "share-member", 0, []string{"sh"}
	sr := c.do(sh, 1).(*kmsg.ShareGroupHeartbeatResponse)
	require.Zero(t, sr.ErrorCode, codeName(sr.ErrorCode))

	jr := c.join("shared", joinOpts{})
	require.Equal(t, "INCONSISTENT_GROUP_PROTOCOL", codeName(jr.ErrorCode))
	require.Equal(t, []int16{kerr.GroupIDNotFound.Code}, c.commit(b, 9, "shared", "", -1, commitPart{"sh", 0, 1, -1, ""}))
	e := c.cgHeartbeat("shared", cgHeartbeat{member: "m", topics: []string{"sh"}})
	require.Equal(t, "GROUP_ID_NOT_FOUND", codeName(e.ErrorCode))

	lr := c.do(&kmsg.ListGroupsRequest{}, 5).(*kmsg.ListGroupsResponse)
	require.Len(t, lr.Groups, 1)
	require.Equal(t, "share", lr.Groups[0].GroupType)
	lr = c.do(&kmsg.ListGroupsRequest{TypesFilter: []string{"classic"}}, 5).(*kmsg.ListGroupsResponse)
	require.Empty(t, lr.Groups)

	del := c.do(&kmsg.DeleteGroupsRequest{Groups: []string{"shared"}}, 2).(*kmsg.DeleteGroupsResponse)
	require.Equal(t, "NON_EMPTY_GROUP", codeName(del.Groups[0].ErrorCode))
}
