package integration

// Share-group acknowledgements in flight when a connection dies (KIP-932),
// scripted through the fault proxy: each test lands one fault exactly
// where it wants it (faultproxy.Proxy.Next) and checks what Kafka does.
// The invariant: an acknowledgement whose answer was lost is applied once
// or not at all; a record whose accept was confirmed to the client is
// never delivered again; nothing is lost.
//
// Two Kafka rules shape every script (kip932.md §3 and §4; Kafka's
// ShareSessionCache, SharePartitionManager.releaseSession and
// SharePartition.releaseAcquiredRecords):
//
//   - A share session is bound to the connection that opened it (ShareFetch
//     epoch 0). When that connection closes, the broker drops the session
//     and releases the records the member still holds, decrementing their
//     delivery count ("fetched but not delivered"): they are available at
//     once and come back with the same count. A lost answer closes the
//     connection, so the records in flight on it come back without waiting
//     for their acquisition lock.
//   - Records belong to the member, not to the session: an epoch-0 open
//     that replaces a session, or a connection closing that did not open
//     the session, releases nothing; such records stay locked until their
//     lock expires (a delivery attempt: count + 1) or the member
//     acknowledges them.
//
// So a lost answer sends records down the lock-expiry path (delivery
// count + 1) only when its request went over a connection other than the
// session's, which franz-go never does (ShareFetch and ShareAcknowledge
// share its fetch connection); the scripts cover both.

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/integration/faultproxy"
	"github.com/shoal-mq/shoal/integration/workload"
)

// Acknowledge types (KIP-932).
const (
	lsAccept  int8 = 1
	lsRelease int8 = 2
)

// lsKeyShareFetch and lsKeyShareAck are the API keys the faults target.
const (
	lsKeyShareFetch int16 = 78
	lsKeyShareAck   int16 = 79
)

// lsEnv is one broker behind a fault proxy, a topic, and a share group
// starting at the earliest offset with a chosen acquisition lock.
type lsEnv struct {
	t       *testing.T
	proxy   *faultproxy.Proxy
	b       *testBroker
	ctx     context.Context
	adm     *kadm.Client
	topic   string
	topicID [16]byte
	group   string
	lock    time.Duration
	prod    *rawConn // straight to the broker, never faulted
	ends    map[int32]int64
}

// newLSEnv starts the broker and proxy, creates a topic of partitions,
// lets the group have a lock of lock (the broker's lower bound lowered to
// 1000 ms, as Kafka allows), and writes one log batch of n records to
// partition 0 for every n in batches.
func newLSEnv(t *testing.T, partitions int32, lock time.Duration, batches ...int) *lsEnv {
	t.Helper()
	proxy, b, topic, ctx := proxiedBroker(t, partitions)
	e := &lsEnv{t: t, proxy: proxy, b: b, ctx: ctx, adm: b.admin(t), topic: topic,
		group: "lost-share-" + topic, lock: lock, ends: map[int32]int64{}}
	alt, err := e.adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "group.share.min.record.lock.duration.ms", Value: strp("1000")}})
	require.NoError(t, err)
	for _, r := range alt {
		require.NoError(t, r.Err, "AlterBrokerConfigs: %s", r.ErrMessage)
	}
	require.NoError(t, workload.SetGroupConfigs(ctx, b.client(t), e.group,
		"share.auto.offset.reset", "earliest",
		"share.record.lock.duration.ms", fmt.Sprint(lock.Milliseconds()),
		"share.delivery.count.limit", "10",
	))
	td, err := e.adm.ListTopics(ctx, topic)
	require.NoError(t, err)
	e.topicID = [16]byte(td[topic].ID)
	e.prod = dialRaw(t, b.Addr)
	for _, n := range batches {
		e.produce(0, n)
	}
	return e
}

// produce appends one log batch of n records to partition p.
func (e *lsEnv) produce(p int32, n int) {
	e.t.Helper()
	recs := make([]testRecord, n)
	for i := range recs {
		recs[i].Value = fmt.Appendf(nil, "p%d-%d", p, e.ends[p]+int64(i))
	}
	r := e.prod.produce(e.topic, e.topicID, p, plainBatch(time.Now().UnixMilli(), recs...).encode())
	require.Zero(e.t, r.ErrorCode, "produce: %s", codeName(r.ErrorCode))
	require.Equal(e.t, e.ends[p], r.BaseOffset, "produce base offset")
	e.ends[p] += int64(n)
}

// spso returns partition p's share-partition start offset and lag as
// DescribeShareGroupOffsets reports them.
func (e *lsEnv) spso(p int32) [2]int64 {
	e.t.Helper()
	start, lag, err := shareStart(e.ctx, e.adm, e.group, e.topic, p)
	require.NoError(e.t, err, "DescribeShareGroupOffsets")
	return [2]int64{start, lag}
}

// lsMember is one share-group member speaking ShareFetch and
// ShareAcknowledge on a raw connection through the proxy, tracking the
// epoch of its share session as a client does.
type lsMember struct {
	e     *lsEnv
	t     *testing.T
	name  string
	c     *rawConn
	epoch int32 // the epoch the next request carries
}

func (e *lsEnv) member(name string) *lsMember {
	m := &lsMember{e: e, t: e.t, name: name}
	m.dial()
	return m
}

// dial gives the member a new connection, as a client does after one died.
func (m *lsMember) dial() { m.c = dialRaw(m.t, m.e.proxy.Addr()) }

func (m *lsMember) fetchReq(epoch, maxRecords int32, wait time.Duration, as ...ackRange) *kmsg.ShareFetchRequest {
	return shareFetchReq(m.e.group, m.name, m.e.topicID, epoch, maxRecords, wait, as...)
}

func (m *lsMember) ackReq(epoch int32, as ...ackRange) *kmsg.ShareAcknowledgeRequest {
	return shareAckReq(m.e.group, m.name, m.e.topicID, epoch, 0, as...)
}

// try sends req on the member's connection and reads its answer; it does
// not touch t, so it may run in a require.Eventually condition.
func (m *lsMember) try(req kmsg.Request) (kmsg.Response, error) {
	corr, frame := m.c.prepare(req)
	return m.c.exchange(req, corr, frame, 20*time.Second)
}

func (m *lsMember) do(req kmsg.Request) kmsg.Response {
	m.t.Helper()
	resp, err := m.try(req)
	require.NoError(m.t, err, "%s of %s", kmsg.NameForKey(req.Key()), m.name)
	return resp
}

// lose sends req, whose exchange the caller doomed with proxy.Next: no
// answer comes back and the connection is closed.
func (m *lsMember) lose(req kmsg.Request) {
	m.t.Helper()
	resp, err := m.try(req)
	require.Error(m.t, err, "%s of %s was answered (%+v) though its exchange was to be lost", kmsg.NameForKey(req.Key()), m.name, resp)
	require.Zero(m.t, m.e.proxy.Pending(), "the fault landed")
}

// fetch sends a ShareFetch at the member's epoch; an answer without a
// top-level error advances the epoch.
func (m *lsMember) fetch(maxRecords int32, wait time.Duration, as ...ackRange) *kmsg.ShareFetchResponse {
	m.t.Helper()
	resp := m.do(m.fetchReq(m.epoch, maxRecords, wait, as...)).(*kmsg.ShareFetchResponse)
	if resp.ErrorCode == 0 {
		m.epoch = lsNextEpoch(m.epoch)
	}
	return resp
}

// open starts a new share session (ShareFetch epoch 0) on the member's
// current connection.
func (m *lsMember) open(maxRecords int32, wait time.Duration) *kmsg.ShareFetchResponse {
	m.t.Helper()
	m.epoch = 0
	return m.fetch(maxRecords, wait)
}

// ack sends a ShareAcknowledge at the member's epoch and returns the
// top-level and partition 0's error codes; an answer without a top-level
// error advances the epoch.
func (m *lsMember) ack(as ...ackRange) (top, part int16) {
	m.t.Helper()
	resp := m.do(m.ackReq(m.epoch, as...)).(*kmsg.ShareAcknowledgeResponse)
	top, part, listed := lsAckCodes(resp)
	if top == 0 {
		m.epoch = lsNextEpoch(m.epoch)
		require.True(m.t, listed, "ShareAcknowledge response does not list the acknowledged partition: %+v", resp.Topics)
	}
	return top, part
}

// waitSessionGone waits until the broker has dropped the member's share
// session: a ShareAcknowledge without acknowledgements at an epoch no
// session expects answers SHARE_SESSION_NOT_FOUND once it is gone and
// INVALID_SHARE_SESSION_EPOCH before; neither changes anything.
func (m *lsMember) waitSessionGone() {
	m.t.Helper()
	probe := m.ackReq(1 << 30)
	var last atomic.Pointer[string] // the last probe's outcome
	gone := assert.Eventually(m.t, func() bool {
		out := "no answer"
		defer func() { last.Store(&out) }()
		resp, err := m.try(probe)
		if err != nil {
			out = err.Error()
			return false
		}
		code := resp.(*kmsg.ShareAcknowledgeResponse).ErrorCode
		out = codeName(code)
		return code == kerr.ShareSessionNotFound.Code
	}, 10*time.Second, 20*time.Millisecond)
	if !gone {
		out := "none"
		if p := last.Load(); p != nil {
			out = *p
		}
		m.t.Fatalf("the broker never dropped %s's share session (last probe: %s)", m.name, out)
	}
}

func lsNextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// lsAckCodes returns a ShareAcknowledge response's top-level error and
// partition 0's, and whether partition 0 is listed.
func lsAckCodes(resp *kmsg.ShareAcknowledgeResponse) (top, part int16, listed bool) {
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.Partition == 0 {
				part, listed = rp.ErrorCode, true
			}
		}
	}
	return resp.ErrorCode, part, listed
}

// lsFetchAckCode returns the AcknowledgeErrorCode of partition 0 in a
// ShareFetch response and whether the partition is listed.
func lsFetchAckCode(resp *kmsg.ShareFetchResponse) (int16, bool) {
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.Partition == 0 {
				return rp.AcknowledgeErrorCode, true
			}
		}
	}
	return 0, false
}

func lsCodes(top, part int16) string { return codeName(top) + "/" + codeName(part) }

// TestLostShareAckResponseApplied: a member holds offsets 0-4 and
// accepts 1-4 with a ShareAcknowledge whose response is lost. The broker
// applied the accepts before answering; the connection closing then
// drops the session and releases what the member still held, offset 0,
// without counting a delivery. The client retries the same request on a
// new connection: Kafka answers a top-level INVALID_SHARE_SESSION_EPOCH
// while the broker has not yet seen the close (the lost request consumed
// the epoch) and SHARE_SESSION_NOT_FOUND once it has dropped the session,
// processing no partition either way. On a new session (its
// epoch-0 ShareFetch gets only offset 0 back, with delivery count 1) the
// retried accepts of 1-4 are INVALID_RECORD_STATE for the partition:
// Kafka's SharePartition.acknowledge refuses an offset at or above the
// SPSO that is not ACQUIRED by the member, and these are ACKNOWLEDGED.
// DescribeShareGroupOffsets counts them delivered (SPSO 0, lag 1); once 0
// is accepted the SPSO is the log end and nothing comes back after the
// lock expires.
func TestLostShareAckResponseApplied(t *testing.T) {
	t.Parallel()
	e := newLSEnv(t, 1, 3*time.Second, 5)
	m := e.member("lost-ack-resp")
	require.Equal(t, [][3]int64{{0, 4, 1}}, acquiredRanges(t, m.open(10, 5*time.Second)))

	lost := m.ackReq(m.epoch, acks(1, 4, lsAccept))
	e.proxy.Next(lsKeyShareAck, faultproxy.LoseResponse, 0)
	m.lose(lost)
	require.Equal(t, [2]int64{0, 1}, e.spso(0), "SPSO and lag after the lost accept of 1-4: applied")

	m.dial()
	resp := m.do(lost).(*kmsg.ShareAcknowledgeResponse)
	require.Contains(t, []string{codeName(kerr.InvalidShareSessionEpoch.Code), codeName(kerr.ShareSessionNotFound.Code)},
		codeName(resp.ErrorCode), "the retry on a new connection, before or after the broker saw the old one close")
	require.Empty(t, resp.Topics, "a refused session processes no partition")
	m.waitSessionGone()
	resp = m.do(lost).(*kmsg.ShareAcknowledgeResponse)
	require.Equal(t, codeName(kerr.ShareSessionNotFound.Code), codeName(resp.ErrorCode), "the retry once the old session is gone")
	require.Empty(t, resp.Topics)

	// The release of offset 0 follows the session's removal; the new
	// session's long poll is woken by it.
	require.Equal(t, [][3]int64{{0, 0, 1}}, acquiredRanges(t, m.open(10, 5*time.Second)),
		"only offset 0 comes back, released by the close without counting a delivery")
	top, part := m.ack(acks(1, 4, lsAccept))
	require.Equal(t, lsCodes(0, kerr.InvalidRecordState.Code), lsCodes(top, part), "the retried accept of 1-4 on the new session")
	require.Equal(t, [2]int64{0, 1}, e.spso(0), "the refused retry changed nothing")

	top, part = m.ack(acks(0, 0, lsAccept))
	require.Equal(t, lsCodes(0, 0), lsCodes(top, part), "accept 0")
	require.Equal(t, [2]int64{5, 0}, e.spso(0))
	time.Sleep(e.lock + 500*time.Millisecond) // past every lock taken above
	require.Empty(t, acquiredRanges(t, m.fetch(10, 300*time.Millisecond)), "accepted records never come back")
	require.Equal(t, [2]int64{5, 0}, e.spso(0))
}

// TestLostShareAckResponseAllAccepted: a member accepts everything it
// holds (0-4) and the response is lost. The accepts were applied, so the
// SPSO moved to 5 at once. The client's retry on a new connection gets
// SHARE_SESSION_NOT_FOUND (the close dropped the session), and the same
// accepts on a new session answer NONE: Kafka's SharePartition.acknowledge
// skips a batch entirely below the SPSO as already done. Nothing changes
// and nothing is delivered again, even after the lock duration.
func TestLostShareAckResponseAllAccepted(t *testing.T) {
	t.Parallel()
	e := newLSEnv(t, 1, 1500*time.Millisecond, 5)
	m := e.member("lost-ack-all")
	require.Equal(t, [][3]int64{{0, 4, 1}}, acquiredRanges(t, m.open(10, 5*time.Second)))

	lost := m.ackReq(m.epoch, acks(0, 4, lsAccept))
	e.proxy.Next(lsKeyShareAck, faultproxy.LoseResponse, 0)
	m.lose(lost)
	require.Equal(t, [2]int64{5, 0}, e.spso(0), "SPSO and lag after the lost accept of 0-4: applied")

	m.dial()
	m.waitSessionGone()
	resp := m.do(lost).(*kmsg.ShareAcknowledgeResponse)
	require.Equal(t, codeName(kerr.ShareSessionNotFound.Code), codeName(resp.ErrorCode), "the verbatim retry on a new connection")
	require.Empty(t, resp.Topics)

	require.Empty(t, acquiredRanges(t, m.open(10, 0)), "a new session finds nothing to deliver")
	top, part := m.ack(acks(0, 4, lsAccept))
	require.Equal(t, lsCodes(0, 0), lsCodes(top, part), "the retried accept on the new session: below the SPSO, ignored")
	require.Equal(t, [2]int64{5, 0}, e.spso(0))
	time.Sleep(e.lock + 500*time.Millisecond)
	require.Empty(t, acquiredRanges(t, m.fetch(10, 300*time.Millisecond)), "accepted records never come back")
	require.Equal(t, [2]int64{5, 0}, e.spso(0))
}

// TestLostShareAckRequestSessionConn: the accept of 0-4 is lost on its
// way (only a prefix reaches the broker), on the connection that opened
// the session, as franz-go sends it. The broker never handled it:
// nothing is acknowledged (SPSO 0, lag 5). The connection closing drops
// the session and releases 0-4 without counting a delivery, so a new
// session gets them back at once, before any lock could expire (the lock
// is 10 s), with delivery count 1.
func TestLostShareAckRequestSessionConn(t *testing.T) {
	t.Parallel()
	e := newLSEnv(t, 1, 10*time.Second, 5)
	m := e.member("lost-ack-req")
	require.Equal(t, [][3]int64{{0, 4, 1}}, acquiredRanges(t, m.open(10, 5*time.Second)))

	e.proxy.Next(lsKeyShareAck, faultproxy.LoseRequest, 0)
	m.lose(m.ackReq(m.epoch, acks(0, 4, lsAccept)))
	require.Equal(t, [2]int64{0, 5}, e.spso(0), "nothing applied")

	m.dial()
	start := time.Now()
	require.Equal(t, [][3]int64{{0, 4, 1}}, acquiredRanges(t, m.open(10, 5*time.Second)),
		"released by the close, not a delivery attempt")
	require.Less(t, time.Since(start), e.lock, "they came back before their lock could expire")
	top, part := m.ack(acks(0, 4, lsAccept))
	require.Equal(t, lsCodes(0, 0), lsCodes(top, part))
	require.Equal(t, [2]int64{5, 0}, e.spso(0))
}

// TestLostShareAckRequestOtherConn: the member's session lives on
// connection A; it sends the accept of 0-4 on connection B (any
// connection may carry a member's requests) and the request is lost on
// its way. The broker never handled it: nothing is acknowledged, and the
// session's epoch was not consumed (the next ShareFetch on A at the
// epoch the lost request carried succeeds). B closing releases nothing,
// since no session is bound to it: 0-4 stay locked to the member, another
// member gets nothing, and once the acquisition lock expires they are
// delivered again with delivery count 2 (lock expiry is a delivery
// attempt).
func TestLostShareAckRequestOtherConn(t *testing.T) {
	t.Parallel()
	e := newLSEnv(t, 1, 3*time.Second, 5)
	m := e.member("lost-ack-req-other")
	require.Equal(t, [][3]int64{{0, 4, 1}}, acquiredRanges(t, m.open(10, 5*time.Second)))

	other := &lsMember{e: e, t: t, name: m.name}
	other.dial()
	e.proxy.Next(lsKeyShareAck, faultproxy.LoseRequest, 0)
	other.lose(m.ackReq(m.epoch, acks(0, 4, lsAccept)))
	require.Equal(t, [2]int64{0, 5}, e.spso(0), "nothing applied")

	require.Empty(t, acquiredRanges(t, m.fetch(10, 0)), "the session's epoch was not consumed; 0-4 are still the member's")
	m2 := e.member("lost-ack-req-other-2")
	require.Empty(t, acquiredRanges(t, m2.open(10, 0)), "another member gets nothing while the lock holds")

	// The long poll is woken by the lock expiry.
	var got [][3]int64
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0 && time.Now().Before(deadline); {
		got = acquiredRanges(t, m.fetch(10, 5*time.Second))
	}
	require.Equal(t, [][3]int64{{0, 4, 2}}, got, "redelivered after the lock expired, delivery count + 1")
	top, part := m.ack(acks(0, 4, lsAccept))
	require.Equal(t, lsCodes(0, 0), lsCodes(top, part))
	require.Equal(t, [2]int64{5, 0}, e.spso(0))
}

// TestLostShareFetchAcksResponseSessionConn: the member holds 0-4 and
// sends a ShareFetch on its session's connection that accepts them and
// acquires the next log batch, 5-9; the response is lost. The broker
// handled it whole: 0-4 are accepted, once (SPSO 5), and 5-9 were
// acquired for the member. The records the lost response acquired are not lost: the
// connection closing releases them without counting a delivery, and
// another member gets them at once (the lock is 10 s) with delivery count
// 1, while the first member's new session gets nothing of them. Its
// retried piggybacked accept of 0-4 on the new session is below the SPSO:
// AcknowledgeErrorCode NONE, no change.
func TestLostShareFetchAcksResponseSessionConn(t *testing.T) {
	t.Parallel()
	e := newLSEnv(t, 1, 10*time.Second, 5, 5)
	m1 := e.member("lost-fetch-1")
	require.Equal(t, [][3]int64{{0, 4, 1}}, acquiredRanges(t, m1.open(5, 5*time.Second)))

	e.proxy.Next(lsKeyShareFetch, faultproxy.LoseResponse, 0)
	m1.lose(m1.fetchReq(m1.epoch, 5, 5*time.Second, acks(0, 4, lsAccept)))
	require.Equal(t, [2]int64{5, 5}, e.spso(0), "the piggybacked accept of 0-4 was applied")

	m2 := e.member("lost-fetch-2")
	start := time.Now()
	require.Equal(t, [][3]int64{{5, 9, 1}}, acquiredRanges(t, m2.open(10, 5*time.Second)),
		"what the lost response acquired, released by the close")
	require.Less(t, time.Since(start), e.lock, "released, not expired")

	m1.dial()
	require.Empty(t, acquiredRanges(t, m1.open(10, 0)), "5-9 are another member's now")
	resp := m1.fetch(5, 0, acks(0, 4, lsAccept))
	code, listed := lsFetchAckCode(resp)
	require.True(t, listed, "an acknowledged partition is in the response")
	require.Equal(t, codeName(0), codeName(code), "the retried piggybacked accept of 0-4: below the SPSO, ignored")
	require.Empty(t, acquiredRanges(t, resp))
	require.Equal(t, [2]int64{5, 5}, e.spso(0))

	top, part := m2.ack(acks(5, 9, lsAccept))
	require.Equal(t, lsCodes(0, 0), lsCodes(top, part))
	require.Equal(t, [2]int64{10, 0}, e.spso(0))
	require.Empty(t, acquiredRanges(t, m1.fetch(10, 0)))
}

// TestLostShareFetchAcksResponseOtherConn: as above, but the member sends
// the ShareFetch that accepts 0-4 and acquires 5-9 on a second connection
// while its session lives on the first; the response is lost and the
// second connection closes, which releases nothing. The accepts applied
// once (SPSO 5); the session's epoch was consumed, so the client's retry
// of the same request on the session's connection is
// INVALID_SHARE_SESSION_EPOCH and changes nothing. 5-9 are the member's
// until their lock expires: another member gets nothing, nor does the
// member's own new session (an epoch-0 open replaces the session without
// releasing the member's records), where the retried piggybacked accept
// of 0-4 is below the SPSO (NONE); after the lock the other member gets
// them with delivery count 2, and never both members at once.
func TestLostShareFetchAcksResponseOtherConn(t *testing.T) {
	t.Parallel()
	e := newLSEnv(t, 1, 4*time.Second, 5, 5)
	m1 := e.member("lost-fetch-other-1")
	require.Equal(t, [][3]int64{{0, 4, 1}}, acquiredRanges(t, m1.open(5, 5*time.Second)))

	lost := m1.fetchReq(m1.epoch, 5, 5*time.Second, acks(0, 4, lsAccept))
	other := &lsMember{e: e, t: t, name: m1.name}
	other.dial()
	e.proxy.Next(lsKeyShareFetch, faultproxy.LoseResponse, 0)
	other.lose(lost)
	require.Equal(t, [2]int64{5, 5}, e.spso(0), "the piggybacked accept of 0-4 was applied")

	resp := m1.do(lost).(*kmsg.ShareFetchResponse)
	require.Equal(t, codeName(kerr.InvalidShareSessionEpoch.Code), codeName(resp.ErrorCode), "the verbatim retry on the session's connection")
	require.Empty(t, resp.Topics)

	m2 := e.member("lost-fetch-other-2")
	require.Empty(t, acquiredRanges(t, m2.open(10, 0)), "5-9 are locked to the first member")
	require.Empty(t, acquiredRanges(t, m1.open(10, 0)), "the first member's new session does not get them again either")
	resp = m1.fetch(5, 0, acks(0, 4, lsAccept))
	code, listed := lsFetchAckCode(resp)
	require.True(t, listed, "an acknowledged partition is in the response")
	require.Equal(t, codeName(0), codeName(code), "the retried piggybacked accept of 0-4 on the new session: below the SPSO, ignored")
	require.Empty(t, acquiredRanges(t, resp), "5-9 are still locked")
	require.Equal(t, [2]int64{5, 5}, e.spso(0), "the retries changed nothing")

	// Only m2 fetches from here on, so who gets them is not a race.
	var got [][3]int64
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0 && time.Now().Before(deadline); {
		got = acquiredRanges(t, m2.fetch(10, 5*time.Second))
	}
	require.Equal(t, [][3]int64{{5, 9, 2}}, got, "redelivered after the lock expired, delivery count + 1")
	require.Empty(t, acquiredRanges(t, m1.fetch(10, 0)), "not delivered to two members at once")
	top, part := m2.ack(acks(5, 9, lsAccept))
	require.Equal(t, lsCodes(0, 0), lsCodes(top, part))
	require.Equal(t, [2]int64{10, 0}, e.spso(0))
}

// TestLostShareReleaseResponse: the member releases 0-4 and the response
// is lost. The release applied once: 0-4 are AVAILABLE with delivery
// count 1, and the connection closing (which releases only ACQUIRED
// records) does nothing more. The client's retry of the release on a new
// session (opened without partitions, so that it acquires nothing first)
// is INVALID_RECORD_STATE: the records are not ACQUIRED by the member.
// The next delivery has count 2 — one more than the first, not two — and
// comes at once, without waiting for the 10 s lock.
func TestLostShareReleaseResponse(t *testing.T) {
	t.Parallel()
	e := newLSEnv(t, 1, 10*time.Second, 5)
	m := e.member("lost-release")
	require.Equal(t, [][3]int64{{0, 4, 1}}, acquiredRanges(t, m.open(10, 5*time.Second)))

	lost := m.ackReq(m.epoch, acks(0, 4, lsRelease))
	e.proxy.Next(lsKeyShareAck, faultproxy.LoseResponse, 0)
	m.lose(lost)

	m.dial()
	m.waitSessionGone()
	resp := m.do(lost).(*kmsg.ShareAcknowledgeResponse)
	require.Equal(t, codeName(kerr.ShareSessionNotFound.Code), codeName(resp.ErrorCode))
	open := m.fetchReq(0, 10, 0)
	open.Topics = nil // a session with no partitions: fetches nothing
	resp2 := m.do(open).(*kmsg.ShareFetchResponse)
	require.Zero(t, resp2.ErrorCode, "ShareFetch epoch 0 without partitions: %s", codeName(resp2.ErrorCode))
	require.Empty(t, resp2.Topics)
	m.epoch = 1
	top, part := m.ack(acks(0, 4, lsRelease))
	require.Equal(t, lsCodes(0, kerr.InvalidRecordState.Code), lsCodes(top, part), "the retried release: the records are AVAILABLE")

	start := time.Now()
	require.Equal(t, [][3]int64{{0, 4, 2}}, acquiredRanges(t, m.fetch(10, 5*time.Second)),
		"the release counted once")
	require.Less(t, time.Since(start), e.lock)
	top, part = m.ack(acks(0, 4, lsAccept))
	require.Equal(t, lsCodes(0, 0), lsCodes(top, part))
	require.Equal(t, [2]int64{5, 0}, e.spso(0))
}

// lsDieInLongPoll sends a ShareFetch at m's epoch that finds nothing to
// acquire and waits up to wait, then closes m's connection without
// reading the answer. The proxy forwards the whole request before it
// sees the close (TCP delivers the bytes before the FIN) and then closes
// its connection to the broker, so the broker always gets the request
// and sees its connection closed only after the long poll it parks in;
// the epoch the request carries is consumed.
func lsDieInLongPoll(m *lsMember, wait time.Duration) {
	m.t.Helper()
	_, frame := m.c.prepare(m.fetchReq(m.epoch, 10, wait))
	before := m.e.proxy.Stats().Exchanges
	m.c.writeRaw(frame)
	m.epoch = lsNextEpoch(m.epoch)
	// The poll must be parked at the broker before the connection dies:
	// closed first, the proxy may drop the request, and a request still
	// on its way could reach the broker after the member's next session
	// opened on another connection, and be taken as that session's (its
	// epoch, 1, is the new session's too): a test of the network, not of
	// the broker. So wait for the proxy to forward it, and a moment for
	// the broker to read it.
	require.Eventually(m.t, func() bool { return m.e.proxy.Stats().Exchanges > before }, 5*time.Second, time.Millisecond,
		"the long poll never reached the broker")
	time.Sleep(100 * time.Millisecond)
	require.NoError(m.t, m.c.conn.Close())
}

// TestLostShareLongPollConnClosed: the member holds 0-4 and has a
// ShareFetch long poll (500 ms) waiting on its session's connection when
// the connection dies. Once the broker sees the close (Shoal reads a
// connection one request at a time, so when the long poll ends) it drops
// the session and releases 0-4 without counting a delivery, as Kafka's
// disconnect listener does. The client waits here: another member then
// gets 0-4 with delivery count 1, long before the 10 s lock; the first
// member's next ShareFetch at its old session's epoch is
// SHARE_SESSION_NOT_FOUND, and its new session (epoch 0, on a new
// connection) starts empty-handed: 0-4 are the other member's.
func TestLostShareLongPollConnClosed(t *testing.T) {
	t.Parallel()
	e := newLSEnv(t, 1, 10*time.Second, 5)
	m1 := e.member("long-poll-closed-1")
	require.Equal(t, [][3]int64{{0, 4, 1}}, acquiredRanges(t, m1.open(10, 5*time.Second)))
	start := time.Now()
	lsDieInLongPoll(m1, 500*time.Millisecond)

	m2 := e.member("long-poll-closed-2")
	require.Equal(t, [][3]int64{{0, 4, 1}}, acquiredRanges(t, m2.open(10, 5*time.Second)),
		"released by the close, not a delivery attempt")
	require.Less(t, time.Since(start), e.lock)

	m1.dial()
	resp := m1.do(m1.fetchReq(m1.epoch, 10, 0)).(*kmsg.ShareFetchResponse)
	require.Equal(t, codeName(kerr.ShareSessionNotFound.Code), codeName(resp.ErrorCode), "the old session's next epoch")
	resp = m1.open(10, 0)
	require.Empty(t, acquiredRanges(t, resp), "not delivered to two members at once")
	require.Len(t, resp.Topics, 1, "a full response lists the session's partition")

	top, part := m2.ack(acks(0, 4, lsAccept))
	require.Equal(t, lsCodes(0, 0), lsCodes(top, part))
	require.Equal(t, [2]int64{5, 0}, e.spso(0))
}

// TestLostShareLongPollReconnectAtOnce: the member holds 0-4 and has a
// 4 s ShareFetch long poll waiting when its connection dies; the client
// reconnects at once, before the broker has seen the close (the poll is
// still parked, and the broker reads that connection's end only after
// it). Its epoch-0 ShareFetch opens a new session right away,
// not waiting for the old one's poll, and, as in Kafka, replaces the old
// session without releasing the member's records: 0-4 are still the
// member's (nobody gets them; its new session does not get them again)
// and it can accept them through the new session. When the old poll ends
// and the broker sees the old connection closed, the new session is not
// affected (Kafka marks the replaced session's connection stale).
func TestLostShareLongPollReconnectAtOnce(t *testing.T) {
	t.Parallel()
	const poll = 4 * time.Second
	e := newLSEnv(t, 1, 10*time.Second, 5)
	m1 := e.member("long-poll-reconnect-1")
	require.Equal(t, [][3]int64{{0, 4, 1}}, acquiredRanges(t, m1.open(10, 5*time.Second)))
	parked := time.Now()
	lsDieInLongPoll(m1, poll)

	m1.dial()
	require.Empty(t, acquiredRanges(t, m1.open(10, 0)), "the member's records were not released by the new session")
	require.Less(t, time.Since(parked), poll, "the new session opened while the old poll was still waiting")
	m2 := e.member("long-poll-reconnect-2")
	require.Empty(t, acquiredRanges(t, m2.open(10, 0)), "0-4 are still locked to the first member")

	top, part := m1.ack(acks(0, 4, lsAccept))
	require.Equal(t, lsCodes(0, 0), lsCodes(top, part), "the member accepts through its new session what the old one acquired")
	require.Equal(t, [2]int64{5, 0}, e.spso(0))

	time.Sleep(time.Until(parked.Add(poll + time.Second))) // the old poll ends and its connection's close is seen
	resp := m1.fetch(10, 0)
	require.Equal(t, codeName(0), codeName(resp.ErrorCode), "the new session outlives the old connection")
	require.Empty(t, acquiredRanges(t, resp))
}

// TestLostShareAcksFranzGo: franz-go's share consumer reads a small
// two-partition topic through the proxy, accepting every record and
// flushing its acknowledgements after each poll, while the proxy loses
// the responses of three ShareAcknowledge and three ShareFetch exchanges
// (which may carry piggybacked acknowledgements and acquisitions). Each
// loss closes the connection; the client resets its share session and
// reports the acknowledgements in flight as failed; the broker keeps what
// it applied and releases what the member held. A record counts as
// confirmed accepted when FlushAcks returned nil and every ack result the
// callback reported for its partition in that round is a success; such a
// record must never be delivered again (no later fetch may decode it).
// At the end every share-partition's start offset is its log end:
// nothing is lost, and every record was delivered (with counts below the
// delivery limit, so none was archived instead of accepted).
func TestLostShareAcksFranzGo(t *testing.T) {
	t.Parallel()
	const partitions = 2
	e := newLSEnv(t, partitions, 1500*time.Millisecond)
	for range 4 {
		for p := range int32(partitions) {
			e.produce(p, 3)
		}
	}

	var log shareAckLog
	cl := e.b.client(t,
		kgo.SeedBrokers(e.proxy.Addr()),
		kgo.ShareGroup(e.group),
		kgo.ConsumeTopics(e.topic),
		kgo.ShareMaxRecords(3),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		log.opt(),
	)

	type tp struct {
		p   int32
		off int64
	}
	faults := []int16{lsKeyShareAck, lsKeyShareFetch, lsKeyShareAck, lsKeyShareFetch, lsKeyShareAck, lsKeyShareFetch}
	injected := 0
	confirmedAt := map[tp]time.Time{}
	delivered := map[tp]int{}
	maxCount := map[tp]int32{}
	confirmedRecords, extra := 0, 0
	drained := func() bool {
		got, err := e.adm.DescribeShareGroupOffsets(e.ctx, e.group)
		if err != nil || got.Error() != nil {
			return false
		}
		for p, end := range e.ends {
			o, ok := got[e.group].Offsets.Lookup(e.topic, p)
			if !ok || o.Err != nil || o.StartOffset != end {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(12 * time.Second)
	for round := 0; ; round++ {
		require.True(t, time.Now().Before(deadline), "round %d: not drained in time (%d of %d faults landed, ends %v)",
			round, injected-e.proxy.Pending(), len(faults), e.ends)
		if injected < len(faults) && e.proxy.Pending() == 0 {
			e.proxy.Next(faults[injected], faultproxy.LoseResponse, 0)
			injected++
		}
		pctx, cancel := context.WithTimeout(e.ctx, time.Second)
		fs := cl.PollRecords(pctx, -1)
		cancel()
		recs := fs.Records()
		for _, r := range recs {
			k := tp{r.Partition, r.Offset}
			at := r.AcquisitionDeadline().Add(-e.lock) // when the client decoded its fetch
			if c, ok := confirmedAt[k]; ok && at.After(c) {
				t.Errorf("%d@%d delivered again (count %d) %v after its accept was confirmed",
					r.Partition, r.Offset, r.DeliveryCount(), at.Sub(c).Round(time.Millisecond))
			}
			delivered[k]++
			maxCount[k] = max(maxCount[k], r.DeliveryCount())
			r.Ack(kgo.AckAccept)
		}
		fctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		ferr := cl.FlushAcks(fctx)
		cancel()
		now := time.Now()
		okPart, badPart := map[int32]bool{}, map[int32]bool{}
		for _, o := range log.take() {
			if o.err != nil {
				badPart[o.partition] = true
			} else {
				okPart[o.partition] = true
			}
		}
		for _, r := range recs {
			if ferr == nil && okPart[r.Partition] && !badPart[r.Partition] {
				if _, ok := confirmedAt[tp{r.Partition, r.Offset}]; !ok {
					confirmedRecords++
				}
				confirmedAt[tp{r.Partition, r.Offset}] = now
			}
		}
		if len(recs) > 0 || !drained() {
			continue
		}
		if injected == len(faults) && e.proxy.Pending() == 0 {
			break
		}
		// Everything is consumed but a fault has not landed yet (the
		// client piggybacked what would have been a ShareAcknowledge):
		// give it more to acknowledge.
		e.produce(int32(round%partitions), 3)
		extra += 3
	}
	require.Zero(t, e.proxy.Pending(), "every fault landed")
	st := e.proxy.Stats()
	t.Logf("proxy: %v; lost ShareFetch responses %d, ShareAcknowledge %d; %d records (%d added), %d confirmed accepted",
		st, st.ByKey[faultproxy.LoseResponse][lsKeyShareFetch], st.ByKey[faultproxy.LoseResponse][lsKeyShareAck],
		len(delivered), extra, confirmedRecords)
	require.GreaterOrEqual(t, st.ByKey[faultproxy.LoseResponse][lsKeyShareAck], int64(3))
	require.GreaterOrEqual(t, st.ByKey[faultproxy.LoseResponse][lsKeyShareFetch], int64(3))
	for p, end := range e.ends {
		for off := range end {
			k := tp{p, off}
			require.Positive(t, delivered[k], "%d@%d was never delivered", p, off)
			require.Less(t, maxCount[k], int32(10), "%d@%d reached the delivery limit", p, off)
		}
	}
	require.True(t, drained(), "every share-partition's SPSO is its log end")
}
