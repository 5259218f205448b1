package broker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitGate holds, then passes or fails, one share-state group commit
// (Config.shareBeforeCommit).
type commitGate struct {
	armed, atGate atomic.Bool
	release       chan error
}

func newCommitGate() *commitGate { return &commitGate{release: make(chan error, 1)} }

func (g *commitGate) hook() error {
	if !g.armed.Swap(false) {
		return nil
	}
	g.atGate.Store(true)
	return <-g.release
}

// async sends req on r's connection from another goroutine.
func (r *rawShare) async(req kmsg.Request) <-chan kmsg.Response {
	out := make(chan kmsg.Response, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		resp, err := r.cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			resp = nil
		}
		out <- resp
	}()
	return out
}

func ackRequest(r *rawShare, epoch int32, first, last int64, typ int8) *kmsg.ShareAcknowledgeRequest {
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &r.group, &r.member, epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = r.topicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = first, last, []int8{typ}
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchRequest(r *rawShare, epoch, waitMs int32) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = &r.group, &r.member
	req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = epoch, waitMs, 1, 1<<20
	req.MaxRecords, req.BatchSize = 100, 100
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = r.topicID
	rt.Partitions = append(rt.Partitions, kmsg.NewShareFetchRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	return req
}

// gatedShareBroker starts a broker whose share-state commits the
// returned gate can hold.
func gatedShareBroker(t *testing.T, mut ...func(*Config)) (*commitGate, *Broker) {
	g := newCommitGate()
	b := startShareTest(t, append([]func(*Config){func(c *Config) { c.shareBeforeCommit = g.hook }}, mut...)...)
	t.Cleanup(func() { // before the broker closes: a failed test may leave a commit held
		g.armed.Store(false)
		select {
		case g.release <- nil:
		default:
		}
	})
	return g, b
}

// orderedAckSetup starts a broker whose share-state commits g can hold,
// with one partition holding records 0 and 1 of message group "a", and
// an ordered share group in which m1 holds record 0 and m2 has a session
// and nothing.
func orderedAckSetup(t *testing.T) (g *commitGate, b *Broker, m1, m2 *rawShare) {
	g, b = gatedShareBroker(t)
	createTopicRaw(t, b, "aw", 1)
	produceAll(t, newClient(t, b), &kgo.Record{Topic: "aw", Key: []byte("a"), Value: []byte("0")},
		&kgo.Record{Topic: "aw", Key: []byte("a"), Value: []byte("1")})
	setShareGroupConfigs(t, b, "awg", "share.auto.offset.reset", "earliest",
		"share.message.group.source", "key", "share.message.group.ordered", "true")
	m1, m2 = newRawShare(t, b, "awg", "m1", "aw"), newRawShare(t, b, "awg", "m2", "aw")
	require.Equal(t, [][3]int64{{0, 0, 1}}, acquired(onlyPartition(t, m1.fetch(0, 0, 100))))
	resp := m2.fetch(0, 0, 100)
	require.Zero(t, resp.ErrorCode)
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			require.Empty(t, p.AcquiredRecords, "group a's head is m1's")
		}
	}
	return g, b, m1, m2
}

// TestShareAckDurableBeforeNextOfGroup: while the acceptance of a
// message group's head is being written, neither it nor another
// consumer's fetch is answered: the group's next record is handed out
// only once the acceptance is durable (ordered mode; after a crash the
// head would otherwise come back and be delivered after its successor).
func TestShareAckDurableBeforeNextOfGroup(t *testing.T) {
	t.Parallel()
	g, _, m1, m2 := orderedAckSetup(t)

	g.armed.Store(true)
	ackDone := m1.async(ackRequest(m1, 1, 0, 0, 1)) // accept 0; its commit is held
	require.Eventually(t, g.atGate.Load, 5*time.Second, time.Millisecond)
	fetched := m2.async(fetchRequest(m2, 1, 3000))
	select {
	case resp := <-fetched:
		t.Fatalf("record 1 handed out before the acceptance of 0 was durable: %v", resp)
	case <-ackDone:
		t.Fatal("the acknowledgement was answered before it was durable")
	case <-time.After(300 * time.Millisecond):
	}
	g.release <- nil
	ack := (<-ackDone).(*kmsg.ShareAcknowledgeResponse)
	require.Zero(t, ackCode(t, ack))
	resp := (<-fetched).(*kmsg.ShareFetchResponse)
	require.Equal(t, [][3]int64{{1, 1, 1}}, acquired(onlyPartition(t, resp)))
}

// TestShareAckFailureRedeliversHeadFirst: the acceptance of a message
// group's head fails to be written while another consumer is fetching.
// The acknowledgement answers KAFKA_STORAGE_ERROR, the share-partition
// reloads from what is durable (the lock the first consumer held is gone
// with it), and the other consumer gets the head again, never its
// successor first.
func TestShareAckFailureRedeliversHeadFirst(t *testing.T) {
	t.Parallel()
	g, b, m1, m2 := orderedAckSetup(t)

	g.armed.Store(true)
	ackDone := m1.async(ackRequest(m1, 1, 0, 0, 1))
	require.Eventually(t, g.atGate.Load, 5*time.Second, time.Millisecond)
	fetched := m2.async(fetchRequest(m2, 1, 3000))
	time.Sleep(100 * time.Millisecond) // the fetch is waiting
	g.release <- errors.New("injected commit failure")
	ack := (<-ackDone).(*kmsg.ShareAcknowledgeResponse)
	require.Equal(t, kerr.KafkaStorageError.Code, ackCode(t, ack))
	resp := (<-fetched).(*kmsg.ShareFetchResponse)
	require.Equal(t, [][3]int64{{0, 0, 1}}, acquired(onlyPartition(t, resp)), "the group's head comes back first")
	start, _ := shareSPSO(t, b, "awg", "aw")
	require.Equal(t, int64(0), start)
	require.Zero(t, ackCode(t, m2.ack(2, false, ackBatch(0, 0, 1))))
	require.Equal(t, [][3]int64{{1, 1, 1}}, acquired(onlyPartition(t, m2.fetch(3, 1000, 100))), "then its successor")
}

// TestShareAckWriteHoldsBackOnlyItsGroup: an acknowledgement's write
// does not hold the share-partition while it syncs. With the acceptance
// of group a's head being written, another consumer's fetch is answered
// at once with group b's head; only a's next record waits, until the
// acceptance is durable (ordered mode). In plain mode nothing waits.
func TestShareAckWriteHoldsBackOnlyItsGroup(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{true, false} {
		t.Run(map[bool]string{true: "ordered", false: "plain"}[ordered], func(t *testing.T) {
			t.Parallel()
			g, b := gatedShareBroker(t)
			createTopicRaw(t, b, "hb", 1)
			produceAll(t, newClient(t, b), &kgo.Record{Topic: "hb", Key: []byte("a"), Value: []byte("0")},
				&kgo.Record{Topic: "hb", Key: []byte("b"), Value: []byte("1")},
				&kgo.Record{Topic: "hb", Key: []byte("a"), Value: []byte("2")})
			setRecordLimitShareGroup(t, b, "hbg", ordered)
			m1, m2 := newRawShare(t, b, "hbg", "m1", "hb"), newRawShare(t, b, "hbg", "m2", "hb")
			require.Equal(t, [][3]int64{{0, 0, 1}}, acquired(onlyPartition(t, m1.fetch(0, 0, 1))))

			g.armed.Store(true)
			ackDone := m1.async(ackRequest(m1, 1, 0, 0, 1)) // accept 0; its commit is held
			require.Eventually(t, g.atGate.Load, 5*time.Second, time.Millisecond)
			req := fetchRequest(m2, 0, 0) // opens m2's session
			req.MaxRecords = 1
			first := m2.async(req)
			select {
			case resp := <-first:
				require.NotNil(t, resp)
				require.Equal(t, [][3]int64{{1, 1, 1}}, acquired(onlyPartition(t, resp.(*kmsg.ShareFetchResponse))))
			case <-time.After(3 * time.Second):
				t.Fatal("a fetch waited for another consumer's acknowledgement to be written")
			}
			if ordered {
				next := m2.async(fetchRequest(m2, 1, 3000))
				select {
				case resp := <-next:
					t.Fatalf("a's 2 handed out before the acceptance of 0 was durable: %v", resp)
				case <-time.After(300 * time.Millisecond):
				}
				g.release <- nil
				resp := (<-next).(*kmsg.ShareFetchResponse)
				require.Equal(t, [][3]int64{{2, 2, 1}}, acquired(onlyPartition(t, resp)))
			} else {
				g.release <- nil
			}
			ack := (<-ackDone).(*kmsg.ShareAcknowledgeResponse)
			require.Zero(t, ackCode(t, ack))
		})
	}
}

// setRecordLimitShareGroup configures group to read from the earliest
// offset in record_limit mode, ordered by record key or plain.
func setRecordLimitShareGroup(t *testing.T, b *Broker, group string, ordered bool) {
	t.Helper()
	kv := []string{"share.auto.offset.reset", "earliest", "share.acquire.mode", "record_limit"}
	if ordered {
		kv = append(kv, "share.message.group.source", "key", "share.message.group.ordered", "true")
	}
	setShareGroupConfigs(t, b, group, kv...)
}
