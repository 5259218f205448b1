package groups

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/meta"
	"github.com/shoal-mq/shoal/broker/topics"
	"github.com/shoal-mq/shoal/protocol"
)

// Tests of the Coordinator's group-level and offset paths that need no
// topic: the package may not import what creating one takes
// (topics.Admin needs broker/metrics and log), so the registry is empty.
// Offsets get in through the paths that do not check the topic
// (ApplyTxnOffsets, PersistOffsetsOnly), as a committed transaction's do.

// testConsumerDefaults are Kafka's defaults of the KIP-848 configs the
// coordinator reads through GroupConfigInt and GroupBrokerInt.
var testConsumerDefaults = map[string]int64{
	"consumer.session.timeout.ms":          45000,
	"consumer.heartbeat.interval.ms":       5000,
	"group.consumer.session.timeout.ms":    45000,
	"group.consumer.heartbeat.interval.ms": 5000,
	"group.consumer.max.size":              2147483647,
}

// testCoord is a coordinator over a metadata store in dir.
type testCoord struct {
	*Coordinator
	store *meta.Store
	done  chan struct{}
	share map[string]bool
	// closeFn closes the coordinator and its store, once.
	closeFn func()
}

// openCoord opens the store in dir and a coordinator over it, loaded;
// Cleanup closes both unless close was called first.
func openCoord(t *testing.T, dir string) *testCoord {
	t.Helper()
	st, err := meta.Open(dir, zap.NewNop())
	require.NoError(t, err)
	tc := &testCoord{store: st, done: make(chan struct{}), share: map[string]bool{}}
	tc.Coordinator = New(Options{
		Topics:       topics.NewRegistry(),
		Store:        st,
		Logger:       zap.NewNop(),
		Done:         tc.done,
		IsShareGroup: func(name string) bool { return tc.share[name] },
		BrokerConfig: func(string) (string, bool) { return "", false },
		GroupConfigInt: func(_, name string) int64 {
			return testConsumerDefaults[name]
		},
		GroupBrokerInt: func(name string) int64 { return testConsumerDefaults[name] },
	})
	require.NoError(t, tc.Load())
	closed := false
	tc.closeFn = func() {
		if closed {
			return
		}
		closed = true
		tc.Coordinator.Close()
		close(tc.done)
		require.NoError(t, st.Close())
	}
	t.Cleanup(tc.close)
	return tc
}

func (tc *testCoord) close() { tc.closeFn() }

// restart closes tc and opens a new coordinator over the same store.
func (tc *testCoord) restart(t *testing.T, dir string) *testCoord {
	t.Helper()
	tc.close()
	return openCoord(t, dir)
}

var testBase = time.UnixMilli(1_700_000_000_000)

func plainOffset(off int64) OffsetCommit {
	return OffsetCommit{Offset: off, LeaderEpoch: 3, Metadata: fmt.Sprintf("m%d", off), CommitTime: testBase}
}

// fetchAll is an OffsetFetch (v8) of every committed offset of group.
func fetchAll(c *Coordinator, group string) map[TP]int64 {
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	sg := c.FetchOffsets(&rg, 8, false)
	out := map[TP]int64{}
	for _, st := range sg.Topics {
		for _, sp := range st.Partitions {
			out[TP{st.Topic, sp.Partition}] = sp.Offset
		}
	}
	return out
}

func committed(c *Coordinator) map[string]map[TP]int64 {
	out := map[string]map[TP]int64{}
	c.CommittedOffsets(func(group string, offsets map[TP]int64) { out[group] = offsets })
	return out
}

func TestLoadEmptyStore(t *testing.T) {
	t.Parallel()
	c := openCoord(t, t.TempDir())
	require.Empty(t, c.List(nil, nil))
	require.False(t, c.Exists("g"))
	require.Empty(t, committed(c.Coordinator))
	exists, has := c.HasCommitted("g", TP{"t", 0})
	require.False(t, exists)
	require.False(t, has)
	require.Equal(t, 4096, c.MetadataMaxBytes())
	c.ExpireOffsets(time.Now().Add(365 * 24 * time.Hour)) // nothing to expire
	require.Empty(t, c.List(nil, nil))
}

func TestFetchOffsetsUnknownGroup(t *testing.T) {
	t.Parallel()
	c := openCoord(t, t.TempDir())

	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = "nobody"
	for _, name := range []string{"a", "b"} {
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic = name
		rt.Partitions = []int32{2, 0, 1}
		rg.Topics = append(rg.Topics, rt)
	}
	for _, stable := range []bool{false, true} {
		sg := c.FetchOffsets(&rg, 8, stable)
		require.Equal(t, "nobody", sg.Group)
		require.Zero(t, sg.ErrorCode)
		require.Len(t, sg.Topics, 2)
		for i, st := range sg.Topics {
			require.Equal(t, rg.Topics[i].Topic, st.Topic)
			require.Len(t, st.Partitions, 3)
			for j, sp := range st.Partitions {
				require.Equal(t, rg.Topics[i].Partitions[j], sp.Partition, "partitions in request order")
				require.Zero(t, sp.ErrorCode)
				require.Equal(t, int64(-1), sp.Offset)
				require.Equal(t, int32(-1), sp.LeaderEpoch)
				require.NotNil(t, sp.Metadata)
				require.Equal(t, "", *sp.Metadata)
			}
		}
	}

	// All topics (Topics nil): nothing.
	all := kmsg.NewOffsetFetchRequestGroup()
	all.Group = "nobody"
	sg := c.FetchOffsets(&all, 8, false)
	require.Zero(t, sg.ErrorCode)
	require.Empty(t, sg.Topics)

	// v10 names topics by id: an unknown id answers UNKNOWN_TOPIC_ID.
	v10 := kmsg.NewOffsetFetchRequestGroup()
	v10.Group = "nobody"
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.TopicID = [16]byte{1, 2, 3}
	rt.Partitions = []int32{0}
	v10.Topics = append(v10.Topics, rt)
	sg = c.FetchOffsets(&v10, 10, false)
	require.Len(t, sg.Topics, 1)
	require.Equal(t, [16]byte{1, 2, 3}, sg.Topics[0].TopicID)
	require.Len(t, sg.Topics[0].Partitions, 1)
	require.Equal(t, kerr.UnknownTopicID.Code, sg.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int64(-1), sg.Topics[0].Partitions[0].Offset)

	// An empty group id is invalid.
	empty := kmsg.NewOffsetFetchRequestGroup()
	sg = c.FetchOffsets(&empty, 8, false)
	require.Equal(t, kerr.InvalidGroupID.Code, sg.ErrorCode)

	// A fetch makes no group.
	require.False(t, c.Exists("nobody"))
	require.Empty(t, c.List(nil, nil))
}

func TestDeleteGroupUnknown(t *testing.T) {
	t.Parallel()
	c := openCoord(t, t.TempDir())
	code, msg := c.DeleteGroup("nobody")
	require.Equal(t, kerr.GroupIDNotFound.Code, code)
	require.Equal(t, "Group nobody not found.", msg)
	code, _ = c.DeleteGroup("")
	require.Equal(t, kerr.InvalidGroupID.Code, code)
	require.False(t, c.Exists("nobody"))
}

func TestDescribeUnknownGroup(t *testing.T) {
	t.Parallel()
	c := openCoord(t, t.TempDir())

	sg := c.Describe("nobody", 5, false)
	require.Equal(t, "nobody", sg.Group)
	require.Equal(t, "Dead", sg.State)
	require.Zero(t, sg.ErrorCode, "before v6 an unknown group is only Dead")
	require.Equal(t, int32(-2147483648), sg.AuthorizedOperations)

	sg = c.Describe("nobody", 6, true)
	require.Equal(t, "Dead", sg.State)
	require.Equal(t, kerr.GroupIDNotFound.Code, sg.ErrorCode)
	require.NotNil(t, sg.ErrorMessage)
	require.Equal(t, "Group nobody not found.", *sg.ErrorMessage)
	require.Equal(t, int32(protocol.GroupAllOperations), sg.AuthorizedOperations)

	sg = c.Describe("", 6, false)
	require.Equal(t, kerr.InvalidGroupID.Code, sg.ErrorCode)
	require.False(t, c.Exists("nobody"))
}

func TestDeleteOffsetsUnknownGroupOrTopic(t *testing.T) {
	t.Parallel()
	c := openCoord(t, t.TempDir())
	req := kmsg.NewOffsetDeleteRequest()
	rt := kmsg.NewOffsetDeleteRequestTopic()
	rt.Topic = "a"
	for _, p := range []int32{0, 1} {
		rp := kmsg.NewOffsetDeleteRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.OffsetDeleteRequestTopic{rt}

	resp := kmsg.NewOffsetDeleteResponse()
	c.DeleteOffsets(&req, &resp)
	require.Equal(t, kerr.InvalidGroupID.Code, resp.ErrorCode)

	req.Group = "g"
	resp = kmsg.NewOffsetDeleteResponse()
	c.DeleteOffsets(&req, &resp)
	require.Equal(t, kerr.GroupIDNotFound.Code, resp.ErrorCode)

	// The group exists, the topic does not: each partition is
	// UNKNOWN_TOPIC_OR_PARTITION and the offset stays.
	tp := TP{"a", 0}
	require.NoError(t, c.ApplyTxnOffsets("g", map[TP]OffsetCommit{tp: plainOffset(5)}))
	resp = kmsg.NewOffsetDeleteResponse()
	c.DeleteOffsets(&req, &resp)
	require.Zero(t, resp.ErrorCode)
	require.Len(t, resp.Topics, 1)
	require.Equal(t, "a", resp.Topics[0].Topic)
	require.Len(t, resp.Topics[0].Partitions, 2)
	for i, sp := range resp.Topics[0].Partitions {
		require.Equal(t, int32(i), sp.Partition)
		require.Equal(t, kerr.UnknownTopicOrPartition.Code, sp.ErrorCode)
	}
	exists, has := c.HasCommitted("g", tp)
	require.True(t, exists)
	require.True(t, has)
}

// buildCommit is an OffsetCommit of group (generation -1, a simple
// commit) for the partitions of topic.
func buildCommit(version int16, group, topic string, id [16]byte, parts ...int32) kmsg.OffsetCommitRequest {
	req := kmsg.NewOffsetCommitRequest()
	req.Version = version
	req.Group = group
	req.Generation = -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	for _, p := range parts {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = p
		rp.Offset = 10 + int64(p)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	return req
}

func TestCommitUnknownTopicStoresNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := openCoord(t, dir)

	check := func(resp *kmsg.OffsetCommitResponse, topic string, code int16, parts ...int32) {
		t.Helper()
		require.Len(t, resp.Topics, 1)
		require.Equal(t, topic, resp.Topics[0].Topic)
		require.Len(t, resp.Topics[0].Partitions, len(parts))
		for i, sp := range resp.Topics[0].Partitions {
			require.Equal(t, parts[i], sp.Partition)
			require.Equal(t, code, sp.ErrorCode, "partition %d", sp.Partition)
		}
	}

	// By name (v8), a simple commit that would create the group.
	req := buildCommit(8, "g", "nope", [16]byte{}, 0, 1, -1)
	resp := kmsg.NewOffsetCommitResponse()
	c.Commit(&req, &resp)
	check(&resp, "nope", kerr.UnknownTopicOrPartition.Code, 0, 1, -1)

	// By id (v10): UNKNOWN_TOPIC_ID.
	req = buildCommit(10, "g", "", [16]byte{9}, 0)
	resp = kmsg.NewOffsetCommitResponse()
	c.Commit(&req, &resp)
	check(&resp, "", kerr.UnknownTopicID.Code, 0)
	require.Equal(t, [16]byte{9}, resp.Topics[0].TopicID)

	// A member's commit to a group that does not exist, and an empty
	// group id: the topic's code comes first.
	req = buildCommit(9, "h", "nope", [16]byte{}, 0)
	req.Generation, req.MemberID = 3, "m"
	resp = kmsg.NewOffsetCommitResponse()
	c.Commit(&req, &resp)
	check(&resp, "nope", kerr.UnknownTopicOrPartition.Code, 0)
	req = buildCommit(8, "", "nope", [16]byte{}, 0)
	resp = kmsg.NewOffsetCommitResponse()
	c.Commit(&req, &resp)
	check(&resp, "nope", kerr.UnknownTopicOrPartition.Code, 0)

	// The refused commits left no group and no offset, in memory or
	// in the store.
	for _, c := range []*testCoord{c, c.restart(t, dir)} {
		require.False(t, c.Exists("g"))
		require.False(t, c.Exists("h"))
		require.Empty(t, c.List(nil, nil))
		require.Empty(t, committed(c.Coordinator))
		require.Empty(t, fetchAll(c.Coordinator, "g"))
	}
}

func TestApplyTxnOffsetsSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := openCoord(t, dir)
	offs := map[TP]OffsetCommit{
		{"a", 0}: plainOffset(5),
		{"a", 1}: plainOffset(6),
		{"b", 0}: plainOffset(7),
	}
	require.NoError(t, c.ApplyTxnOffsets("g", offs))
	require.NoError(t, c.ApplyTxnOffsets("g", nil), "nothing to apply")
	require.False(t, c.Exists("empty-apply"))

	want := map[TP]int64{{"a", 0}: 5, {"a", 1}: 6, {"b", 0}: 7}
	for i, c := range []*testCoord{c, c.restart(t, dir)} {
		require.True(t, c.Exists("g"), "run %d", i)
		require.Equal(t, want, fetchAll(c.Coordinator, "g"), "run %d", i)
		require.Equal(t, map[string]map[TP]int64{"g": want}, committed(c.Coordinator), "run %d", i)

		// The partitions asked for, with metadata and leader epoch.
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = "g"
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic = "a"
		rt.Partitions = []int32{1, 7}
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{rt}
		sg := c.FetchOffsets(&rg, 8, false)
		require.Len(t, sg.Topics, 1)
		ps := sg.Topics[0].Partitions
		require.Len(t, ps, 2)
		require.Equal(t, int64(6), ps[0].Offset)
		require.Equal(t, int32(3), ps[0].LeaderEpoch)
		require.Equal(t, "m6", *ps[0].Metadata)
		require.Equal(t, int64(-1), ps[1].Offset, "no offset for partition 7")

		// v10 reports topics by id: offsets of topics that do not
		// exist have none, and are left out of an all-topics fetch.
		all := kmsg.NewOffsetFetchRequestGroup()
		all.Group = "g"
		sg = c.FetchOffsets(&all, 10, false)
		require.Zero(t, sg.ErrorCode)
		require.Empty(t, sg.Topics)

		lg := c.List(nil, nil)
		require.Len(t, lg, 1)
		require.Equal(t, "g", lg[0].Group)
		require.Equal(t, "Empty", lg[0].GroupState)
		require.Equal(t, "classic", lg[0].GroupType)
		require.Equal(t, "", lg[0].ProtocolType)

		d := c.Describe("g", 6, false)
		require.Zero(t, d.ErrorCode)
		require.Equal(t, "Empty", d.State)
		require.Empty(t, d.Members)
	}
}

func TestPersistOffsetsOnlyVisibleAfterLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := openCoord(t, dir)
	tp := TP{"a", 0}
	require.NoError(t, c.PersistOffsetsOnly("g", map[TP]OffsetCommit{tp: plainOffset(42)}))
	require.False(t, c.Exists("g"), "only the store has it")
	c = c.restart(t, dir)
	exists, has := c.HasCommitted("g", tp)
	require.True(t, exists)
	require.True(t, has)
	require.Equal(t, map[TP]int64{tp: 42}, fetchAll(c.Coordinator, "g"))
}

func TestDeleteGroupRemovesOffsets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := openCoord(t, dir)
	require.NoError(t, c.ApplyTxnOffsets("g", map[TP]OffsetCommit{{"a", 0}: plainOffset(1), {"a", 1}: plainOffset(2)}))
	require.NoError(t, c.ApplyTxnOffsets("keep", map[TP]OffsetCommit{{"a", 0}: plainOffset(3)}))

	code, msg := c.DeleteGroup("g")
	require.Zero(t, code)
	require.Empty(t, msg)
	code, _ = c.DeleteGroup("g")
	require.Equal(t, kerr.GroupIDNotFound.Code, code, "deleted already")

	for i, c := range []*testCoord{c, c.restart(t, dir)} {
		require.False(t, c.Exists("g"), "run %d", i)
		require.Empty(t, fetchAll(c.Coordinator, "g"), "run %d", i)
		require.Equal(t, map[TP]int64{{"a", 0}: 3}, fetchAll(c.Coordinator, "keep"), "run %d", i)
		lg := c.List(nil, nil)
		require.Len(t, lg, 1, "run %d", i)
		require.Equal(t, "keep", lg[0].Group)
	}
}

func TestDropTopicOffsets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := openCoord(t, dir)
	require.NoError(t, c.ApplyTxnOffsets("g1", map[TP]OffsetCommit{{"a", 0}: plainOffset(1), {"b", 0}: plainOffset(2)}))
	require.NoError(t, c.ApplyTxnOffsets("g2", map[TP]OffsetCommit{{"a", 3}: plainOffset(4)}))

	require.NoError(t, c.DropTopicOffsets("a"))
	require.NoError(t, c.DropTopicOffsets("never-committed"))

	for i, c := range []*testCoord{c, c.restart(t, dir)} {
		require.Equal(t, map[TP]int64{{"b", 0}: 2}, fetchAll(c.Coordinator, "g1"), "run %d", i)
		require.Empty(t, fetchAll(c.Coordinator, "g2"), "run %d", i)
		_, has := c.HasCommitted("g1", TP{"a", 0})
		require.False(t, has, "run %d", i)
	}
}

func TestExpireOffsetsSimpleGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := openCoord(t, dir)
	retention := 10080 * time.Minute // offsets.retention.minutes' default
	old := plainOffset(1)
	young := plainOffset(2)
	young.CommitTime = testBase.Add(time.Hour)
	require.NoError(t, c.ApplyTxnOffsets("g", map[TP]OffsetCommit{{"a", 0}: old, {"a", 1}: young}))

	// A group of simple commits: each offset expires retention after its commit.
	c.ExpireOffsets(testBase.Add(retention - time.Millisecond))
	require.Equal(t, map[TP]int64{{"a", 0}: 1, {"a", 1}: 2}, fetchAll(c.Coordinator, "g"))
	c.ExpireOffsets(testBase.Add(retention))
	require.Equal(t, map[TP]int64{{"a", 1}: 2}, fetchAll(c.Coordinator, "g"))
	require.True(t, c.Exists("g"))

	c = c.restart(t, dir)
	require.Equal(t, map[TP]int64{{"a", 1}: 2}, fetchAll(c.Coordinator, "g"))

	// The last offset expires, and the group without offsets goes.
	c.ExpireOffsets(testBase.Add(time.Hour + retention))
	require.False(t, c.Exists("g"))
	require.Empty(t, c.List(nil, nil))
	c = c.restart(t, dir)
	require.False(t, c.Exists("g"))
}

func TestExpireOffsetsKeepsPending(t *testing.T) {
	t.Parallel()
	c := openCoord(t, t.TempDir())
	tpA, tpB := TP{"a", 0}, TP{"a", 1}
	require.NoError(t, c.ApplyTxnOffsets("g", map[TP]OffsetCommit{tpA: plainOffset(1), tpB: plainOffset(2)}))
	seq := c.Pending.Add("g", tpA, false, 0)

	c.ExpireOffsets(testBase.Add(365 * 24 * time.Hour))
	require.Equal(t, map[TP]int64{tpA: 1}, fetchAll(c.Coordinator, "g"), "the pending partition is kept")
	require.True(t, c.Exists("g"))

	// RequireStable: the pending partition is unstable, the other has no offset.
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = "g"
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic = "a"
	rt.Partitions = []int32{0, 1}
	rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{rt}
	sg := c.FetchOffsets(&rg, 8, true)
	ps := sg.Topics[0].Partitions
	require.Equal(t, kerr.UnstableOffsetCommit.Code, ps[0].ErrorCode)
	require.Equal(t, int64(-1), ps[0].Offset)
	require.Zero(t, ps[1].ErrorCode)
	require.Equal(t, int64(-1), ps[1].Offset)
	// Without RequireStable the committed offset is answered.
	sg = c.FetchOffsets(&rg, 8, false)
	require.Equal(t, int64(1), sg.Topics[0].Partitions[0].Offset)

	// Once nothing is pending it expires, and the group with it.
	c.Pending.Forget("g", tpA, seq)
	c.ExpireOffsets(testBase.Add(365 * 24 * time.Hour))
	require.False(t, c.Exists("g"))
}

func TestDeleteGroupWithPendingMarksOffsets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := openCoord(t, dir)
	tp := TP{"a", 0}
	// A transaction's TxnOffsetCommit: stamped before the deletion.
	old := plainOffset(9)
	old.Stamp = 1
	require.NoError(t, c.ApplyTxnOffsets("g", map[TP]OffsetCommit{{"a", 1}: plainOffset(1)}))
	c.Pending.Add("g", tp, false, 0)

	code, _ := c.DeleteGroup("g")
	require.Zero(t, code)
	require.False(t, c.Exists("g"))
	require.Empty(t, c.Pending.unstable("g"), "the deletion supersedes the pending offset")

	// The transaction commits after the deletion: its offset, older
	// than the deletion mark, is not applied and the group stays gone.
	require.NoError(t, c.ApplyTxnOffsets("g", map[TP]OffsetCommit{tp: old}))
	require.False(t, c.Exists("g"))

	c = c.restart(t, dir)
	require.False(t, c.Exists("g"), "the deletion mark makes no group at load")
	require.Empty(t, fetchAll(c.Coordinator, "g"))
}

func TestLockTxnCommit(t *testing.T) {
	t.Parallel()
	c := openCoord(t, t.TempDir())
	simple := func(group string) *kmsg.TxnOffsetCommitRequest {
		req := kmsg.NewTxnOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		return &req
	}

	// A simple committer makes the group; released with nothing in it, it goes.
	g, code := c.LockTxnCommit(simple("g"))
	require.Zero(t, code)
	require.NotNil(t, g)
	g.ReleaseTxnCommit(time.Now())
	require.False(t, c.Exists("g"))

	// With an offset pending it stays, as in Kafka.
	g, code = c.LockTxnCommit(simple("g"))
	require.Zero(t, code)
	seq := c.Pending.Add("g", TP{"a", 0}, false, 0)
	g.ReleaseTxnCommit(time.Now())
	require.True(t, c.Exists("g"))
	lg := c.List([]string{"EMPTY"}, []string{" Classic "})
	require.Len(t, lg, 1)
	require.Equal(t, "g", lg[0].Group)
	require.Empty(t, c.List(nil, []string{"consumer"}))
	require.Empty(t, c.List([]string{"Stable"}, nil))
	c.Pending.Forget("g", TP{"a", 0}, seq)

	// A member at a generation of a group that does not exist.
	req := kmsg.NewTxnOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = "other", 1, "m"
	g, code = c.LockTxnCommit(&req)
	require.Nil(t, g)
	require.Equal(t, kerr.IllegalGeneration.Code, code)
	require.False(t, c.Exists("other"))

	// A member of an empty existing group, at generation 0.
	req.Group, req.Generation = "g", 0
	g, code = c.LockTxnCommit(&req)
	require.Nil(t, g)
	require.Equal(t, kerr.UnknownMemberID.Code, code)

	// A share group's name.
	c.share["sg"] = true
	g, code = c.LockTxnCommit(simple("sg"))
	require.Nil(t, g)
	require.Equal(t, kerr.GroupIDNotFound.Code, code)
	require.False(t, c.Exists("sg"))
}

func TestListSortedAndFiltered(t *testing.T) {
	t.Parallel()
	c := openCoord(t, t.TempDir())
	for _, name := range []string{"c", "a", "b"} {
		require.NoError(t, c.ApplyTxnOffsets(name, map[TP]OffsetCommit{{"t", 0}: plainOffset(1)}))
	}
	var names []string
	for _, lg := range c.List(nil, nil) {
		names = append(names, lg.Group)
	}
	require.Equal(t, []string{"a", "b", "c"}, names)
	require.Len(t, c.List([]string{"empty"}, []string{"classic"}), 3)
	require.Empty(t, c.List(nil, []string{"share"}), "an unknown type matches nothing")
}

func TestClosedCoordinatorExpiresNothing(t *testing.T) {
	t.Parallel()
	c := openCoord(t, t.TempDir())
	require.NoError(t, c.ApplyTxnOffsets("g", map[TP]OffsetCommit{{"a", 0}: plainOffset(1)}))
	c.Coordinator.Close()
	c.ExpireOffsets(testBase.Add(365 * 24 * time.Hour))
	require.Equal(t, map[TP]int64{{"a", 0}: 1}, fetchAll(c.Coordinator, "g"))
}

func TestConcurrentApplyAndFetch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := openCoord(t, dir)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs <- c.ApplyTxnOffsets("g", map[TP]OffsetCommit{{"a", int32(i)}: plainOffset(int64(i))})
		}()
		go func() {
			defer wg.Done()
			var err error
			for tp, off := range fetchAll(c.Coordinator, "g") {
				if off != int64(tp.Partition) {
					err = fmt.Errorf("%v: offset %d", tp, off)
				}
			}
			c.CommittedOffsets(func(string, map[TP]int64) {})
			c.List(nil, nil)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	want := map[TP]int64{}
	for i := range n {
		want[TP{"a", int32(i)}] = int64(i)
	}
	require.Equal(t, want, fetchAll(c.Coordinator, "g"))
	c = c.restart(t, dir)
	require.Equal(t, want, fetchAll(c.Coordinator, "g"))
}
