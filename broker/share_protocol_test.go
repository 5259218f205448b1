package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawShare speaks the share protocol directly, as one member with its own
// connections.
type rawShare struct {
	t       *testing.T
	cl      *kgo.Client
	group   string
	member  string
	epoch   int32
	topicID [16]byte
}

func newRawShare(t *testing.T, b *Broker, group, member, topic string) *rawShare {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	r := &rawShare{t: t, cl: cl, group: group, member: member}
	if tp := b.topics.Get(topic); tp != nil {
		r.topicID = tp.ID
	}
	return r
}

func (r *rawShare) do(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := r.cl.SeedBrokers()[0].Request(ctx, req)
	require.NoError(r.t, err)
	return resp
}

func ackBatch(first, last int64, types ...int8) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
	ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = first, last, types
	return ab
}

// fetch sends a ShareFetch at epoch for partition 0 of the member's
// topic with acks, and returns the response. wait is MaxWaitMillis.
func (r *rawShare) fetch(epoch int32, wait int32, maxRecords int32, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
	r.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = &r.group, &r.member
	req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = epoch, wait, 1, 1<<20
	req.MaxRecords, req.BatchSize = maxRecords, maxRecords
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = r.topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.AcknowledgementBatches = acks
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return r.do(req).(*kmsg.ShareFetchResponse)
}

// ack sends a ShareAcknowledge for partition 0 of the member's topic.
func (r *rawShare) ack(epoch int32, renew bool, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareAcknowledgeResponse {
	r.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID = &r.group, &r.member
	req.ShareSessionEpoch, req.IsRenewAck = epoch, renew
	if len(acks) > 0 {
		rt := kmsg.NewShareAcknowledgeRequestTopic()
		rt.TopicID = r.topicID
		rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
		for _, a := range acks {
			ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
			ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = a.FirstOffset, a.LastOffset, a.AcknowledgeTypes
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
		}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return r.do(req).(*kmsg.ShareAcknowledgeResponse)
}

// onlyPartition returns the single partition of a ShareFetch response.
func onlyPartition(t *testing.T, resp *kmsg.ShareFetchResponse) kmsg.ShareFetchResponseTopicPartition {
	t.Helper()
	require.Equal(t, int16(0), resp.ErrorCode, "top-level error %v", kerr.ErrorForCode(resp.ErrorCode))
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	p := resp.Topics[0].Partitions[0]
	require.Equal(t, int32(-1), p.CurrentLeader.LeaderID)
	require.Equal(t, int32(-1), p.CurrentLeader.LeaderEpoch)
	return p
}

func ackCode(t *testing.T, resp *kmsg.ShareAcknowledgeResponse) int16 {
	t.Helper()
	require.Equal(t, int16(0), resp.ErrorCode, "top-level error %v", kerr.ErrorForCode(resp.ErrorCode))
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	return resp.Topics[0].Partitions[0].ErrorCode
}

func acquired(p kmsg.ShareFetchResponseTopicPartition) [][3]int64 {
	var out [][3]int64
	for _, a := range p.AcquiredRecords {
		out = append(out, [3]int64{a.FirstOffset, a.LastOffset, int64(a.DeliveryCount)})
	}
	return out
}

func TestShareApiVersions(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	cl := newClient(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	require.NoError(t, err)
	want := map[int16][2]int16{76: {1, 1}, 77: {1, 1}, 78: {1, 2}, 79: {1, 2}, 90: {0, 1}, 91: {0, 0}, 92: {0, 0}}
	for _, k := range resp.ApiKeys {
		if w, ok := want[k.ApiKey]; ok {
			require.Equal(t, w, [2]int16{k.MinVersion, k.MaxVersion}, "key %d", k.ApiKey)
			delete(want, k.ApiKey)
		}
	}
	require.Empty(t, want)
}

// Session epochs and bad acknowledgements get Kafka's error codes and
// change nothing else.
func TestShareSessionsAndBadAcks(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	produceValues(t, b, "sb", 20)
	setShareGroupConfigs(t, b, "g", "share.auto.offset.reset", "earliest")
	m1 := newRawShare(t, b, "g", "member-1", "sb")

	// No session yet.
	require.Equal(t, kerr.InvalidShareSessionEpoch.Code, m1.ack(0, false, ackBatch(0, 0, 1)).ErrorCode)
	require.Equal(t, kerr.ShareSessionNotFound.Code, m1.ack(1, false, ackBatch(0, 0, 1)).ErrorCode)
	require.Equal(t, kerr.ShareSessionNotFound.Code, m1.fetch(3, 0, 10).ErrorCode)
	require.Equal(t, kerr.ShareSessionNotFound.Code, m1.ack(-1, false).ErrorCode)
	// Acknowledgements on an opening fetch.
	require.Equal(t, kerr.InvalidRequest.Code, m1.fetch(0, 0, 10, ackBatch(0, 0, 1)).ErrorCode)

	// Open: the whole first batch and more up to MaxRecords (batches of ~10).
	resp := m1.fetch(0, 1000, 10)
	p := onlyPartition(t, resp)
	require.NotEmpty(t, p.Records)
	got := acquired(p)
	require.NotEmpty(t, got)
	require.Equal(t, int64(0), got[0][0])
	require.Equal(t, int64(1), got[0][2])
	last := got[len(got)-1][1]
	require.Greater(t, resp.AcquisitionLockTimeoutMillis, int32(0))

	// A wrong epoch changes nothing.
	require.Equal(t, kerr.InvalidShareSessionEpoch.Code, m1.fetch(5, 0, 10).ErrorCode)
	// Past the last in-flight offset: INVALID_REQUEST (epoch 1 → 2).
	require.Equal(t, kerr.InvalidRequest.Code, ackCode(t, m1.ack(1, false, ackBatch(0, last+100, 1))))
	// Overlapping batches: INVALID_REQUEST, all or nothing (2 → 3).
	require.Equal(t, kerr.InvalidRequest.Code, ackCode(t, m1.ack(2, false, ackBatch(0, 2, 1), ackBatch(2, 3, 1))))
	// RENEW without IsRenewAck: INVALID_REQUEST (3 → 4).
	require.Equal(t, kerr.InvalidRequest.Code, ackCode(t, m1.ack(3, false, ackBatch(0, 0, 4))))
	// Per-offset types with the wrong count (4 → 5).
	require.Equal(t, kerr.InvalidRequest.Code, ackCode(t, m1.ack(4, false, ackBatch(0, 2, 1, 1))))

	// Another member cannot acknowledge m1's records.
	m2 := newRawShare(t, b, "g", "member-2", "sb")
	p2 := onlyPartition(t, m2.fetch(0, 0, 10))
	require.Equal(t, int64(last+1), acquired(p2)[0][0], "m2 acquires past m1's records")
	require.Equal(t, kerr.InvalidRecordState.Code, ackCode(t, m2.ack(1, false, ackBatch(0, 0, 1))))

	// m1's records are intact: accept 0..2 (5 → 6), then 0 again is below
	// the SPSO (silently fine) but 2 is already acknowledged... 0..2 moved
	// the SPSO to 3, so only an offset still in the window can fail:
	require.Equal(t, int16(0), ackCode(t, m1.ack(5, false, ackBatch(0, 2, 1))))
	require.Equal(t, int16(0), ackCode(t, m1.ack(6, false, ackBatch(0, 2, 1))))
	require.Equal(t, int16(0), ackCode(t, m1.ack(7, false, ackBatch(4, 4, 1))))
	require.Equal(t, kerr.InvalidRecordState.Code, ackCode(t, m1.ack(8, false, ackBatch(4, 4, 1))))

	// Unknown topic id.
	bad := *m1
	bad.topicID = [16]byte{1, 2, 3}
	require.Equal(t, kerr.UnknownTopicID.Code, ackCode(t, bad.ack(9, false, ackBatch(0, 0, 1))))

	// Piggybacked acks are reported even without data (10 → 11).
	resp = m1.fetch(10, 0, 10, ackBatch(3, 3, 1))
	p = onlyPartition(t, resp)
	require.Equal(t, int16(0), p.AcknowledgeErrorCode)

	// Unknown group / member: no session.
	ghost := newRawShare(t, b, "nope", "x", "sb")
	require.Equal(t, kerr.ShareSessionNotFound.Code, ghost.ack(1, false, ackBatch(0, 0, 1)).ErrorCode)
	// Member ids must be non-blank.
	blank := newRawShare(t, b, "g", " ", "sb")
	require.Equal(t, kerr.InvalidRequest.Code, blank.fetch(0, 0, 10).ErrorCode)

	// Closing the session releases what m1 still holds, without counting
	// a delivery: m2 gets it with count 1.
	require.Equal(t, int16(0), m1.ack(-1, false).ErrorCode)
	require.Equal(t, kerr.ShareSessionNotFound.Code, m1.ack(12, false, ackBatch(5, 5, 1)).ErrorCode)
	p2 = onlyPartition(t, m2.fetch(2, 2000, 100))
	got = acquired(p2)
	require.NotEmpty(t, got)
	require.Equal(t, int64(5), got[0][0])
	for _, a := range got {
		require.Equal(t, int64(1), a[2], "%v", got)
	}
}

// Closing the connection drops the session and releases the member's
// records without counting a delivery.
func TestShareConnectionCloseReleases(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	produceValues(t, b, "sc", 10)
	setShareGroupConfigs(t, b, "g", "share.auto.offset.reset", "earliest")
	a := newRawShare(t, b, "g", "a", "sc")
	p := onlyPartition(t, a.fetch(0, 1000, 100))
	require.Equal(t, [][3]int64{{0, 9, 1}}, acquired(p))
	require.Equal(t, 1, b.shares.Sessions())
	a.cl.Close()

	c := newRawShare(t, b, "g", "c", "sc")
	deadline := time.Now().Add(10 * time.Second)
	for {
		p = onlyPartition(t, c.fetch(0, 1000, 100))
		if len(p.AcquiredRecords) > 0 || time.Now().After(deadline) {
			break
		}
		require.Equal(t, int16(0), c.ack(-1, false).ErrorCode)
	}
	require.Equal(t, [][3]int64{{0, 9, 1}}, acquired(p))
}

// Renew through ShareFetch with IsRenewAck: the four fetch parameters
// must be zero and nothing is fetched.
func TestShareFetchRenewAck(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	produceValues(t, b, "sn", 10)
	setShareGroupConfigs(t, b, "g", "share.auto.offset.reset", "earliest")
	m := newRawShare(t, b, "g", "m", "sn")
	onlyPartition(t, m.fetch(0, 1000, 100))

	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = &m.group, &m.member
	req.ShareSessionEpoch, req.IsRenewAck = 1, true
	req.MaxBytes, req.MinBytes, req.MaxRecords, req.MaxWaitMillis = 0, 0, 0, 100
	require.Equal(t, kerr.InvalidRequest.Code, m.do(req).(*kmsg.ShareFetchResponse).ErrorCode)

	req.MaxWaitMillis = 0
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = m.topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ackBatch(0, 4, 4), ackBatch(5, 9, 1))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := onlyPartition(t, m.do(req).(*kmsg.ShareFetchResponse))
	require.Equal(t, int16(0), p.AcknowledgeErrorCode)
	require.Empty(t, p.AcquiredRecords)

	// Renew refused when the group disables it.
	setShareGroupConfigs(t, b, "g", "share.renew.acknowledge.enable", "false")
	require.Equal(t, kerr.InvalidRecordState.Code, ackCode(t, m.ack(2, true, ackBatch(0, 4, 4))))
	require.Equal(t, int16(0), ackCode(t, m.ack(3, true, ackBatch(0, 4, 1))))
}

func heartbeat(t *testing.T, r *rawShare, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = r.group, r.member, epoch, topics
	return r.do(req).(*kmsg.ShareGroupHeartbeatResponse)
}

func assignedCount(a *kmsg.ShareGroupHeartbeatResponseAssignment) int {
	n := 0
	for _, t := range a.TopicPartitions {
		n += len(t.Partitions)
	}
	return n
}

func TestShareGroupHeartbeat(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, b))
	_, err := adm.CreateTopic(ctx, 4, 1, nil, "hb")
	require.NoError(t, err)
	m1 := newRawShare(t, b, "hg", "m1", "hb")
	m2 := newRawShare(t, b, "hg", "m2", "hb")

	require.Equal(t, kerr.InvalidRequest.Code, heartbeat(t, m1, 0, nil).ErrorCode)
	require.Equal(t, kerr.GroupIDNotFound.Code, heartbeat(t, m1, 3, nil).ErrorCode)
	blank := newRawShare(t, b, "hg", "", "hb")
	require.Equal(t, kerr.InvalidRequest.Code, heartbeat(t, blank, 0, []string{"hb"}).ErrorCode)

	r := heartbeat(t, m1, 0, []string{"hb"})
	require.Equal(t, int16(0), r.ErrorCode)
	require.Equal(t, int32(1), r.MemberEpoch)
	require.Equal(t, int32(5000), r.HeartbeatIntervalMillis)
	require.NotNil(t, r.Assignment)
	require.Equal(t, 4, assignedCount(r.Assignment))

	r = heartbeat(t, m2, 0, []string{"hb"})
	require.Equal(t, int32(2), r.MemberEpoch)
	require.Equal(t, 2, assignedCount(r.Assignment))

	// m1 learns its new assignment at its next heartbeat.
	r = heartbeat(t, m1, 1, nil)
	require.Equal(t, int16(0), r.ErrorCode)
	require.Equal(t, int32(2), r.MemberEpoch)
	require.NotNil(t, r.Assignment)
	require.Equal(t, 2, assignedCount(r.Assignment))
	// Nothing changed: null assignment. The previous epoch is accepted.
	r = heartbeat(t, m1, 2, nil)
	require.Nil(t, r.Assignment)
	require.Equal(t, int16(0), heartbeat(t, m1, 1, nil).ErrorCode)
	require.Equal(t, kerr.FencedMemberEpoch.Code, heartbeat(t, m1, 7, nil).ErrorCode)
	stranger := newRawShare(t, b, "hg", "m3", "hb")
	require.Equal(t, kerr.UnknownMemberID.Code, heartbeat(t, stranger, 2, nil).ErrorCode)
	// A full request gets the assignment again; a rejoin too.
	require.NotNil(t, heartbeat(t, m1, 2, []string{"hb"}).Assignment)
	r = heartbeat(t, m1, 0, []string{"hb"})
	require.Equal(t, int16(0), r.ErrorCode)
	require.Equal(t, 2, assignedCount(r.Assignment))

	// Describe.
	dreq := kmsg.NewPtrShareGroupDescribeRequest()
	dreq.GroupIDs = []string{"hg", "nope"}
	dresp := m1.do(dreq).(*kmsg.ShareGroupDescribeResponse)
	require.Len(t, dresp.Groups, 2)
	require.Equal(t, "Stable", dresp.Groups[0].GroupState)
	require.Len(t, dresp.Groups[0].Members, 2)
	require.Equal(t, "simple", dresp.Groups[0].Assignor)
	require.Equal(t, kerr.GroupIDNotFound.Code, dresp.Groups[1].ErrorCode)
	lg := b.shares.ListGroups(nil, []string{"Share"})
	require.Len(t, lg, 1)
	require.Equal(t, "Stable", lg[0].GroupState)

	// Leave, twice.
	r = heartbeat(t, m2, -1, nil)
	require.Equal(t, int16(0), r.ErrorCode)
	require.Equal(t, int32(-1), r.MemberEpoch)
	require.Equal(t, kerr.UnknownMemberID.Code, heartbeat(t, m2, -1, nil).ErrorCode)
	r = heartbeat(t, m1, heartbeat(t, m1, 3, nil).MemberEpoch, nil)
	r = heartbeat(t, m1, r.MemberEpoch, []string{"hb"})
	require.Equal(t, 4, assignedCount(r.Assignment))

	// More partitions: a new epoch and assignment.
	_, err = adm.UpdatePartitions(ctx, 6, "hb")
	require.NoError(t, err)
	epoch := r.MemberEpoch
	r = heartbeat(t, m1, epoch, nil)
	require.Greater(t, r.MemberEpoch, epoch)
	require.NotNil(t, r.Assignment)
	require.Equal(t, 6, assignedCount(r.Assignment), "%+v", r.Assignment)

	// Offsets admin: a group with members cannot be altered.
	_, err = adm.AlterShareGroupOffsets(ctx, "hg", kadm.Offsets{"hb": {0: {At: 0}}})
	require.Error(t, err)
	require.Equal(t, int16(0), heartbeat(t, m1, -1, nil).ErrorCode)
}

// A member that stops heartbeating is removed after the session timeout
// and the group reassigns.
func TestShareGroupSessionTimeout(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	setShareBrokerConfig(b, "group.share.min.session.timeout.ms", "100")
	setShareBrokerConfig(b, "group.share.min.heartbeat.interval.ms", "10")
	setShareGroupConfigs(t, b, "tg", "share.session.timeout.ms", "500", "share.heartbeat.interval.ms", "100")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := kadm.NewClient(newClient(t, b)).CreateTopic(ctx, 2, 1, nil, "st")
	require.NoError(t, err)
	m1 := newRawShare(t, b, "tg", "m1", "st")
	m2 := newRawShare(t, b, "tg", "m2", "st")
	r := heartbeat(t, m1, 0, []string{"st"})
	require.Equal(t, int32(100), r.HeartbeatIntervalMillis)
	r = heartbeat(t, m2, 0, []string{"st"})
	require.Equal(t, 1, assignedCount(r.Assignment))
	epoch := r.MemberEpoch
	// m2 keeps heartbeating, m1 does not.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		r = heartbeat(t, m2, epoch, nil)
		require.Equal(t, int16(0), r.ErrorCode)
		epoch = r.MemberEpoch
		if r.Assignment != nil && assignedCount(r.Assignment) == 2 {
			break
		}
	}
	require.NotNil(t, r.Assignment)
	require.Equal(t, 2, assignedCount(r.Assignment))
	require.Equal(t, kerr.UnknownMemberID.Code, heartbeat(t, m1, 1, nil).ErrorCode)
	// The same id rejoins at epoch 0.
	require.Equal(t, int16(0), heartbeat(t, m1, 0, []string{"st"}).ErrorCode)
}

// Share groups and classic groups do not share ids.
func TestShareGroupTypeExclusive(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	produceValues(t, b, "sx", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cg := newClient(t, b, kgo.ConsumerGroup("classic"), kgo.ConsumeTopics("sx"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for len(cg.PollFetches(ctx).Records()) == 0 && ctx.Err() == nil {
	}
	require.True(t, b.groups.Exists("classic"))
	m := newRawShare(t, b, "classic", "m", "sx")
	require.Equal(t, kerr.GroupIDNotFound.Code, heartbeat(t, m, 0, []string{"sx"}).ErrorCode)
	require.Equal(t, kerr.GroupIDNotFound.Code, m.fetch(0, 0, 10).ErrorCode)
	require.False(t, b.shares.IsShareGroup("classic"))
}
