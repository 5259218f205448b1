package log

// A second independent review's test of compaction (session 29): it
// failed before toRun counted an empty batch with a producer id as a
// change.

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func review2Roll(t *testing.T, p *Partition) {
	p.appendMu.Lock()
	require.NoError(t, p.rollLocked(testNow))
	p.appendMu.Unlock()
	_, err := p.Sync()
	require.NoError(t, err)
}

func review2DropSnapshots(t *testing.T, fsys *MemFS) {
	names, err := fsys.ReadDir("/data/topic-0")
	require.NoError(t, err)
	for _, n := range names {
		if strings.HasSuffix(n, snapshotSuffix) {
			require.NoError(t, fsys.Remove(filepath.Join("/data/topic-0", n)))
		}
	}
	require.NoError(t, fsys.SyncDir("/data/topic-0"))
}

// A transactional batch emptied by an earlier pass (kept then as its
// producer's newest) goes to toRun in a later pass without setting
// changed; if its group has no other change the group is discarded and
// the batch stays on disk (pid 1, transactional) while the commit marker,
// in the next group, is removed. Recovery that replays from the first
// segment (no valid snapshot) then opens a transaction nothing closes.
func TestReview2StaleEmptyTxnBatchOutlivesItsRemovedCommitMarker(t *testing.T) {
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 60_000
	fsys := NewMemFS()
	p := openMem(t, fsys, cfg)
	txnBatch := func(pid int64, seq int32, key, val string) []byte { return txnKeyedBatch(t, pid, seq, key, val) }
	marker := func(pid int64) {
		res, err := p.WriteMarker(Marker{ProducerID: pid, Commit: true}, testNow)
		require.NoError(t, err)
		p.SetHighWatermark(res.LastOffset + 1)
	}
	big := make([]byte, 2500)
	// S0: f0, D1 (txn). S1: M1, f1. S2: a (supersedes D1).
	mustAppend(t, p, keyedBatch(t, []kv{{[]byte("f0"), big}}, -1, 0, baseTime, false))
	mustAppend(t, p, txnBatch(1, 0, "a", "txn"))
	review2Roll(t, p)
	marker(1)
	mustAppend(t, p, keyedBatch(t, []kv{{[]byte("f1"), big}}, -1, 0, baseTime, false))
	review2Roll(t, p)
	mustAppend(t, p, keyedBatch(t, []kv{{[]byte("a"), []byte("v2")}}, -1, 0, baseTime, false))
	review2Roll(t, p)
	cleanFully(t, p, NewOffsetMap(1<<20, 0.9), testNow) // D1 emptied, kept as producer 1's newest

	// Producer 1 goes idle and expires (producer.id.expiration.ms);
	// something dirty.
	p.appendMu.Lock()
	p.producers.expire(testNow.Add(time.Hour).UnixMilli())
	p.appendMu.Unlock()
	mustAppend(t, p, keyedBatch(t, []kv{{[]byte("a"), []byte("v3")}}, -1, 0, baseTime, false))
	review2Roll(t, p)

	control := fsys.CrashClone()
	review2DropSnapshots(t, control)
	q := openMem(t, control, cfg)
	require.Empty(t, q.OpenTransactions(), "control: before the second clean, replay from segment 0 closes everything")
	require.NoError(t, q.Close())

	st := cleanFully(t, p, NewOffsetMap(1<<20, 0.9), testNow.Add(120*time.Second))
	var markers int64
	for _, s := range st {
		markers += s.Markers
	}
	t.Logf("markers removed: %d", markers)
	hs, _ := readAll(t, p, 0)
	for _, h := range hs {
		t.Logf("batch %d..%d pid %d txn %v control %v records %d", h.BaseOffset, h.LastOffset(), h.ProducerID, h.IsTransactional(), h.IsControl(), h.RecordCount)
	}
	crashed := fsys.CrashClone()
	review2DropSnapshots(t, crashed)
	r := openMem(t, crashed, cfg)
	defer r.Close()
	require.Empty(t, r.OpenTransactions(), "a transaction was left open with no marker; LSO %d, HW %d", r.LastStableOffset(), r.HighWatermark())
}
