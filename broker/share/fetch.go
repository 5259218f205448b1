package share

// ShareFetch and ShareAcknowledge: the share coordinator's side of
// api_78_share_fetch.go and api_79_share_acknowledge.go, which have the
// rules (sessions, acknowledgements, acquisition, the long poll).

import (
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/topics"
	"github.com/shoal-mq/shoal/sharegroup"
)

// defaultShareMaxRecords is Kafka's max.poll.records default, used when a
// request leaves MaxRecords at 0.
const defaultShareMaxRecords = 500

// FetchIO is what a ShareFetch needs of its connection.
type FetchIO struct {
	// Arena returns a pooled buffer the records are read onto, given
	// back once the response is written.
	Arena func() *[]byte
	// Parked adds the time since a long poll Parked, which is not
	// handler time (request_percentage quotas).
	Parked func(since time.Time)
	// Charge charges the finished response to the consumer byte quotas.
	Charge func(*kmsg.ShareFetchResponse)
	// MayRead, if set, reports whether the caller may Read a topic
	// (ACLs, in the root); a partition of a topic it may not is
	// TOPIC_AUTHORIZATION_FAILED, for its records and its
	// acknowledgements, which are not applied.
	MayRead func(topic string) bool
}

// ServeFetch serves ShareFetch (api_78_share_fetch.go has its rules) for
// cl; io is what it needs of the connection.
func (sc *Coordinator) ServeFetch(cl Client, req *kmsg.ShareFetchRequest, io FetchIO) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	fail := func(code int16, msg string) kmsg.Response {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	group, member := derefString(req.GroupID), derefString(req.MemberID)
	renew := req.Version >= 2 && req.IsRenewAck
	if code, msg := checkShareIDs(group, member); code != 0 {
		return fail(code, msg)
	}
	switch {
	case renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0):
		return fail(kerr.InvalidRequest.Code, "MaxBytes, MinBytes, MaxRecords and MaxWaitMs must be 0 with IsRenewAck.")
	case sc.classicGroupExists(group):
		return fail(kerr.GroupIDNotFound.Code, "Group "+group+" is not a share group.")
	}
	st := sc.shareSettings(group)
	resp.AcquisitionLockTimeoutMillis = int32(st.lockDuration.Milliseconds())
	acks := shareAcksFromFetch(req.Topics, renew)
	sc.refuseUnreadable(acks, io.MayRead)

	key := shareSessionKey{group, member}
	var sess *shareSession
	switch req.ShareSessionEpoch {
	case 0:
		if len(acks) > 0 {
			return fail(kerr.InvalidRequest.Code, "Acknowledge data is not allowed on an initial share fetch (epoch 0).")
		}
		g, err := sc.lockGroup(group, true)
		if err != nil {
			sc.lg.Error("creating share group failed", zap.Error(err))
			return fail(kerr.CoordinatorNotAvailable.Code, "")
		}
		g.mu.Unlock()
		var code int16
		if sess, code = sc.sessions.open(key, cl.Conn, int(sc.GroupBrokerInt("group.share.max.share.sessions"))); code != 0 {
			return fail(code, "")
		}
	default:
		if sess = sc.sessions.get(key); sess == nil {
			return fail(kerr.ShareSessionNotFound.Code, "")
		}
		if req.ShareSessionEpoch != -1 && req.ShareSessionEpoch != sess.mu.epoch {
			sess.mu.Unlock()
			return fail(kerr.InvalidShareSessionEpoch.Code, "")
		}
	}
	defer sess.mu.Unlock()
	out := newShareFetchOut()

	if req.ShareSessionEpoch == -1 {
		sc.acknowledge(time.Now(), group, st, member, acks)
		sc.sessions.remove(sess)
		tps := sess.partsLocked()
		for _, a := range acks {
			tps = append(tps, a.tp)
			out.ack(a)
		}
		sc.releaseMember(group, member, tps)
		out.build(resp)
		return resp
	}

	sess.mu.epoch = nextShareEpoch(req.ShareSessionEpoch)
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			sess.addLocked(shareTP{rt.TopicID, rp.Partition})
		}
	}
	for _, ft := range req.ForgottenTopicsData {
		for _, p := range ft.Partitions {
			sess.forgetLocked(shareTP{ft.TopicID, p})
		}
	}
	spread := sess.spreadHeads(time.Now(), len(acks) > 0)
	if renew {
		sc.acknowledge(time.Now(), group, st, member, acks)
		for _, a := range acks {
			out.ack(a)
		}
		out.build(resp)
		return resp
	}
	// The acknowledgements' write syncs while the first try acquires and
	// reads; the response waits for both. (A panic in between still
	// finishes them: their results are lost with the request, but waiting
	// fetches are woken.)
	finish, startsCommit := sc.submitAcks(time.Now(), group, st, member, acks)
	finishAcks := sync.OnceFunc(finish)
	defer finishAcks()
	// A commit the acknowledgements started runs once this goroutine
	// blocks or yields (store.Pending.StartsCommit): it yields before the
	// log read, so that the write and its sync overlap the read instead
	// of following it. In a message-group mode only once the first
	// share-partition's acquisitions are made: yielding earlier lets
	// another member's fetch, arriving meanwhile, take the groups' next
	// records these acknowledgements freed, leaving this member without
	// them.
	var yield func()
	if startsCommit {
		yield = sync.OnceFunc(runtime.Gosched)
		if st.groupMode == sharegroup.GroupsNone {
			yield() // plain mode reads under the share-partition's lock
		}
	}

	// Fetch every session partition, the first one rotating by epoch.
	type target struct {
		tp shareTP
		sp *sharePart
		lp *topics.Partition
	}
	parts := sess.mu.parts
	errs := map[shareTP]int16{}
	var targets []target
	first := 0
	if n := len(parts); n > 1 {
		first = int(sess.mu.epoch) % n
	}
	for i := range parts {
		tp := parts[(first+i)%len(parts)].tp
		if t, lp, code := sc.o.Topics.PartitionByID(tp.topicID, tp.partition); code != 0 {
			errs[tp] = code
		} else if io.MayRead != nil && !io.MayRead(t.Name) {
			errs[tp] = kerr.TopicAuthorizationFailed.Code
		} else {
			targets = append(targets, target{tp, sc.part(shareKey(group, tp)), lp})
		}
	}
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = defaultShareMaxRecords
	}
	mode := sharegroup.BatchOptimized
	if req.Version >= 2 && req.ShareAcquireMode == 1 || st.recordLimit {
		mode = sharegroup.RecordLimit
	}
	budget := int(req.MaxBytes)
	if budget <= 0 {
		budget = math.MaxInt32
	}
	type result struct {
		acquired []sharegroup.Acquired
		records  []byte
	}
	results := map[shareTP]*result{}
	// Every partition's records are read onto one pooled buffer.
	arena := io.Arena()
	var rateWait time.Duration // share.delivery.rate.limit: when a token is there
	try := func() (got int, failed bool) {
		// The group's delivery rate limit (quota.go) bounds what
		// this try may acquire.
		limit, retry, settle := sc.shareDeliveryGrant(group, maxRecords)
		rateWait = retry
		defer func() { settle(got) }()
		for _, t := range targets {
			if got >= limit || budget <= 0 {
				break
			}
			acq, data, err := t.sp.acquire(st, member, spread, t.lp, limit-got, mode, budget, arena, yield)
			if err != nil {
				errs[t.tp] = shareErrorCode(err)
				failed = true
				continue
			}
			if len(acq) == 0 {
				continue
			}
			results[t.tp] = &result{acq, data}
			budget -= len(data)
			n := 0
			for _, a := range acq {
				n += int(a.Last - a.First + 1)
				sc.o.Metrics.Delivered(a.DeliveryCount, a.Last-a.First+1)
			}
			got += n
			t.lp.M.BytesOut.Add(float64(len(data)))
			t.lp.M.RecordsOut.Add(float64(n))
		}
		return got, failed
	}
	got, failed := try()
	finishAcks()
	for _, a := range acks {
		out.ack(a)
	}
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	// Ordered mode: only this member's own acks can free its groups
	// (mgroups.go), due before its earliest lock deadline.
	var lockDeadline time.Time
	blocked := false
	for i := 0; got == 0 && wait > 0 && i < len(targets); i++ {
		if d, ok := targets[i].sp.blocksOwnGroups(member); ok {
			if !blocked || d.Before(lockDeadline) {
				lockDeadline = d
			}
			blocked = true
		}
	}
	wait = sess.ownGroupsWait(time.Now(), blocked, len(acks) > 0, wait, lockDeadline)
	if got == 0 && !failed && wait > 0 && len(targets) > 0 {
		deadline := time.Now().Add(wait)
		wake := make(chan struct{}, 1)
		for _, t := range targets {
			t.lp.Watch(wake)
			t.sp.waiters.add(wake, member)
		}
		defer func() {
			for _, t := range targets {
				t.lp.Unwatch(wake)
				t.sp.waiters.remove(wake)
			}
		}()
	poll:
		for {
			// Registered first, then tried again: no wake-up is missed.
			if got, failed = try(); got > 0 || failed {
				break
			}
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			if rateWait > 0 {
				left = min(left, rateWait) // poll again when the rate limit allows
			}
			tm := time.NewTimer(left)
			parked := time.Now() // not handler time for request_percentage
			select {
			case <-wake:
				tm.Stop()
			case <-tm.C:
			case <-sc.o.Ctx.Done():
				tm.Stop()
				break poll
			}
			io.Parked(parked)
		}
	}

	if got > 0 {
		sess.mu.deliveredAt = time.Now()
	}
	full := req.ShareSessionEpoch == 0
	for _, p := range parts {
		code, res := errs[p.tp], results[p.tp]
		if !full && code == 0 && res == nil && !p.requiresUpdate {
			continue
		}
		e := out.entry(p.tp)
		e.ErrorCode = code
		if res != nil {
			e.Records = res.records
			e.AcquiredRecords = make([]kmsg.ShareFetchResponseTopicPartitionAcquiredRecord, len(res.acquired))
			for i, a := range res.acquired {
				ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
				ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = a.First, a.Last, a.DeliveryCount
				e.AcquiredRecords[i] = ar
			}
		}
		p.requiresUpdate = code != 0
	}
	out.build(resp)
	io.Charge(resp) // consumer byte quotas (quota_conn.go)
	return resp
}

// shareFetchOut collects the partitions of a ShareFetch response, each
// once, in first-mention order.
type shareFetchOut struct {
	order []shareTP
	m     map[shareTP]*kmsg.ShareFetchResponseTopicPartition
}

func newShareFetchOut() *shareFetchOut {
	return &shareFetchOut{m: map[shareTP]*kmsg.ShareFetchResponseTopicPartition{}}
}

func (o *shareFetchOut) entry(tp shareTP) *kmsg.ShareFetchResponseTopicPartition {
	if e := o.m[tp]; e != nil {
		return e
	}
	e := kmsg.NewShareFetchResponseTopicPartition()
	e.Partition = tp.partition
	// Kafka's schema default; 0/0 would name node 0 as the leader.
	e.CurrentLeader.LeaderID, e.CurrentLeader.LeaderEpoch = -1, -1
	o.m[tp] = &e
	o.order = append(o.order, tp)
	return &e
}

func (o *shareFetchOut) ack(a *shareAck) {
	e := o.entry(a.tp)
	e.AcknowledgeErrorCode = a.code
	if a.code != 0 && a.msg != "" {
		msg := a.msg
		e.AcknowledgeErrorMessage = &msg
	}
}

// build writes the partitions into resp, grouped by topic.
func (o *shareFetchOut) build(resp *kmsg.ShareFetchResponse) {
	idx := map[[16]byte]int{}
	for _, tp := range o.order {
		i, ok := idx[tp.topicID]
		if !ok {
			i = len(resp.Topics)
			idx[tp.topicID] = i
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = tp.topicID
			resp.Topics = append(resp.Topics, t)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, *o.m[tp])
	}
}

// refuseUnreadable refuses, with TOPIC_AUTHORIZATION_FAILED, the
// acknowledgements of topics mayRead (nil: every topic readable) says
// the caller may not Read; they are then left alone. An unknown topic
// id is left to the usual checks.
func (sc *Coordinator) refuseUnreadable(acks []*shareAck, mayRead func(topic string) bool) {
	if mayRead == nil {
		return
	}
	for _, a := range acks {
		if a.code != 0 {
			continue
		}
		if t := sc.o.Topics.GetID(a.tp.topicID); t != nil && !mayRead(t.Name) {
			a.code, a.msg = kerr.TopicAuthorizationFailed.Code, "Authorization failed."
		}
	}
}

// shareAcksFromFetch extracts the acknowledgements of a ShareFetch.
func shareAcksFromFetch(topics []kmsg.ShareFetchRequestTopic, renew bool) []*shareAck {
	var c shareAckCollector
	for _, rt := range topics {
		for _, rp := range rt.Partitions {
			if len(rp.AcknowledgementBatches) == 0 {
				continue
			}
			a := c.add(shareTP{rt.TopicID, rp.Partition})
			for _, ab := range rp.AcknowledgementBatches {
				a.addBatch(ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes, renew)
			}
		}
	}
	return c.acks
}

// shareAckCollector builds shareAcks, refusing a partition listed twice
// (INVALID_REQUEST for all of it: acknowledgements are all-or-nothing
// per partition).
type shareAckCollector struct {
	acks []*shareAck
	seen map[shareTP]*shareAck
}

func (c *shareAckCollector) add(tp shareTP) *shareAck {
	if c.seen == nil {
		c.seen = map[shareTP]*shareAck{}
	}
	if prev := c.seen[tp]; prev != nil {
		prev.code, prev.msg = kerr.InvalidRequest.Code, "The partition is listed more than once."
		return &shareAck{tp: tp} // collected nowhere
	}
	a := &shareAck{tp: tp}
	c.seen[tp] = a
	c.acks = append(c.acks, a)
	return a
}

// addBatch converts one AcknowledgementBatch; types outside 0..3 (0..4
// with IsRenewAck) refuse the partition. The state machine checks the
// rest (ranges, order, type counts).
func (a *shareAck) addBatch(first, last int64, types []int8, renew bool) {
	maxType := int8(sharegroup.AckReject)
	if renew {
		maxType = int8(sharegroup.AckRenew)
	}
	ts := make([]sharegroup.AckType, len(types))
	for i, t := range types {
		if t < 0 || t > maxType {
			if a.code == 0 {
				a.code, a.msg = kerr.InvalidRequest.Code, "Invalid acknowledge type."
			}
			return
		}
		ts[i] = sharegroup.AckType(t)
	}
	a.batches = append(a.batches, sharegroup.AckBatch{First: first, Last: last, Types: ts})
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ServeAcknowledge serves ShareAcknowledge (api_79_share_acknowledge.go
// has its rules).
func (sc *Coordinator) ServeAcknowledge(req *kmsg.ShareAcknowledgeRequest, mayRead func(topic string) bool) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	fail := func(code int16, msg string) kmsg.Response {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	group, member := derefString(req.GroupID), derefString(req.MemberID)
	renew := req.Version >= 2 && req.IsRenewAck
	if code, msg := checkShareIDs(group, member); code != 0 {
		return fail(code, msg)
	}
	switch {
	case req.ShareSessionEpoch == 0:
		return fail(kerr.InvalidShareSessionEpoch.Code, "ShareAcknowledge cannot open a share session (epoch 0).")
	}
	st := sc.shareSettings(group)
	resp.AcquisitionLockTimeoutMillis = int32(st.lockDuration.Milliseconds())
	sess := sc.sessions.get(shareSessionKey{group, member})
	if sess == nil {
		return fail(kerr.ShareSessionNotFound.Code, "")
	}
	defer sess.mu.Unlock()
	if req.ShareSessionEpoch != -1 {
		if req.ShareSessionEpoch != sess.mu.epoch {
			return fail(kerr.InvalidShareSessionEpoch.Code, "")
		}
		sess.mu.epoch = nextShareEpoch(req.ShareSessionEpoch)
	}

	var col shareAckCollector
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			a := col.add(shareTP{rt.TopicID, rp.Partition})
			for _, ab := range rp.AcknowledgementBatches {
				a.addBatch(ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes, renew)
			}
			if len(rp.AcknowledgementBatches) == 0 && a.code == 0 {
				a.code, a.msg = kerr.InvalidRequest.Code, "No acknowledgement batches."
			}
		}
	}
	sc.refuseUnreadable(col.acks, mayRead)
	sess.spreadHeads(time.Now(), len(col.acks) > 0)
	sc.acknowledge(time.Now(), group, st, member, col.acks)
	sess.ackedLocked()
	if req.ShareSessionEpoch == -1 {
		sc.sessions.remove(sess)
		tps := sess.partsLocked()
		for _, a := range col.acks {
			tps = append(tps, a.tp)
		}
		sc.releaseMember(group, member, tps)
	}

	idx := map[[16]byte]int{}
	for _, a := range col.acks {
		i, ok := idx[a.tp.topicID]
		if !ok {
			i = len(resp.Topics)
			idx[a.tp.topicID] = i
			t := kmsg.NewShareAcknowledgeResponseTopic()
			t.TopicID = a.tp.topicID
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewShareAcknowledgeResponseTopicPartition()
		p.Partition = a.tp.partition
		p.ErrorCode = a.code
		if a.code != 0 && a.msg != "" {
			msg := a.msg
			p.ErrorMessage = &msg
		}
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
	}
	return resp
}
