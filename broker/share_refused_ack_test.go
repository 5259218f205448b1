package broker

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/sharegroup/store"
)

// multiGate holds the next n share-state group commits, each until
// release says how it ends.
type multiGate struct {
	left     atomic.Int32
	arrivals atomic.Int32
	release  chan error
}

func (g *multiGate) hook() error {
	if g.left.Add(-1) < 0 {
		return nil
	}
	g.arrivals.Add(1)
	return <-g.release
}

func ackReqParts(r *rawShare, epoch int32, parts map[int32][]int64) *kmsg.ShareAcknowledgeRequest {
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &r.group, &r.member, epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = r.topicID
	for _, p := range []int32{0, 1, 2} {
		offs, ok := parts[p]
		if !ok {
			continue
		}
		rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
		rp.Partition = p
		for _, off := range offs {
			ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
			ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = off, off, []int8{1}
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchParts(r *rawShare, epoch int32, maxRecords int32, parts ...int32) map[int32][][3]int64 {
	req := fetchRequest(r, epoch, 0)
	req.MaxRecords, req.BatchSize = maxRecords, maxRecords
	req.Topics[0].Partitions = nil
	for _, p := range parts {
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = p
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	out := map[int32][][3]int64{}
	for _, p := range r.do(req).(*kmsg.ShareFetchResponse).Topics[0].Partitions {
		out[p.Partition] = acquired(p)
	}
	return out
}

// TestShareRefusedAckLeavesNothingDurable: m1 accepts records of
// share-partitions A (p0) and B (p2) in one request (and names C, p1).
// A write of A by another member (W0) is in flight and fails while m1's
// acknowledge, holding A, C and B, waits in C's reload for C's own write
// in flight. A is then marked failed, so the store refuses m1's write at
// Submit (ErrEarlierWriteFailed), and must mark B failed as well: before
// acknowledge comes back to B to discard it (it first waits for A's
// lock), B's lock timer fires on the Partition holding the refused
// acceptance, and its expiry write must not be applied (it would move
// B's stored SPSO past record 0, whose acceptance was answered
// KAFKA_STORAGE_ERROR). Found by a review; see
// TestSubmitRefusedBatchMarksEveryKey.
func TestShareRefusedAckLeavesNothingDurable(t *testing.T) {
	t.Parallel()
	g := &multiGate{release: make(chan error, 2)}
	b := startShareTest(t, func(c *Config) { c.shareBeforeCommit = g.hook })
	t.Cleanup(func() {
		g.left.Store(-100)
		for i := 0; i < 2; i++ {
			select {
			case g.release <- nil:
			default:
			}
		}
	})
	g.left.Store(-100) // disarmed
	createTopicRaw(t, b, "rt", 3)
	cl := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p, n := range map[int32]int{0: 2, 1: 2, 2: 3} {
		for i := 0; i < n; i++ {
			produceAll(t, cl, &kgo.Record{Topic: "rt", Partition: p, Value: []byte{byte('0' + i)}})
		}
	}
	// Whether acknowledge gets A's lock back before the test does is a
	// race (Go mutexes are not FIFO): try a few times, each with a new
	// share group.
	for try := 0; try < 8; try++ {
		if back := refusedAckTry(t, b, g, fmt.Sprintf("rg%d", try)); firstOffset(back) != 0 {
			t.Fatalf("try %d: B's refused acceptance of record 0 became durable through the expiry write: redelivered %v", try, back)
		}
	}
}

// refusedAckTry runs the scenario once and returns what a new
// member then gets of B.
func refusedAckTry(t *testing.T, b *Broker, g *multiGate, group string) [][3]int64 {
	g.arrivals.Store(0)
	setShareGroupConfigs(t, b, group, "share.auto.offset.reset", "earliest",
		"share.record.lock.duration.ms", "1000", "share.acquire.mode", "record_limit")
	m1, m2, m3, m4 := newRawShare(t, b, group, "m1", "rt"), newRawShare(t, b, group, "m2", "rt"),
		newRawShare(t, b, group, "m3", "rt"), newRawShare(t, b, group, "m4", "rt")
	require.Equal(t, [][3]int64{{0, 0, 1}}, fetchParts(m3, 0, 1, 0)[0])
	require.Equal(t, [][3]int64{{0, 0, 1}}, fetchParts(m2, 0, 1, 1)[1])
	require.Equal(t, [][3]int64{{1, 1, 1}}, fetchParts(m4, 0, 1, 1)[1])
	got := fetchParts(m1, 0, 100, 0, 1, 2)
	require.Equal(t, [][3]int64{{1, 1, 1}}, got[0])
	require.Equal(t, [][3]int64{{0, 2, 1}}, got[2])

	key := func(p int32) store.Key { return store.Key{Group: group, TopicID: m1.topicID, Partition: p} }
	spA, spC := key(0), key(1)
	acking := b.shares.PendingAcks

	g.left.Store(2)
	m2Done := m2.async(ackReqParts(m2, 1, map[int32][]int64{1: {0}})) // W_C1: held (group 1)
	require.Eventually(t, func() bool { return g.arrivals.Load() == 1 }, 5*time.Second, time.Millisecond)
	m4Done := m4.async(ackReqParts(m4, 1, map[int32][]int64{1: {1}})) // W_C2, chained behind W_C1
	m3Done := m3.async(ackReqParts(m3, 1, map[int32][]int64{0: {0}})) // W0 of A
	require.Eventually(t, func() bool { return acking(spC) == 2 && acking(spA) == 1 }, 5*time.Second, time.Millisecond)
	g.release <- errors.New("injected: group 1") // W_C1 fails; group 2 = {W_C2, W0} held
	require.Equal(t, kerr.KafkaStorageError.Code, ackCode(t, (<-m2Done).(*kmsg.ShareAcknowledgeResponse)))
	require.Eventually(t, func() bool { return g.arrivals.Load() == 2 }, 5*time.Second, time.Millisecond)

	// m1 accepts A:1 and B:0,2 (C:0 is not its own): it locks A, C, B,
	// prepares A (W0 not done: kept), then waits in C's Load for W_C2.
	m1Done := m1.async(ackReqParts(m1, 1, map[int32][]int64{0: {1}, 1: {0}, 2: {0, 2}}))
	time.Sleep(200 * time.Millisecond)
	locked := make(chan struct{})
	var releaseA func()
	go func() { releaseA = b.shares.HoldPartition(spA); close(locked) }() // A busy when acknowledge comes back to it
	time.Sleep(50 * time.Millisecond)
	g.release <- errors.New("injected: group 2") // W0 fails: A marked; m1's Submit is refused
	<-locked
	time.Sleep(1500 * time.Millisecond) // B's record 1 lock runs out: fire() on B writes
	releaseA()
	<-m3Done
	<-m4Done
	resp := (<-m1Done).(*kmsg.ShareAcknowledgeResponse)
	for _, p := range resp.Topics[0].Partitions {
		if p.Partition == 2 {
			require.Equal(t, kerr.KafkaStorageError.Code, p.ErrorCode) // the client is told it failed
		}
	}
	m5 := newRawShare(t, b, group, "m5", "rt")
	return fetchParts(m5, 0, 100, 2)[2]
}
