package broker

import (
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareParkedFetchWokenByAck: a fetch long-polling for work is woken
// by another member's acknowledgement that makes a record acquirable, and
// gets it at once, not at the end of its MaxWait: in ordered mode the
// acceptance of a message group's head (its next record becomes the
// head), in plain mode a release. Acknowledgements that free nothing
// another member could take no longer wake waiting fetches
// (sharePart.notifyIfAcquirable); these do.
func TestShareParkedFetchWokenByAck(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{true, false} {
		t.Run(map[bool]string{true: "ordered", false: "plain"}[ordered], func(t *testing.T) {
			t.Parallel()
			b := startShareTest(t)
			createTopicRaw(t, b, "wk", 1)
			produceAll(t, newClient(t, b), &kgo.Record{Topic: "wk", Key: []byte("a"), Value: []byte("0")},
				&kgo.Record{Topic: "wk", Key: []byte("a"), Value: []byte("1")})
			setRecordLimitShareGroup(t, b, "wkg", ordered)
			m1, m2 := newRawShare(t, b, "wkg", "m1", "wk"), newRawShare(t, b, "wkg", "m2", "wk")
			require.Equal(t, [][3]int64{{0, 0, 1}}, acquired(onlyPartition(t, m1.fetch(0, 0, 1))))
			if !ordered {
				// Record 1 too, so that m2 has nothing to take.
				require.Equal(t, [][3]int64{{1, 1, 1}}, acquired(onlyPartition(t, m1.fetch(1, 0, 1))))
			}

			const maxWait = 8000
			start := time.Now()
			parked := m2.async(fetchRequest(m2, 0, maxWait))
			requireParked(t, parked, "nothing was acquirable")
			epoch := int32(1)
			typ := int8(1) // accept: group a's next record becomes its head
			if !ordered {
				epoch, typ = 2, 2 // release record 0
			}
			require.Zero(t, ackCode(t, m1.do(ackRequest(m1, epoch, 0, 0, typ)).(*kmsg.ShareAcknowledgeResponse)))
			want := [][3]int64{{1, 1, 1}}
			if !ordered {
				want = [][3]int64{{0, 0, 2}}
			}
			require.Equal(t, want, requireWoken(t, parked, start, maxWait, "the acknowledgement"))
		})
	}
}

// TestShareParkedFetchWokenByAckPastLogStart: the log start has moved past
// a record held in flight (retention, which wakes nothing by itself in
// between; DeleteRecordsBefore stands in for it). An acknowledgement that
// frees room or a group's next record only once the window is advanced
// past the deleted record still wakes a fetch waiting for work: in plain
// mode the window is full (share.partition.max.record.locks) until the
// deleted record is dropped, in ordered mode group a's deleted head holds
// back its next record (found by review).
func TestShareParkedFetchWokenByAckPastLogStart(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{true, false} {
		t.Run(map[bool]string{true: "ordered", false: "plain"}[ordered], func(t *testing.T) {
			t.Parallel()
			b := startShareTest(t)
			createTopicRaw(t, b, "wl", 1)
			var recs []*kgo.Record
			if ordered {
				// a@0 a@1 b@2
				for _, k := range []string{"a", "a", "b"} {
					recs = append(recs, &kgo.Record{Topic: "wl", Key: []byte(k), Value: []byte(k)})
				}
			} else {
				for i := 0; i < 101; i++ {
					recs = append(recs, &kgo.Record{Topic: "wl", Value: []byte(strconv.Itoa(i))})
				}
			}
			produceAll(t, newClient(t, b), recs...)
			kv := []string{"share.auto.offset.reset", "earliest", "share.acquire.mode", "record_limit"}
			if ordered {
				kv = append(kv, "share.message.group.source", "key", "share.message.group.ordered", "true")
			} else {
				kv = append(kv, "share.partition.max.record.locks", "100")
			}
			setShareGroupConfigs(t, b, "wlg", kv...)
			m1, m2 := newRawShare(t, b, "wlg", "m1", "wl"), newRawShare(t, b, "wlg", "m2", "wl")
			var want [][3]int64
			var ackFirst, ackLast int64
			if ordered {
				// The heads of a and b.
				require.Equal(t, [][3]int64{{0, 0, 1}, {2, 2, 1}}, acquired(onlyPartition(t, m1.fetch(0, 0, 10))))
				ackFirst, ackLast, want = 2, 2, [][3]int64{{1, 1, 1}}
			} else {
				// The whole window: 0..99.
				require.Equal(t, [][3]int64{{0, 99, 1}}, acquired(onlyPartition(t, m1.fetch(0, 0, 100))))
				ackFirst, ackLast, want = 1, 99, [][3]int64{{100, 100, 1}}
			}

			const maxWait = 8000
			parked := m2.async(fetchRequest(m2, 0, maxWait))
			requireParked(t, parked, "nothing was acquirable")
			// Retention drops record 0 (held by m1) without a notify.
			tp := b.topics.Get("wl")
			_, lp, _ := b.topics.PartitionByID(tp.ID, 0)
			_, err := lp.Log.DeleteRecordsBefore(1)
			require.NoError(t, err)

			start := time.Now()
			// m1 accepts records that are not at the SPSO: the window
			// moves only once an acquisition advances it to the log start.
			require.Zero(t, ackCode(t, m1.do(ackRequest(m1, 1, ackFirst, ackLast, 1)).(*kmsg.ShareAcknowledgeResponse)))
			require.Equal(t, want, requireWoken(t, parked, start, maxWait, "the acknowledgement"))
		})
	}
}

// TestShareParkedFetchWokenByRetention: retention deleting the segments
// that hold every record of a plain share group's full window wakes a
// fetch waiting for work, which gets records past the new log start at
// once, not at the end of its MaxWait.
func TestShareParkedFetchWokenByRetention(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	_, err := b.topicAdmin.Create("wr", 1, map[string]string{"segment.bytes": strconv.Itoa(1 << 20), "retention.bytes": "1"}, false)
	require.NoError(t, err)
	cl := newClient(t, b)
	for batch := 0; batch < 3; batch++ { // about 600 KB each: three segments
		var recs []*kgo.Record
		for range 200 {
			value := make([]byte, 3000)
			_, _ = rand.Read(value) // incompressible
			recs = append(recs, &kgo.Record{Topic: "wr", Value: value})
		}
		produceAll(t, cl, recs...)
	}
	setShareGroupConfigs(t, b, "wrg", "share.auto.offset.reset", "earliest", "share.acquire.mode", "record_limit",
		"share.partition.max.record.locks", "100")
	m1, m2 := newRawShare(t, b, "wrg", "m1", "wr"), newRawShare(t, b, "wrg", "m2", "wr")
	require.Equal(t, [][3]int64{{0, 99, 1}}, acquired(onlyPartition(t, m1.fetch(0, 0, 100))))

	const maxWait = 8000
	parked := m2.async(fetchRequest(m2, 0, maxWait))
	requireParked(t, parked, "the window was full")
	start := time.Now()
	b.topics.EnforceRetention(time.Now(), b.lg)
	tp := b.topics.Get("wr")
	_, lp, _ := b.topics.PartitionByID(tp.ID, 0)
	logStart := lp.Log.LogStartOffset()
	require.Greater(t, logStart, int64(100), "retention deleted the segments of m1's records")
	got := requireWoken(t, parked, start, maxWait, "retention")
	require.NotEmpty(t, got)
	require.Equal(t, logStart, got[0][0])
}

// requireParked checks that the fetch sent on parked is still waiting.
func requireParked(t *testing.T, parked <-chan kmsg.Response, why string) {
	t.Helper()
	select {
	case resp := <-parked:
		t.Fatalf("%s, yet the fetch was answered: %v", why, resp)
	case <-time.After(300 * time.Millisecond):
	}
}

// requireWoken waits for the fetch sent on parked, which must be answered
// well before its MaxWait (maxWait ms), counted from since, by what woke
// it, and returns its acquired ranges.
func requireWoken(t *testing.T, parked <-chan kmsg.Response, since time.Time, maxWait int32, by string) [][3]int64 {
	t.Helper()
	select {
	case resp := <-parked:
		require.NotNil(t, resp)
		require.Less(t, time.Since(since), time.Duration(maxWait)*time.Millisecond/2, "woken by %s, not by its MaxWait", by)
		return acquired(onlyPartition(t, resp.(*kmsg.ShareFetchResponse)))
	case <-time.After(time.Duration(maxWait) * time.Millisecond):
		t.Fatalf("the waiting fetch was not woken by %s", by)
		return nil
	}
}
