//go:build linux

package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mq/shoal/integration/workload"
)

// Share crash test parameters, sized so the whole test stays well under
// two minutes on two cores under -race with 25 kills.
const (
	shareCrashPartitions = 3
	shareCrashRecords    = 20000
	shareCrashConsumers  = 4
	shareCrashValueSize  = 64
	shareCrashLimit      = 4               // share.delivery.count.limit (the default is 5)
	shareCrashLock       = 3 * time.Second // share.record.lock.duration.ms
	shareCrashMaxRecords = 50              // ShareMaxRecords per consumer
	// Every record is accepted except: "poison" records, released on
	// every delivery until the limit archives them; rejected records; and
	// records released once on their first delivery.
	shareCrashPoisonEvery  = 500 // id % 500 == 250
	shareCrashRejectEvery  = 997 // id % 997 == 13
	shareCrashReleaseEvery = 100 // id % 100 == 37, on delivery 1 only
)

type shareKind int8

const (
	shareNormal shareKind = iota
	sharePoison
	shareRejected
)

func shareCrashKind(id int) shareKind {
	switch {
	case id%shareCrashPoisonEvery == shareCrashPoisonEvery/2:
		return sharePoison
	case id%shareCrashRejectEvery == 13:
		return shareRejected
	}
	return shareNormal
}

// shareCrashAction is what the consumers answer to a delivery.
func shareCrashAction(id int, count int32) kgo.AckStatus {
	switch shareCrashKind(id) {
	case sharePoison:
		return kgo.AckRelease
	case shareRejected:
		return kgo.AckReject
	}
	if id%shareCrashReleaseEvery == 37 && count == 1 {
		return kgo.AckRelease
	}
	return kgo.AckAccept
}

// TestShareCrashRecovery SIGKILLs a child broker (fsync=always) at random
// moments while franz-go share consumers of one group drain a pre-filled
// topic, accepting almost every record (some are released, some rejected,
// a few released until the delivery limit archives them), and after every
// restart and at the end checks:
//
//   - no record is delivered again after its accept (or reject, or release
//     at the delivery limit) was confirmed to the client — within one broker
//     run any later delivery with a higher count, and any delivery in a later
//     run, is a violation;
//   - no delivery count exceeds share.delivery.count.limit, and after a
//     confirmed release at count c the next broker runs deliver the record
//     with a count above c (acknowledged counts are durable);
//   - DescribeShareGroupOffsets never shows fewer terminal records than
//     were confirmed, nor an SPSO below the first offset not confirmed
//     terminal;
//   - at the end every partition's SPSO is its end offset (everything is
//     terminal), every record was delivered, every record other than the
//     poison ones was accepted (or rejected) by a consumer or reached the
//     limit, and after a clean restart a new consumer receives nothing.
//
// The client learns that an acknowledgement succeeded from its
// ShareAckCallback: results are per partition, so a poll's acks of one
// partition count as confirmed when FlushAcks returned and every result
// reported for that partition since the acks were made is a success.
// When a delivery happened is when the client decoded the ShareFetch
// response (Record.AcquisitionDeadline minus the lock); which broker run
// it came from is only trusted once that run answered ApiVersions. (A
// response of an earlier run decoded after a later run is up and another
// consumer's acknowledgement of the same record was confirmed would be
// misread as a redelivery: that needs a scheduling delay of a whole
// restart and reconnect, and has not been seen.) Acquisitions are not
// persisted (kip932.md §5), so a record may be delivered again with the
// same count after a crash; what counts are may not go below is the last
// confirmed release.
//
// Not parallel, like TestCrashRecovery: it runs alone before the parallel
// tests (and after TestCrashRecovery), so kill timing and lock expiry are
// not at the mercy of other brokers competing for two cores.
func TestShareCrashRecovery(t *testing.T) {
	runShareCrash(t, shareCrashConfig{
		name:    "share-crash",
		cycles:  crashCycles(t),
		records: shareCrashRecords,
		drain:   60 * time.Second,
	})
}

// shareCrashConfig is what differs between the share crash tests.
type shareCrashConfig struct {
	name    string // topic prefix; the group is the topic + "-group"
	cycles  int    // kills
	records int
	// groups > 0 is ordered mode (share.message.group.source=key,
	// share.message.group.ordered=true) with this many message groups:
	// record id's key is "g<id % groups>". groups must be a multiple of
	// shareCrashPartitions, so that a group's records, which go to
	// partition id % shareCrashPartitions like all records, share one.
	groups int
	drain  time.Duration // how long the drain after the last kill may take
}

// shareGroupKey is the key (the message group) of record id.
func shareGroupKey(id, groups int) []byte {
	return []byte("g" + strconv.Itoa(id%groups))
}

// runShareCrash is TestShareCrashRecovery's scenario, with cfg.
func runShareCrash(t *testing.T, cfg shareCrashConfig) {
	if len(externalSeeds()) > 0 {
		t.Skipf("runs its own shoal binary; %s is set", seedsEnv)
	}
	if testing.Short() {
		t.Skip("-short")
	}
	testStart := time.Now()
	cycles := cfg.cycles
	seed := crashSeed(t)
	mode := ""
	if cfg.groups > 0 {
		require.Zero(t, cfg.groups%shareCrashPartitions, "groups must be a multiple of the partitions")
		mode = fmt.Sprintf(" (ordered, %d message groups)", cfg.groups)
	}
	t.Logf("share crash test%s: %d kills, SHOAL_CRASH_SEED=%d", mode, cycles, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5a4e))

	child := newCrashChild(t, seed)
	h := newShareCrashHistory(seed, cfg.records, cfg.groups)
	h.start(child)
	child.waitReady()
	h.ready()

	// Topic, broker-level lock bound, group configs, and the records.
	topic := cfg.name + "-" + strconv.FormatUint(seed%1e9, 10)
	group := topic + "-group"
	h.topic, h.group = topic, group
	setup := newCrashClient(t, child.addr,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(4096), // ~50 records per log batch, so acquisitions stay small
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	adm := kadm.NewClient(setup)
	resp, err := adm.CreateTopic(ctx, shareCrashPartitions, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err, resp.ErrMessage)
	// Persisted broker config: it must still allow the 3 s lock after
	// every restart.
	alt, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "group.share.min.record.lock.duration.ms", Value: strp("1000")}})
	require.NoError(t, err)
	for _, r := range alt {
		require.NoError(t, r.Err, "AlterBrokerConfigs: %s", r.ErrMessage)
	}
	groupConfigs := []string{
		"share.auto.offset.reset", "earliest",
		"share.delivery.count.limit", strconv.Itoa(shareCrashLimit),
		"share.record.lock.duration.ms", strconv.Itoa(int(shareCrashLock / time.Millisecond)),
	}
	if cfg.groups > 0 {
		groupConfigs = append(groupConfigs,
			"share.message.group.source", "key",
			"share.message.group.ordered", "true")
	}
	require.NoError(t, workload.SetGroupConfigs(ctx, setup, group, groupConfigs...))
	fillStart := time.Now()
	recs := make([]*kgo.Record, cfg.records)
	for id := range recs {
		recs[id] = &kgo.Record{Topic: topic, Partition: int32(id % shareCrashPartitions), Value: shareValue(id, shareCrashValueSize)}
		if cfg.groups > 0 {
			recs[id].Key = shareGroupKey(id, cfg.groups)
		}
	}
	results := setup.ProduceSync(ctx, recs...)
	require.NoError(t, results.FirstErr(), "pre-fill")
	for _, r := range results { // in completion order, not input order
		id, ok := parseShareValue(r.Record.Value)
		require.True(t, ok)
		h.where[id] = shareOffset{r.Record.Partition, r.Record.Offset}
		h.ends[r.Record.Partition] = max(h.ends[r.Record.Partition], r.Record.Offset+1)
	}
	cancel()
	setup.Close()
	t.Logf("pre-filled %d records in %v", cfg.records, time.Since(fillStart).Round(time.Millisecond))

	// Consumers, paced so that consumption spans all the kills: the rate
	// is re-aimed after every cycle at finishing with the last one, and
	// lifted for the final drain.
	pace := &sharePacer{rate: float64(cfg.records) / (float64(cycles) * 0.8)}
	consumeStart := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var clients []*kgo.Client
	for i := range shareCrashConsumers {
		var acks shareAckLog
		cl := newCrashClient(t, child.addr,
			kgo.ClientID(fmt.Sprintf("%s-%d", cfg.name, i)),
			kgo.ShareGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.ShareMaxRecords(shareCrashMaxRecords),
			kgo.FetchMaxWait(500*time.Millisecond),
			acks.opt(),
		)
		clients = append(clients, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.consume(i, cl, &acks, pace, stop)
		}()
	}
	stopConsumers := func() {
		close(stop)
		wg.Wait()
		for _, cl := range clients {
			lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = cl.LeaveGroupContext(lctx)
			cancel()
			cl.Close()
		}
	}
	defer func() {
		select {
		case <-stop:
		default:
			stopConsumers()
		}
	}()

	var maxRestart time.Duration
	for cycle := 1; cycle <= cycles; cycle++ {
		var alive time.Duration
		if rng.IntN(10) < 3 {
			alive = time.Duration(rng.IntN(200)) * time.Millisecond
		} else {
			alive = 200*time.Millisecond + time.Duration(rng.IntN(1300))*time.Millisecond
		}
		time.Sleep(alive)
		child.kill()
		if rng.IntN(5) == 0 {
			// Crash again during recovery.
			h.start(child)
			time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
			child.kill()
		}
		h.start(child)
		took := child.waitReady()
		h.ready()
		maxRestart = max(maxRestart, took)
		st := h.verify(t, child.addr, false)
		t.Logf("cycle %2d: alive %4dms, ready after %4dms; %s", cycle, alive.Milliseconds(), took.Milliseconds(), st)
		if left := cycles - cycle; left > 0 {
			perCycle := time.Since(consumeStart).Seconds() / float64(cycle)
			pace.aim(float64(cfg.records-st.terminal) / (float64(left) * perCycle))
		}
	}

	// Drain at full speed until every share-partition's SPSO is its end
	// offset, then stop the consumers.
	pace.unlimit()
	drainStart := time.Now()
	for !h.allTerminal(t, child.addr) {
		if time.Since(drainStart) > cfg.drain {
			st := h.verify(t, child.addr, false)
			t.Fatalf("not everything was acknowledged within %v of the last kill: %s", cfg.drain, st)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("drained in %v after the last kill", time.Since(drainStart).Round(time.Millisecond))
	resumeMedian, resumeMax := h.resumeTimes()
	t.Logf("after a restart the consumers' first acknowledgement was confirmed within %v (median), %v (slowest)",
		resumeMedian.Round(time.Millisecond), resumeMax.Round(time.Millisecond))
	stopConsumers()
	st := h.verify(t, child.addr, true)

	// A clean shutdown (which must not hang), a restart, and a new member
	// of the group gets nothing: everything stayed terminal.
	child.terminate()
	h.start(child)
	child.waitReady()
	h.ready()
	require.True(t, h.allTerminal(t, child.addr), "after a clean restart some share-partition's SPSO is below its end")
	var acks shareAckLog
	late := newCrashClient(t, child.addr, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), acks.opt())
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		pctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		for _, r := range late.PollRecords(pctx, -1).Records() {
			id, _ := parseShareValue(r.Value)
			t.Errorf("record %d (%d/%d) delivered after everything was acknowledged and the broker restarted (count %d)", id, r.Partition, r.Offset, r.DeliveryCount())
		}
		cancel()
	}
	late.Close()
	final := h.verify(t, child.addr, true)
	t.Logf("final: %s", final)
	t.Logf("totals: %d confirmed acks, %d acks not confirmed (%v); slowest restart %v; test took %v",
		st.confirmed, st.unconfirmed, st.reasons, maxRestart, time.Since(testStart).Round(time.Millisecond))
	t.Logf("%d of %d poison records were seen at the delivery limit %d and then archived", st.poisonAtLimit, cfg.records/shareCrashPoisonEvery, shareCrashLimit)
	require.Positive(t, st.poisonAtLimit, "no poison record was seen at the delivery limit: the limit went untested")
	if cfg.groups > 0 {
		t.Logf("%d records were delivered in more than one broker run (a crash interrupted their group)", st.laterRun)
	}
	child.terminate()
}

// ---- history ----

type shareOffset struct {
	partition int32
	offset    int64
}

type shareDelivery struct {
	count    int32
	at       time.Time // when the client decoded the ShareFetch response
	consumer int
	action   kgo.AckStatus
}

// shareConfirm is an acknowledgement the client was told succeeded.
type shareConfirm struct {
	at     time.Time // when the ack callback reported it
	count  int32     // delivery count of the acknowledged delivery
	action kgo.AckStatus
}

type brokerRun struct {
	started, ready time.Time
	firstConfirm   time.Time // the first confirmed acknowledgement after ready
}

// shareCrashHistory is what the consumers saw and were told. mu guards
// everything below it.
type shareCrashHistory struct {
	seed         uint64
	records      int // record ids are 0..records-1
	groups       int // > 0: ordered mode, record id's message group is id % groups
	topic, group string
	where        []shareOffset // by record id
	ends         [shareCrashPartitions]int64

	mu          sync.Mutex
	runs        []brokerRun
	deliveries  [][]shareDelivery // by record id
	terminal    []*shareConfirm   // the first confirmed accept, reject, or release at the limit
	released    [][]shareConfirm
	confirmed   int
	unconfirmed int
	reasons     map[string]int
	early       []string // violations seen while consuming
	lastSPSO    [shareCrashPartitions]int64
}

func newShareCrashHistory(seed uint64, records, groups int) *shareCrashHistory {
	return &shareCrashHistory{
		seed:       seed,
		records:    records,
		groups:     groups,
		where:      make([]shareOffset, records),
		deliveries: make([][]shareDelivery, records),
		terminal:   make([]*shareConfirm, records),
		released:   make([][]shareConfirm, records),
		reasons:    map[string]int{},
	}
}

func (h *shareCrashHistory) start(c *childBroker) {
	h.mu.Lock()
	h.runs = append(h.runs, brokerRun{started: time.Now()})
	h.mu.Unlock()
	c.start()
}

func (h *shareCrashHistory) ready() {
	h.mu.Lock()
	h.runs[len(h.runs)-1].ready = time.Now()
	h.mu.Unlock()
}

// runAt returns the broker run that was started last at time at, and
// whether at is certainly inside it: after the run answered ApiVersions,
// so that a response of an earlier run cannot be mistaken for one of it.
// mu must be held.
func (h *shareCrashHistory) runAt(at time.Time) (int, bool) {
	i := sort.Search(len(h.runs), func(i int) bool { return h.runs[i].started.After(at) }) - 1
	if i < 0 {
		return -1, false
	}
	r := h.runs[i]
	return i, !r.ready.IsZero() && !at.Before(r.ready)
}

func (h *shareCrashHistory) earlyViolation(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.early) < 20 {
		h.early = append(h.early, fmt.Sprintf(format, args...))
	}
}

// sharePacer spreads consumption over time: consumers reserve slots at a
// shared rate in records per second (0: unlimited).
type sharePacer struct {
	mu   sync.Mutex
	rate float64
	next time.Time
}

func (p *sharePacer) reserve(n int) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rate == 0 {
		return 0
	}
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	p.next = p.next.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	return time.Until(p.next)
}

// aim sets the rate, at least 100 records/s.
func (p *sharePacer) aim(rate float64) {
	p.mu.Lock()
	p.rate = max(rate, 100)
	p.mu.Unlock()
}

func (p *sharePacer) unlimit() {
	p.mu.Lock()
	p.rate = 0
	p.mu.Unlock()
}

type shareAckRef struct {
	id     int
	count  int32
	action kgo.AckStatus
}

// consume polls, acknowledges every record, flushes, and records which
// acknowledgements were confirmed.
func (h *shareCrashHistory) consume(idx int, cl *kgo.Client, acks *shareAckLog, pace *sharePacer, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollRecords(pctx, 2*shareCrashMaxRecords)
		cancel()
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		now := time.Now()
		acks.take() // results of earlier polls' acks are not about these
		byPart := map[int32][]shareAckRef{}
		for _, r := range recs {
			id, ok := parseShareValue(r.Value)
			if !ok || id < 0 || id >= h.records {
				h.earlyViolation("%s/%d@%d: value %.30q was never written", r.Topic, r.Partition, r.Offset, r.Value)
				r.Ack(kgo.AckRelease)
				continue
			}
			if w := h.where[id]; w.partition != r.Partition || w.offset != r.Offset {
				h.earlyViolation("record %d written at %d/%d delivered as %d/%d", id, w.partition, w.offset, r.Partition, r.Offset)
			}
			at := r.AcquisitionDeadline().Add(-shareCrashLock)
			if at.After(now.Add(100 * time.Millisecond)) {
				h.earlyViolation("record %d: acquisition lock ends %v after delivery, longer than the group's %v",
					id, r.AcquisitionDeadline().Sub(now).Round(time.Millisecond), shareCrashLock)
			}
			count := r.DeliveryCount()
			action := shareCrashAction(id, count)
			h.mu.Lock()
			h.deliveries[id] = append(h.deliveries[id], shareDelivery{count: count, at: at, consumer: idx, action: action})
			h.mu.Unlock()
			r.Ack(action)
			byPart[r.Partition] = append(byPart[r.Partition], shareAckRef{id, count, action})
		}
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ferr := cl.FlushAcks(fctx)
		cancel()
		outcomes := acks.take()
		for p, refs := range byPart {
			var (
				reported bool
				failure  error
				at       time.Time
			)
			for _, o := range outcomes {
				if o.partition != p {
					continue
				}
				reported = true
				if o.err != nil && failure == nil {
					failure = o.err
				}
				if o.at.After(at) {
					at = o.at
				}
			}
			switch {
			case ferr != nil:
				h.notConfirmed(len(refs), "FlushAcks: "+ackFailure(ferr))
			case failure != nil:
				h.notConfirmed(len(refs), ackFailure(failure))
			case !reported:
				h.notConfirmed(len(refs), "no ack result for the partition")
			default:
				h.confirm(refs, at)
			}
		}
		if d := pace.reserve(len(recs)); d > 0 {
			select {
			case <-stop:
				return
			case <-time.After(d):
			}
		}
	}
}

var hostPort = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+`)

// ackFailure shortens an acknowledgement error for the statistics.
func ackFailure(err error) string {
	s := hostPort.ReplaceAllString(err.Error(), "broker")
	if i := strings.Index(s, ": The "); i > 0 { // kerr's description
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

func (h *shareCrashHistory) notConfirmed(n int, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unconfirmed += n
	h.reasons[reason] += n
}

func (h *shareCrashHistory) confirm(refs []shareAckRef, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := &h.runs[len(h.runs)-1]; r.firstConfirm.IsZero() && !r.ready.IsZero() && at.After(r.ready) {
		r.firstConfirm = at
	}
	h.confirmed += len(refs)
	for _, r := range refs {
		c := shareConfirm{at: at, count: r.count, action: r.action}
		terminal := r.action != kgo.AckRelease || r.count >= shareCrashLimit
		switch {
		case !terminal:
			h.released[r.id] = append(h.released[r.id], c)
		case h.terminal[r.id] == nil:
			h.terminal[r.id] = &c
		}
	}
}

// ---- checks ----

type shareCrashStats struct {
	deliveries, records, terminal, confirmed, unconfirmed int
	poisonAtLimit, normalAtLimit                          int
	laterRun                                              int // records delivered in more than one broker run
	spso                                                  [shareCrashPartitions]int64
	reasons                                               map[string]int
}

func (s shareCrashStats) String() string {
	return fmt.Sprintf("%d deliveries of %d records, %d confirmed terminal; acks %d confirmed, %d not; SPSO %v",
		s.deliveries, s.records, s.terminal, s.confirmed, s.unconfirmed, s.spso)
}

// describe returns the SPSO and lag of every share-partition.
func (h *shareCrashHistory) describe(t *testing.T, addr string) (spso, lag [shareCrashPartitions]int64, err error) {
	cl := newCrashClient(t, addr)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		var got kadm.DescribedShareGroupsOffsets
		got, err = adm.DescribeShareGroupOffsets(ctx, h.group)
		if err == nil {
			err = got.Error()
		}
		if err == nil {
			for p := range int32(shareCrashPartitions) {
				o, ok := got[h.group].Offsets.Lookup(h.topic, p)
				switch {
				case !ok:
					err = fmt.Errorf("no share state for partition %d", p)
				case o.Err != nil:
					err = fmt.Errorf("partition %d: %w", p, o.Err)
				default:
					spso[p], lag[p] = o.StartOffset, o.Lag
				}
			}
		}
		if err == nil || attempt >= 40 || ctx.Err() != nil {
			return spso, lag, err
		}
		time.Sleep(100 * time.Millisecond) // right after a restart the client may still be connecting
	}
}

// allTerminal reports whether every share-partition's SPSO is its end
// offset with no lag.
func (h *shareCrashHistory) allTerminal(t *testing.T, addr string) bool {
	spso, lag, err := h.describe(t, addr)
	if err != nil {
		t.Logf("DescribeShareGroupOffsets: %v", err)
		return false
	}
	for p := range shareCrashPartitions {
		if spso[p] != h.ends[p] || lag[p] != 0 {
			return false
		}
	}
	return true
}

// verify checks the history and the broker's share-partition offsets.
// With final set, the consumers have stopped and everything must be
// terminal.
func (h *shareCrashHistory) verify(t *testing.T, addr string, final bool) shareCrashStats {
	t.Helper()
	var violations []string
	bad := func(format string, args ...any) {
		if len(violations) < 30 {
			violations = append(violations, fmt.Sprintf(format, args...))
		}
	}

	// What is confirmed terminal now must be terminal in what the broker
	// reports after this point.
	var confirmedTerminal [shareCrashPartitions]int64
	var prefix [shareCrashPartitions][]bool // by offset: confirmed terminal
	for p := range prefix {
		prefix[p] = make([]bool, h.ends[p])
	}
	h.mu.Lock()
	for id := range h.terminal {
		if h.terminal[id] != nil {
			w := h.where[id]
			confirmedTerminal[w.partition]++
			prefix[w.partition][w.offset] = true
		}
	}
	h.mu.Unlock()
	spso, lag, err := h.describe(t, addr)
	require.NoError(t, err, "DescribeShareGroupOffsets")

	h.mu.Lock()
	defer h.mu.Unlock()
	violations = append(violations, h.early...)
	st := shareCrashStats{spso: spso, confirmed: h.confirmed, unconfirmed: h.unconfirmed, reasons: h.reasons}
	for p := range shareCrashPartitions {
		if spso[p] < 0 || spso[p] > h.ends[p] {
			bad("partition %d: SPSO %d outside [0, %d]", p, spso[p], h.ends[p])
			continue
		}
		if done := h.ends[p] - lag[p]; done < confirmedTerminal[p] {
			bad("partition %d: the broker counts %d terminal records (end %d - lag %d), but %d were confirmed",
				p, done, h.ends[p], lag[p], confirmedTerminal[p])
		}
		first := int64(0)
		for first < h.ends[p] && prefix[p][first] {
			first++
		}
		if spso[p] < first {
			bad("partition %d: SPSO %d, but offsets below %d were all confirmed terminal", p, spso[p], first)
		}
		if spso[p] < h.lastSPSO[p] {
			t.Logf("partition %d: SPSO went back from %d to %d (allowed only for unconfirmed lock-expiry archiving)", p, h.lastSPSO[p], spso[p])
		}
		h.lastSPSO[p] = spso[p]
	}

	for id := range h.deliveries {
		ds := h.deliveries[id]
		if len(ds) > 0 {
			st.records++
		}
		st.deliveries += len(ds)
		atLimit, terminalTried := false, false
		firstRun, laterRun := -1, false
		for i, d := range ds {
			if run, _ := h.runAt(d.at); i == 0 {
				firstRun = run
			} else if run != firstRun {
				laterRun = true
			}
			if d.count < 1 || d.count > shareCrashLimit {
				bad("record %d delivered with count %d (limit %d) to consumer %d", id, d.count, shareCrashLimit, d.consumer)
			}
			atLimit = atLimit || d.count >= shareCrashLimit
			terminalTried = terminalTried || d.action != kgo.AckRelease
		}
		if laterRun {
			st.laterRun++
		}
		if term := h.terminal[id]; term != nil {
			st.terminal++
			termRun, _ := h.runAt(term.at)
			for _, d := range ds {
				if !d.at.After(term.at) {
					continue
				}
				run, sure := h.runAt(d.at)
				switch {
				case d.count > term.count:
					bad("record %d: %s at count %d confirmed at %s, delivered again at %s with count %d",
						id, term.action, term.count, h.stamp(term.at), h.stamp(d.at), d.count)
				case sure && run > termRun:
					bad("record %d: %s at count %d confirmed at %s, delivered again in a later broker run at %s with count %d",
						id, term.action, term.count, h.stamp(term.at), h.stamp(d.at), d.count)
				}
			}
		}
		for _, rel := range h.released[id] {
			relRun, _ := h.runAt(rel.at)
			for _, d := range ds {
				if !d.at.After(rel.at) {
					continue
				}
				if run, sure := h.runAt(d.at); sure && run > relRun && d.count <= rel.count {
					bad("record %d: release at count %d confirmed at %s, delivered in a later broker run at %s with count %d (the count went back)",
						id, rel.count, h.stamp(rel.at), h.stamp(d.at), d.count)
				}
			}
		}
		switch kind := shareCrashKind(id); {
		case kind == sharePoison && atLimit:
			st.poisonAtLimit++
		case kind != sharePoison && atLimit:
			st.normalAtLimit++
		}
		if !final {
			continue
		}
		w := h.where[id]
		switch {
		case len(ds) == 0:
			bad("record %d (%d/%d) was never delivered (lost)", id, w.partition, w.offset)
		case shareCrashKind(id) != sharePoison && !terminalTried && !atLimit:
			bad("record %d (%d/%d) is terminal but was only ever released below the limit (lost): %v", id, w.partition, w.offset, ds)
		}
	}
	if h.groups > 0 {
		for _, v := range h.groupOrderViolations() {
			bad("%s", v)
		}
	}
	if final {
		for p := range shareCrashPartitions {
			if spso[p] != h.ends[p] || lag[p] != 0 {
				bad("partition %d: SPSO %d lag %d at the end, want %d and 0", p, spso[p], lag[p], h.ends[p])
			}
		}
		if st.normalAtLimit > 0 {
			t.Logf("%d records other than the poison ones reached the delivery limit (lock expiry)", st.normalAtLimit)
		}
	}
	if len(violations) > 0 {
		sort.Strings(violations)
		t.Fatalf("share crash check found %d violation(s) (replay with SHOAL_CRASH_SEED=%d):\n  %s",
			len(violations), h.seed, strings.Join(violations, "\n  "))
	}
	return st
}

// resumeTimes returns, for every broker run that answered and confirmed
// an acknowledgement, how long after it answered ApiVersions the first
// acknowledgement was confirmed: how long consumers took to resume.
func (h *shareCrashHistory) resumeTimes() (median, slowest time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ds []time.Duration
	for _, r := range h.runs[1:] { // the first run had nothing to resume
		if !r.firstConfirm.IsZero() {
			ds = append(ds, r.firstConfirm.Sub(r.ready))
		}
	}
	if len(ds) == 0 {
		return 0, 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2], ds[len(ds)-1]
}

// stamp renders a time relative to the broker runs, for violations.
func (h *shareCrashHistory) stamp(at time.Time) string {
	run, _ := h.runAt(at)
	if run < 0 {
		return at.Format("15:04:05.000")
	}
	return fmt.Sprintf("%s (run %d +%dms)", at.Format("15:04:05.000"), run, at.Sub(h.runs[run].started).Milliseconds())
}

// shareValue is the value the test writes for record id.
func shareValue(id int, size int) []byte {
	v := fmt.Sprintf("share-%06d ", id)
	if len(v) < size {
		v += strings.Repeat(".", size-len(v))
	}
	return []byte(v)
}

// parseShareValue returns the id in a shareValue.
func parseShareValue(v []byte) (int, bool) {
	s := string(v)
	if i := strings.IndexByte(s, ' '); i >= 0 {
		s = s[:i]
	}
	rest, ok := strings.CutPrefix(s, "share-")
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(rest)
	return id, err == nil
}
