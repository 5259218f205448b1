package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestElectLeadersSingleNode: on a single node every partition's one
// replica is its preferred leader and leads, so a preferred election is
// ELECTION_NOT_NEEDED per partition asked for, and an election of all
// partitions answers none of them, as Kafka's controller leaves those
// out; an unclean one is ELECTION_NOT_NEEDED too (the leader is live);
// unknown partitions are UNKNOWN_TOPIC_OR_PARTITION, an unknown
// election type INVALID_REQUEST.
func TestElectLeadersSingleNode(t *testing.T) {
	e := startAdminBroker(t, t.TempDir())
	e.createTopic("el", 2, nil)

	rs, err := e.adm.ElectLeaders(e.ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"el": {0: {}, 1: {}}, "nope": {0: {}}})
	require.NoError(t, err)
	for _, p := range []int32{0, 1} {
		require.ErrorIs(t, rs["el"][p].Err, kerr.ElectionNotNeeded, "el-%d", p)
	}
	require.ErrorIs(t, rs["nope"][0].Err, kerr.UnknownTopicOrPartition)

	rs, err = e.adm.ElectLeaders(e.ctx, kadm.ElectLiveReplica, kadm.TopicsSet{"el": {0: {}, 5: {}}})
	require.NoError(t, err)
	require.ErrorIs(t, rs["el"][0].Err, kerr.ElectionNotNeeded)
	require.ErrorIs(t, rs["el"][5].Err, kerr.UnknownTopicOrPartition)

	rs, err = e.adm.ElectLeaders(e.ctx, kadm.ElectPreferredReplica, nil) // every partition
	require.NoError(t, err)
	require.Contains(t, rs, "el")
	require.Empty(t, rs["el"], "partitions whose election was not needed are left out")

	for _, v := range []int16{0, 1, 2} {
		req := kmsg.NewPtrElectLeadersRequest()
		req.Version = v
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = "el", []int32{1}
		req.Topics = append(req.Topics, rt)
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(43, v)
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.b.Addr()), kgo.MaxVersions(vs))
		require.NoError(t, err)
		resp, err := req.RequestWith(e.ctx, cl)
		cl.Close()
		require.NoError(t, err)
		require.Equal(t, v, resp.GetVersion())
		r := resp
		require.Zero(t, r.ErrorCode, "v%d", v)
		require.Equal(t, kerr.ElectionNotNeeded.Code, r.Topics[0].Partitions[0].ErrorCode, "v%d", v)
	}

	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType = 7
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = "el", []int32{0}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(e.ctx, e.cl)
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidRequest.Code, resp.ErrorCode)
	require.Equal(t, kerr.InvalidRequest.Code, resp.Topics[0].Partitions[0].ErrorCode)
}
