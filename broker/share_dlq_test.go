package broker

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/share"
	"github.com/shoal-mq/shoal/sharegroup/store"
)

// dlqSetup creates src (partitions) and, if dlqParts > 0, the opted-in
// dead-letter topic dlq.<src>, then produces n records to every source
// partition with key k<i>, value <i> and header h=<i>.
func dlqSetup(t *testing.T, b *Broker, src string, partitions int32, dlqParts int32, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	r, err := adm.CreateTopic(ctx, partitions, 1, nil, src)
	require.NoError(t, err)
	require.NoError(t, r.Err)
	if dlqParts > 0 {
		r, err := adm.CreateTopic(ctx, dlqParts, 1, map[string]*string{share.DLQGroupEnableTopic: kadm.StringPtr("true")}, "dlq."+src)
		require.NoError(t, err)
		require.NoError(t, r.Err)
	}
	for p := int32(0); p < partitions; p++ {
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			s := strconv.Itoa(i)
			recs = append(recs, &kgo.Record{Topic: src, Partition: p, Key: []byte("k" + s), Value: []byte(s),
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(s)}}})
		}
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	}
}

// dlqGroupSetup is dlqSetup plus share group group reading src from the
// earliest offset with dlq.<src> as its dead-letter topic.
func dlqGroupSetup(t *testing.T, b *Broker, group, src string, partitions, dlqParts int32, n int) {
	t.Helper()
	dlqSetup(t, b, src, partitions, dlqParts, n)
	setShareGroupConfigs(t, b, group, "share.auto.offset.reset", "earliest", share.DLQTopicNameConfig, "dlq."+src)
}

// dlqConsume reads every record of topic from the start until want
// records arrived (and a little longer, to catch extras).
func dlqConsume(t *testing.T, b *Broker, topic string, want int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	var out []*kgo.Record
	deadline := time.Now().Add(20 * time.Second)
	extra := time.Time{}
	for time.Now().Before(deadline) {
		if len(out) >= want {
			if extra.IsZero() {
				extra = time.Now().Add(500 * time.Millisecond)
			} else if time.Now().After(extra) {
				break
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		out = append(out, fs.Records()...)
	}
	return out
}

func headerMap(r *kgo.Record) map[string]string {
	m := map[string]string{}
	for _, h := range r.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}

// drainShare consumes group on src with action deciding each delivery
// until every share-partition's SPSO reaches n.
func drainShare(t *testing.T, b *Broker, group, src string, partitions int32, n int, action func(v int, count int32) kgo.AckStatus) {
	t.Helper()
	cl := newShareClient(t, b, group, kgo.ConsumeTopics(src))
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range pollShare(t, cl, time.Second) {
			v, err := strconv.Atoi(string(r.Value))
			require.NoError(t, err)
			r.Ack(action(v, r.DeliveryCount()))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		require.NoError(t, cl.FlushAcks(ctx))
		cancel()
		done := true
		for p := int32(0); p < partitions; p++ {
			if spso(t, b, group, src, p) < int64(n) {
				done = false
			}
		}
		if done {
			return
		}
	}
	t.Fatalf("share group %s did not finish %s", group, src)
}

// spso reads a share-partition's SPSO through the owner.
func spso(t *testing.T, b *Broker, group, topicName string, p int32) int64 {
	t.Helper()
	tp := b.topics.Get(topicName)
	require.NotNil(t, tp)
	return b.shares.SPSO(store.Key{Group: group, TopicID: tp.ID, Partition: p})
}

func dlqAction(v int, _ int32) kgo.AckStatus {
	switch v % 5 {
	case 0:
		return kgo.AckReject
	case 1:
		return kgo.AckRelease // until the delivery limit
	}
	return kgo.AckAccept
}

// TestShareDLQRejectAndDeliveryLimit: rejected records and records
// released up to share.delivery.count.limit land in the dead-letter topic
// exactly once, on partition sourcePartition % numDlqPartitions, with
// KIP-1191's headers and (copy.record.enable) the original key, value and
// headers; the durable count matches.
func TestShareDLQRejectAndDeliveryLimit(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	const n = 40
	dlqSetup(t, b, "dsrc", 3, 2, n)
	setShareGroupConfigs(t, b, "dg", "share.auto.offset.reset", "earliest", "share.delivery.count.limit", "2",
		share.DLQTopicNameConfig, "dlq.dsrc", share.DLQCopyRecordConfig, "true")
	drainShare(t, b, "dg", "dsrc", 3, n, dlqAction)

	const perPart = 2 * n / 5
	recs := dlqConsume(t, b, "dlq.dsrc", 3*perPart)
	require.Len(t, recs, 3*perPart)
	seen := map[string]bool{}
	for _, r := range recs {
		h := headerMap(r)
		src, err := strconv.Atoi(h[share.DLQHeaderPartition])
		require.NoError(t, err)
		require.Equal(t, int32(src%2), r.Partition, "DLQ partition = source partition %% 2")
		id := h[share.DLQHeaderPartition] + "/" + h[share.DLQHeaderOffset]
		require.False(t, seen[id], "duplicate DLQ record %s", id)
		seen[id] = true
		off, err := strconv.Atoi(h[share.DLQHeaderOffset])
		require.NoError(t, err)
		require.Equal(t, "dsrc", h[share.DLQHeaderTopic])
		require.Equal(t, "dg", h[share.DLQHeaderGroup])
		require.Equal(t, strconv.Itoa(off), string(r.Value), "value copied")
		require.Equal(t, "k"+strconv.Itoa(off), string(r.Key), "key copied")
		require.Equal(t, strconv.Itoa(off), h["h"], "original header copied")
		require.Equal(t, "h", r.Headers[0].Key, "original headers first")
		switch off % 5 {
		case 0:
			require.Equal(t, "1", h[share.DLQHeaderDeliveryCount])
			require.Equal(t, "rejected", h[share.DLQHeaderMessage])
		case 1:
			require.Equal(t, "2", h[share.DLQHeaderDeliveryCount])
			require.Equal(t, "rejected or delivery count limit reached", h[share.DLQHeaderMessage])
		default:
			t.Fatalf("accepted record %d in the DLQ", off)
		}
	}
	counts, err := b.ShareDLQCounts("dg")
	require.NoError(t, err)
	require.Len(t, counts, 3)
	for i, c := range counts {
		require.Equal(t, DLQCount{Group: "dg", Topic: "dsrc", Partition: int32(i), Records: perPart}, c)
	}
	totals, err := b.ShareDLQTotals()
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"dg": 3 * perPart}, totals)
}

// TestShareDLQPointerRecords: without copy.record.enable the DLQ record
// has no key or value and only the __dlq headers; a missing topic is
// created at the first write when auto-create is enabled.
func TestShareDLQPointerRecords(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	setShareBrokerConfig(b, share.DLQAutoCreateConfig, "true")
	const n = 10
	dlqSetup(t, b, "psrc", 1, 0, n)
	setShareGroupConfigs(t, b, "pg", "share.auto.offset.reset", "earliest", share.DLQTopicNameConfig, "dlq.auto")
	drainShare(t, b, "pg", "psrc", 1, n, func(v int, _ int32) kgo.AckStatus {
		if v%2 == 0 {
			return kgo.AckReject
		}
		return kgo.AckAccept
	})
	dt := b.topics.Get("dlq.auto")
	require.NotNil(t, dt, "auto-created")
	_, cfgs := b.topics.Snapshot(dt)
	require.Equal(t, "true", cfgs[share.DLQGroupEnableTopic])
	recs := dlqConsume(t, b, "dlq.auto", n/2)
	require.Len(t, recs, n/2)
	var offs []int
	for _, r := range recs {
		require.Nil(t, r.Key)
		require.Nil(t, r.Value)
		require.Len(t, r.Headers, 6)
		o, _ := strconv.Atoi(headerMap(r)[share.DLQHeaderOffset])
		offs = append(offs, o)
	}
	sort.Ints(offs)
	require.Equal(t, []int{0, 2, 4, 6, 8}, offs)
}

// TestShareDLQUnavailableDoesNotStall: a dead-letter topic deleted after
// it was configured fails every attempt; after the retries the records
// are archived without a copy and the group goes on.
func TestShareDLQUnavailableDoesNotStall(t *testing.T) {
	t.Parallel()
	b := startShareTest(t, func(c *Config) { c.shareDLQ.MaxAttempts, c.shareDLQ.Backoff = 2, 10*time.Millisecond })
	const n = 10
	dlqGroupSetup(t, b, "ug", "usrc", 1, 1, n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := kadm.NewClient(newClient(t, b)).DeleteTopics(ctx, "dlq.usrc")
	require.NoError(t, err)
	drainShare(t, b, "ug", "usrc", 1, n, func(int, int32) kgo.AckStatus { return kgo.AckReject })
	require.Nil(t, b.topics.Get("dlq.usrc"), "not re-created without auto-create")
	counts, err := b.ShareDLQCounts("ug")
	require.NoError(t, err)
	require.Empty(t, counts)
}

// TestShareDLQConfigValidation: KIP-1191's rules refuse bad dead-letter
// topic names with INVALID_CONFIG through IncrementalAlterConfigs.
func TestShareDLQConfigValidation(t *testing.T) {
	t.Parallel()
	b := startShareTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := newClient(t, b)
	adm := kadm.NewClient(cl)
	_, err := adm.CreateTopic(ctx, 1, 1, nil, "dlq.closed")
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{share.DLQGroupEnableTopic: kadm.StringPtr("true")}, "dlq.open")
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{share.DLQGroupEnableTopic: kadm.StringPtr("true")}, "other.open")
	require.NoError(t, err)

	set := func(name, value string) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "vg"
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Value = name, kmsg.StringPtr(value)
		res.Configs = append(res.Configs, op)
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp.Resources[0].ErrorCode
	}
	bad := kerr.InvalidConfig.Code
	require.Equal(t, bad, set(share.DLQTopicNameConfig, "__dlq.x"), "__ prefix")
	require.Equal(t, bad, set(share.DLQTopicNameConfig, "other.open"), "outside the dlq. prefix")
	require.Equal(t, bad, set(share.DLQTopicNameConfig, "dlq.closed"), "not opted in")
	require.Equal(t, bad, set(share.DLQTopicNameConfig, "dlq.missing"), "missing without auto-create")
	require.Equal(t, bad, set(share.DLQTopicNameConfig, "dlq.bad/name"), "invalid topic name")
	require.Equal(t, bad, set(share.DLQCopyRecordConfig, "yes"))
	require.Equal(t, int16(0), set(share.DLQTopicNameConfig, "dlq.open"))
	require.Equal(t, int16(0), set(share.DLQTopicNameConfig, ""), "blank: no DLQ")
	require.Equal(t, int16(0), set(share.DLQCopyRecordConfig, "true"))

	// Broker configs: the prefix and auto-create.
	alt, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: share.DLQAutoCreateConfig, Value: kadm.StringPtr("maybe")}})
	require.NoError(t, err)
	require.Error(t, alt[0].Err)
	alt, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: share.DLQAutoCreateConfig, Value: kadm.StringPtr("true")}, {Name: share.DLQPrefixConfig, Value: kadm.StringPtr("")}})
	require.NoError(t, err)
	require.NoError(t, alt[0].Err)
	require.Equal(t, int16(0), set(share.DLQTopicNameConfig, "dlq.missing"), "missing with auto-create")
	require.Equal(t, int16(0), set(share.DLQTopicNameConfig, "other.open"), "empty prefix allows any name")
	require.Equal(t, bad, set(share.DLQTopicNameConfig, "__x"), "__ is refused even with an empty prefix")
	// Topic config: a boolean.
	ac, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: share.DLQGroupEnableTopic, Value: kadm.StringPtr("1")}}, "dlq.open")
	require.NoError(t, err)
	require.Error(t, ac[0].Err)
}

// TestShareDLQRestartMidWrite stops the writer at each crash point (the
// DLQ append durable but not marked written; marked but not archived) —
// the process state a crash leaves — restarts the broker on the same
// data, and checks every record reaches the DLQ exactly once, is
// archived, and is counted once.
func TestShareDLQRestartMidWrite(t *testing.T) {
	for _, stage := range []string{"durable", "written"} {
		t.Run(stage, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			b := startShareTest(t, func(c *Config) {
				c.DataDir = dir
				c.shareDLQ.CrashAt = func(s string) bool { return s == stage }
			})
			const n = 20
			dlqGroupSetup(t, b, "cg", "csrc", 1, 1, n)
			cl := newShareClient(t, b, "cg", kgo.ConsumeTopics("csrc"))
			got := 0
			deadline := time.Now().Add(30 * time.Second)
			for got < n {
				require.True(t, time.Now().Before(deadline), "delivered %d of %d", got, n)
				for _, r := range pollShare(t, cl, time.Second) {
					r.Ack(kgo.AckReject)
					got++
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			require.NoError(t, cl.FlushAcks(ctx))
			cancel()
			cl.Close()
			// The writer stopped at the crash point: nothing archived.
			require.Eventually(t, func() bool {
				return !b.shares.DLQRunning(store.Key{Group: "cg", TopicID: b.topics.Get("csrc").ID, Partition: 0})
			}, 10*time.Second, 10*time.Millisecond)
			require.Less(t, spso(t, b, "cg", "csrc", 0), int64(n))
			require.Positive(t, b.topics.Partition("dlq.csrc", 0).Log.HighWatermark(), "DLQ append durable")
			require.NoError(t, b.Close())

			b2 := startShareTest(t, func(c *Config) { c.DataDir = dir })
			require.Eventually(t, func() bool { return spso(t, b2, "cg", "csrc", 0) == n }, 10*time.Second, 10*time.Millisecond,
				"resumed at startup without a consumer")
			recs := dlqConsume(t, b2, "dlq.csrc", n)
			require.Len(t, recs, n, "exactly once")
			counts, err := b2.ShareDLQCounts("cg")
			require.NoError(t, err)
			require.Equal(t, []DLQCount{{Group: "cg", Topic: "csrc", Partition: 0, Records: n}}, counts)
		})
	}
}

// dlqKillChildEnv names the data directory a TestShareDLQSigkill child
// serves from; the child SIGKILLs itself right after its first DLQ
// append is fsynced.
const dlqKillChildEnv = "SHOAL_DLQ_KILL_CHILD"

// TestShareDLQSigkill: a child broker is SIGKILLed between a durable DLQ
// append and the records' Archived state; a broker restarted on the same
// data writes no second copy and archives them.
func TestShareDLQSigkill(t *testing.T) {
	serveCrashChild(t, dlqKillChildEnv, nil, func(c *Config) {
		c.shareDLQ.CrashAt = func(stage string) bool {
			if stage == "durable" {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			return false
		}
	})
	t.Parallel()
	dir := t.TempDir()
	child := startCrashChild(t, "TestShareDLQSigkill", dlqKillChildEnv, dir)
	addr, exited := child.addr, child.exited

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	adm := kadm.NewClient(cl)
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "ksrc")
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{share.DLQGroupEnableTopic: kadm.StringPtr("true")}, "dlq.ksrc")
	require.NoError(t, err)
	const n = 10
	for i := 0; i < n; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "ksrc", Value: []byte(strconv.Itoa(i))}).FirstErr())
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "kg"
	for _, kv := range [][2]string{{"share.auto.offset.reset", "earliest"}, {share.DLQTopicNameConfig, "dlq.ksrc"}} {
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Value = kv[0], kmsg.StringPtr(kv[1])
		res.Configs = append(res.Configs, op)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, int16(0), resp.Resources[0].ErrorCode)
	cl.Close()

	sc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("kg"), kgo.ConsumeTopics("ksrc"), kgo.FetchMaxWait(200*time.Millisecond))
	require.NoError(t, err)
	defer sc.Close()
	// Reject until the child kills itself at its first durable DLQ append.
	for killed := false; !killed; {
		select {
		case <-exited:
			killed = true
			continue
		case <-ctx.Done():
			t.Fatal("child was not killed by its DLQ crash hook")
		default:
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		recs := sc.PollRecords(pctx, -1).Records()
		pcancel()
		for _, r := range recs {
			r.Ack(kgo.AckReject)
		}
		fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
		sc.FlushAcks(fctx) // fails once the child is dead
		fcancel()
	}
	sc.Close()

	// Restarted: the pending write resumes; records never acknowledged
	// before the kill are delivered again and rejected.
	b := startShareTest(t, func(c *Config) { c.DataDir = dir })
	drainShare(t, b, "kg", "ksrc", 1, n, func(int, int32) kgo.AckStatus { return kgo.AckReject })
	recs := dlqConsume(t, b, "dlq.ksrc", n)
	offs := map[string]int{}
	for _, r := range recs {
		offs[headerMap(r)[share.DLQHeaderOffset]]++
	}
	require.Len(t, offs, n, "every rejected record is in the DLQ")
	for o, c := range offs {
		require.Equal(t, 1, c, "offset %s written %d times", o, c)
	}
	counts, err := b.ShareDLQCounts("kg")
	require.NoError(t, err)
	require.Equal(t, []DLQCount{{Group: "kg", Topic: "ksrc", Partition: 0, Records: n}}, counts)
}

// TestShareDLQWindowMovesBetweenAttempts: an attempt writes offsets
// 50-549 (the first dlqMaxRecords Archiving ones) and stops before they
// are marked written; then offsets 0-49 start archiving, so the next
// attempt's window is 0-499. Offsets 500-549, already in the DLQ, must
// neither be written again nor stay Archiving (found in review).
func TestShareDLQWindowMovesBetweenAttempts(t *testing.T) {
	t.Parallel()
	crash, crashes := crashOnceAt("durable")
	b := startShareTest(t, crash)
	const n = 600
	dlqGroupSetup(t, b, "wg", "wsrc", 1, 1, n)
	cl := newShareClient(t, b, "wg", kgo.ConsumeTopics("wsrc"), kgo.ShareMaxRecords(n))
	var held []*kgo.Record
	deadline := time.Now().Add(30 * time.Second)
	for len(held) < n {
		require.True(t, time.Now().Before(deadline), "acquired %d of %d", len(held), n)
		held = append(held, pollShare(t, cl, time.Second)...)
	}
	flush := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, cl.FlushAcks(ctx))
	}
	for _, r := range held {
		if r.Offset >= 50 {
			r.Ack(kgo.AckReject)
		}
	}
	flush()
	require.Eventually(t, func() bool { return crashes.Load() >= 1 }, 10*time.Second, 10*time.Millisecond)
	for _, r := range held {
		if r.Offset < 50 {
			r.Ack(kgo.AckReject)
		}
	}
	flush()
	require.Eventually(t, func() bool { return spso(t, b, "wg", "wsrc", 0) == n }, 20*time.Second, 10*time.Millisecond,
		"every record archived")
	recs := dlqConsume(t, b, "dlq.wsrc", n)
	seen := map[string]bool{}
	for _, r := range recs {
		off := headerMap(r)[share.DLQHeaderOffset]
		require.False(t, seen[off], "offset %s written twice", off)
		seen[off] = true
	}
	require.Len(t, seen, n)
	counts, err := b.ShareDLQCounts("wg")
	require.NoError(t, err)
	require.Equal(t, []DLQCount{{Group: "wg", Topic: "wsrc", Partition: 0, Records: n}}, counts, "counted once each")
}

// TestShareDLQGiveUpCompletesEarlierAttempt: an attempt appends copies
// of offsets 50-549 and stops before marking them written; offsets 0-49
// then start archiving (the window becomes 0-499), and every later
// attempt fails until the writer gives up. Giving up must archive
// 500-549 too, whose copies the intent records: left Archiving with the
// intent gone, the next writer (for 550-599) would append them a second
// time (found in review).
func TestShareDLQGiveUpCompletesEarlierAttempt(t *testing.T) {
	t.Parallel()
	crash, crashes := crashOnceAt("durable")
	var failing atomic.Bool
	fail, fails := failOneWriter(&failing)
	b := startShareTest(t, crash, fail)
	const n = 600
	dlqGroupSetup(t, b, "gg", "gsrc", 1, 1, n)
	// Raw requests: each rejection lands in one acknowledgement, so the
	// writers' windows are known.
	r := newRawShare(t, b, "gg", "m1", "gsrc")
	epoch := acquireAllRaw(t, r, n)
	require.Zero(t, ackCode(t, r.ack(epoch, false, ackBatch(50, n-1, 3))))
	require.Eventually(t, func() bool { return crashes.Load() >= 1 }, 10*time.Second, 10*time.Millisecond)
	failing.Store(true)
	require.Zero(t, ackCode(t, r.ack(epoch+1, false, ackBatch(0, 49, 3))))
	require.Eventually(t, func() bool { return spso(t, b, "gg", "gsrc", 0) == n }, 20*time.Second, 10*time.Millisecond,
		"every record archived")
	require.Equal(t, int32(2), fails.Load(), "the writer gave up after two failed attempts")
	// The first attempt's copies (50-549) and the next writer's
	// (550-599, beyond the given-up window 0-499) are there, each once;
	// 0-49 were given up without one.
	time.Sleep(200 * time.Millisecond)
	hw := b.topics.Partition("dlq.gsrc", 0).Log.HighWatermark()
	seen := map[string]bool{}
	for _, r := range dlqConsume(t, b, "dlq.gsrc", int(hw)) {
		off := headerMap(r)[share.DLQHeaderOffset]
		require.False(t, seen[off], "offset %s written twice", off)
		seen[off] = true
	}
	require.Len(t, seen, int(hw))
	require.Equal(t, int64(550), hw)
	for off := 50; off < n; off++ {
		require.True(t, seen[strconv.Itoa(off)], "offset %d has no copy", off)
	}
}

// TestShareDLQGiveUpKeepsUnwrittenIntent: an earlier attempt wrote its
// intent for 500-549 and stopped before appending anything (the state a
// crash between putDLQIntent and the append leaves). The next writer's
// window is 0-499; its two attempts fail and it gives up. 500-549 must
// not be given up with it (nothing failed for them): the intent keeps
// them, and the next writer scans for their copies and writes the
// missing ones. (Found by review.)
func TestShareDLQGiveUpKeepsUnwrittenIntent(t *testing.T) {
	t.Parallel()
	var failing atomic.Bool
	failing.Store(true)
	fail, fails := failOneWriter(&failing)
	b := startShareTest(t, fail)
	const n = 600
	dlqGroupSetup(t, b, "ug", "usrc", 1, 1, n)
	src, dlq := b.topics.Get("usrc"), b.topics.Get("dlq.usrc")
	key := store.Key{Group: "ug", TopicID: src.ID, Partition: 0}
	intent, err := json.Marshal(&share.DLQIntent{TopicID: dlq.ID, Partition: 0, From: 0,
		Ranges: []share.DLQRange{{First: 500, Last: 549, DeliveryCount: 1}}})
	require.NoError(t, err)
	require.NoError(t, b.meta.DB().Update(func(btx *badger.Txn) error { return btx.Set(share.DLQIntentKey(key), intent) }))
	r := newRawShare(t, b, "ug", "m1", "usrc")
	epoch := acquireAllRaw(t, r, n)
	require.Zero(t, ackCode(t, r.ack(epoch, false, ackBatch(0, n-1, 3))))
	require.Eventually(t, func() bool { return spso(t, b, "ug", "usrc", 0) == n }, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, int32(2), fails.Load())
	time.Sleep(200 * time.Millisecond)
	hw := b.topics.Partition("dlq.usrc", 0).Log.HighWatermark()
	seen := map[string]bool{}
	for _, rec := range dlqConsume(t, b, "dlq.usrc", int(hw)) {
		seen[headerMap(rec)[share.DLQHeaderOffset]] = true
	}
	for off := 500; off < n; off++ { // 0-499 were given up
		require.True(t, seen[strconv.Itoa(off)], "offset %d has no copy", off)
	}
}

// acquireAllRaw acquires offsets 0..n-1 of partition 0 for r with raw
// ShareFetches and returns the session epoch of r's next request.
func acquireAllRaw(t *testing.T, r *rawShare, n int32) int32 {
	t.Helper()
	var acq [][3]int64
	epoch := int32(0)
	for ; len(acq) == 0 || acq[len(acq)-1][1] < int64(n)-1; epoch++ {
		require.Less(t, epoch, int32(20))
		acq = append(acq, acquired(onlyPartition(t, r.fetch(epoch, 500, n)))...)
	}
	return epoch
}

// failOneWriter lets a dead-letter writer make two attempts and fails
// both once failing is set, so that writer gives up; later attempts
// succeed. It returns the count of failed attempts.
func failOneWriter(failing *atomic.Bool) (func(*Config), *atomic.Int32) {
	var fails atomic.Int32
	return func(c *Config) {
		c.shareDLQ.MaxAttempts, c.shareDLQ.Backoff = 2, 10*time.Millisecond
		c.shareDLQ.FailAttempt = func() error {
			if failing.Load() && fails.Load() < 2 {
				fails.Add(1)
				return errors.New("injected dead-letter failure")
			}
			return nil
		}
	}, &fails
}

// TestShareDLQResetIgnoresEarlierIntent: a writer stops after marking
// its copies written and before archiving them (a crash); the group's
// offsets are then reset (a new state epoch), and the same offsets are
// delivered and rejected again. Those rejections are new dead-letter
// records: the intent left from the earlier epoch must not pass them off
// as already written, archiving them without a copy. (Found by review.)
func TestShareDLQResetIgnoresEarlierIntent(t *testing.T) {
	t.Parallel()
	crash, crashes := crashOnceAt("written")
	b := startShareTest(t, crash)
	const n = 10
	dlqGroupSetup(t, b, "rg", "rsrc", 1, 1, n)
	r := newRawShare(t, b, "rg", "m1", "rsrc")
	epoch := acquireAllRaw(t, r, n)
	require.Zero(t, ackCode(t, r.ack(epoch, false, ackBatch(0, n-1, 3))))
	require.Eventually(t, func() bool { return crashes.Load() == 1 }, 10*time.Second, 10*time.Millisecond)
	dlq := b.topics.Partition("dlq.rsrc", 0)
	require.Equal(t, int64(n), dlq.Log.HighWatermark(), "the first epoch's copies")

	key := store.Key{Group: "rg", TopicID: b.topics.Get("rsrc").ID, Partition: 0}
	require.Zero(t, b.shares.ResetOffset(key, 0))
	r2 := newRawShare(t, b, "rg", "m2", "rsrc")
	epoch = acquireAllRaw(t, r2, n)
	require.Zero(t, ackCode(t, r2.ack(epoch, false, ackBatch(0, n-1, 3))))
	require.Eventually(t, func() bool { return spso(t, b, "rg", "rsrc", 0) == n }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, int64(2*n), dlq.Log.HighWatermark(), "the second epoch's rejections have copies of their own")
}

// crashOnceAt stops the first dead-letter writer to reach stage there,
// as a crash would (share.DLQHooks.CrashAt), and counts the stops.
func crashOnceAt(stage string) (func(*Config), *atomic.Int32) {
	var crashes atomic.Int32
	return func(c *Config) {
		c.shareDLQ.CrashAt = func(s string) bool { return s == stage && crashes.Add(1) == 1 }
	}, &crashes
}
