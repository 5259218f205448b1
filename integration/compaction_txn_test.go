package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompactedTopicTransactions: transactional and idempotent producers
// on a compacted topic, as in Kafka. Twenty transactions of 500 updates
// over 200 keys, every other one aborted, beside an idempotent producer's
// updates of keys of its own; a transaction left open while the cleaner
// runs holds cleaning back at the last stable offset (the keys it
// updates keep their committed values for read_committed readers, and
// nothing above it is cleaned). Once compacted, a read_committed and a
// read_uncommitted reader from the start both see exactly the committed
// table at its offsets and none of the aborted records (the cleaner
// removed them); the same producers then go on (their producer state,
// epochs and sequences, survived the cleaning), and after a restart the
// table, the last stable offset and producing again are all as before.
func TestCompactedTopicTransactions(t *testing.T) {
	b, opts := startCompactingBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic := b.createTopic(t, 1, map[string]*string{
		"cleanup.policy": strp("compact"), "segment.bytes": strp("1048576"),
		"segment.ms": strp("1000"), "min.cleanable.dirty.ratio": strp("0.01"),
	})

	type kv struct {
		off int64
		val string
	}
	table := map[string]kv{}
	aborted := map[int64]bool{}
	txp := b.client(t, kgo.TransactionalID("compact-tx-"+topic), kgo.DefaultProduceTopic(topic))
	idem := b.client(t, kgo.DefaultProduceTopic(topic))

	txn := func(cl *kgo.Client, n int, commit bool, tag string) {
		require.NoError(t, cl.BeginTransaction())
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "tx-%03d", i%200), Value: fmt.Appendf(nil, "%s update %d", tag, i)})
		}
		res := cl.ProduceSync(ctx, rs...)
		require.NoError(t, res.FirstErr())
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
		}
		require.NoError(t, cl.EndTransaction(ctx, end))
		for _, r := range res {
			if commit {
				table[string(r.Record.Key)] = kv{r.Record.Offset, string(r.Record.Value)}
			} else {
				aborted[r.Record.Offset] = true
			}
		}
	}
	idemProduce := func(round int) {
		var rs []*kgo.Record
		for i := range 100 {
			rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "idem-%02d", i%50), Value: fmt.Appendf(nil, "idem round %d update %d", round, i)})
		}
		res := idem.ProduceSync(ctx, rs...)
		require.NoError(t, res.FirstErr())
		for _, r := range res {
			table[string(r.Record.Key)] = kv{r.Record.Offset, string(r.Record.Value)}
		}
	}
	for i := range 20 {
		txn(txp, 500, i%2 == 0, fmt.Sprintf("txn %d", i))
		idemProduce(i)
	}

	// A transaction left open across a roll: the cleaner may clean only
	// the segments below its first record, so one roll first.
	time.Sleep(1200 * time.Millisecond) // segment.ms: the next record rolls
	idemProduce(99)
	stableEnd := table["idem-49"].off // the last committed record below the open transaction
	open := b.client(t, kgo.TransactionalID("compact-open-"+topic), kgo.DefaultProduceTopic(topic))
	require.NoError(t, open.BeginTransaction())
	var openRs []*kgo.Record
	for i := range 10 {
		openRs = append(openRs, &kgo.Record{Key: fmt.Appendf(nil, "tx-%03d", i), Value: []byte("open, then aborted")})
	}
	res := open.ProduceSync(ctx, openRs...)
	require.NoError(t, res.FirstErr())
	firstOpen := res[0].Record.Offset
	for _, r := range res {
		aborted[r.Record.Offset] = true
	}
	time.Sleep(1200 * time.Millisecond) // segment.ms: the next record rolls
	idemProduce(100)
	time.Sleep(1200 * time.Millisecond)
	idemProduce(101) // rolls again: the segment with the open records is sealed too

	// readAll reads from the start up to sentinel (a record's offset),
	// returning the table and how many records it read.
	readAll := func(iso kgo.IsolationLevel, sentinel int64) (map[string]kv, int, []int64) {
		cl := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso))
		defer cl.Close()
		tab, n := map[string]kv{}, 0
		var offs []int64
		for next := int64(0); next <= sentinel; {
			fs := cl.PollFetches(ctx)
			require.NoError(t, ctx.Err(), "reading to %d: at %d", sentinel, next)
			fs.EachRecord(func(r *kgo.Record) {
				n++
				offs = append(offs, r.Offset)
				tab[string(r.Key)] = kv{r.Offset, string(r.Value)}
				next = r.Offset + 1
			})
		}
		return tab, n, offs
	}
	sentinel := table["idem-49"].off

	// While the transaction is open the cleaner cleans below it only:
	// the records it updates keep their earlier, committed versions.
	require.Eventually(t, func() bool {
		_, n, _ := readAll(kgo.ReadUncommitted(), sentinel)
		return n < 20*500/2
	}, 60*time.Second, 300*time.Millisecond, "the cleaner never ran")
	tab, _, offs := readAll(kgo.ReadUncommitted(), sentinel)
	for _, o := range offs {
		if o < firstOpen {
			require.False(t, aborted[o], "aborted record at %d still there below the open transaction", o)
		}
	}
	for i := range 10 {
		k := fmt.Sprintf("tx-%03d", i)
		require.Equal(t, "open, then aborted", tab[k].val, "read_uncommitted sees the open transaction's update of %s", k)
	}
	committed, _, _ := readAll(kgo.ReadCommitted(), stableEnd) // the last stable offset is firstOpen
	for i := range 10 {
		k := fmt.Sprintf("tx-%03d", i)
		require.Equal(t, table[k], committed[k], "read_committed: %s lost its committed value while a transaction was open", k)
	}

	// Abort it; another roll; then everything is cleanable.
	require.NoError(t, open.EndTransaction(ctx, kgo.TryAbort))
	time.Sleep(1200 * time.Millisecond)
	idemProduce(102)
	time.Sleep(1200 * time.Millisecond)
	idemProduce(103)
	sentinel = table["idem-49"].off
	require.Eventually(t, func() bool {
		_, n, _ := readAll(kgo.ReadUncommitted(), sentinel)
		return n <= len(table)+100 // at most the active segment's idempotent updates beyond one per key
	}, 60*time.Second, 300*time.Millisecond, "the log was never compacted")
	check := func() {
		for _, iso := range []kgo.IsolationLevel{kgo.ReadCommitted(), kgo.ReadUncommitted()} {
			tab, _, offs := readAll(iso, sentinel)
			require.Equal(t, table, tab)
			for _, o := range offs {
				require.False(t, aborted[o], "aborted record at %d read after compaction", o)
			}
		}
	}
	check()

	// The producers go on with their producer ids: no
	// OUT_OF_ORDER_SEQUENCE, no fencing.
	txn(txp, 500, true, "after cleaning")
	idemProduce(104)
	sentinel = table["idem-49"].off
	check()

	// A restart: the same table, no transaction left open (the last
	// stable offset is the high watermark), and new producers under the
	// same transactional id go on.
	b.shutdown(t)
	b = startBroker(t, opts...)
	check()
	ends, err := b.admin(t).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	stable, err := b.admin(t).ListCommittedOffsets(ctx, topic)
	require.NoError(t, err)
	e, _ := ends.Lookup(topic, 0)
	s, _ := stable.Lookup(topic, 0)
	require.Equal(t, e.Offset, s.Offset, "an open transaction after restart: last stable offset %d, high watermark %d", s.Offset, e.Offset)
	txp = b.client(t, kgo.TransactionalID("compact-tx-"+topic), kgo.DefaultProduceTopic(topic))
	idem = b.client(t, kgo.DefaultProduceTopic(topic))
	txn(txp, 500, true, "after restart")
	idemProduce(105)
	sentinel = table["idem-49"].off
	check()
}
