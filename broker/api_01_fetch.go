package broker

// Fetch (1).
//
// Behavior: returns whole record batches read from the segment files
// (nothing is cached in RAM), up to the high watermark, which under the
// default fsync policy only covers fsynced data, so consumers never see
// a record a power loss could take back. Limits: MaxBytes for the whole
// response and PartitionMaxBytes per partition, except that the first
// partition with data always gets at least one whole batch (KIP-74).
// When fewer than MinBytes are available the request waits up to
// MaxWaitMillis and is woken by any high watermark move on a fetched
// partition (long poll). Incremental fetch sessions follow KIP-227 (see
// fetch_sessions.go). Under read_committed (IsolationLevel 1) a fetch
// stops at the last stable offset (LSO: the high watermark, or the first
// offset of the oldest open transaction if lower) and returns the aborted
// transactions (producer id, first offset) overlapping the returned range,
// so clients drop aborted records; read_uncommitted reads to the high
// watermark with no aborted list. Every answer reports the LSO.
// Consumer byte quotas (quota_conn.go) cap the bytes returned to what
// they hold and throttle; spent, they make the fetch return no records
// at once.
//
// Authorization: Read on each topic, or ClusterAction on the cluster
// for a fetch with a replica id; TOPIC_AUTHORIZATION_FAILED per
// partition otherwise.
//
// Version notes: v4 is the first that can carry RecordBatch v2 and the
// oldest Kafka 4 serves; v5 log start offset; v7 sessions; v9 current
// leader epoch (we are always epoch 0; a newer epoch gets
// UNKNOWN_LEADER_EPOCH, an older one FENCED_LEADER_EPOCH); v11 rack /
// preferred replica (-1); v12 flexible, diverging epochs (never: one
// epoch); v13 topic ids instead of names.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/broker/topics"
	slog "github.com/shoal-mq/shoal/log"
)

func init() { registerSimple(1, 4, 13, handleFetch) }

// fetchItem is one partition of one fetch.
type fetchItem struct {
	topic    string
	topicID  [16]byte
	idx      int32
	offset   int64
	maxBytes int32
	epoch    int32
	sp       *sessionPart // nil when sessionless

	// results
	err      int16
	records  []byte
	hw, logS int64
	lso      int64
	aborted  []slog.AbortedTxn // read_committed only
}

func handleFetch(c *conn, req *kmsg.FetchRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	now := time.Now()
	useIDs := req.Version >= 13

	var sess *fetchSession
	incremental := false
	if req.Version >= 7 {
		switch {
		case req.SessionID == 0 && req.SessionEpoch == -1:
		case req.SessionEpoch == -1:
			b.fetchSessions.remove(req.SessionID)
		case req.SessionEpoch == 0:
			if req.SessionID != 0 {
				b.fetchSessions.remove(req.SessionID)
			}
			sess = b.fetchSessions.create(now)
		default:
			sess = b.fetchSessions.get(req.SessionID)
			if sess == nil {
				resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
				return resp
			}
			incremental = true
		}
	}
	if sess != nil {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		if incremental && req.SessionEpoch != sess.epoch {
			resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
			return resp
		}
		b.fetchSessions.touch(sess, now)
		resp.SessionID = sess.id
	}

	// Build the list of partitions to fetch.
	var items []*fetchItem
	resolveName := func(rt *kmsg.FetchRequestTopic) (string, [16]byte, bool) {
		if !useIDs {
			t := b.topics.Get(rt.Topic)
			if t == nil {
				return rt.Topic, [16]byte{}, false
			}
			return rt.Topic, t.ID, true
		}
		t := b.topics.GetID(rt.TopicID)
		if t == nil {
			return "", rt.TopicID, false
		}
		return t.Name, t.ID, true
	}
	if sess == nil || !incremental {
		for i := range req.Topics {
			rt := &req.Topics[i]
			name, id, known := resolveName(rt)
			if useIDs {
				id = rt.TopicID
			}
			for _, rp := range rt.Partitions {
				it := &fetchItem{topic: name, topicID: id, idx: rp.Partition, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, epoch: rp.CurrentLeaderEpoch}
				if !known {
					it.err = kerr.UnknownTopicOrPartition.Code
					if useIDs {
						it.err = kerr.UnknownTopicID.Code
					}
				}
				if sess != nil && known {
					sp := &sessionPart{topic: name, topicID: id, partition: rp.Partition, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes}
					sess.upsert(sp)
					it.sp = sess.parts[tpKey{name, rp.Partition}]
				}
				items = append(items, it)
			}
		}
	} else {
		// Incremental: apply updates, then forgotten, then fetch all.
		for i := range req.Topics {
			rt := &req.Topics[i]
			name, id, known := resolveName(rt)
			for _, rp := range rt.Partitions {
				if !known {
					// Report it once; it cannot join the session.
					it := &fetchItem{topic: name, topicID: rt.TopicID, idx: rp.Partition, err: kerr.UnknownTopicOrPartition.Code}
					if useIDs {
						it.err = kerr.UnknownTopicID.Code
					}
					items = append(items, it)
					continue
				}
				sess.upsert(&sessionPart{topic: name, topicID: id, partition: rp.Partition, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes})
			}
		}
		for _, ft := range req.ForgottenTopics {
			name := ft.Topic
			if useIDs {
				if t := b.topics.GetID(ft.TopicID); t != nil {
					name = t.Name
				} else {
					// Deleted topic: drop every session entry with that id.
					for k, sp := range sess.parts {
						if sp.topicID == ft.TopicID {
							sess.remove(k)
						}
					}
					continue
				}
			}
			for _, p := range ft.Partitions {
				sess.remove(tpKey{name, p})
			}
		}
		for _, k := range sess.order {
			sp := sess.parts[k]
			items = append(items, &fetchItem{topic: sp.topic, topicID: sp.topicID, idx: sp.partition, offset: sp.offset, maxBytes: sp.maxBytes, epoch: -1, sp: sp})
		}
		sess.epoch = nextEpoch(sess.epoch)
	}

	// Authorize, then resolve partitions once. A follower's fetch (a
	// replica id) needs ClusterAction on the cluster, a consumer's Read
	// on each topic; a denied partition is TOPIC_AUTHORIZATION_FAILED
	// whether or not it exists (an unknown topic id has no name to ask
	// about, and stays UNKNOWN_TOPIC_ID, as in Kafka).
	parts := make([]*topics.Partition, len(items))
	follower := req.ReplicaID >= 0
	followerOK := follower && c.mayCluster(acl.ClusterAction)
	var readable map[string]bool // per topic, when the authorizer is on
	for i, it := range items {
		if b.authz != nil && it.err != kerr.UnknownTopicID.Code {
			ok, seen := readable[it.topic]
			if !seen {
				ok = followerOK || !follower && c.mayTopic(acl.Read, it.topic)
				if readable == nil {
					readable = map[string]bool{}
				}
				readable[it.topic] = ok
			}
			if !ok {
				it.err = kerr.TopicAuthorizationFailed.Code
				continue
			}
		}
		if it.err != 0 {
			continue
		}
		p := b.topics.Partition(it.topic, it.idx)
		if p == nil || (useIDs && b.topics.GetID(it.topicID) == nil) {
			it.err = b.absentPartitionCode(it.topic, it.idx)
			if useIDs && b.topics.GetID(it.topicID) == nil {
				it.err = kerr.UnknownTopicID.Code
			}
			continue
		}
		if _, code := b.leaderState(p, it.epoch); code != 0 {
			it.err = code
		}
		parts[i] = p
	}

	// Every partition's records are read into one pooled buffer.
	buf := c.recordBuf()
	maxBytes := req.MaxBytes // capped by consumer quotas below
	read := func() (int, bool) {
		var total int
		var anyErr bool
		*buf, total, anyErr = b.fetchOnce((*buf)[:0], items, parts, maxBytes, req.IsolationLevel == 1)
		return total, anyErr
	}

	maxWait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	deadline := now.Add(maxWait)
	var wake chan struct{}
	// Over its consumer quotas, a fetch is answered at once with no
	// records (quota_conn.go); otherwise what it returns is charged.
	held := c.fetchQuotaHold(items, resp, &maxBytes)
	if held {
		fetchHeld(items, parts)
	} else {
		defer c.fetchQuotaCharge(items)
	}
	for !held {
		total, anyErr := read()
		if total >= int(req.MinBytes) || anyErr || maxWait <= 0 {
			break
		}
		if wake == nil {
			// Register, then read again, so no append between the read
			// above and the registration is missed.
			wake = make(chan struct{}, 1)
			for _, p := range parts {
				if p != nil {
					p.Watch(wake)
				}
			}
			defer func() {
				for _, p := range parts {
					if p != nil {
						p.Unwatch(wake)
					}
				}
			}()
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		t := time.NewTimer(left)
		parked := time.Now() // not handler time for request_percentage
		select {
		case <-wake:
			t.Stop()
		case <-t.C:
		case <-b.ctx.Done():
			t.Stop()
			maxWait = 0
		}
		c.quota.parkedSince(parked)
		if time.Now().After(deadline) {
			read()
			break
		}
	}

	// Assemble, skipping unchanged partitions in incremental responses.
	served, sessionPos := 0, 0 // in session order, for rotate
	for i, it := range items {
		if it.sp != nil {
			sessionPos++
			changed := len(it.records) > 0 || it.err != 0 || it.hw != it.sp.lastHW || it.logS != it.sp.lastLogStart || it.sp.lastErr != it.err
			if incremental && !changed {
				continue
			}
			it.sp.lastHW, it.sp.lastLogStart, it.sp.lastErr = it.hw, it.logS, it.err
			if len(it.records) > 0 {
				served = sessionPos
			}
		}
		var rt *kmsg.FetchResponseTopic
		if n := len(resp.Topics); n > 0 && resp.Topics[n-1].Topic == it.topic && resp.Topics[n-1].TopicID == it.topicID {
			rt = &resp.Topics[n-1]
		} else {
			t := kmsg.NewFetchResponseTopic()
			t.Topic, t.TopicID = it.topic, it.topicID
			resp.Topics = append(resp.Topics, t)
			rt = &resp.Topics[len(resp.Topics)-1]
		}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = it.idx
		rp.ErrorCode = it.err
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = it.hw, it.lso, it.logS
		if it.err != 0 && parts[i] == nil {
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
		}
		if req.IsolationLevel == 1 && len(it.records) > 0 {
			rp.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 0, len(it.aborted))
			for _, a := range it.aborted {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
				rp.AbortedTransactions = append(rp.AbortedTransactions, at)
			}
		}
		rp.PreferredReadReplica = -1
		rp.RecordBatches = it.records
		if len(it.records) > 0 {
			// Counted here, once per response: a long poll may read a
			// partition several times before it answers.
			parts[i].M.BytesOut.Add(float64(len(it.records)))
		}
		if rp.RecordBatches == nil {
			// Empty, not null: librdkafka rejects a null record set
			// ("invalid MessageSetSize -1").
			rp.RecordBatches = []byte{}
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	if sess != nil && served > 0 {
		// Partitions after the last one served go first next time.
		sess.rotate(served)
	}
	return resp
}

// fetchMaxBytes is Kafka's fetch.max.bytes default (55 MiB): the most one
// fetch response carries.
const fetchMaxBytes = 57671680

// recordBuf takes a buffer from records.GetBuffer for the records of the
// response being handled (Fetch, ShareFetch) and hands it back once that
// response is encoded or dropped (conn.afterWrite). The handler appends to
// *buf; what *buf holds then goes back, however often it grew. Reader
// goroutine only.
func (c *conn) recordBuf() *[]byte {
	bp := records.GetBuffer()
	buf := (*bp)[:0]
	c.afterWrite(func() { records.PutBuffer(bp, buf) })
	return &buf
}

// fetchOnce reads every item once, appending records to buf (each item's
// records are a sub-slice of the returned buffer), honouring MaxBytes
// across the response (the first partition with data may exceed it by one
// batch) and per-partition limits. It returns the buffer, the bytes read
// and whether any partition has an error (which completes a long poll at
// once).
func (b *Broker) fetchOnce(buf []byte, items []*fetchItem, parts []*topics.Partition, maxBytes int32, readCommitted bool) ([]byte, int, bool) {
	// Kafka's fetch.max.bytes caps what one response may carry whatever
	// the client asks, bounding the broker's memory per fetch.
	budget := min(int(maxBytes), fetchMaxBytes)
	if budget <= 0 {
		budget = 1
	}
	total := 0
	anyErr := false
	for i, it := range items {
		p := parts[i]
		it.records = nil
		if p == nil || (it.err != 0 && it.err != kerr.OffsetOutOfRange.Code && it.err != kerr.KafkaStorageError.Code) {
			anyErr = anyErr || it.err != 0
			continue
		}
		it.err = 0
		it.hw = p.Log.HighWatermark()
		it.lso = min(it.hw, p.Log.LastStableOffset())
		it.logS = p.Log.LogStartOffset()
		if it.offset < it.logS || it.offset > p.Log.LogEndOffset() {
			it.err = kerr.OffsetOutOfRange.Code
			anyErr = true
			continue
		}
		upper := it.hw
		if readCommitted {
			upper = it.lso
		}
		if it.offset >= upper || budget-total <= 0 && total > 0 {
			continue
		}
		limit := int(it.maxBytes)
		if left := budget - total; left < limit {
			limit = left
		}
		start := len(buf)
		nb, err := p.Log.ReadAppend(buf, it.offset, upper, limit, total == 0)
		if err != nil {
			// A deleted topic, a moved log start or a failed partition:
			// this partition reports it, the others are served.
			it.err = kafkaerr.Code(err)
			anyErr = true
			continue
		}
		buf = nb
		if n := len(buf) - start; n > 0 {
			it.records = buf[start:len(buf):len(buf)]
			total += n
			if readCommitted {
				it.aborted = p.Log.AbortedTransactions(it.offset, upper)
			}
		}
	}
	return buf, total, anyErr
}
