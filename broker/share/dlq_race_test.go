package share

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/sharegroup"
	"github.com/shoal-mq/shoal/sharegroup/store"
)

// dlqAcquireAck acquires up to 100 records for member and acknowledges
// them all with typ.
func dlqAcquireAck(t *testing.T, h *testShare, group, topic string, member string, typ sharegroup.AckType) []sharegroup.Acquired {
	t.Helper()
	tp := shareTP{topicID: h.topics.Get(topic).ID, partition: 0}
	_, lp, _ := h.topics.PartitionByID(tp.topicID, 0)
	st := h.c.shareSettings(group)
	sp := h.c.part(shareKey(group, tp))
	acq, _, err := sp.acquire(st, member, false, lp, 100, sharegroup.RecordLimit, 1<<20, new([]byte), nil)
	require.NoError(t, err)
	var batches []sharegroup.AckBatch
	for _, a := range acq {
		batches = append(batches, sharegroup.AckBatch{First: a.First, Last: a.Last, Types: []sharegroup.AckType{typ}})
	}
	if len(batches) > 0 {
		acks := []*shareAck{{tp: tp, batches: batches}}
		h.c.acknowledge(time.Now(), group, st, member, acks)
		require.Zero(t, acks[0].code, acks[0].msg)
	}
	return acq
}

// rejectWhileWriting has member m1 reject everything it acquires from
// topic, runs meanwhile once the dead-letter copies are durable and not
// yet marked written (the crashAt hook, returning false: no crash), and
// waits until that writer has stopped. It returns the share-partition.
func rejectWhileWriting(t *testing.T, h *testShare, group, topic string, key store.Key, meanwhile func()) *sharePart {
	t.Helper()
	var fired atomic.Bool
	// Set on the running coordinator, as the root test did: no writer
	// runs yet, and the acknowledgement below starts the first.
	h.c.dlq.crashAt = func(stage string) bool {
		if stage == "durable" && fired.CompareAndSwap(false, true) {
			meanwhile()
		}
		return false
	}
	require.NotEmpty(t, dlqAcquireAck(t, h, group, topic, "m1", sharegroup.AckReject))
	sp := h.c.part(key)
	require.Eventually(t, func() bool {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		return fired.Load() && !sp.mu.dlq.running
	}, 10*time.Second, 10*time.Millisecond)
	return sp
}

// TestDLQWriterRestartsForWorkThatArrivedWhileItRan: a reset (AlterShareGroupOffsets)
// and new rejections land while the writer is inside writeDLQ (simulated
// with the crashAt hook, which returns false: no crash). completeDLQ sees
// the epoch changed and the writer stops; the epoch-1 Archiving records,
// whose kick was a no-op because the writer was running, stay Archiving.
func TestDLQWriterRestartsForWorkThatArrivedWhileItRan(t *testing.T) {
	h := newShareTest(t, "")
	const n = 5
	h.dlqGroupSetup("eg", "esrc", 1, 1, n)
	tp := shareTP{topicID: h.topics.Get("esrc").ID, partition: 0}
	_, lp, _ := h.topics.PartitionByID(tp.topicID, 0)
	key := shareKey("eg", tp)
	sp := rejectWhileWriting(t, h, "eg", "esrc", key, func() {
		// Meanwhile: the group empties, the admin resets, consumers reject again.
		require.Zero(t, h.c.resetOffset(key, h.c.shareSettings("eg"), lp, 0))
		require.NotEmpty(t, dlqAcquireAck(t, h, "eg", "esrc", "m2", sharegroup.AckReject))
	})
	time.Sleep(2 * time.Second)
	sp.mu.Lock()
	arch := sp.mu.p.Archiving()
	sp.mu.Unlock()
	require.Empty(t, arch, "epoch-1 records stuck in Archiving with no writer")
}

// TestDLQDeleteStateFencesRunningWriter: the share-partition's state is deleted
// (DeleteShareGroupOffsets / DeleteGroups) while its writer is between the
// DLQ append and markDLQWritten. Unfenced, markDLQWritten would re-create
// the deleted count and a Written intent, and completeDLQ, finding
// p == nil, would leave both: neither may be left.
func TestDLQDeleteStateFencesRunningWriter(t *testing.T) {
	h := newShareTest(t, "")
	const n = 5
	h.dlqGroupSetup("dg", "dsrc", 1, 1, n)
	tp := shareTP{topicID: h.topics.Get("dsrc").ID, partition: 0}
	key := shareKey("dg", tp)
	rejectWhileWriting(t, h, "dg", "dsrc", key, func() { require.NoError(t, h.c.deleteState("dg", nil)) })
	in, err := h.c.loadDLQIntent(key)
	require.NoError(t, err)
	counts, err := h.c.DLQCounts("dg") // Broker.ShareDLQCounts
	require.NoError(t, err)
	t.Logf("after delete: intent=%+v counts=%+v", in, counts)
	// The group starts over from earliest and rejects every record again.
	dlqHW := h.topics.Partition("dlq.dsrc", 0).Log.HighWatermark()
	require.NotEmpty(t, dlqAcquireAck(t, h, "dg", "dsrc", "m2", sharegroup.AckReject))
	require.Eventually(t, func() bool { return h.spso("dg", "dsrc", 0) == n }, 5*time.Second, 10*time.Millisecond)
	t.Logf("DLQ high watermark before re-rejection %d, after %d", dlqHW, h.topics.Partition("dlq.dsrc", 0).Log.HighWatermark())
	require.Nil(t, in, "intent of a deleted share-partition")
	require.Empty(t, counts, "count of a deleted share-partition")
}

// TestDLQRetryKeepsItsPartitionAfterPartitionsAreAdded: a writer stops
// with its dead-letter copies durable and not yet marked written (a
// crash). Partitions are then added to the DLQ topic, so source
// partition 1 would now map to DLQ partition 1. The retry after the
// restart must scan and use the partition its intent recorded (0), or it
// writes every record a second time. (Found by review.)
func TestDLQRetryKeepsItsPartitionAfterPartitionsAreAdded(t *testing.T) {
	t.Parallel()
	h := newShareTest(t, "")
	const n = 10
	h.dlqGroupSetup("pg", "psrc", 2, 1, n)
	// Set on the running coordinator, as the root test did, so that the
	// restart below (h.restart: the same options) runs without it.
	h.c.dlq.crashAt = func(s string) bool { return s == "durable" }
	for p := range int32(2) {
		tp := shareTP{topicID: h.topics.Get("psrc").ID, partition: p}
		_, lp, _ := h.topics.PartitionByID(tp.topicID, p)
		st := h.c.shareSettings("pg")
		sp := h.c.part(shareKey("pg", tp))
		acq, _, err := sp.acquire(st, "m1", false, lp, 100, sharegroup.RecordLimit, 1<<20, new([]byte), nil)
		require.NoError(t, err)
		require.Len(t, acq, 1)
		acks := []*shareAck{{tp: tp, batches: []sharegroup.AckBatch{{First: acq[0].First, Last: acq[0].Last, Types: []sharegroup.AckType{sharegroup.AckReject}}}}}
		h.c.acknowledge(time.Now(), "pg", st, "m1", acks)
		require.Zero(t, acks[0].code, acks[0].msg)
		require.Eventually(t, func() bool {
			sp.mu.Lock()
			defer sp.mu.Unlock()
			return !sp.mu.dlq.running
		}, 10*time.Second, 10*time.Millisecond)
	}
	require.Equal(t, int64(2*n), h.topics.Partition("dlq.psrc", 0).Log.HighWatermark(), "both copies durable in DLQ partition 0")
	// One partition more, as kadm's CreatePartitions(ctx, 1, "dlq.psrc")
	// did through the CreatePartitions handler (Admin.AddPartitions).
	dlqT := h.topics.Get("dlq.psrc")
	require.NoError(t, h.admin.AddPartitions(dlqT, h.topics.PartitionCount(dlqT)+1, false))

	h2 := h.restart() // b.Close, then a broker on the same data directory
	for p := range int32(2) {
		require.Eventually(t, func() bool { return h2.spso("pg", "psrc", p) == n }, 10*time.Second, 10*time.Millisecond)
	}
	require.Len(t, h2.dlqConsume("dlq.psrc", 2*n), 2*n, "every record in the DLQ exactly once")
}
