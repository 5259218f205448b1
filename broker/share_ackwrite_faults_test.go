package broker

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/sharegroup/store"
)

// The tests below come from a review of the change that let
// acknowledgements be written without holding their share-partitions
// (72fc71b); each failed on it.

// TestShareSwitchToOrderedWaitsForAckInFlight: a plain share group
// accepts record 0 of message group "a"; while that acceptance is being
// written the group is switched to ordered mode. Another consumer's fetch
// must not get record 1 (a's next) before the acceptance of 0 is durable:
// the write then fails and record 0 is delivered again, and it must not
// come after its successor.
func TestShareSwitchToOrderedWaitsForAckInFlight(t *testing.T) {
	t.Parallel()
	g, b := gatedShareBroker(t)
	createTopicRaw(t, b, "po", 1)
	produceAll(t, newClient(t, b), &kgo.Record{Topic: "po", Key: []byte("a"), Value: []byte("0")},
		&kgo.Record{Topic: "po", Key: []byte("a"), Value: []byte("1")})
	setShareGroupConfigs(t, b, "pog", "share.auto.offset.reset", "earliest", "share.acquire.mode", "record_limit")
	m1, m2 := newRawShare(t, b, "pog", "m1", "po"), newRawShare(t, b, "pog", "m2", "po")
	require.Equal(t, [][3]int64{{0, 0, 1}}, acquired(onlyPartition(t, m1.fetch(0, 0, 1))))

	g.armed.Store(true)
	ackDone := m1.async(ackRequest(m1, 1, 0, 0, 1)) // accept 0; its commit is held
	require.Eventually(t, g.atGate.Load, 5*time.Second, time.Millisecond)
	setShareGroupConfigs(t, b, "pog", "share.message.group.source", "key", "share.message.group.ordered", "true")

	fetched := m2.async(fetchRequest(m2, 0, 3000))
	var early kmsg.Response
	select {
	case early = <-fetched:
	case <-time.After(500 * time.Millisecond):
	}
	g.release <- errors.New("injected commit failure")
	ack := (<-ackDone).(*kmsg.ShareAcknowledgeResponse)
	require.Equal(t, kerr.KafkaStorageError.Code, ackCode(t, ack))
	if early == nil {
		early = <-fetched
	}
	got := acquired(onlyPartition(t, early.(*kmsg.ShareFetchResponse)))
	m3 := newRawShare(t, b, "pog", "m3", "po")
	later := acquired(onlyPartition(t, m3.fetch(0, 2000, 10)))
	require.NotEqual(t, [][3]int64{{1, 1, 1}}, got,
		"record 1 of group a was handed out while the acceptance of record 0 was in flight (then record 0 came back: %v)", later)
}

// TestShareFailedAckLeavesNothingDurable: an acknowledgement of two
// share-partitions fails to be written. Before acknowledge gets back to
// the second one (it first waits for the first one's lock, held here as
// a slow fetch or load would hold it), the second one's lock timer
// fires, on the Partition holding the failed acceptance, and writes what
// expired. That write must fail too (the store refuses writes of a
// share-partition after a failed one until it is reloaded): else the
// failed, all-or-nothing acknowledgement (accept 0 and 2) would end up
// half durable, record 0 below the stored SPSO and record 2 back.
func TestShareFailedAckLeavesNothingDurable(t *testing.T) {
	t.Parallel()
	g, b := gatedShareBroker(t)
	createTopicRaw(t, b, "ex", 2)
	cl := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceAll(t, cl, &kgo.Record{Topic: "ex", Partition: 0, Value: []byte("x")})
	for i := 0; i < 3; i++ {
		produceAll(t, cl, &kgo.Record{Topic: "ex", Partition: 1, Value: []byte{byte('0' + i)}})
	}
	setShareGroupConfigs(t, b, "exg", "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "1000")
	m1 := newRawShare(t, b, "exg", "m1", "ex")

	both := func(req *kmsg.ShareFetchRequest) *kmsg.ShareFetchRequest {
		p1 := kmsg.NewShareFetchRequestTopicPartition()
		p1.Partition = 1
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
		return req
	}
	resp := m1.do(both(fetchRequest(m1, 0, 500))).(*kmsg.ShareFetchResponse)
	held := map[int32][][3]int64{}
	for _, p := range resp.Topics[0].Partitions {
		held[p.Partition] = acquired(p)
	}
	require.Equal(t, [][3]int64{{0, 0, 1}}, held[0])
	require.Equal(t, [][3]int64{{0, 2, 1}}, held[1])

	// Accept p0:0 and p1:0,2 (p1:1 stays acquired; its lock runs out in 1 s).
	ackReq := ackRequest(m1, 1, 0, 0, 1)
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	rp.Partition = 1
	for _, off := range []int64{0, 2} {
		ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = off, off, []int8{1}
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	}
	ackReq.Topics[0].Partitions = append(ackReq.Topics[0].Partitions, rp)

	key0 := store.Key{Group: "exg", TopicID: m1.topicID, Partition: 0}
	g.armed.Store(true)
	ackDone := m1.async(ackReq)
	require.Eventually(t, g.atGate.Load, 5*time.Second, time.Millisecond)
	// Share-partition 0 busy (a log read, a load, its own write) when
	// acknowledge comes back to it.
	locked := make(chan struct{})
	var release0 func()
	go func() { release0 = b.shares.HoldPartition(key0); close(locked) }()
	select {
	case <-locked:
	case <-time.After(300 * time.Millisecond):
	}
	g.release <- errors.New("injected commit failure")
	<-locked
	time.Sleep(1500 * time.Millisecond) // p1:1's lock expires: fire() on share-partition 1
	release0()
	ack := (<-ackDone).(*kmsg.ShareAcknowledgeResponse)
	for _, p := range ack.Topics[0].Partitions {
		require.Equal(t, kerr.KafkaStorageError.Code, p.ErrorCode, "partition %d", p.Partition)
	}

	// Nothing of the failed acknowledgement may be durable: all of 0..2
	// of partition 1 come back.
	m2 := newRawShare(t, b, "exg", "m2", "ex")
	req := fetchRequest(m2, 0, 1000)
	req.Topics[0].Partitions[0].Partition = 1
	var got [][3]int64
	for _, p := range m2.do(req).(*kmsg.ShareFetchResponse).Topics[0].Partitions {
		got = append(got, acquired(p)...)
	}
	require.Equal(t, int64(0), firstOffset(got), "redelivered after the failed ack: %v", got)
}

func firstOffset(r [][3]int64) int64 {
	if len(r) == 0 {
		return -1
	}
	return r[0][0]
}

// TestShareDLQWaitsForRejectionInFlight: a dead-letter writer already
// running (retrying an earlier rejection) finds another record rejected
// by an acknowledgement whose write is in flight. It must not copy that
// record to the dead-letter topic before the rejection is durable: the
// write then fails, the REJECT answers KAFKA_STORAGE_ERROR and the record
// is delivered again.
func TestShareDLQWaitsForRejectionInFlight(t *testing.T) {
	t.Parallel()
	var hold atomic.Bool
	hold.Store(true)
	g, b := gatedShareBroker(t, func(c *Config) {
		c.shareDLQ.MaxAttempts, c.shareDLQ.Backoff, c.shareDLQ.MaxBackoff = 1000, 5*time.Millisecond, 5*time.Millisecond
		c.shareDLQ.FailAttempt = func() error {
			if hold.Load() {
				return errors.New("dead-letter topic unavailable for now")
			}
			return nil
		}
	})
	dlqGroupSetup(t, b, "dq", "dsrc", 1, 1, 2)
	m1 := newRawShare(t, b, "dq", "m1", "dsrc")
	epoch := acquireAllRaw(t, m1, 2)
	require.Zero(t, ackCode(t, m1.ack(epoch, false, ackBatch(0, 0, 3)))) // REJECT 0: durable; writer starts, retrying
	time.Sleep(50 * time.Millisecond)

	g.armed.Store(true)
	ackDone := m1.async(ackRequest(m1, epoch+1, 1, 1, 3)) // REJECT 1: its commit is held
	require.Eventually(t, g.atGate.Load, 5*time.Second, time.Millisecond)
	hold.Store(false) // the writer's next attempt snapshots Archiving = {0, 1}
	dlq := b.topics.Partition("dlq.dsrc", 0)
	copied := func() bool { return dlq.Log.HighWatermark() >= 2 }
	require.Never(t, copied, time.Second, 10*time.Millisecond,
		"record 1 copied to the dead-letter topic while its REJECT was not durable")
	g.release <- errors.New("injected commit failure")
	ack := (<-ackDone).(*kmsg.ShareAcknowledgeResponse)
	require.Equal(t, kerr.KafkaStorageError.Code, ackCode(t, ack))
}

// TestShareDescribeOffsetsWaitsForAckInFlight: DescribeShareGroupOffsets
// reports what is durable. With the acceptance of record 0 being
// written, it answers only once the write is done: SPSO 1 if it
// succeeded; SPSO 0 (reloaded from what is stored) if it failed, never
// an SPSO a crash or the failure would take back. (Found by the ordered
// crash test, which saw a reported SPSO go back after a kill.)
func TestShareDescribeOffsetsWaitsForAckInFlight(t *testing.T) {
	t.Parallel()
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "durable", true: "failed"}[fail], func(t *testing.T) {
			t.Parallel()
			g, b := gatedShareBroker(t)
			createTopicRaw(t, b, "do", 1)
			produceAll(t, newClient(t, b), &kgo.Record{Topic: "do", Value: []byte("0")}, &kgo.Record{Topic: "do", Value: []byte("1")})
			setShareGroupConfigs(t, b, "dog", "share.auto.offset.reset", "earliest", "share.acquire.mode", "record_limit")
			m1 := newRawShare(t, b, "dog", "m1", "do")
			require.Equal(t, [][3]int64{{0, 0, 1}}, acquired(onlyPartition(t, m1.fetch(0, 0, 1))))

			g.armed.Store(true)
			ackDone := m1.async(ackRequest(m1, 1, 0, 0, 1)) // accept 0; its commit is held
			require.Eventually(t, g.atGate.Load, 5*time.Second, time.Millisecond)
			described := make(chan int64, 1)
			go func() {
				start, _ := shareSPSO(t, b, "dog", "do")
				described <- start
			}()
			select {
			case start := <-described:
				t.Fatalf("described SPSO %d while the acceptance of 0 was not durable", start)
			case <-time.After(300 * time.Millisecond):
			}
			if fail {
				g.release <- errors.New("injected commit failure")
			} else {
				g.release <- nil
			}
			<-ackDone
			want := int64(1)
			if fail {
				want = 0
			}
			require.Equal(t, want, <-described)
		})
	}
}
