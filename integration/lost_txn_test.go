package integration

// Scripted lost answers for transactions and idempotent producers: each
// test queues one LoseResponse fault on the fault proxy for one exchange
// (faultproxy.Next), so the request reaches the broker and is handled,
// its answer is dropped and the connection closed, and the client
// retries on a new connection, as a real client does. Kafka's behaviour
// is the reference (TransactionCoordinator, TransactionMetadata,
// OffsetMetadataManager, KIP-98, KIP-360, KIP-447, KIP-890). Requests are
// hand-built kmsg requests at exact versions where the assertions need
// exact control; franz-go clients produce, consume read_committed and
// initialise where a real client would. TestLostProduceResponses and
// TestLostTxnResponses (lostresp_test.go) cover random faults; these
// place one fault exactly.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/integration/faultproxy"
)

// ltEnv is one test's broker behind the fault proxy, its topic and the
// topic's id.
type ltEnv struct {
	t     *testing.T
	proxy *faultproxy.Proxy
	b     *testBroker
	topic string
	id    [16]byte
}

func newLTEnv(t *testing.T, partitions int32) *ltEnv {
	t.Helper()
	proxy, b, topic, _ := proxiedBroker(t, partitions)
	e := &ltEnv{t: t, proxy: proxy, b: b, topic: topic}
	e.id = e.dial().topicID(topic)
	return e
}

// dial opens a raw connection through the proxy.
func (e *ltEnv) dial() *rawConn { return dialRaw(e.t, e.proxy.Addr()) }

// ltCall sends req at exactly version v and returns its answer.
func ltCall(t *testing.T, c *rawConn, req kmsg.Request, v int16) kmsg.Response {
	t.Helper()
	req.SetVersion(v)
	c.corr++
	c.send(req, c.corr)
	got, resp, err := c.readResponse(req, 20*time.Second)
	require.NoError(t, err, "%s v%d", kmsg.NameForKey(req.Key()), v)
	require.Equal(t, c.corr, got, "correlation id of %s", kmsg.NameForKey(req.Key()))
	return resp
}

// lose sends req at version v on c with one LoseResponse fault queued for
// its API key: the broker handles the request, the proxy drops the answer
// and closes the connection. c is closed afterwards.
func (e *ltEnv) lose(c *rawConn, req kmsg.Request, v int16) {
	t := e.t
	t.Helper()
	require.Zero(t, e.proxy.Pending(), "no fault queued before")
	before := e.proxy.Stats().ByKey[faultproxy.LoseResponse][req.Key()]
	e.proxy.Next(req.Key(), faultproxy.LoseResponse, 0)
	req.SetVersion(v)
	c.corr++
	c.send(req, c.corr)
	_, _, err := c.readResponse(req, 20*time.Second)
	require.Error(t, err, "the answer to %s v%d is lost", kmsg.NameForKey(req.Key()), v)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the proxy closed the connection (not a timeout): %v", err)
	require.Zero(t, e.proxy.Pending(), "the fault landed")
	// Counted once the broker's answer reached the proxy: it was handled.
	require.Equal(t, before+1, e.proxy.Stats().ByKey[faultproxy.LoseResponse][req.Key()], "the broker answered %s and the answer was dropped", kmsg.NameForKey(req.Key()))
}

// ltEventually polls cond on the test's goroutine (so cond may fail the
// test) every 10 ms until it holds, for up to 15 s: for what completes
// asynchronously, as a client's retries would find it.
func ltEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---- request builders ----

const ltTxnTimeoutMs = 60000

func ltInitReq(txnID *string, pid int64, epoch int16) *kmsg.InitProducerIDRequest {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = txnID
	req.TransactionTimeoutMillis = ltTxnTimeoutMs
	req.ProducerID, req.ProducerEpoch = pid, epoch
	return req
}

// ltInitPID sends InitProducerId v5 and requires success.
func ltInitPID(t *testing.T, c *rawConn, txnID *string, pid int64, epoch int16) (int64, int16) {
	t.Helper()
	resp := ltCall(t, c, ltInitReq(txnID, pid, epoch), 5).(*kmsg.InitProducerIDResponse)
	require.Zero(t, resp.ErrorCode, "InitProducerId(%d, %d): %s", pid, epoch, codeName(resp.ErrorCode))
	return resp.ProducerID, resp.ProducerEpoch
}

func ltAddPartitionsReq(txnID string, pid int64, epoch int16, topic string, parts ...int32) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = append(req.Topics, rt)
	return req
}

// ltAddPartitions sends AddPartitionsToTxn v3 (the client form) and returns
// each partition's code.
func ltAddPartitions(t *testing.T, c *rawConn, txnID string, pid int64, epoch int16, topic string, parts ...int32) map[int32]int16 {
	t.Helper()
	resp := ltCall(t, c, ltAddPartitionsReq(txnID, pid, epoch, topic, parts...), 3).(*kmsg.AddPartitionsToTxnResponse)
	codes := map[int32]int16{}
	for _, rt := range resp.Topics {
		require.Equal(t, topic, rt.Topic)
		for _, p := range rt.Partitions {
			codes[p.Partition] = p.ErrorCode
		}
	}
	require.Len(t, codes, len(parts), "one answer per partition")
	return codes
}

func ltAddOffsetsReq(txnID string, pid int64, epoch int16, group string) *kmsg.AddOffsetsToTxnRequest {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txnID, pid, epoch, group
	return req
}

func ltEndTxnReq(txnID string, pid int64, epoch int16, commit bool) *kmsg.EndTxnRequest {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, pid, epoch, commit
	return req
}

// ltEndTxn sends EndTxn at version v.
func ltEndTxn(t *testing.T, c *rawConn, v int16, txnID string, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	t.Helper()
	return ltCall(t, c, ltEndTxnReq(txnID, pid, epoch, commit), v).(*kmsg.EndTxnResponse)
}

// ltEndTxnRetry sends EndTxn at version v until it is not
// CONCURRENT_TRANSACTIONS (what Kafka answers a retry while the
// decision's markers are still being written; clients retry it) and
// returns the answer.
func ltEndTxnRetry(t *testing.T, c *rawConn, v int16, txnID string, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	t.Helper()
	var resp *kmsg.EndTxnResponse
	ltEventually(t, "EndTxn is answered other than CONCURRENT_TRANSACTIONS", func() bool {
		resp = ltEndTxn(t, c, v, txnID, pid, epoch, commit)
		return resp.ErrorCode != kerr.ConcurrentTransactions.Code
	})
	return resp
}

func ltTxnOffsetCommitReq(txnID string, pid int64, epoch int16, group string, gen int32, member, topic string, offsets map[int32]int64) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, group, pid, epoch
	req.Generation, req.MemberID = gen, member
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	parts := make([]int32, 0, len(offsets))
	for p := range offsets {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	for _, p := range parts {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, offsets[p], -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// ltTxnOffsetCommitCodes sends TxnOffsetCommit v3 (KIP-447: with the
// member's generation and id) and returns the partitions' codes.
func ltTxnOffsetCommitCodes(t *testing.T, c *rawConn, req *kmsg.TxnOffsetCommitRequest) map[int32]int16 {
	t.Helper()
	resp := ltCall(t, c, req, 3).(*kmsg.TxnOffsetCommitResponse)
	codes := map[int32]int16{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			codes[p.Partition] = p.ErrorCode
		}
	}
	return codes
}

// ltCodes returns a map of parts to code.
func ltCodes(code int16, parts ...int32) map[int32]int16 {
	m := map[int32]int16{}
	for _, p := range parts {
		m[p] = code
	}
	return m
}

// ltBatch is a hand-built batch of values from producer pid at epoch,
// first sequence seq, transactional or only idempotent.
func ltBatch(pid int64, epoch int16, seq int32, transactional bool, values ...string) []byte {
	recs := make([]testRecord, len(values))
	for i, v := range values {
		recs[i] = testRecord{Value: []byte(v)}
	}
	raw := batchSpec{ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq, Timestamp: time.Now().UnixMilli(), Records: recs}.encode()
	if transactional {
		binary.BigEndian.PutUint16(raw[21:], 0x10) // attributes: transactional
		fixCRC(raw)
	}
	return raw
}

func ltTxnProduceReq(txnID, topic string, id [16]byte, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := produceRequest(topic, id, partition, -1, batch)
	req.TransactionID = &txnID
	return req
}

// ltProduced returns the one partition's answer of a produce.
func ltProduced(t *testing.T, resp kmsg.Response) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	pr := resp.(*kmsg.ProduceResponse)
	require.Len(t, pr.Topics, 1)
	require.Len(t, pr.Topics[0].Partitions, 1)
	return pr.Topics[0].Partitions[0]
}

// ltDescribeTxn returns DescribeTransactions' state of txnID.
func ltDescribeTxn(t *testing.T, c *rawConn, txnID string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{txnID}
	resp := ltCall(t, c, req, 0).(*kmsg.DescribeTransactionsResponse)
	require.Len(t, resp.TransactionStates, 1)
	st := resp.TransactionStates[0]
	require.Zero(t, st.ErrorCode, codeName(st.ErrorCode))
	return st
}

// ltTxnPartitions lists a described transaction's partitions of topic, in
// the order given, duplicates kept.
func ltTxnPartitions(st kmsg.DescribeTransactionsResponseTransactionState, topic string) []int32 {
	var out []int32
	for _, tt := range st.Topics {
		if tt.Topic == topic {
			out = append(out, tt.Partitions...)
		}
	}
	return out
}

// ltCommitSimple commits offset for one partition with OffsetCommit v8 as a
// simple (groupless) committer.
func ltCommitSimple(t *testing.T, c *rawConn, group, topic string, partition int32, offset int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, -1, ""
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = partition, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := ltCall(t, c, req, 8).(*kmsg.OffsetCommitResponse)
	require.Len(t, resp.Topics, 1)
	require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode, codeName(resp.Topics[0].Partitions[0].ErrorCode))
}

// ltFetchOffsetV10 is OffsetFetch v10 as franz-go sends it (the groups form,
// topic ids, an admin fetch naming no member), with RequireStable as
// given: the partition's code and offset.
func ltFetchOffsetV10(t *testing.T, c *rawConn, group string, topicID [16]byte, partition int32, stable bool) (int16, int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = stable
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group, rg.MemberID, rg.MemberEpoch = group, nil, -1
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.TopicID, rt.Partitions = topicID, []int32{partition}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp := ltCall(t, c, req, 10).(*kmsg.OffsetFetchResponse)
	require.Len(t, resp.Groups, 1)
	g := resp.Groups[0]
	require.Zero(t, g.ErrorCode, "OffsetFetch v10 group error %s", codeName(g.ErrorCode))
	require.Len(t, g.Topics, 1)
	require.Equal(t, topicID, g.Topics[0].TopicID)
	require.Len(t, g.Topics[0].Partitions, 1)
	p := g.Topics[0].Partitions[0]
	return p.ErrorCode, p.Offset
}

// ltFetchOffsetV7 is OffsetFetch v7 (topic names, one group).
func ltFetchOffsetV7(t *testing.T, c *rawConn, group, topic string, partition int32, stable bool) (int16, int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = group, stable
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	resp := ltCall(t, c, req, 7).(*kmsg.OffsetFetchResponse)
	require.Zero(t, resp.ErrorCode, "OffsetFetch v7 error %s", codeName(resp.ErrorCode))
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	p := resp.Topics[0].Partitions[0]
	return p.ErrorCode, p.Offset
}

// requireStableOffset requires that OffsetFetch with RequireStable, v10
// and v7, answers UNSTABLE_OFFSET_COMMIT or want until it answers want,
// and never anything else: while a decided transaction's offsets are
// being applied Kafka answers UNSTABLE_OFFSET_COMMIT, never an older
// offset.
func (e *ltEnv) requireStableOffset(c *rawConn, group string, partition int32, want int64) {
	t := e.t
	t.Helper()
	ltEventually(t, fmt.Sprintf("OffsetFetch RequireStable answers offset %d", want), func() bool {
		done := true
		for _, v := range []int16{10, 7} {
			var code int16
			var off int64
			if v == 10 {
				code, off = ltFetchOffsetV10(t, c, group, e.id, partition, true)
			} else {
				code, off = ltFetchOffsetV7(t, c, group, e.topic, partition, true)
			}
			switch {
			case code == kerr.UnstableOffsetCommit.Code:
				done = false
			case code == 0 && off == want:
			default:
				require.FailNow(t, "unexpected stable offset", "OffsetFetch v%d RequireStable: %s offset %d, want UNSTABLE_OFFSET_COMMIT or %d", v, codeName(code), off, want)
			}
		}
		return done
	})
}

// requireUnstable requires UNSTABLE_OFFSET_COMMIT from OffsetFetch with
// RequireStable (v10 and v7), and the last committed offset without it.
func (e *ltEnv) requireUnstable(c *rawConn, group string, partition int32, committed int64) {
	t := e.t
	t.Helper()
	code, _ := ltFetchOffsetV10(t, c, group, e.id, partition, true)
	require.Equal(t, kerr.UnstableOffsetCommit.Code, code, "v10 RequireStable: %s", codeName(code))
	code, _ = ltFetchOffsetV7(t, c, group, e.topic, partition, true)
	require.Equal(t, kerr.UnstableOffsetCommit.Code, code, "v7 RequireStable: %s", codeName(code))
	code, off := ltFetchOffsetV10(t, c, group, e.id, partition, false)
	require.Zero(t, code, codeName(code))
	require.Equal(t, committed, off, "without RequireStable the committed offset")
	code, off = ltFetchOffsetV7(t, c, group, e.topic, partition, false)
	require.Zero(t, code, codeName(code))
	require.Equal(t, committed, off, "without RequireStable the committed offset")
}

// readCommitted appends a plain sentinel record to every partition and
// reads the topic read_committed from the start until each sentinel is
// there, returning each partition's other values in offset order. What
// precedes a sentinel is decided once the sentinel is visible, so a
// committed record missing or read twice shows.
func (e *ltEnv) readCommitted(partitions int32) map[int32][]string {
	t := e.t
	t.Helper()
	ctx := testContext(t)
	sentinel := fmt.Sprintf("sentinel-%d", time.Now().UnixNano())
	prod := e.b.client(t, kgo.DefaultProduceTopic(e.topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite())
	for p := range partitions {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(sentinel)}).FirstErr())
	}
	prod.Close()
	cl := e.b.client(t, kgo.ConsumeTopics(e.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	out := map[int32][]string{}
	seen := map[int32]bool{}
	for len(seen) < int(partitions) {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "reading to the sentinels: %v", out)
		require.NoError(t, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			switch {
			case v == sentinel:
				seen[r.Partition] = true
			case strings.HasPrefix(v, "sentinel-"):
			case seen[r.Partition]:
				t.Errorf("record %q after the sentinel in partition %d", v, r.Partition)
			default:
				out[r.Partition] = append(out[r.Partition], v)
			}
		})
	}
	return out
}

// ---- classic and KIP-848 group members ----

// ltJoinClassic joins member (empty: a new one, as KIP-394 asks) to a
// classic group and returns its id and generation.
func ltJoinClassic(t *testing.T, c *rawConn, group, topic, member string) (string, int32) {
	t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID = group, member
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, 30000
	req.ProtocolType = "consumer"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{topic}
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name, proto.Metadata = "range", meta.AppendTo(nil)
	req.Protocols = append(req.Protocols, proto)
	resp := ltCall(t, c, req, 9).(*kmsg.JoinGroupResponse)
	if resp.ErrorCode == kerr.MemberIDRequired.Code {
		req.MemberID = resp.MemberID
		resp = ltCall(t, c, req, 9).(*kmsg.JoinGroupResponse)
	}
	require.Zero(t, resp.ErrorCode, "JoinGroup: %s", codeName(resp.ErrorCode))
	require.Equal(t, resp.MemberID, resp.LeaderID, "the only member leads")
	return resp.MemberID, resp.Generation
}

// ltSyncClassic completes a one-member rebalance with its SyncGroup.
func ltSyncClassic(t *testing.T, c *rawConn, group, member string, gen int32) {
	t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.Generation, req.MemberID = group, gen, member
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	assignment := kmsg.NewConsumerMemberAssignment()
	a.MemberID, a.MemberAssignment = member, assignment.AppendTo(nil)
	req.GroupAssignment = append(req.GroupAssignment, a)
	resp := ltCall(t, c, req, 5).(*kmsg.SyncGroupResponse)
	require.Zero(t, resp.ErrorCode, "SyncGroup: %s", codeName(resp.ErrorCode))
}

// ltHeartbeat848 sends a full ConsumerGroupHeartbeat v1 for member at
// epoch, subscribed to topic, owning owned of topicID; it returns the
// member's epoch and assigned partitions.
func ltHeartbeat848(t *testing.T, c *rawConn, group, member string, epoch int32, topic string, topicID [16]byte, owned []int32) (int32, []int32) {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = group, member, epoch
	req.RebalanceTimeoutMillis = 30000
	req.SubscribedTopicNames = []string{topic}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if len(owned) > 0 {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = topicID, owned
		req.Topics = append(req.Topics, rt)
	}
	resp := ltCall(t, c, req, 1).(*kmsg.ConsumerGroupHeartbeatResponse)
	require.Zero(t, resp.ErrorCode, "ConsumerGroupHeartbeat: %s", codeName(resp.ErrorCode))
	require.NotNil(t, resp.Assignment, "a full heartbeat gets the assignment")
	var parts []int32
	for _, at := range resp.Assignment.Topics {
		if at.TopicID == topicID {
			parts = append(parts, at.Partitions...)
		}
	}
	slices.Sort(parts)
	return resp.MemberEpoch, parts
}

// ---- 1. InitProducerId ----

// TestLostInitProducerIDRetried: producer A holds epoch 0 of a
// transactional id. Producer B (franz-go) starts with the same id; its
// InitProducerId reaches the broker, which bumps the epoch to 1, but the
// answer is lost and the connection closes. franz-go retries on a new
// connection, still naming no producer id, so Kafka treats it as one more
// new producer and bumps again (prepareIncrementProducerEpoch with no
// expected epoch): B gets the same producer id at epoch 2. A is fenced:
// AddPartitionsToTxn, EndTxn and a KIP-360 InitProducerId with its epoch
// get PRODUCER_FENCED. B's transaction commits and is read once.
func TestLostInitProducerIDRetried(t *testing.T) {
	t.Parallel()
	e := newLTEnv(t, 1)
	ctx := testContext(t)
	txnID := e.topic + "-txn"

	a := e.dial()
	pid, epoch := ltInitPID(t, a, &txnID, -1, -1)
	require.Zero(t, epoch, "a new transactional id starts at epoch 0")

	e.proxy.Next(22, faultproxy.LoseResponse, 0) // B's first InitProducerId
	b := e.b.client(t, kgo.SeedBrokers(e.proxy.Addr()), kgo.TransactionalID(txnID), kgo.TransactionTimeout(ltTxnTimeoutMs*time.Millisecond),
		kgo.DefaultProduceTopic(e.topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var bPid int64
	var bEpoch int16
	var err error
	for range 5 { // franz-go retries the cut request, or discards the attempt for the next call to redo
		if bPid, bEpoch, err = b.ProducerID(ctx); err == nil {
			break
		}
		t.Logf("ProducerID: %v", err)
	}
	require.NoError(t, err)
	require.Zero(t, e.proxy.Pending(), "the InitProducerId answer was lost")
	require.EqualValues(t, 1, e.proxy.Stats().ByKey[faultproxy.LoseResponse][22])
	require.Equal(t, pid, bPid, "the transactional id keeps its producer id")
	require.EqualValues(t, 2, bEpoch, "the lost InitProducerId bumped to 1, its retry to 2")

	st := ltDescribeTxn(t, a, txnID)
	require.Equal(t, "Empty", st.State)
	require.Equal(t, pid, st.ProducerID)
	require.EqualValues(t, 2, st.ProducerEpoch)

	// A, at epoch 0, is fenced.
	require.Equal(t, ltCodes(kerr.ProducerFenced.Code, 0), ltAddPartitions(t, a, txnID, pid, 0, e.topic, 0))
	resp := ltEndTxn(t, a, 5, txnID, pid, 0, true)
	require.Equal(t, kerr.ProducerFenced.Code, resp.ErrorCode, "EndTxn v5 at epoch 0: %s", codeName(resp.ErrorCode))
	ir := ltCall(t, a, ltInitReq(&txnID, pid, 0), 5).(*kmsg.InitProducerIDResponse)
	require.Equal(t, kerr.ProducerFenced.Code, ir.ErrorCode, "KIP-360 InitProducerId at epoch 0: %s", codeName(ir.ErrorCode))

	// B works.
	require.NoError(t, b.BeginTransaction())
	require.NoError(t, b.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("b1")}).FirstErr())
	require.NoError(t, b.EndTransaction(ctx, kgo.TryCommit))
	require.Equal(t, map[int32][]string{0: {"b1"}}, e.readCommitted(1))
}

// TestInitProducerIDRetryRuleIsLastEpoch: Kafka takes a KIP-360
// InitProducerId (one naming the producer id and epoch) for the retry of
// an epoch bump whose answer was lost only if the epoch it names is
// lastProducerEpoch, the epoch that bump left, and an InitProducerId
// naming no producer id (a new producer instance taking over) sets
// lastProducerEpoch to -1 (TransactionMetadata.prepareIncrementProducerEpoch:
// "There is no danger of this producer being fenced, because a new
// producer calling InitProducerId would have caused the last epoch to be
// set to -1"). Producer B takes over from A; its InitProducerId is lost
// (epoch 1) and retried (epoch 2). InitProducerId(pid, 1), naming the
// epoch nobody received, is PRODUCER_FENCED. Producer C then takes over
// (epoch 3), and B, now a zombie one epoch behind, asks to bump its
// epoch with InitProducerId(pid, 2), as a client does after an abortable
// error: PRODUCER_FENCED, as every other request of B's.
//
// Shoal used to keep the epoch a takeover left as the last epoch, so it
// answered both NONE: the zombie shared C's epoch and could add
// partitions to C's transaction.
func TestInitProducerIDRetryRuleIsLastEpoch(t *testing.T) {
	t.Parallel()
	e := newLTEnv(t, 1)
	txnID := e.topic + "-txn"

	a := e.dial()
	pid, epoch := ltInitPID(t, a, &txnID, -1, -1)
	require.Zero(t, epoch)
	b := e.dial()
	e.lose(b, ltInitReq(&txnID, -1, -1), 5)
	b = e.dial()
	bPid, bEpoch := ltInitPID(t, b, &txnID, -1, -1)
	require.Equal(t, pid, bPid)
	require.EqualValues(t, 2, bEpoch, "the lost InitProducerId bumped to 1, its retry to 2")
	ir := ltCall(t, a, ltInitReq(&txnID, pid, 1), 5).(*kmsg.InitProducerIDResponse)
	require.Equal(t, kerr.ProducerFenced.Code, ir.ErrorCode,
		"InitProducerId(pid, 1), the epoch of the lost answer, after the retry: %s with epoch %d", codeName(ir.ErrorCode), ir.ProducerEpoch)

	c := e.dial()
	_, cEpoch := ltInitPID(t, c, &txnID, -1, -1)
	require.EqualValues(t, 3, cEpoch)
	require.Equal(t, ltCodes(kerr.ProducerFenced.Code, 0), ltAddPartitions(t, b, txnID, pid, bEpoch, e.topic, 0), "B is fenced")
	ir = ltCall(t, b, ltInitReq(&txnID, pid, bEpoch), 5).(*kmsg.InitProducerIDResponse)
	require.Equal(t, kerr.ProducerFenced.Code, ir.ErrorCode,
		"the zombie's InitProducerId(pid, %d), one epoch behind the new producer: %s with epoch %d", bEpoch, codeName(ir.ErrorCode), ir.ProducerEpoch)
	require.Equal(t, ltCodes(0, 0), ltAddPartitions(t, c, txnID, pid, cEpoch, e.topic, 0), "the new producer is not disturbed")
}

// ---- 2. KIP-360 epoch bumps ----

// TestLostKIP360BumpIdempotent: an idempotent producer (no transactional
// id) asks InitProducerId v5 with its producer id and epoch to bump its
// epoch (KIP-360); the broker hands out a producer id, the answer is
// lost, and the producer retries with the same (pid, epoch). Kafka's
// TransactionCoordinator.handleInitProducerId "always blindly accept[s]"
// a request without a transactional id and returns a new producer id at
// epoch 0, so the retry is not refused (no INVALID_PRODUCER_EPOCH or
// PRODUCER_FENCED) and gets a producer id other than the old one and the
// lost one, at epoch 0, whose sequences start at 0.
func TestLostKIP360BumpIdempotent(t *testing.T) {
	t.Parallel()
	e := newLTEnv(t, 1)
	c := e.dial()
	pid0, epoch0 := ltInitPID(t, c, nil, -1, -1)
	require.Zero(t, epoch0)
	require.Zero(t, ltProduced(t, ltCall(t, c, produceRequest(e.topic, e.id, 0, -1, ltBatch(pid0, 0, 0, false, "i0")), 12)).ErrorCode)

	e.lose(c, ltInitReq(nil, pid0, 0), 5)
	c = e.dial()
	pid2, epoch2 := ltInitPID(t, c, nil, pid0, 0)
	require.Zero(t, epoch2, "a new producer id starts at epoch 0")
	require.NotEqual(t, pid0, pid2, "a new producer id")
	require.Greater(t, pid2, pid0+1, "the lost answer's producer id was handed out too; ids are never reused")

	pr := ltProduced(t, ltCall(t, c, produceRequest(e.topic, e.id, 0, -1, ltBatch(pid2, 0, 0, false, "i1")), 12))
	require.Zero(t, pr.ErrorCode, codeName(pr.ErrorCode))
	require.EqualValues(t, 1, pr.BaseOffset)
	require.Equal(t, map[int32][]string{0: {"i0", "i1"}}, e.readCommitted(1))
}

// TestLostKIP360BumpTransactional: a transactional producer at (pid, 0)
// bumps its epoch with InitProducerId(pid, 0) (KIP-360, after an
// abortable error); the broker bumps to 1 and records 0 as
// lastProducerEpoch, the answer is lost, and the producer retries with
// (pid, 0). Kafka's prepareIncrementProducerEpoch takes an expected epoch
// equal to lastProducerEpoch for a retry of a successful bump and answers
// the current epoch, 1, without bumping again. Epoch 0 is fenced; the
// producer's transaction at epoch 1 commits.
func TestLostKIP360BumpTransactional(t *testing.T) {
	t.Parallel()
	e := newLTEnv(t, 1)
	txnID := e.topic + "-txn"
	c := e.dial()
	pid, epoch := ltInitPID(t, c, &txnID, -1, -1)
	require.Zero(t, epoch)

	e.lose(c, ltInitReq(&txnID, pid, 0), 5)
	c = e.dial()
	rPid, rEpoch := ltInitPID(t, c, &txnID, pid, 0)
	require.Equal(t, pid, rPid)
	require.EqualValues(t, 1, rEpoch, "the retry gets the epoch the lost bump made, not another bump")
	// Again: still a retry of the same bump.
	rPid, rEpoch = ltInitPID(t, c, &txnID, pid, 0)
	require.Equal(t, pid, rPid)
	require.EqualValues(t, 1, rEpoch)
	require.EqualValues(t, 1, ltDescribeTxn(t, c, txnID).ProducerEpoch)

	require.Equal(t, ltCodes(kerr.ProducerFenced.Code, 0), ltAddPartitions(t, c, txnID, pid, 0, e.topic, 0), "epoch 0 is fenced")
	require.Equal(t, ltCodes(0, 0), ltAddPartitions(t, c, txnID, pid, 1, e.topic, 0))
	pr := ltProduced(t, ltCall(t, c, ltTxnProduceReq(txnID, e.topic, e.id, 0, ltBatch(pid, 1, 0, true, "k0")), 11))
	require.Zero(t, pr.ErrorCode, codeName(pr.ErrorCode))
	require.Zero(t, ltEndTxn(t, c, 4, txnID, pid, 1, true).ErrorCode)
	require.Equal(t, map[int32][]string{0: {"k0"}}, e.readCommitted(1))

	// The next bump at the current epoch is a bump, not a retry.
	_, rEpoch = ltInitPID(t, c, &txnID, pid, 1)
	require.EqualValues(t, 2, rEpoch)
}

// ---- 3. KIP-890 transactions v2 ----

// TestLostEndTxnV5Retried: a KIP-890 (transactions v2) producer writes a
// transaction with Produce v12 (the partitions join the transaction
// implicitly) and commits it with EndTxn v5, which the broker decides,
// bumping the epoch 0 → 1; the answer is lost. The retry, at epoch 0, is
// Kafka's retryOnEpochBump (the transaction's epoch is the request's + 1):
// it is answered NONE with the same new epoch (or CONCURRENT_TRANSACTIONS
// while the markers are being written, which the client retries), and an
// abort at epoch 0 is INVALID_TXN_STATE. The transaction's records are
// read read_committed exactly once, and the producer's next transaction
// at epoch 1 commits to epoch 2.
func TestLostEndTxnV5Retried(t *testing.T) {
	t.Parallel()
	e := newLTEnv(t, 2)
	txnID := e.topic + "-txn"
	c := e.dial()
	pid, _ := ltInitPID(t, c, &txnID, -1, -1)
	for p, vals := range [][]string{{"a", "b"}, {"c"}} {
		pr := ltProduced(t, ltCall(t, c, ltTxnProduceReq(txnID, e.topic, e.id, int32(p), ltBatch(pid, 0, 0, true, vals...)), 12))
		require.Zero(t, pr.ErrorCode, codeName(pr.ErrorCode))
	}
	require.Equal(t, []int32{0, 1}, ltTxnPartitions(ltDescribeTxn(t, c, txnID), e.topic))

	e.lose(c, ltEndTxnReq(txnID, pid, 0, true), 5)
	c = e.dial()
	resp := ltEndTxnRetry(t, c, 5, txnID, pid, 0, true)
	require.Zero(t, resp.ErrorCode, "retried EndTxn v5 commit: %s", codeName(resp.ErrorCode))
	require.Equal(t, pid, resp.ProducerID)
	require.EqualValues(t, 1, resp.ProducerEpoch, "the epoch the lost EndTxn moved to")
	resp = ltEndTxnRetry(t, c, 5, txnID, pid, 0, true)
	require.Zero(t, resp.ErrorCode, "a second retry: %s", codeName(resp.ErrorCode))
	require.EqualValues(t, 1, resp.ProducerEpoch)
	resp = ltEndTxn(t, c, 5, txnID, pid, 0, false)
	require.Equal(t, kerr.InvalidTxnState.Code, resp.ErrorCode, "abort retrying a commit: %s", codeName(resp.ErrorCode))
	require.Equal(t, map[int32][]string{0: {"a", "b"}, 1: {"c"}}, e.readCommitted(2))

	pr := ltProduced(t, ltCall(t, c, ltTxnProduceReq(txnID, e.topic, e.id, 0, ltBatch(pid, 1, 0, true, "d")), 12))
	require.Zero(t, pr.ErrorCode, codeName(pr.ErrorCode))
	resp = ltEndTxn(t, c, 5, txnID, pid, 1, true)
	require.Zero(t, resp.ErrorCode, codeName(resp.ErrorCode))
	require.EqualValues(t, 2, resp.ProducerEpoch)
	require.Equal(t, map[int32][]string{0: {"a", "b", "d"}, 1: {"c"}}, e.readCommitted(2))
}

// TestLostProduceV12Retried: the first Produce v12 of a transactions-v2
// transaction, which adds its partition to the transaction (the
// partition leader asks the coordinator to, in Kafka), is stored and
// its answer lost. The client retries the same batch (same producer,
// epoch and sequence): the partition is in the transaction once and the
// batch is a duplicate, answered NONE with its original offset
// (ProducerStateManager's duplicate detection), stored once. The next
// batch follows it directly, and the commit shows each record once.
func TestLostProduceV12Retried(t *testing.T) {
	t.Parallel()
	e := newLTEnv(t, 1)
	txnID := e.topic + "-txn"
	c := e.dial()
	pid, _ := ltInitPID(t, c, &txnID, -1, -1)
	first := ltBatch(pid, 0, 0, true, "x0", "x1")

	e.lose(c, ltTxnProduceReq(txnID, e.topic, e.id, 0, first), 12)
	c = e.dial()
	st := ltDescribeTxn(t, c, txnID)
	require.Equal(t, "Ongoing", st.State, "the lost produce started the transaction")
	require.Equal(t, []int32{0}, ltTxnPartitions(st, e.topic))

	pr := ltProduced(t, ltCall(t, c, ltTxnProduceReq(txnID, e.topic, e.id, 0, first), 12))
	require.Zero(t, pr.ErrorCode, "retried batch: %s", codeName(pr.ErrorCode))
	require.Zero(t, pr.BaseOffset, "the duplicate gets the original offset")
	require.Equal(t, []int32{0}, ltTxnPartitions(ltDescribeTxn(t, c, txnID), e.topic), "the partition is in the transaction once")
	pr = ltProduced(t, ltCall(t, c, ltTxnProduceReq(txnID, e.topic, e.id, 0, ltBatch(pid, 0, 2, true, "x2")), 12))
	require.Zero(t, pr.ErrorCode, codeName(pr.ErrorCode))
	require.EqualValues(t, 2, pr.BaseOffset, "nothing was stored twice")

	resp := ltEndTxn(t, c, 5, txnID, pid, 0, true)
	require.Zero(t, resp.ErrorCode, codeName(resp.ErrorCode))
	require.EqualValues(t, 1, resp.ProducerEpoch)
	require.Equal(t, map[int32][]string{0: {"x0", "x1", "x2"}}, e.readCommitted(1))
}

// ---- 4. AddPartitionsToTxn and AddOffsetsToTxn ----

// TestLostAddPartitionsAndAddOffsetsRetried: a transactions-v1 producer
// (AddPartitionsToTxn v3, the client form; Produce v11; EndTxn v4) adds
// two partitions, and the answer is lost after the coordinator stored
// them; the retry finds them in the Ongoing transaction and answers NONE
// (Kafka's "partitions already in the metadata" shortcut), the
// transaction listing each partition once. AddOffsetsToTxn's answer is
// lost the same way and its retry answers NONE (the group is in the
// transaction already), then TxnOffsetCommit's, whose retry replaces the
// pending offset with the same one, and then EndTxn v4's: transactions v1
// keep the epoch, so the retry names the current one and Kafka answers
// NONE for the outcome just completed (CONCURRENT_TRANSACTIONS while its
// markers are written). The transaction commits whole: both partitions'
// records once and the group's offset.
func TestLostAddPartitionsAndAddOffsetsRetried(t *testing.T) {
	t.Parallel()
	e := newLTEnv(t, 2)
	txnID, group := e.topic+"-txn", e.topic+"-group"
	c := e.dial()
	pid, epoch := ltInitPID(t, c, &txnID, -1, -1)

	e.lose(c, ltAddPartitionsReq(txnID, pid, epoch, e.topic, 0, 1), 3)
	c = e.dial()
	require.Equal(t, ltCodes(0, 0, 1), ltAddPartitions(t, c, txnID, pid, epoch, e.topic, 0, 1))
	st := ltDescribeTxn(t, c, txnID)
	require.Equal(t, "Ongoing", st.State)
	require.Equal(t, []int32{0, 1}, ltTxnPartitions(st, e.topic), "each partition once")

	for p := range int32(2) {
		pr := ltProduced(t, ltCall(t, c, ltTxnProduceReq(txnID, e.topic, e.id, p, ltBatch(pid, epoch, 0, true, fmt.Sprintf("p%d", p))), 11))
		require.Zero(t, pr.ErrorCode, codeName(pr.ErrorCode))
	}

	e.lose(c, ltAddOffsetsReq(txnID, pid, epoch, group), 3)
	c = e.dial()
	ar := ltCall(t, c, ltAddOffsetsReq(txnID, pid, epoch, group), 3).(*kmsg.AddOffsetsToTxnResponse)
	require.Zero(t, ar.ErrorCode, "retried AddOffsetsToTxn: %s", codeName(ar.ErrorCode))
	e.lose(c, ltTxnOffsetCommitReq(txnID, pid, epoch, group, -1, "", e.topic, map[int32]int64{0: 1}), 3)
	c = e.dial()
	require.Equal(t, ltCodes(0, 0), ltTxnOffsetCommitCodes(t, c, ltTxnOffsetCommitReq(txnID, pid, epoch, group, -1, "", e.topic, map[int32]int64{0: 1})),
		"retried TxnOffsetCommit")
	require.Equal(t, []int32{0, 1}, ltTxnPartitions(ltDescribeTxn(t, c, txnID), e.topic))

	e.lose(c, ltEndTxnReq(txnID, pid, epoch, true), 4)
	c = e.dial()
	resp := ltEndTxnRetry(t, c, 4, txnID, pid, epoch, true)
	require.Zero(t, resp.ErrorCode, "retried EndTxn v4 commit: %s", codeName(resp.ErrorCode))
	require.Equal(t, map[int32][]string{0: {"p0"}, 1: {"p1"}}, e.readCommitted(2))
	e.requireStableOffset(c, group, 0, 1)
	ltEventually(t, "the commit completes", func() bool {
		st = ltDescribeTxn(t, c, txnID)
		return st.State == "CompleteCommit"
	})
	require.Empty(t, st.Topics)
}

// ---- 5. TxnOffsetCommit fencing (KIP-447) ----

// TestLostTxnOffsetCommitClassicGeneration: a classic group's member
// commits through a transaction with TxnOffsetCommit v3, which carries
// its member id and generation (KIP-447). Kafka checks them as an offset
// commit's (ClassicGroup.validateOffsetCommit): after a rebalance moved
// the generation on, a commit with the old generation is
// ILLEGAL_GENERATION and leaves nothing pending (OffsetFetch with
// RequireStable shows the committed offset). Then a TxnOffsetCommit at the
// current generation is stored pending and its answer lost; a rebalance
// moves the generation before the retry, which is ILLEGAL_GENERATION; the
// client aborts, and the aborted transaction's offset is never applied:
// OffsetFetch shows the old offset.
func TestLostTxnOffsetCommitClassicGeneration(t *testing.T) {
	t.Parallel()
	e := newLTEnv(t, 1)
	txnID, group := e.topic+"-txn", e.topic+"-group"
	noRebalanceDelay(testContext(t), t, e.b.admin(t))
	c, gc := e.dial(), e.dial()
	ltCommitSimple(t, gc, group, e.topic, 0, 3)

	member, gen1 := ltJoinClassic(t, gc, group, e.topic, "")
	ltSyncClassic(t, gc, group, member, gen1)
	pid, epoch := ltInitPID(t, c, &txnID, -1, -1)
	require.Zero(t, ltCall(t, c, ltAddOffsetsReq(txnID, pid, epoch, group), 4).(*kmsg.AddOffsetsToTxnResponse).ErrorCode)

	// The leader rejoins: a rebalance, generation 2.
	_, gen2 := ltJoinClassic(t, gc, group, e.topic, member)
	ltSyncClassic(t, gc, group, member, gen2)
	require.Greater(t, gen2, gen1)
	require.Equal(t, ltCodes(kerr.IllegalGeneration.Code, 0),
		ltTxnOffsetCommitCodes(t, c, ltTxnOffsetCommitReq(txnID, pid, epoch, group, gen1, member, e.topic, map[int32]int64{0: 5})))
	e.requireStableOffset(c, group, 0, 3) // nothing pending

	// At the current generation the commit is stored; its answer is lost.
	e.lose(c, ltTxnOffsetCommitReq(txnID, pid, epoch, group, gen2, member, e.topic, map[int32]int64{0: 6}), 3)
	c = e.dial()
	e.requireUnstable(c, group, 0, 3)
	_, gen3 := ltJoinClassic(t, gc, group, e.topic, member)
	ltSyncClassic(t, gc, group, member, gen3)
	require.Greater(t, gen3, gen2)
	require.Equal(t, ltCodes(kerr.IllegalGeneration.Code, 0),
		ltTxnOffsetCommitCodes(t, c, ltTxnOffsetCommitReq(txnID, pid, epoch, group, gen2, member, e.topic, map[int32]int64{0: 6})),
		"the retry after the rebalance is fenced")

	resp := ltEndTxn(t, c, 5, txnID, pid, epoch, false)
	require.Zero(t, resp.ErrorCode, "abort: %s", codeName(resp.ErrorCode))
	e.requireStableOffset(c, group, 0, 3)

	// The member's next transaction, at its current generation, commits.
	epoch = resp.ProducerEpoch
	require.Zero(t, ltCall(t, c, ltAddOffsetsReq(txnID, pid, epoch, group), 4).(*kmsg.AddOffsetsToTxnResponse).ErrorCode)
	require.Equal(t, ltCodes(0, 0), ltTxnOffsetCommitCodes(t, c, ltTxnOffsetCommitReq(txnID, pid, epoch, group, gen3, member, e.topic, map[int32]int64{0: 7})))
	require.Zero(t, ltEndTxn(t, c, 5, txnID, pid, epoch, true).ErrorCode)
	e.requireStableOffset(c, group, 0, 7)
}

// TestLostTxnOffsetCommitConsumerGroupEpoch is the same for a KIP-848
// consumer group, whose TxnOffsetCommit carries the member epoch as its
// generation. Member A holds both partitions at epoch eA1; member B
// joins and A is asked to revoke one of them, r, keeping epoch eA1 until
// it has. Before revoking, A commits r's offset through its transaction
// (the KIP-447 case: offsets of a partition about to move), which is
// accepted at eA1 and stored pending, and the answer is lost. A revokes
// r, moving to epoch eA2, and B takes r. The retry at eA1 is refused:
// Kafka's ConsumerGroup.validateOffsetCommit throws STALE_MEMBER_EPOCH
// for an epoch other than the member's, which
// OffsetMetadataManager.validateTransactionalOffsetCommit turns into
// ILLEGAL_GENERATION for TxnOffsetCommit before v6 (KIP-1251's relaxed
// check refuses it too: r is no longer A's). The client aborts and r's
// offset is never applied. In A's next transaction a commit of r at eA1
// is ILLEGAL_GENERATION with nothing pending, and a commit of A's kept
// partition at eA2 commits.
func TestLostTxnOffsetCommitConsumerGroupEpoch(t *testing.T) {
	t.Parallel()
	e := newLTEnv(t, 2)
	txnID, group := e.topic+"-txn", e.topic+"-group"
	c, ga, gb := e.dial(), e.dial(), e.dial()
	ltCommitSimple(t, ga, group, e.topic, 0, 3)
	ltCommitSimple(t, ga, group, e.topic, 1, 3)

	memberA, memberB := e.topic+"-a", e.topic+"-b"
	eA1, partsA := ltHeartbeat848(t, ga, group, memberA, 0, e.topic, e.id, nil)
	require.Equal(t, []int32{0, 1}, partsA, "the only member gets both partitions")
	eB, partsB := ltHeartbeat848(t, gb, group, memberB, 0, e.topic, e.id, nil)
	require.Empty(t, partsB, "B waits for A to revoke")
	ep, kept := ltHeartbeat848(t, ga, group, memberA, eA1, e.topic, e.id, partsA)
	require.Equal(t, eA1, ep, "A keeps its epoch until it revoked")
	require.Len(t, kept, 1)
	r := 1 - kept[0]

	pid, epoch := ltInitPID(t, c, &txnID, -1, -1)
	require.Zero(t, ltCall(t, c, ltAddOffsetsReq(txnID, pid, epoch, group), 4).(*kmsg.AddOffsetsToTxnResponse).ErrorCode)
	e.lose(c, ltTxnOffsetCommitReq(txnID, pid, epoch, group, eA1, memberA, e.topic, map[int32]int64{r: 5}), 3)
	c = e.dial()
	e.requireUnstable(c, group, r, 3)

	eA2, kept2 := ltHeartbeat848(t, ga, group, memberA, eA1, e.topic, e.id, kept)
	require.Equal(t, kept, kept2)
	require.Greater(t, eA2, eA1, "A moved on once it revoked")
	_, partsB = ltHeartbeat848(t, gb, group, memberB, eB, e.topic, e.id, nil)
	require.Equal(t, []int32{r}, partsB, "B took the revoked partition")

	require.Equal(t, ltCodes(kerr.IllegalGeneration.Code, r),
		ltTxnOffsetCommitCodes(t, c, ltTxnOffsetCommitReq(txnID, pid, epoch, group, eA1, memberA, e.topic, map[int32]int64{r: 5})),
		"the retry at the old member epoch is fenced")
	resp := ltEndTxn(t, c, 5, txnID, pid, epoch, false)
	require.Zero(t, resp.ErrorCode, "abort: %s", codeName(resp.ErrorCode))
	e.requireStableOffset(c, group, r, 3)
	e.requireStableOffset(c, group, kept[0], 3)

	epoch = resp.ProducerEpoch
	require.Zero(t, ltCall(t, c, ltAddOffsetsReq(txnID, pid, epoch, group), 4).(*kmsg.AddOffsetsToTxnResponse).ErrorCode)
	require.Equal(t, ltCodes(kerr.IllegalGeneration.Code, r),
		ltTxnOffsetCommitCodes(t, c, ltTxnOffsetCommitReq(txnID, pid, epoch, group, eA1, memberA, e.topic, map[int32]int64{r: 6})))
	e.requireStableOffset(c, group, r, 3) // nothing pending
	require.Equal(t, ltCodes(0, kept[0]),
		ltTxnOffsetCommitCodes(t, c, ltTxnOffsetCommitReq(txnID, pid, epoch, group, eA2, memberA, e.topic, map[int32]int64{kept[0]: 7})))
	require.Zero(t, ltEndTxn(t, c, 5, txnID, pid, epoch, true).ErrorCode)
	e.requireStableOffset(c, group, kept[0], 7)
	e.requireStableOffset(c, group, r, 3)
}

// ---- 6. OffsetFetch RequireStable ----

// TestLostEndTxnRequireStable: while a transaction holds a pending offset
// for a partition, OffsetFetch with RequireStable (v10 with topic ids, as
// franz-go sends it, and v7 with names) answers UNSTABLE_OFFSET_COMMIT
// (KIP-447), and without RequireStable the last committed offset. After
// EndTxn v5 commits, it answers UNSTABLE_OFFSET_COMMIT until the offset
// is applied and then the transaction's offset; after an abort, the
// previous offset. Each is done once with the EndTxn answer received and
// once with it lost: the decision was taken all the same, OffsetFetch
// reaches the same offset before the client's retry, and the retry
// (Kafka's retryOnEpochBump) is answered NONE with the epoch the lost
// EndTxn moved to.
func TestLostEndTxnRequireStable(t *testing.T) {
	t.Parallel()
	e := newLTEnv(t, 1)
	txnID, group := e.topic+"-txn", e.topic+"-group"
	c, oc := e.dial(), e.dial()
	ltCommitSimple(t, oc, group, e.topic, 0, 3)
	pid, epoch := ltInitPID(t, c, &txnID, -1, -1)

	committed := int64(3)
	for i, step := range []struct {
		commit, lost bool
	}{{true, false}, {false, false}, {true, true}, {false, true}} {
		offset := int64(10 + i)
		require.Zero(t, ltCall(t, c, ltAddOffsetsReq(txnID, pid, epoch, group), 4).(*kmsg.AddOffsetsToTxnResponse).ErrorCode)
		require.Equal(t, ltCodes(0, 0), ltTxnOffsetCommitCodes(t, c, ltTxnOffsetCommitReq(txnID, pid, epoch, group, -1, "", e.topic, map[int32]int64{0: offset})))
		e.requireUnstable(oc, group, 0, committed)
		if step.commit {
			committed = offset
		}
		if !step.lost {
			resp := ltEndTxn(t, c, 5, txnID, pid, epoch, step.commit)
			require.Zero(t, resp.ErrorCode, "step %d: %s", i, codeName(resp.ErrorCode))
			require.Equal(t, epoch+1, resp.ProducerEpoch)
			e.requireStableOffset(oc, group, 0, committed)
			epoch = resp.ProducerEpoch
			continue
		}
		e.lose(c, ltEndTxnReq(txnID, pid, epoch, step.commit), 5)
		e.requireStableOffset(oc, group, 0, committed)
		c = e.dial()
		resp := ltEndTxnRetry(t, c, 5, txnID, pid, epoch, step.commit)
		require.Zero(t, resp.ErrorCode, "step %d retry: %s", i, codeName(resp.ErrorCode))
		require.Equal(t, pid, resp.ProducerID)
		require.Equal(t, epoch+1, resp.ProducerEpoch, "the epoch the lost EndTxn moved to")
		e.requireStableOffset(oc, group, 0, committed)
		epoch = resp.ProducerEpoch
	}
	code, off := ltFetchOffsetV10(t, oc, group, e.id, 0, false)
	require.Zero(t, code)
	require.EqualValues(t, 12, off)
}
