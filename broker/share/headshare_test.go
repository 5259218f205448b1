package share

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/sharegroup"
)

// In ordered mode a member slow to acknowledge (spread) takes at most its
// share of the heads while another member waits with less, wakes the
// waiting ones for the rest, and does not count locks that ran out as
// held. The protocol side (spreadHeads timing, franz-go consumers) is
// integration's TestShareOrderedSlowConsumersAllWork.
func TestOrderedSlowMemberLeavesWaitersTheirShare(t *testing.T) {
	h := newTestShare(t, "")
	h.setBrokerConfig("group.share.min.record.lock.duration.ms", "1000")
	h.createTopic("hs", 1, nil)
	for i := range 20 { // 10 message groups of 2 records
		// One batch per record, from an idempotent producer, as a
		// client's ProduceSync of each writes them.
		off := h.appendBatch("hs", 0, encodeBatch([]testRecord{{key: fmt.Appendf(nil, "g%d", i%10)}},
			batchOpts{producerID: 1, sequence: int32(i)}))
		require.EqualValues(t, i, off)
	}
	h.setGroupConfigs("hg", "share.auto.offset.reset", "earliest",
		"share.message.group.source", "key", "share.message.group.ordered", "true",
		"share.record.lock.duration.ms", "1000")
	tp := h.tp("hs", 0)
	_, lp, _ := h.topics.PartitionByID(tp.topicID, 0)
	st := h.c.shareSettings("hg")
	sp := h.c.part(shareKey("hg", tp))
	acquire := func(member string, spread bool, max int) int64 {
		t.Helper()
		acq, _, err := sp.acquire(st, member, spread, lp, max, sharegroup.RecordLimit, 1<<20, new([]byte), nil)
		require.NoError(t, err)
		var n int64
		for _, a := range acq {
			n += a.Last - a.First + 1
		}
		return n
	}

	// w holds 4 of the 10 heads and waits for more: m, slow, takes its
	// share of 5 and wakes w.
	require.EqualValues(t, 4, acquire("w", false, 4))
	wake := make(chan struct{}, 1)
	sp.waiters.add(wake, "w")
	defer sp.waiters.remove(wake)
	require.EqualValues(t, 5, acquire("m", true, 100))
	select {
	case <-wake:
	default:
		t.Fatal("the waiting member was not woken for the heads left to it")
	}
	// A member acknowledging at once is not bounded: f takes the last.
	require.EqualValues(t, 1, acquire("f", false, 100))

	// Every lock runs out (the timer stopped: only acquisitions expire
	// them). Nobody holds anything now: m's share with w is 5 again.
	sp.mu.Lock()
	sp.mu.timer.Stop()
	sp.mu.Unlock()
	time.Sleep(1100 * time.Millisecond)
	require.EqualValues(t, 5, acquire("m", true, 100))
}
