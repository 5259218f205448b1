package share

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	slog "github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/sharegroup"
)

// TestPlainReadBytes: a plain fetch reads about what the records it wants
// took in the batches it read last, a quarter more, between 16 KiB and a
// megabyte (and its budget); a megabyte while it knows nothing.
func TestPlainReadBytes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ budget, records, offsetBytes, want int }{
		{math.MaxInt32, 500, 0, 1 << 20},           // nothing read yet
		{math.MaxInt32, 500, 25, 16 << 10},         // 16-byte records: the floor
		{math.MaxInt32, 500, 100, 62500},           // 500 × 100 × 5/4
		{math.MaxInt32, 500, 1100, 687500},         // 1 KiB records (a 1 MiB batch still comes whole)
		{math.MaxInt32, 500, 4000, 1 << 20},        // the cap
		{40 << 10, 500, 1100, 40 << 10},            // the fetch's byte budget
		{math.MaxInt32, 1 << 30, 1 << 20, 1 << 20}, // no overflow
		{math.MaxInt32, 0, 100, 1 << 20},
	} {
		require.Equal(t, c.want, plainReadBytes(c.budget, c.records, c.offsetBytes), "%+v", c)
	}
}

// TestSharePlainFetchPassesAbortedRecords: a read_committed plain fetch
// reaches a committed record behind about 4 MiB of an aborted
// transaction's records in small batches in one acquisition, though it
// reads only about what it wants once it knows the records' size: rounds
// that acquire nothing read a megabyte (found by review: with every round
// sized by the records wanted, it took 13 acquisitions, each ShareFetch
// waiting out its MaxWait in between).
func TestSharePlainFetchPassesAbortedRecords(t *testing.T) {
	t.Parallel()
	h := newTestShare(t, "")
	h.setBrokerConfig("group.share.min.record.lock.duration.ms", "1000")
	h.createTopic("txn", 1, nil)
	lp := h.topics.Partition("txn", 0)
	// The log a transactional client (franz-go, KIP-890 part 2: every
	// EndTxn moves the epoch on) writes with 16 KiB uncompressed batches:
	// 40,000 records of 100 bytes in batches of 148, as many as fit (the
	// last of 40), at offsets 0..39,999, aborted by the marker at 40,000;
	// then "c" at 40,001 in a transaction committed by the marker at
	// 40,002.
	const pid, perBatch = 1, 148
	marker := func(epoch int16, commit bool) int64 {
		t.Helper()
		res, err := lp.Log.WriteMarker(slog.Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit}, time.Now())
		require.NoError(t, err)
		require.NoError(t, <-h.syncer.Appended(lp, res.BaseOffset, res.LastOffset+1, true))
		return res.BaseOffset
	}
	val := make([]byte, 100)
	for off := 0; off < 40_000; off += perBatch {
		var recs []testRecord
		for range min(perBatch, 40_000-off) {
			recs = append(recs, testRecord{value: val})
		}
		b := encodeBatch(recs, batchOpts{transactional: true, producerID: pid, epoch: 0, sequence: int32(off)})
		require.LessOrEqual(t, len(b), 16<<10, "a batch of at most 16 KiB")
		if len(recs) == perBatch {
			require.Greater(t, len(b)+110, 16<<10, "as many records as fit in 16 KiB")
		}
		require.EqualValues(t, off, h.appendBatch("txn", 0, b))
	}
	require.EqualValues(t, 0, lp.Log.LastStableOffset(), "the aborted transaction is open")
	require.EqualValues(t, 40_000, marker(1, false), "the abort marker")
	require.EqualValues(t, 40_001, lp.Log.LastStableOffset())
	require.EqualValues(t, 40_001, h.appendBatch("txn", 0, encodeBatch([]testRecord{{value: []byte("c")}},
		batchOpts{transactional: true, producerID: pid, epoch: 1, sequence: 0})))
	require.EqualValues(t, 40_001, lp.Log.LastStableOffset(), "the committed transaction is open")
	require.EqualValues(t, 40_002, marker(2, true), "the commit marker")
	require.EqualValues(t, 40_003, lp.Log.LastStableOffset())
	require.EqualValues(t, 40_003, lp.Log.HighWatermark())
	require.Equal(t, []slog.AbortedTxn{{ProducerID: pid, FirstOffset: 0, LastOffset: 40_000}}, lp.Log.AbortedTransactions(0, 40_003))

	h.setGroupConfigs("g", "share.auto.offset.reset", "earliest", "share.isolation.level", "read_committed")
	tp := h.tp("txn", 0)
	_, lp, _ = h.topics.PartitionByID(tp.topicID, 0)
	st := h.c.shareSettings("g")
	require.True(t, st.readCommitted)
	sp := h.c.part(shareKey("g", tp))
	sp.mu.Lock()
	sp.mu.offsetBytes = 110 // as a fetch of this topic learns it
	sp.mu.Unlock()
	acq, _, err := sp.acquire(st, "m", false, lp, 10, sharegroup.BatchOptimized, 1<<20, new([]byte), nil)
	require.NoError(t, err)
	require.Equal(t, []sharegroup.Acquired{{First: 40_001, Last: 40_001, DeliveryCount: 1}}, acq,
		"the committed record, past 40,000 aborted ones and their abort marker")
}
