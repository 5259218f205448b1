package broker

// Tests of KIP-890 part 2 (transaction.version=2) over raw requests at
// explicit versions: the feature in ApiVersions, Produce v12's implicit
// partition add, EndTxn v5's epoch bump (and its retry and empty abort),
// TxnOffsetCommit v5's implicit group add, and the adoption at start of
// transactions that only the logs record.

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"net"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"github.com/shoal-mq/shoal/broker/txn"
	"github.com/shoal-mq/shoal/protocol"
)

// produceAt sends one transactional batch of r's producer (at r.epoch)
// as a Produce at version v.
func (r *rawTxn) produceAt(v int16, topic string, part, seq int32, value string) int16 {
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &r.id, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, txnRecordBatch(r.pid, r.epoch, seq, value)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return r.c.do(req, v).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

// endAt sends EndTxn at version v for producer pid at epoch.
func (r *rawTxn) endAt(v int16, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = r.id, pid, epoch, commit
	return r.c.do(req, v).(*kmsg.EndTxnResponse)
}

// endV5 ends r's transaction with EndTxn v5, requires success with r's
// producer id and the next epoch in the answer, and moves r to it.
func (r *rawTxn) endV5(t *testing.T, commit bool) {
	t.Helper()
	resp := r.endAt(5, r.pid, r.epoch, commit)
	require.Equal(t, "NONE", codeName(resp.ErrorCode))
	require.Equal(t, r.pid, resp.ProducerID, "EndTxn v5 keeps the producer id")
	require.Equal(t, r.epoch+1, resp.ProducerEpoch, "EndTxn v5 moves the epoch")
	r.epoch = resp.ProducerEpoch
	r.awaitCompleted(t)
}

// awaitCompleted waits until the completion of r's last decision is
// durable: EndTxn v5 answers once the decision is, and its markers,
// offsets and Complete* record follow in the background
// (startCompletionLocked), as Kafka's do.
func (r *rawTxn) awaitCompleted(t *testing.T) {
	t.Helper()
	_, known := r.c.b.txns.Record(r.id)
	require.True(t, known)
	done, cmpErr, ok := r.c.b.txns.Completion(r.id)
	if !ok {
		return
	}
	select {
	case <-done:
		require.NoError(t, cmpErr())
	case <-time.After(10 * time.Second):
		t.Fatal("the transaction's completion did not finish")
	}
}

// commitOffsetAt sends a simple committer's TxnOffsetCommit at version v.
func (r *rawTxn) commitOffsetAt(v int16, group, topic string, part int32, off int64) int16 {
	return r.commitOffsetVersion(v, group, -1, "", topic, part, off)
}

// txnParts is DescribeTransactions' partition list as "topic/partition".
func txnParts(d kmsg.DescribeTransactionsResponseTransactionState) []string {
	var out []string
	for _, tt := range d.Topics {
		for _, p := range tt.Partitions {
			out = append(out, tt.Topic+"/"+strconv.Itoa(int(p)))
		}
	}
	return out
}

// readCommitted is one read_committed Fetch (v12) of a partition from
// offset 0: the high watermark, the last stable offset and the values of
// the committed data records, aborted transactions filtered out as a
// consumer does.
type readCommitted struct {
	hw, lso int64
	values  []string
	aborted int // aborted transactions listed
}

func fetchCommitted(t *testing.T, c *rawConn, topic string, part int32) readCommitted {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 0, 1<<20
	req.IsolationLevel, req.SessionEpoch = 1, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.LogStartOffset, rp.CurrentLeaderEpoch = part, 0, 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.do(req, 12).(*kmsg.FetchResponse)
	require.Zero(t, resp.ErrorCode)
	p := resp.Topics[0].Partitions[0]
	require.Equal(t, "NONE", codeName(p.ErrorCode))
	out := readCommitted{hw: p.HighWatermark, lso: p.LastStableOffset, aborted: len(p.AbortedTransactions)}
	aborted := slices.Clone(p.AbortedTransactions)
	sort.Slice(aborted, func(i, j int) bool { return aborted[i].FirstOffset < aborted[j].FirstOffset })
	aborting := map[int64]bool{}
	for rest := p.RecordBatches; len(rest) > 0; {
		raw, next, err := protocol.NextBatch(rest)
		if err != nil {
			break // a partial batch at the end
		}
		rest = next
		var rb kmsg.RecordBatch
		require.NoError(t, rb.ReadFrom(raw))
		last := rb.FirstOffset + int64(rb.LastOffsetDelta)
		for len(aborted) > 0 && aborted[0].FirstOffset <= last {
			aborting[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		if protocol.IsControl(rb.Attributes) {
			delete(aborting, rb.ProducerID) // either marker ends the transaction
			continue
		}
		if protocol.IsTransactional(rb.Attributes) && aborting[rb.ProducerID] {
			continue
		}
		require.Zero(t, protocol.CompressionOf(rb.Attributes), "test batches are uncompressed")
		recs := rb.Records
		for i := int32(0); i < rb.NumRecords; i++ {
			l, n := binary.Varint(recs)
			require.Positive(t, n)
			var r kmsg.Record
			require.NoError(t, r.ReadFrom(recs[:n+int(l)]))
			out.values = append(out.values, string(r.Value))
			recs = recs[n+int(l):]
		}
	}
	return out
}

// logProducer is DescribeProducers' (v0) view of pid in a partition.
func logProducer(t *testing.T, c *rawConn, topic string, part int32, pid int64) (kmsg.DescribeProducersResponseTopicPartitionActiveProducer, bool) {
	t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{part}
	req.Topics = append(req.Topics, rt)
	p := c.do(req, 0).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0]
	require.Equal(t, "NONE", codeName(p.ErrorCode))
	for _, ap := range p.ActiveProducers {
		if ap.ProducerID == pid {
			return ap, true
		}
	}
	return kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}, false
}

func tv2Topic(t *testing.T, b *Broker, name string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := kadm.NewClient(newClient(t, b)).CreateTopic(ctx, partitions, 1, nil, name)
	require.NoError(t, err)
}

// tv2Producer creates topic with partitions and returns a raw
// transactional producer, "<topic>-1", initialised (timeout 60 s).
func tv2Producer(t *testing.T, b *Broker, topic string, partitions int32) *rawTxn {
	t.Helper()
	tv2Topic(t, b, topic, partitions)
	r := &rawTxn{c: dialRaw(t, b), id: topic + "-1"}
	require.Zero(t, r.init(60000).ErrorCode)
	return r
}

// TestTV2ApiVersionsFeatures: v3+ answers list transaction.version as
// supported 0..2 and finalized at 2 (with a finalized features epoch);
// v0-v2 answers still decode and advertise the KIP-890 part 2 versions.
func TestTV2ApiVersionsFeatures(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	c := dialRaw(t, b)
	for v := int16(0); v <= 4; v++ {
		resp := c.do(kmsg.NewPtrApiVersionsRequest(), v).(*kmsg.ApiVersionsResponse)
		require.Zero(t, resp.ErrorCode, "v%d", v)
		max := map[int16]int16{}
		for _, k := range resp.ApiKeys {
			max[k.ApiKey] = k.MaxVersion
		}
		require.Equal(t, int16(12), max[0], "v%d: Produce v12", v)
		require.Equal(t, int16(5), max[26], "v%d: EndTxn v5", v)
		require.Equal(t, int16(5), max[28], "v%d: TxnOffsetCommit v5", v)
		if v < 3 {
			require.Empty(t, resp.SupportedFeatures, "v%d has no features", v)
			require.Empty(t, resp.FinalizedFeatures, "v%d has no features", v)
			continue
		}
		var sup []string
		for _, f := range resp.SupportedFeatures {
			if f.Name == "transaction.version" {
				require.Equal(t, int16(0), f.MinVersion, "v%d", v)
				require.Equal(t, int16(2), f.MaxVersion, "v%d", v)
			}
			sup = append(sup, f.Name)
		}
		require.Contains(t, sup, "transaction.version", "v%d", v)
		var fin []string
		for _, f := range resp.FinalizedFeatures {
			if f.Name == "transaction.version" {
				require.Equal(t, int16(2), f.MaxVersionLevel, "v%d", v)
				require.Equal(t, int16(2), f.MinVersionLevel, "v%d", v)
			}
			fin = append(fin, f.Name)
		}
		require.Contains(t, fin, "transaction.version", "v%d", v)
		require.GreaterOrEqual(t, resp.FinalizedFeaturesEpoch, int64(0), "v%d", v)
	}
}

// TestTV2ProduceImplicitAdd: a Produce v12 adds its partition to the
// transaction (starting it), v11 still needs AddPartitionsToTxn, EndTxn
// v5 commits with the next epoch, and read_committed sees the records.
func TestTV2ProduceImplicitAdd(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	r := tv2Producer(t, b, "ia", 2)
	require.Equal(t, int16(0), r.epoch)
	pid := r.pid

	// v11 to a partition never added: refused, nothing appended, the
	// transaction not started.
	require.Equal(t, "INVALID_TXN_STATE", codeName(r.produceAt(11, "ia", 1, 0, "v11")))
	require.Equal(t, "Empty", r.describe().State)
	require.Equal(t, readCommitted{}, fetchCommitted(t, r.c, "ia", 1))

	// v12: accepted; the transaction is Ongoing with the partition.
	require.Equal(t, "NONE", codeName(r.produceAt(12, "ia", 0, 0, "a")))
	d := r.describe()
	require.Equal(t, "Ongoing", d.State)
	require.Equal(t, []string{"ia/0"}, txnParts(d))
	require.Equal(t, pid, d.ProducerID)
	require.Equal(t, int16(0), d.ProducerEpoch)
	require.Positive(t, d.StartTimestamp)
	// v11 to the other partition, still not added: refused while Ongoing.
	require.Equal(t, "INVALID_TXN_STATE", codeName(r.produceAt(11, "ia", 1, 0, "v11")))
	require.Equal(t, []string{"ia/0"}, txnParts(r.describe()))
	require.Equal(t, readCommitted{}, fetchCommitted(t, r.c, "ia", 1))
	// v11 to the implicitly added partition is fine: it is in the txn.
	require.Equal(t, "NONE", codeName(r.produceAt(11, "ia", 0, 1, "b")))
	require.Equal(t, "NONE", codeName(r.produceAt(12, "ia", 0, 2, "c")))
	open := fetchCommitted(t, r.c, "ia", 0)
	require.Equal(t, int64(3), open.hw)
	require.Zero(t, open.lso, "the open transaction holds the LSO")
	require.Empty(t, open.values)

	r.endV5(t, true)
	d = r.describe()
	require.Equal(t, "CompleteCommit", d.State)
	require.Empty(t, d.Topics)
	require.Equal(t, pid, d.ProducerID)
	require.Equal(t, int16(1), d.ProducerEpoch)
	got := fetchCommitted(t, r.c, "ia", 0)
	require.Equal(t, []string{"a", "b", "c"}, got.values)
	require.Equal(t, int64(4), got.hw, "three records and the COMMIT marker")
	require.Equal(t, got.hw, got.lso)
	// The marker carries the new epoch: the log knows the producer at it.
	lp, ok := logProducer(t, r.c, "ia", 0, pid)
	require.True(t, ok)
	require.Equal(t, int32(1), lp.ProducerEpoch)
	require.Equal(t, int64(-1), lp.CurrentTxnStartOffset)

	// After the commit, v11 to an unadded partition is still refused and
	// starts nothing.
	require.Equal(t, "INVALID_TXN_STATE", codeName(r.produceAt(11, "ia", 1, 0, "v11")))
	require.Equal(t, "CompleteCommit", r.describe().State)
	require.Equal(t, readCommitted{}, fetchCommitted(t, r.c, "ia", 1))
}

// TestTV2EndTxnBumpFencesOldEpoch: after EndTxn v5 the epoch just left is
// refused (INVALID_PRODUCER_EPOCH, nothing appended) and a batch at the
// new epoch starting at sequence 0 opens the next transaction.
func TestTV2EndTxnBumpFencesOldEpoch(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	r := tv2Producer(t, b, "fe", 2)
	require.Equal(t, "NONE", codeName(r.produceAt(12, "fe", 0, 0, "one")))
	require.Equal(t, "NONE", codeName(r.produceAt(12, "fe", 0, 1, "two")))
	old := *r
	r.endV5(t, true)
	before0, before1 := fetchCommitted(t, r.c, "fe", 0), fetchCommitted(t, r.c, "fe", 1)

	// The old epoch, continuing its sequence or not, in the old partition
	// or a new one, at v12 or v11: refused, nothing appended, no
	// transaction started.
	require.Equal(t, "INVALID_PRODUCER_EPOCH", codeName(old.produceAt(12, "fe", 0, 2, "zombie")))
	require.Equal(t, "INVALID_PRODUCER_EPOCH", codeName(old.produceAt(12, "fe", 0, 0, "zombie")))
	require.Equal(t, "INVALID_PRODUCER_EPOCH", codeName(old.produceAt(12, "fe", 1, 0, "zombie")))
	require.Equal(t, "INVALID_PRODUCER_EPOCH", codeName(old.produceAt(11, "fe", 0, 2, "zombie")))
	require.Equal(t, before0, fetchCommitted(t, r.c, "fe", 0))
	require.Equal(t, before1, fetchCommitted(t, r.c, "fe", 1))
	d := r.describe()
	require.Equal(t, "CompleteCommit", d.State)
	require.Equal(t, r.epoch, d.ProducerEpoch)
	// Other coordinator requests at the old epoch are fenced too.
	require.Equal(t, []string{"PRODUCER_FENCED"}, names(old.addPartitions("fe", 1)))
	require.Equal(t, "INVALID_PRODUCER_EPOCH", codeName(old.commitOffsetAt(5, "g", "fe", 0, 1)))
	require.Equal(t, "CompleteCommit", r.describe().State)

	// The new epoch starts over at sequence 0, in the same partition and
	// a new one, opening the next transaction.
	require.Equal(t, "NONE", codeName(r.produceAt(12, "fe", 0, 0, "three")))
	require.Equal(t, "NONE", codeName(r.produceAt(12, "fe", 1, 0, "four")))
	d = r.describe()
	require.Equal(t, "Ongoing", d.State)
	require.Equal(t, []string{"fe/0", "fe/1"}, txnParts(d))
	// The old epoch is still refused inside the new transaction.
	require.Equal(t, "INVALID_PRODUCER_EPOCH", codeName(old.produceAt(12, "fe", 0, 2, "zombie")))
	// A sequence gap at the new epoch is the log's OUT_OF_ORDER_SEQUENCE.
	require.Equal(t, "OUT_OF_ORDER_SEQUENCE_NUMBER", codeName(r.produceAt(12, "fe", 0, 5, "gap")))

	r.endV5(t, false)
	require.Equal(t, int16(2), r.epoch)
	got0, got1 := fetchCommitted(t, r.c, "fe", 0), fetchCommitted(t, r.c, "fe", 1)
	require.Equal(t, []string{"one", "two"}, got0.values)
	require.Empty(t, got1.values)
	require.Equal(t, got0.hw, got0.lso)
	require.Equal(t, got1.hw, got1.lso)
	require.Equal(t, 1, got0.aborted)
	require.Equal(t, 1, got1.aborted)
}

// TestTV2EndTxnRetry: EndTxn v5 repeated with the epoch it left is
// recognised as its retry (success, the current id and epoch) for the
// same outcome only; nothing changes either way.
func TestTV2EndTxnRetry(t *testing.T) {
	t.Parallel()
	f := &txnFaults{}
	b := startTest(t, f.config)
	tv2Topic(t, b, "rt2", 1)
	for _, commit := range []bool{true, false} {
		r := &rawTxn{c: dialRaw(t, b), id: "rt2-" + map[bool]string{true: "commit", false: "abort"}[commit]}
		require.Zero(t, r.init(60000).ErrorCode)
		// A retry right after a normal (bumped) EndTxn succeeds with the
		// current id and epoch; the other outcome is INVALID_TXN_STATE.
		require.Equal(t, "NONE", codeName(r.produceAt(12, "rt2", 0, 0, "pre")))
		pre := *r
		r.endV5(t, commit)
		again := r.endAt(5, pre.pid, pre.epoch, commit)
		require.Equal(t, "NONE", codeName(again.ErrorCode), "commit=%v: the retry of a completed EndTxn succeeds", commit)
		require.Equal(t, r.pid, again.ProducerID)
		require.Equal(t, r.epoch, again.ProducerEpoch)
		require.Equal(t, "INVALID_TXN_STATE", codeName(r.endAt(5, pre.pid, pre.epoch, !commit).ErrorCode))
		r.awaitCompleted(t)

		require.Equal(t, "NONE", codeName(r.produceAt(12, "rt2", 0, 0, "x")))
		old := *r
		// While the decision is still being completed (its markers held
		// back), the retry gets CONCURRENT_TRANSACTIONS, the other outcome
		// INVALID_TXN_STATE.
		f.fail(r.id, "markers")
		r.endV5(t, commit)
		require.Equal(t, map[bool]string{true: "PrepareCommit", false: "PrepareAbort"}[commit], r.describe().State)
		require.Equal(t, "CONCURRENT_TRANSACTIONS", codeName(r.endAt(5, old.pid, old.epoch, commit).ErrorCode))
		require.Equal(t, "INVALID_TXN_STATE", codeName(r.endAt(5, old.pid, old.epoch, !commit).ErrorCode))
		// Nor can Produce v12 or TxnOffsetCommit v5 start the next one yet.
		hw := fetchCommitted(t, r.c, "rt2", 0).hw
		require.Equal(t, "CONCURRENT_TRANSACTIONS", codeName(r.produceAt(12, "rt2", 0, 0, "early")))
		require.Equal(t, "CONCURRENT_TRANSACTIONS", codeName(r.commitOffsetAt(5, "rt2-g", "rt2", 0, 1)))
		require.Equal(t, hw, fetchCommitted(t, r.c, "rt2", 0).hw)
		// The timeout loop completes it once the markers can be written.
		state := map[bool]string{true: "CompleteCommit", false: "CompleteAbort"}[commit]
		f.heal(r.id, "markers")
		setBrokerConfigs(b, "transaction.abort.timed.out.transaction.cleanup.interval.ms", "20")
		require.Eventually(t, func() bool { return r.describe().State == state }, 10*time.Second, 5*time.Millisecond)
		setBrokerConfigs(b, "transaction.abort.timed.out.transaction.cleanup.interval.ms", "3600000")
		r.awaitCompleted(t)
		before := fetchCommitted(t, r.c, "rt2", 0)

		for range 2 {
			again := r.endAt(5, old.pid, old.epoch, commit)
			require.Equal(t, "NONE", codeName(again.ErrorCode), "commit=%v: the retry succeeds", commit)
			require.Equal(t, r.pid, again.ProducerID)
			require.Equal(t, r.epoch, again.ProducerEpoch, "the retry answers the current epoch")
		}
		other := r.endAt(5, old.pid, old.epoch, !commit)
		require.Equal(t, "INVALID_TXN_STATE", codeName(other.ErrorCode), "commit=%v: the other outcome", commit)
		// EndTxn v4 knows no retries: the old epoch is fenced.
		require.Equal(t, "PRODUCER_FENCED", codeName(r.endAt(4, old.pid, old.epoch, commit).ErrorCode))
		// An epoch older than the one just left is fenced.
		if old.epoch > 0 {
			require.Equal(t, "PRODUCER_FENCED", codeName(r.endAt(5, old.pid, old.epoch-1, commit).ErrorCode))
		}
		d := r.describe()
		require.Equal(t, state, d.State)
		require.Equal(t, r.epoch, d.ProducerEpoch)
		require.Empty(t, d.Topics)
		require.Equal(t, before, fetchCommitted(t, r.c, "rt2", 0), "no new marker")

		// Once the next transaction is open, the old epoch is no retry.
		require.Equal(t, "NONE", codeName(r.produceAt(12, "rt2", 0, 0, "y")))
		require.Equal(t, "PRODUCER_FENCED", codeName(r.endAt(5, old.pid, old.epoch, commit).ErrorCode))
		require.Equal(t, "Ongoing", r.describe().State)
		r.endV5(t, false)
	}
	got := fetchCommitted(t, dialRaw(t, b), "rt2", 0)
	require.Equal(t, []string{"pre", "x"}, got.values, "the commit round's; the abort round's are aborted")
	require.Equal(t, got.hw, got.lso)
}

// TestTV2EmptyAbort: EndTxn v5 abort with no transaction open succeeds
// and moves the epoch (and is retried like any EndTxn v5); a v5 commit
// with none open, and any v4 EndTxn on Empty, get INVALID_TXN_STATE.
func TestTV2EmptyAbort(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	tv2Topic(t, b, "ea", 1)
	c := dialRaw(t, b)

	v4 := &rawTxn{c: c, id: "ea-v4"}
	require.Zero(t, v4.init(60000).ErrorCode)
	require.Equal(t, "INVALID_TXN_STATE", codeName(v4.endAt(4, v4.pid, v4.epoch, false).ErrorCode))
	require.Equal(t, "INVALID_TXN_STATE", codeName(v4.endAt(4, v4.pid, v4.epoch, true).ErrorCode))
	d := v4.describe()
	require.Equal(t, "Empty", d.State)
	require.Equal(t, int16(0), d.ProducerEpoch)

	r := &rawTxn{c: c, id: "ea-v5"}
	require.Zero(t, r.init(60000).ErrorCode)
	// A v5 commit with nothing open follows the old rule.
	require.Equal(t, "INVALID_TXN_STATE", codeName(r.endAt(5, r.pid, r.epoch, true).ErrorCode))
	require.Equal(t, "Empty", r.describe().State)
	require.Equal(t, int16(0), r.describe().ProducerEpoch)
	// A v5 abort with nothing open: success, epoch 0 → 1.
	old := *r
	r.endV5(t, false)
	d = r.describe()
	require.Equal(t, "CompleteAbort", d.State)
	require.Equal(t, int16(1), d.ProducerEpoch)
	require.Empty(t, d.Topics)
	// Its retry succeeds without another bump; a commit is the other
	// outcome.
	again := r.endAt(5, old.pid, old.epoch, false)
	require.Equal(t, "NONE", codeName(again.ErrorCode))
	require.Equal(t, int16(1), again.ProducerEpoch)
	require.Equal(t, "INVALID_TXN_STATE", codeName(r.endAt(5, old.pid, old.epoch, true).ErrorCode))
	require.Equal(t, int16(1), r.describe().ProducerEpoch)
	// At the new epoch, after an abort, a commit has nothing to commit.
	require.Equal(t, "INVALID_TXN_STATE", codeName(r.endAt(5, r.pid, r.epoch, true).ErrorCode))
	// Another empty abort moves on again.
	r.endV5(t, false)
	require.Equal(t, int16(2), r.epoch)
	// After a committed transaction, too.
	require.Equal(t, "NONE", codeName(r.produceAt(12, "ea", 0, 0, "kept")))
	r.endV5(t, true)
	r.endV5(t, false)
	d = r.describe()
	require.Equal(t, "CompleteAbort", d.State)
	require.Equal(t, int16(4), d.ProducerEpoch)
	// The empty aborts wrote no markers: one record, one COMMIT marker.
	got := fetchCommitted(t, c, "ea", 0)
	require.Equal(t, []string{"kept"}, got.values)
	require.Equal(t, int64(2), got.hw)
	require.Equal(t, got.hw, got.lso)
	require.Zero(t, got.aborted)
	// The producer goes on at the epoch the empty abort returned.
	require.Equal(t, "NONE", codeName(r.produceAt(12, "ea", 0, 0, "next")))
	r.endV5(t, true)
	require.Equal(t, []string{"kept", "next"}, fetchCommitted(t, c, "ea", 0).values)
}

// TestTV2TxnOffsetCommitImplicitGroup: TxnOffsetCommit v5 adds its group
// itself (v4 still needs AddOffsetsToTxn); the offset becomes visible
// only when EndTxn commits, and an abort drops it.
func TestTV2TxnOffsetCommitImplicitGroup(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	r := tv2Producer(t, b, "og", 1)

	require.Equal(t, "INVALID_TXN_STATE", codeName(r.commitOffsetAt(4, "og-g", "og", 0, 3)))
	require.Equal(t, "Empty", r.describe().State)
	off, code := r.fetchOffset("og-g", "og", 0, true)
	require.Equal(t, int64(-1), off)
	require.Equal(t, "NONE", code)

	require.Equal(t, "NONE", codeName(r.commitOffsetAt(5, "og-g", "og", 0, 3)))
	require.Equal(t, "Ongoing", r.describe().State)
	off, code = r.fetchOffset("og-g", "og", 0, false)
	require.Equal(t, int64(-1), off, "pending until the commit")
	require.Equal(t, "NONE", code)
	_, code = r.fetchOffset("og-g", "og", 0, true)
	require.Equal(t, "UNSTABLE_OFFSET_COMMIT", code)
	// v4 for another group, never added, is still refused mid-transaction.
	require.Equal(t, "INVALID_TXN_STATE", codeName(r.commitOffsetAt(4, "og-other", "og", 0, 1)))
	// v4 for the group v5 added is fine.
	require.Equal(t, "NONE", codeName(r.commitOffsetAt(4, "og-g", "og", 0, 4)))
	// Produce v12 joins the same transaction (consume-transform-produce).
	require.Equal(t, "NONE", codeName(r.produceAt(12, "og", 0, 0, "out")))
	r.endV5(t, true)
	off, code = r.fetchOffset("og-g", "og", 0, true)
	require.Equal(t, int64(4), off)
	require.Equal(t, "NONE", code)
	off, _ = r.fetchOffset("og-other", "og", 0, true)
	require.Equal(t, int64(-1), off)
	require.Equal(t, []string{"out"}, fetchCommitted(t, r.c, "og", 0).values)

	// An aborted transaction started by TxnOffsetCommit v5 drops its
	// offset.
	require.Equal(t, "NONE", codeName(r.commitOffsetAt(5, "og-g", "og", 0, 9)))
	require.Equal(t, "Ongoing", r.describe().State)
	r.endV5(t, false)
	off, code = r.fetchOffset("og-g", "og", 0, true)
	require.Equal(t, int64(4), off)
	require.Equal(t, "NONE", code)
	// A commit with only offsets in it.
	require.Equal(t, "NONE", codeName(r.commitOffsetAt(5, "og-g", "og", 0, 11)))
	r.endV5(t, true)
	off, _ = r.fetchOffset("og-g", "og", 0, true)
	require.Equal(t, int64(11), off)
}

// adoptScenario opens, over c, a transaction added implicitly to two
// partitions of topic ("ad/0" also explicitly when mixed), returning its
// producer and the values written per partition.
func adoptScenario(t *testing.T, c *rawConn, id, topic string, timeoutMs int32, mixed bool) (*rawTxn, map[int32][]string) {
	t.Helper()
	r := &rawTxn{c: c, id: id}
	require.Zero(t, r.init(timeoutMs).ErrorCode)
	if mixed {
		// A persisted Ongoing txn listing only partition 0.
		require.Equal(t, []string{"NONE"}, names(r.addPartitions(topic, 0)))
	}
	require.Equal(t, "NONE", codeName(r.produceAt(12, topic, 0, 0, id+"-a")))
	require.Equal(t, "NONE", codeName(r.produceAt(12, topic, 1, 0, id+"-b")))
	require.Equal(t, "NONE", codeName(r.produceAt(12, topic, 0, 1, id+"-c")))
	d := r.describe()
	require.Equal(t, "Ongoing", d.State)
	require.Equal(t, []string{topic + "/0", topic + "/1"}, txnParts(d))
	return r, map[int32][]string{0: {id + "-a", id + "-c"}, 1: {id + "-b"}}
}

// checkAdopted asserts that r's transaction came back Ongoing with both
// partitions (read_committed seeing only what was committed before it),
// that it goes on and commits with EndTxn v5, and that read_committed
// then sees every record with the LSO at the end.
func checkAdopted(t *testing.T, r *rawTxn, topic string, before, want map[int32][]string) {
	t.Helper()
	d := r.describe()
	require.Equal(t, "Ongoing", d.State, "adopted at start")
	require.Equal(t, []string{topic + "/0", topic + "/1"}, txnParts(d))
	require.Equal(t, r.pid, d.ProducerID)
	require.Equal(t, r.epoch, d.ProducerEpoch)
	for p := range int32(2) {
		got := fetchCommitted(t, r.c, topic, p)
		require.Equal(t, before[p], got.values, "partition %d: still open", p)
		require.Less(t, got.lso, got.hw, "partition %d: the open transaction holds the LSO", p)
	}
	// The producer goes on with its sequences.
	require.Equal(t, "NONE", codeName(r.produceAt(12, topic, 1, 1, r.id+"-d")))
	want[1] = append(want[1], r.id+"-d")
	epoch := r.epoch
	r.endV5(t, true)
	require.Equal(t, epoch+1, r.describe().ProducerEpoch)
	for p := range int32(2) {
		got := fetchCommitted(t, r.c, topic, p)
		require.Equal(t, want[p], got.values, "partition %d", p)
		require.Equal(t, got.hw, got.lso, "partition %d: the LSO is not stuck", p)
		require.Zero(t, got.aborted, "partition %d", p)
	}
	// And the next transaction works at the new epoch.
	require.Equal(t, "NONE", codeName(r.produceAt(12, topic, 0, 0, r.id+"-e")))
	r.endV5(t, true)
	got := fetchCommitted(t, r.c, topic, 0)
	require.Equal(t, append(want[0], r.id+"-e"), got.values)
	require.Equal(t, got.hw, got.lso)
}

// TestTV2RestartAdoptsOpenTxn: a transaction whose partitions were added
// by Produce v12 (in memory only) survives a graceful restart: at start
// it is adopted from the logs, Ongoing with both partitions, and EndTxn
// v5 commits every record. Mixed explicit and implicit adds too.
func TestTV2RestartAdoptsOpenTxn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *Config) { c.DataDir = dir }
	b := startTest(t, cfg)
	tv2Topic(t, b, "ad", 2)
	tv2Topic(t, b, "adm", 2)
	c := dialRaw(t, b)
	// Commit a first transaction so the second starts from CompleteCommit
	// at a bumped epoch, not Empty.
	r, want := adoptScenario(t, c, "ad-1", "ad", 60000, false)
	r.endV5(t, true)
	first, firstB := fetchCommitted(t, c, "ad", 0).values, fetchCommitted(t, c, "ad", 1).values
	require.Equal(t, "NONE", codeName(r.produceAt(12, "ad", 0, 0, "ad-1-x")))
	require.Equal(t, "NONE", codeName(r.produceAt(12, "ad", 1, 0, "ad-1-y")))
	require.Equal(t, "NONE", codeName(r.produceAt(12, "ad", 0, 1, "ad-1-z")))
	require.Equal(t, want, map[int32][]string{0: first, 1: firstB})
	want = map[int32][]string{0: append(slices.Clone(first), "ad-1-x", "ad-1-z"), 1: append(slices.Clone(firstB), "ad-1-y")}
	m, wantM := adoptScenario(t, c, "ad-m", "adm", 60000, true)
	require.NoError(t, b.Close())

	b2 := startTest(t, cfg)
	c2 := dialRaw(t, b2)
	r.c, m.c = c2, c2
	checkAdopted(t, r, "ad", map[int32][]string{0: first, 1: firstB}, want)
	checkAdopted(t, m, "adm", nil, wantM)

	// A second restart finds nothing open and changes nothing.
	require.NoError(t, b2.Close())
	b3 := startTest(t, cfg)
	r.c = dialRaw(t, b3)
	d := r.describe()
	require.Equal(t, "CompleteCommit", d.State)
	require.Equal(t, r.epoch, d.ProducerEpoch)
	got := fetchCommitted(t, r.c, "ad", 0)
	require.Equal(t, got.hw, got.lso)
}

// TestTV2RestartAdoptedTxnTimesOut: an adopted transaction whose producer
// never comes back is aborted by its timeout (restarted at adoption), so
// no LSO stays behind it.
func TestTV2RestartAdoptedTxnTimesOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *Config) { c.DataDir = dir }
	b := startTest(t, cfg)
	tv2Topic(t, b, "at", 2)
	r, _ := adoptScenario(t, dialRaw(t, b), "at-1", "at", 1500, false)
	require.NoError(t, b.Close())

	b2 := startTest(t, cfg)
	setBrokerConfigs(b2, "transaction.abort.timed.out.transaction.cleanup.interval.ms", "20")
	r.c = dialRaw(t, b2)
	require.Equal(t, "Ongoing", r.describe().State)
	require.Eventually(t, func() bool { return r.describe().State == "CompleteAbort" }, 15*time.Second, 20*time.Millisecond)
	require.Equal(t, r.epoch+1, r.describe().ProducerEpoch, "the timeout fences the producer")
	for p := range int32(2) {
		got := fetchCommitted(t, r.c, "at", p)
		require.Empty(t, got.values, "partition %d", p)
		require.Equal(t, got.hw, got.lso, "partition %d", p)
		require.Equal(t, 1, got.aborted, "partition %d", p)
	}
	require.Equal(t, "INVALID_PRODUCER_EPOCH", codeName(r.produceAt(12, "at", 0, 2, "late")))
}

// tv2CrashChildEnv names the data directory a child process serves from
// in TestTV2CrashAdoptsOpenTxn; the child writes its address to
// <dir>/addr and runs until it is killed.
const tv2CrashChildEnv = "SHOAL_TV2_CRASH_CHILD"

// TestTV2CrashAdoptsOpenTxn: as TestTV2RestartAdoptsOpenTxn, but the
// broker is killed with SIGKILL (a child process) while the implicitly
// added transactions are open.
func TestTV2CrashAdoptsOpenTxn(t *testing.T) {
	serveCrashChild(t, tv2CrashChildEnv, nil)
	t.Parallel()
	dir := t.TempDir()
	child := startCrashChild(t, "TestTV2CrashAdoptsOpenTxn", tv2CrashChildEnv, dir)

	c := dialAddr(t, child.addr)
	create := kmsg.NewPtrCreateTopicsRequest()
	for _, name := range []string{"cr", "crm"} {
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, 2, 1
		create.Topics = append(create.Topics, ct)
	}
	create.TimeoutMillis = 5000
	for _, ct := range c.do(create, 5).(*kmsg.CreateTopicsResponse).Topics {
		require.Equal(t, "NONE", codeName(ct.ErrorCode), ct.Topic)
	}
	r, want := adoptScenario(t, c, "cr-1", "cr", 60000, false)
	m, wantM := adoptScenario(t, c, "cr-m", "crm", 60000, true)

	child.kill()

	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.DataDir, cfg.Logger = "127.0.0.1:0", dir, zaptest.NewLogger(t)
	b, err := Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	c2 := dialRaw(t, b)
	r.c, m.c = c2, c2
	checkAdopted(t, r, "cr", nil, want)
	checkAdopted(t, m, "crm", nil, wantM)
}

// dialAddr is dialRaw for a broker in another process.
func dialAddr(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// TestTV2RestartAbortsOrphanedTxn: a transaction open in a log that the
// coordinator cannot own is aborted at start, so the LSO moves on:
// (a) its producer's txn is at a higher epoch than the log's batches,
// (b) no txn has its producer id. Over the wire neither can arise (every
// epoch move writes markers to every partition the txn holds in memory,
// implicit ones included), so both are constructed inside the broker.
func TestTV2RestartAbortsOrphanedTxn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *Config) { c.DataDir = dir }
	b := startTest(t, cfg)
	r := tv2Producer(t, b, "or", 2)
	require.Equal(t, "NONE", codeName(r.produceAt(12, "or", 0, 0, "orphan")))
	// (a) The txn forgets the partition and moves to the next epoch in
	// badger, as if the in-memory add were lost without markers.
	rec, ok := b.txns.Record(r.id)
	require.True(t, ok)
	rec.State, rec.Parts = txn.CompleteAbort, nil
	rec.Epoch++
	raw, err := json.Marshal(rec)
	require.NoError(t, err)
	require.NoError(t, b.meta.DB().Update(func(btx *badger.Txn) error { return btx.Set(txn.Key(r.id), raw) }))
	// (b) A transactional batch of a producer id nothing knows.
	p1 := b.topics.Partition("or", 1)
	_, err = p1.Log.Append(txnRecordBatch(987654, 3, 0, "stray"), time.Now())
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b2 := startTest(t, cfg)
	r.c = dialRaw(t, b2)
	d := r.describe()
	require.Equal(t, "CompleteAbort", d.State)
	require.Empty(t, d.Topics, "an older epoch's transaction is not adopted")
	require.Equal(t, r.epoch+1, d.ProducerEpoch)
	for p := range int32(2) {
		got := fetchCommitted(t, r.c, "or", p)
		require.Empty(t, got.values, "partition %d", p)
		require.Equal(t, int64(2), got.hw, "partition %d: the batch and an ABORT marker", p)
		require.Equal(t, got.hw, got.lso, "partition %d: the LSO is not stuck", p)
		require.Equal(t, 1, got.aborted, "partition %d", p)
	}
	lp, ok := logProducer(t, r.c, "or", 0, r.pid)
	require.True(t, ok)
	require.Equal(t, int32(r.epoch+1), lp.ProducerEpoch, "the marker carries the txn's epoch")
	require.Equal(t, int64(-1), lp.CurrentTxnStartOffset)
	// The old epoch is refused; the txn's epoch goes on from sequence 0.
	require.Equal(t, "INVALID_PRODUCER_EPOCH", codeName(r.produceAt(12, "or", 0, 1, "late")))
	r.epoch++
	require.Equal(t, "NONE", codeName(r.produceAt(12, "or", 0, 0, "fresh")))
	r.endV5(t, true)
	got := fetchCommitted(t, r.c, "or", 0)
	require.Equal(t, []string{"fresh"}, got.values)
	require.Equal(t, got.hw, got.lso)
}

// TestTV2InitProducerIDAbortsImplicitTxn: InitProducerId during a
// transaction whose partitions were only added implicitly aborts it in
// every one of them (the coordinator knows them in memory), so no log is
// left with a transaction at an older epoch than its txn's, and a
// restart then finds nothing to adopt or abort.
func TestTV2InitProducerIDAbortsImplicitTxn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *Config) { c.DataDir = dir }
	b := startTest(t, cfg)
	r := tv2Producer(t, b, "ip", 2)
	require.Equal(t, "NONE", codeName(r.produceAt(12, "ip", 0, 0, "gone0")))
	require.Equal(t, "NONE", codeName(r.produceAt(12, "ip", 1, 0, "gone1")))
	old := *r
	require.Zero(t, r.init(60000).ErrorCode)
	require.Equal(t, old.epoch+2, r.epoch, "abort at epoch+1, then the new epoch")
	require.Equal(t, "Empty", r.describe().State)
	require.Equal(t, "INVALID_PRODUCER_EPOCH", codeName(old.produceAt(12, "ip", 0, 1, "late")))
	check := func(c *rawConn) {
		for p := range int32(2) {
			got := fetchCommitted(t, c, "ip", p)
			require.Empty(t, got.values, "partition %d", p)
			require.Equal(t, int64(2), got.hw, "partition %d: the batch and one ABORT marker", p)
			require.Equal(t, got.hw, got.lso, "partition %d", p)
			require.Equal(t, 1, got.aborted, "partition %d", p)
		}
	}
	check(r.c)
	require.NoError(t, b.Close())
	b2 := startTest(t, cfg)
	r.c = dialRaw(t, b2)
	d := r.describe()
	require.Equal(t, "Empty", d.State)
	require.Equal(t, r.epoch, d.ProducerEpoch)
	check(r.c)
	require.Equal(t, "NONE", codeName(r.produceAt(12, "ip", 0, 0, "new")))
	r.endV5(t, true)
	require.Equal(t, []string{"new"}, fetchCommitted(t, r.c, "ip", 0).values)
}

// TestTV2RestartOffsetsAndImplicitPartition: a transaction started by
// TxnOffsetCommit v5 (durable) that Produce v12 then extends (in memory)
// comes back whole after a restart: EndTxn v5 commits the offset and
// the records.
func TestTV2RestartOffsetsAndImplicitPartition(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *Config) { c.DataDir = dir }
	b := startTest(t, cfg)
	r := tv2Producer(t, b, "ro", 1)
	require.Equal(t, "NONE", codeName(r.commitOffsetAt(5, "ro-g", "ro", 0, 7)))
	require.Equal(t, "NONE", codeName(r.produceAt(12, "ro", 0, 0, "v")))
	require.NoError(t, b.Close())

	b2 := startTest(t, cfg)
	r.c = dialRaw(t, b2)
	d := r.describe()
	require.Equal(t, "Ongoing", d.State)
	require.Equal(t, []string{"ro/0"}, txnParts(d))
	_, code := r.fetchOffset("ro-g", "ro", 0, true)
	require.Equal(t, "UNSTABLE_OFFSET_COMMIT", code)
	r.endV5(t, true)
	off, code := r.fetchOffset("ro-g", "ro", 0, true)
	require.Equal(t, "NONE", code)
	require.Equal(t, int64(7), off)
	got := fetchCommitted(t, r.c, "ro", 0)
	require.Equal(t, []string{"v"}, got.values)
	require.Equal(t, got.hw, got.lso)
}

// exhaustEpoch moves r's txn to the last epoch an EndTxn can bump from:
// it rewrites the txn's stored record and restarts b with cfg (reaching
// that epoch through 32766 transactions would take too long). It returns
// the restarted broker, r connected to it.
func exhaustEpoch(t *testing.T, b *Broker, r *rawTxn, cfg func(*Config)) *Broker {
	t.Helper()
	rec, ok := b.txns.Record(r.id)
	require.True(t, ok)
	rec.Epoch = math.MaxInt16 - 1
	raw, err := json.Marshal(rec)
	require.NoError(t, err)
	require.NoError(t, b.meta.DB().Update(func(btx *badger.Txn) error { return btx.Set(txn.Key(r.id), raw) }))
	require.NoError(t, b.Close())
	b = startTest(t, cfg)
	r.c, r.epoch = dialRaw(t, b), rec.Epoch
	return b
}

// TestTV2ExhaustedEpochMovesProducerID: EndTxn v5 at the last usable
// epoch answers a new producer id at epoch 0; the markers close the
// transaction at the old id; a retry with the old pair answers the new
// one; the new producer id works.
func TestTV2ExhaustedEpochMovesProducerID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *Config) { c.DataDir = dir }
	r := tv2Producer(t, startTest(t, cfg), "ex", 1)
	exhaustEpoch(t, r.c.b, r, cfg)
	require.Equal(t, "NONE", codeName(r.produceAt(12, "ex", 0, 0, "last")))
	resp := r.endAt(5, r.pid, r.epoch, true)
	require.Equal(t, "NONE", codeName(resp.ErrorCode))
	require.NotEqual(t, r.pid, resp.ProducerID, "a new producer id")
	require.Equal(t, int16(0), resp.ProducerEpoch)
	d := r.describe()
	require.Equal(t, "CompleteCommit", d.State)
	require.Equal(t, resp.ProducerID, d.ProducerID)
	require.Equal(t, int16(0), d.ProducerEpoch)
	got := fetchCommitted(t, r.c, "ex", 0)
	require.Equal(t, []string{"last"}, got.values)
	require.Equal(t, got.hw, got.lso)
	// The retry with the old pair answers the new one; the other outcome
	// is refused.
	again := r.endAt(5, r.pid, r.epoch, true)
	require.Equal(t, "NONE", codeName(again.ErrorCode))
	require.Equal(t, resp.ProducerID, again.ProducerID)
	require.Equal(t, int16(0), again.ProducerEpoch)
	require.Equal(t, "INVALID_TXN_STATE", codeName(r.endAt(5, r.pid, r.epoch, false).ErrorCode))
	// The old id is refused; the new one produces from sequence 0.
	require.Equal(t, "INVALID_PRODUCER_ID_MAPPING", codeName(r.produceAt(12, "ex", 0, 1, "late")))
	r.pid, r.epoch = resp.ProducerID, 0
	require.Equal(t, "NONE", codeName(r.produceAt(12, "ex", 0, 0, "new")))
	r.endV5(t, true)
	require.Equal(t, []string{"last", "new"}, fetchCommitted(t, r.c, "ex", 0).values)
}

// TestTV2EndTxnRetryAfterRestart: the retry of an EndTxn v5 is still
// recognised after a restart (the epoch it left is durable).
func TestTV2EndTxnRetryAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *Config) { c.DataDir = dir }
	b := startTest(t, cfg)
	r := tv2Producer(t, b, "rr", 1)
	require.Equal(t, "NONE", codeName(r.produceAt(12, "rr", 0, 0, "v")))
	old := *r
	r.endV5(t, true)
	require.NoError(t, b.Close())

	b2 := startTest(t, cfg)
	r.c = dialRaw(t, b2)
	again := r.endAt(5, old.pid, old.epoch, true)
	require.Equal(t, "NONE", codeName(again.ErrorCode))
	require.Equal(t, r.pid, again.ProducerID)
	require.Equal(t, r.epoch, again.ProducerEpoch)
	require.Equal(t, "INVALID_TXN_STATE", codeName(r.endAt(5, old.pid, old.epoch, false).ErrorCode))
	d := r.describe()
	require.Equal(t, "CompleteCommit", d.State)
	require.Equal(t, r.epoch, d.ProducerEpoch)
	got := fetchCommitted(t, r.c, "rr", 0)
	require.Equal(t, []string{"v"}, got.values)
	require.Equal(t, int64(2), got.hw)
	require.Equal(t, got.hw, got.lso)
}

// TestTV2ReplaySkipsMarkedPartitions: EndTxn v5 answers once the decision
// is durable and lets the producer's next transaction write behind the
// markers before the completion is written. If the broker stops with
// the decision still in badger (here: the Complete* record is replaced
// by the PrepareCommit it followed), completing it again at start must
// not append a second COMMIT marker behind the next transaction's
// batches: that would commit them. Partitions whose producer reached the
// decision's epoch are skipped, and the next transaction is adopted.
func TestTV2ReplaySkipsMarkedPartitions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *Config) { c.DataDir = dir }
	b := startTest(t, cfg)
	r := tv2Producer(t, b, "rp", 2)
	require.Equal(t, "NONE", codeName(r.produceAt(12, "rp", 0, 0, "first0")))
	require.Equal(t, "NONE", codeName(r.produceAt(12, "rp", 1, 0, "first1")))
	// The decision as badger held it before its completion: PrepareCommit
	// at the new epoch, both partitions, bumped.
	prepare, ok := b.txns.Record(r.id)
	require.True(t, ok)
	prepare.State, prepare.Epoch, prepare.Bumped = txn.PrepareCommit, r.epoch+1, true
	prepare.Parts = []txn.Part{{Topic: "rp", Partition: 0}, {Topic: "rp", Partition: 1}}
	r.endV5(t, true)
	// The next transaction writes to partition 0 only.
	require.Equal(t, "NONE", codeName(r.produceAt(12, "rp", 0, 0, "second")))
	raw, err := json.Marshal(prepare)
	require.NoError(t, err)
	require.NoError(t, b.meta.DB().Update(func(btx *badger.Txn) error { return btx.Set(txn.Key(r.id), raw) }))
	require.NoError(t, b.Close())

	b2 := startTest(t, cfg)
	r.c = dialRaw(t, b2)
	d := r.describe()
	require.Equal(t, "Ongoing", d.State, "the next transaction is adopted")
	require.Equal(t, []string{"rp/0"}, txnParts(d))
	require.Equal(t, r.epoch, d.ProducerEpoch)
	got := fetchCommitted(t, r.c, "rp", 0)
	require.Equal(t, []string{"first0"}, got.values, "no replayed marker commits the next transaction")
	require.Equal(t, int64(3), got.hw, "first0, its COMMIT marker, second: nothing appended at start")
	require.Equal(t, int64(2), got.lso, "the next transaction holds the LSO")
	got = fetchCommitted(t, r.c, "rp", 1)
	require.Equal(t, []string{"first1"}, got.values)
	require.Equal(t, int64(2), got.hw, "first1 and its COMMIT marker only")
	r.endV5(t, false)
	got = fetchCommitted(t, r.c, "rp", 0)
	require.Equal(t, []string{"first0"}, got.values, "the next transaction aborted")
	require.Equal(t, got.hw, got.lso)
}
