package integration

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/integration/workload"
)

// Share groups (KIP-932) through franz-go and hand-built requests. The
// broker package's share tests cover each acknowledgement rule; these add
// what needs several clients at once or only shows over the network.

// shareAckLog records what a share consumer's ShareAckCallback reports.
type shareAckLog struct {
	mu  sync.Mutex
	res []shareAckOutcome
}

type shareAckOutcome struct {
	partition int32
	err       error
	at        time.Time
}

func (l *shareAckLog) opt() kgo.Opt {
	return kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
		now := time.Now()
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, r := range rs {
			l.res = append(l.res, shareAckOutcome{r.Partition, r.Err, now})
		}
	})
}

// take returns what was recorded since the last take.
func (l *shareAckLog) take() []shareAckOutcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.res
	l.res = nil
	return out
}

// pollUntilHeld polls share consumer cl until one poll returns records
// (acquiring them), and returns them; who names cl in a failure.
func pollUntilHeld(t *testing.T, ctx context.Context, cl *kgo.Client, who string) []*kgo.Record {
	t.Helper()
	var held []*kgo.Record
	for len(held) == 0 {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		held = cl.PollRecords(pctx, -1).Records()
		cancel()
		require.NoError(t, ctx.Err(), "%s received nothing", who)
	}
	return held
}

// shareStart returns the SPSO and lag of group's share-partition
// topic/partition as DescribeShareGroupOffsets reports them.
func shareStart(ctx context.Context, adm *kadm.Client, group, topic string, partition int32) (start, lag int64, err error) {
	got, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		return 0, 0, err
	}
	if err := got.Error(); err != nil {
		return 0, 0, err
	}
	o, ok := got[group].Offsets.Lookup(topic, partition)
	if !ok {
		return -1, -1, nil
	}
	return o.StartOffset, o.Lag, o.Err
}

// TestShareAcksAfterReassignment: member A holds acquired records on both
// partitions of a topic; member B joins and the assignor moves one of
// them to B. KIP-932 assignments are advisory: A's acknowledgements of
// the records it still holds on the partition it lost must succeed, and
// B must never see those records.
func TestShareAcksAfterReassignment(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	topic := b.createTopic(t, 2, nil)
	group := "share-reassign-" + topic
	adm := b.admin(t)
	require.NoError(t, workload.SetGroupConfigs(ctx, b.client(t), group, "share.auto.offset.reset", "earliest"))

	const perPartition = 20
	prod := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(p int32, n int, tag string) {
		t.Helper()
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d", tag, p, i)})
		}
		require.NoError(t, prod.ProduceSync(ctx, rs...).FirstErr())
	}
	produce(0, perPartition, "first")
	produce(1, perPartition, "first")

	var logA, logB shareAckLog
	a := b.client(t, kgo.ClientID("share-member-a"), kgo.ShareGroup(group), kgo.ConsumeTopics(topic), logA.opt())

	// A alone is assigned both partitions; its first ShareFetch covers
	// both, so one poll returns (and acquires, with the default 30 s lock)
	// every record. A must not poll again before acknowledging: the next
	// poll would auto-accept them.
	held := pollUntilHeld(t, ctx, a, "A")
	heldBy := map[int32]map[int64]bool{0: {}, 1: {}}
	for _, r := range held {
		require.Equal(t, int32(1), r.DeliveryCount(), "%s/%d@%d", r.Topic, r.Partition, r.Offset)
		heldBy[r.Partition][r.Offset] = true
	}
	require.Len(t, heldBy[0], perPartition, "A's first poll should hold all of partition 0")
	require.Len(t, heldBy[1], perPartition, "A's first poll should hold all of partition 1")

	// B joins. Wait until the group has settled on one partition each and
	// A's member epoch has caught up, i.e. A heartbeated and was told it
	// lost a partition.
	bcl := b.client(t, kgo.ClientID("share-member-b"), kgo.ShareGroup(group), kgo.ConsumeTopics(topic), logB.opt())
	var lost, kept int32 = -1, -1
	deadline := time.Now().Add(20 * time.Second) // A heartbeats every 5 s
	for lost < 0 {
		require.True(t, time.Now().Before(deadline), "the group did not settle with one partition per member")
		time.Sleep(100 * time.Millisecond)
		described, err := adm.DescribeShareGroups(ctx, group)
		require.NoError(t, err)
		g := described[group]
		require.NoError(t, g.Err)
		if len(g.Members) != 2 {
			continue
		}
		var aParts, bParts []int32
		settled := true
		for _, m := range g.Members {
			if m.MemberEpoch != g.GroupEpoch {
				settled = false
			}
			var ps []int32
			for p := range m.Assignment[topic] {
				ps = append(ps, p)
			}
			switch m.ClientID {
			case "share-member-a":
				aParts = ps
			case "share-member-b":
				bParts = ps
			}
		}
		if settled && len(aParts) == 1 && len(bParts) == 1 && aParts[0] != bParts[0] {
			kept, lost = aParts[0], bParts[0]
		}
	}
	t.Logf("A keeps partition %d, B took partition %d", kept, lost)

	// New records on the lost partition go to B (A no longer fetches it);
	// the ones A holds stay A's.
	time.Sleep(300 * time.Millisecond) // let A's client apply the new assignment
	const extra = 5
	produce(lost, extra, "second")
	var gotB []*kgo.Record
	for len(gotB) < extra {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := bcl.PollRecords(pctx, -1)
		cancel()
		require.NoError(t, ctx.Err(), "B received %d of the %d new records", len(gotB), extra)
		for _, r := range fs.Records() {
			require.Equal(t, lost, r.Partition, "B fetched partition %d, which is A's", r.Partition)
			require.False(t, heldBy[r.Partition][r.Offset], "B received offset %d, which A holds", r.Offset)
			require.GreaterOrEqual(t, r.Offset, int64(perPartition))
			r.Ack(kgo.AckAccept)
			gotB = append(gotB, r)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	require.NoError(t, bcl.FlushAcks(fctx))
	cancel()
	for _, o := range logB.take() {
		require.NoError(t, o.err, "B's ack on partition %d", o.partition)
	}

	// A accepts everything it holds, on the partition it kept and on the
	// one it lost.
	for _, r := range held {
		r.Ack(kgo.AckAccept)
	}
	fctx, cancel = context.WithTimeout(ctx, 15*time.Second)
	require.NoError(t, a.FlushAcks(fctx))
	cancel()
	outcomes := logA.take()
	reported := map[int32]bool{}
	for _, o := range outcomes {
		require.NoError(t, o.err, "A's acknowledgement on partition %d (lost: %d) after the reassignment", o.partition, lost)
		reported[o.partition] = true
	}
	require.True(t, reported[lost], "no ack result for the lost partition %d: %+v", lost, outcomes)
	require.True(t, reported[kept], "no ack result for the kept partition %d: %+v", kept, outcomes)

	// Every record is now acknowledged: both SPSOs reach the log end.
	ends := map[int32]int64{kept: perPartition, lost: perPartition + extra}
	for p, end := range ends {
		waitUntil(t, fmt.Sprintf("the SPSO of partition %d reaches %d", p, end), func() bool {
			start, lag, err := shareStart(ctx, adm, group, topic, p)
			require.NoError(t, err)
			return start == end && lag == 0
		})
	}
}

// rawShareMember speaks ShareFetch and ShareAcknowledge directly, as one
// member on its own connection, and tracks its share session epoch.
type rawShareMember struct {
	t       *testing.T
	br      *kgo.Broker
	group   string
	member  string
	topicID [16]byte
	epoch   int32 // next epoch to send
}

func newRawShareMember(t *testing.T, b *testBroker, group, member string, topicID [16]byte) *rawShareMember {
	t.Helper()
	cl := b.client(t) // its own connection: the session is bound to it
	return &rawShareMember{t: t, br: cl.SeedBrokers()[0], group: group, member: member, topicID: topicID}
}

func (m *rawShareMember) request(req kmsg.Request) kmsg.Response {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := m.br.Request(ctx, req)
	require.NoError(m.t, err, "%s", kmsg.NameForKey(req.Key()))
	return resp
}

// ackRange is one acknowledgement batch; types has one entry for the
// whole range or one per offset.
type ackRange struct {
	first, last int64
	types       []int8
}

func acks(first, last int64, types ...int8) ackRange { return ackRange{first, last, types} }

// fetch sends a ShareFetch for partition 0 at the member's epoch with
// acks piggybacked and returns the response; a response without a
// top-level error advances the epoch.
func (m *rawShareMember) fetch(maxRecords int32, wait time.Duration, as ...ackRange) *kmsg.ShareFetchResponse {
	m.t.Helper()
	resp := m.fetchAt(m.epoch, maxRecords, wait, as...)
	if resp.ErrorCode == 0 {
		m.epoch++
	}
	return resp
}

func (m *rawShareMember) fetchAt(epoch, maxRecords int32, wait time.Duration, as ...ackRange) *kmsg.ShareFetchResponse {
	m.t.Helper()
	return m.request(shareFetchReq(m.group, m.member, m.topicID, epoch, maxRecords, wait, as...)).(*kmsg.ShareFetchResponse)
}

// shareFetchReq is a ShareFetch by member of group at epoch for
// partition 0 of topicID, with as piggybacked.
func shareFetchReq(group, member string, topicID [16]byte, epoch, maxRecords int32, wait time.Duration, as ...ackRange) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = &group, &member
	req.ShareSessionEpoch = epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(wait/time.Millisecond), 1, 1<<20
	req.MaxRecords, req.BatchSize = maxRecords, maxRecords
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	for _, a := range as {
		ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = a.first, a.last, a.types
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// shareAckReq is a ShareAcknowledge by member of group at epoch of as in
// partition of topicID; without acknowledgements it names no partition.
func shareAckReq(group, member string, topicID [16]byte, epoch, partition int32, as ...ackRange) *kmsg.ShareAcknowledgeRequest {
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID = &group, &member
	req.ShareSessionEpoch = epoch
	if len(as) == 0 {
		return req
	}
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = topicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	rp.Partition = partition
	for _, a := range as {
		ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = a.first, a.last, a.types
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// ack sends a ShareAcknowledge for one partition at the member's epoch
// and returns the top-level and the partition's error codes; a response
// without a top-level error advances the epoch.
func (m *rawShareMember) ack(partition int32, as ...ackRange) (top, part int16) {
	m.t.Helper()
	top, part = m.ackAt(m.epoch, partition, as...)
	if top == 0 {
		m.epoch++
	}
	return top, part
}

func (m *rawShareMember) ackAt(epoch, partition int32, as ...ackRange) (top, part int16) {
	m.t.Helper()
	req := shareAckReq(m.group, m.member, m.topicID, epoch, partition, as...)
	resp := m.request(req).(*kmsg.ShareAcknowledgeResponse)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, 0
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Partition == partition {
				return 0, p.ErrorCode
			}
		}
	}
	m.t.Fatalf("ShareAcknowledge response does not list partition %d: %+v", partition, resp.Topics)
	return 0, 0
}

// acquiredRanges returns partition 0's acquired ranges of a ShareFetch
// response as [first, last, delivery count] triples.
func acquiredRanges(t *testing.T, resp *kmsg.ShareFetchResponse) [][3]int64 {
	t.Helper()
	require.Zero(t, resp.ErrorCode, "ShareFetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	var out [][3]int64
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			require.Zero(t, rp.ErrorCode, "ShareFetch partition %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			for _, a := range rp.AcquiredRecords {
				out = append(out, [3]int64{a.FirstOffset, a.LastOffset, int64(a.DeliveryCount)})
			}
		}
	}
	return out
}

// codeName renders an error code for assertion messages.
func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}

// TestShareBadAcksChangeNothing sends acknowledgements the broker must
// refuse — a stale session epoch (ShareAcknowledge and piggybacked on
// ShareFetch), offsets inside the window that nobody holds, a range
// partly held by another member, malformed batches, an unknown
// partition — and checks each gets Kafka's error code and leaves every
// record as it was: afterwards each member's held records are still
// acknowledgeable, the released ones come back with delivery count 2 and
// nothing else is redelivered. (Wrong epochs on ShareFetch, acks above
// the window, by another member for its own range, for unknown groups
// and topic ids are covered in broker/share_protocol_test.go.)
func TestShareBadAcksChangeNothing(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testContext(t)
	topic := b.createTopic(t, 1, nil)
	group := "share-badacks-" + topic
	require.NoError(t, workload.SetGroupConfigs(ctx, b.client(t), group, "share.auto.offset.reset", "earliest"))
	// Three log batches of ten records: offsets 0-9, 10-19, 20-29.
	prod := b.client(t)
	for batch := range 3 {
		var rs []*kgo.Record
		for i := range 10 {
			rs = append(rs, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(batch*10 + i))})
		}
		require.NoError(t, prod.ProduceSync(ctx, rs...).FirstErr())
	}
	td, err := b.admin(t).ListTopics(ctx, topic)
	require.NoError(t, err)
	topicID := [16]byte(td[topic].ID)

	const accept, release, reject, gap = 1, 2, 3, 0
	m1 := newRawShareMember(t, b, group, "bad-acks-member-1", topicID)
	m2 := newRawShareMember(t, b, group, "bad-acks-member-2", topicID)
	require.Equal(t, [][3]int64{{0, 9, 1}}, acquiredRanges(t, m1.fetch(10, 5*time.Second)), "m1 acquires the first batch")
	require.Equal(t, [][3]int64{{10, 19, 1}}, acquiredRanges(t, m2.fetch(10, 5*time.Second)), "m2 acquires the second batch")

	expect := func(what string, wantTop, wantPart, top, part int16) {
		t.Helper()
		require.Equal(t, codeName(wantTop)+"/"+codeName(wantPart), codeName(top)+"/"+codeName(part), what)
	}

	// Stale ShareAcknowledge epoch: refused at the top level, not applied.
	top, part := m1.ack(0, acks(0, 0, accept))
	expect("accept 0 at the current epoch", 0, 0, top, part)
	top, part = m1.ackAt(m1.epoch-1, 0, acks(1, 1, accept))
	expect("accept 1 at the previous (stale) epoch", kerr.InvalidShareSessionEpoch.Code, 0, top, part)
	top, part = m1.ackAt(m1.epoch+1, 0, acks(1, 1, accept))
	expect("accept 1 at a future epoch", kerr.InvalidShareSessionEpoch.Code, 0, top, part)
	// Piggybacked on a ShareFetch at a stale epoch: refused as a whole.
	resp := m1.fetchAt(m1.epoch-1, 10, 0, acks(1, 1, reject))
	expect("reject 1 piggybacked at a stale epoch", kerr.InvalidShareSessionEpoch.Code, 0, resp.ErrorCode, 0)

	// m1 releases 5-9: they are Available again, held by nobody.
	top, part = m1.ack(0, acks(5, 9, release))
	expect("release 5-9", 0, 0, top, part)
	top, part = m1.ack(0, acks(5, 5, accept))
	expect("m1 accepts 5, which it released", 0, kerr.InvalidRecordState.Code, top, part)
	top, part = m2.ack(0, acks(6, 6, reject))
	expect("m2 rejects 6, which nobody holds", 0, kerr.InvalidRecordState.Code, top, part)
	top, part = m2.ack(0, acks(9, 10, accept))
	expect("m2 accepts 9-10, of which only 10 is its own", 0, kerr.InvalidRecordState.Code, top, part)
	// All or nothing: a good batch next to a bad one is not applied either.
	top, part = m1.ack(0, acks(1, 2, accept), acks(7, 7, accept))
	expect("m1 accepts 1-2 (held) and 7 (released) together", 0, kerr.InvalidRecordState.Code, top, part)
	top, part = m1.ack(0, acks(3, 4, reject), acks(12, 12, accept))
	expect("m1 rejects 3-4 (held) and accepts 12 (m2's) together", 0, kerr.InvalidRecordState.Code, top, part)

	// Malformed batches: INVALID_REQUEST for the partition.
	top, part = m1.ack(0, acks(2, 1, accept))
	expect("first offset after last", 0, kerr.InvalidRequest.Code, top, part)
	top, part = m1.ack(0, acks(1, 1))
	expect("no acknowledge types", 0, kerr.InvalidRequest.Code, top, part)
	top, part = m1.ack(0, acks(1, 1, 7))
	expect("acknowledge type 7", 0, kerr.InvalidRequest.Code, top, part)
	top, part = m1.ack(0, acks(1, 2, accept), acks(3, 4, -1))
	expect("acknowledge type -1 in a second batch", 0, kerr.InvalidRequest.Code, top, part)
	top, part = m1.ack(0, acks(3, 4, accept), acks(1, 2, accept))
	expect("batches out of order", 0, kerr.InvalidRequest.Code, top, part)
	// A partition the topic does not have.
	top, part = m1.ack(3, acks(1, 1, accept))
	expect("partition 3 of a one-partition topic", 0, kerr.UnknownTopicOrPartition.Code, top, part)
	// A gap acknowledgement of another member's record.
	top, part = m1.ack(0, acks(15, 15, gap))
	expect("m1 gap-acks 15 (m2's)", 0, kerr.InvalidRecordState.Code, top, part)

	// Nothing above changed any record: m1 still holds 1-4 and m2 10-19.
	top, part = m1.ack(0, acks(1, 4, accept))
	expect("m1 accepts 1-4, still held", 0, 0, top, part)
	top, part = m2.ack(0, acks(10, 19, accept))
	expect("m2 accepts 10-19, still held", 0, 0, top, part)
	// The released 5-9 come back once, with delivery count 2 (the refused
	// acks counted nothing), followed by the never-fetched last batch.
	var got [][3]int64
	for deadline := time.Now().Add(10 * time.Second); len(got) < 2 && time.Now().Before(deadline); {
		got = append(got, acquiredRanges(t, m1.fetch(100, time.Second))...)
	}
	require.Equal(t, [][3]int64{{5, 9, 2}, {20, 29, 1}}, got)
	top, part = m1.ack(0, acks(5, 9, accept), acks(20, 29, accept))
	expect("m1 accepts 5-9 and 20-29", 0, 0, top, part)
	start, lag, err := shareStart(ctx, b.admin(t), group, topic, 0)
	require.NoError(t, err)
	require.Equal(t, [2]int64{30, 0}, [2]int64{start, lag}, "SPSO and lag")
	// And nothing is left to deliver.
	require.Empty(t, acquiredRanges(t, m2.fetch(100, 500*time.Millisecond)))
}
