package broker

// Produce (0).
//
// Behavior: each partition's batches are validated and appended by the
// log (CRC checked once, offsets assigned by patching baseOffset,
// idempotent producer sequences checked). Under the default fsync
// policy a response for acks=1 or acks=all is sent only once the
// appended bytes are fsynced; the fsync is shared with every other
// append that arrived meanwhile (see syncer). acks=0 gets no response
// at all, as in Kafka. Errors are per partition; nothing in one
// partition's failure affects another's. Producer byte quotas
// (quota_conn.go) throttle the response and the connection, or in
// reject mode refuse the whole request with NOT_ENOUGH_REPLICAS before
// anything is appended.
//
// Version notes: v3 is the first with RecordBatch v2 (magic 2) and the
// oldest Kafka 4 serves; we store batches verbatim so older message
// formats are not accepted. v8 adds per-record errors and an error
// message; v9 is flexible; v10/v11 add KIP-951's leader hints: in a
// cluster a NOT_LEADER_OR_FOLLOWER partition carries the leader and
// epoch this broker knows, and the response that leader's endpoint
// (clusterLeaderHints), so a client retries there without a Metadata
// round trip; a single node is always the leader. v12 has v11's fields; it
// tells the broker the client runs KIP-890 part 2 transactions, so a
// transactional batch adds its partition to the transaction itself (no
// AddPartitionsToTxn). v13 (topic ids) is not served yet.
//
// Authorization: Write on each topic (TOPIC_AUTHORIZATION_FAILED per
// partition, before existence); with a transactional id, Write on it
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition).
//
// Transactions: transactional batches need a TransactionalID
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise, as Kafka). With one,
// the transaction is held locked for the whole request so an EndTxn
// cannot slip between the check and the append: a batch whose producer
// id is not the transactional id's gets INVALID_PRODUCER_ID_MAPPING,
// another epoch INVALID_PRODUCER_EPOCH, and a partition not added to the
// Ongoing transaction (AddPartitionsToTxn) INVALID_TXN_STATE, as
// Kafka's transaction verification answers. From v12 such a partition is
// added instead, starting the transaction if none is open
// (CONCURRENT_TRANSACTIONS while the previous one is still being
// completed); see admitProduceLocked.

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/configs"
	"github.com/shoal-mq/shoal/broker/dedup"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/topics"
	"github.com/shoal-mq/shoal/broker/txn"
	slog "github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/protocol"
)

func init() { register(0, 3, 12, handleProduce) }

func handleProduce(c *conn, req *kmsg.ProduceRequest) (kmsg.Response, func()) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	now := time.Now()
	b := c.b
	type waitFor struct {
		ch   <-chan error
		deps dedup.Deps // package dedup: the first copies of dropped duplicates, and this append
		rp   *kmsg.ProduceResponseTopicPartition
		// cluster yields a cluster partition's outcome (cluster.go).
		cluster <-chan clusterResult
		p       *topics.Partition
		bytes   int
	}
	var waits []waitFor
	var released []<-chan struct{} // cluster partitions' (clusterProduce)
	ackErr := int16(0)
	var ackMsg *string
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		ackErr = kerr.InvalidRequiredAcks.Code
	case req.TransactionID != nil && !c.mayTxn(acl.Write, *req.TransactionID):
		ackErr = kerr.TransactionalIDAuthorizationFailed.Code
	default:
		// Client quotas (quota_conn.go): charged, or refused at once in
		// reject mode before anything is appended.
		ackErr, ackMsg = c.produceQuota(req, resp)
	}
	var tx *txn.Txn // a transactional produce holds its txn locked (package txn)
	if req.TransactionID != nil && ackErr == 0 {
		if tx = b.txns.Lock(*req.TransactionID); tx != nil {
			defer tx.Unlock()
		}
	}
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		// Preallocated so pointers into it stay valid for waitFn.
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, 0, len(rt.Partitions))
		denied := !c.mayTopic(acl.Write, rt.Topic)
		t := b.topics.Get(rt.Topic)
		minISR := int64(1)
		var dd dedup.Settings // window 0: off
		compacted := false
		if t != nil {
			_, cfgs := b.topics.Snapshot(t)
			v, _ := b.topicConfigValue(cfgs, "min.insync.replicas")
			minISR = configs.Int(v, 1)
			dd = b.dedupSettingsFor(cfgs)
			compacted = b.compactedTopic(cfgs)
		}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = -1
			sp.LogAppendTime = -1
			sp.LogStartOffset = -1
			var p *topics.Partition
			if t != nil {
				p = b.topics.Partition(rt.Topic, rp.Partition)
			}
			switch {
			case ackErr != 0:
				sp.ErrorCode, sp.ErrorMessage = ackErr, ackMsg
			case denied:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case p == nil:
				sp.ErrorCode = b.absentPartitionCode(rt.Topic, rp.Partition)
			case b.cluster != nil && (req.TransactionID != nil || hasTransactionalBatch(rp.Records)):
				sp.ErrorCode = kerr.InvalidRequest.Code
				msg := "transactions are not replicated yet: a cluster serves idempotent and plain produce only"
				sp.ErrorMessage = &msg
			case b.cluster != nil:
				// A cluster partition: its raft group appends and
				// answers once a majority has the batches (acks=1 is
				// treated as acks=all; docs/CLUSTER.md).
				if _, code := b.leaderState(p, -1); code != 0 {
					sp.ErrorCode = code
					break
				}
				st.Partitions = append(st.Partitions, sp)
				need := 0 // min.insync.replicas applies to acks=all only, as in Kafka
				if req.Acks == -1 {
					need = int(minISR)
				}
				ch, rel := b.clusterProduce(p, rp.Records, need)
				released = append(released, rel)
				waits = append(waits, waitFor{cluster: ch, rp: &st.Partitions[len(st.Partitions)-1], p: p, bytes: len(rp.Records)})
				continue
			case req.Acks == -1 && minISR > 1:
				sp.ErrorCode = kerr.NotEnoughReplicas.Code
				msg := "min.insync.replicas is " + strconv.FormatInt(minISR, 10) + " but this broker is the only replica"
				sp.ErrorMessage = &msg
			case compacted && compactedRecordsError(rp.Records, rt.Topic, rp.Partition, &sp):
			case req.TransactionID == nil && hasTransactionalBatch(rp.Records):
				// As Kafka: transactional records need a transactional id.
				sp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
				msg := "transactional records without a transactional id"
				sp.ErrorMessage = &msg
			case req.TransactionID != nil && !b.txns.AdmitProduceLocked(tx, rt.Topic, rp.Partition, rp.Records, req.Version >= 12, now, &sp):
			default:
				res, deps, ch, err := b.appendProduced(t, p, dd, rp.Records, now, req.Acks != 0)
				if err != nil {
					sp.ErrorCode = kafkaerr.Code(err)
					msg := err.Error()
					sp.ErrorMessage = &msg
					if sp.ErrorCode == kerr.KafkaStorageError.Code {
						b.lg.Error("append failed", zapPartition(p), zapErr(err))
					}
					break
				}
				sp.BaseOffset = res.BaseOffset
				sp.LogAppendTime = res.LogAppendTime
				sp.LogStartOffset = res.LogStartOffset
				// A duplicate (an idempotent retry) was appended earlier,
				// maybe by a request still waiting for its fsync: it too is
				// answered only once its records are durable.
				if ch != nil || deps.Waits() > 0 && req.Acks != 0 {
					st.Partitions = append(st.Partitions, sp)
					waits = append(waits, waitFor{ch: ch, deps: deps, rp: &st.Partitions[len(st.Partitions)-1]})
					continue
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	// The request's buffer is read into again only once every cluster
	// partition took its batches (conn.holdFrame): the connection reads
	// its next request meanwhile.
	c.holdFrame(released...)
	if req.Acks == 0 {
		// No response; as in Kafka, a failed acks=0 produce closes the
		// connection so the client notices and refreshes its metadata.
		for _, st := range resp.Topics {
			for _, sp := range st.Partitions {
				if sp.ErrorCode != 0 {
					c.closeAfterResponse = true
				}
			}
		}
		return nil, nil
	}
	if len(waits) == 0 {
		b.clusterLeaderHints(req.Version, resp)
		return resp, nil
	}
	waitFn := func() {
		defer b.clusterLeaderHints(req.Version, resp)
		for _, w := range waits {
			if w.cluster != nil {
				r := <-w.cluster
				if r.err != nil {
					w.rp.ErrorCode = clusterCode(r.err)
					msg := r.err.Error()
					w.rp.ErrorMessage = &msg
					continue
				}
				w.rp.BaseOffset, w.rp.LogAppendTime, w.rp.LogStartOffset = r.res.BaseOffset, r.res.LogAppendTime, r.res.LogStartOffset
				if !r.res.Duplicate {
					w.p.M.BytesIn.Add(float64(w.bytes))
					w.p.M.RecordsIn.Add(float64(r.res.LastOffset - r.res.BaseOffset + 1))
				}
				continue
			}
			var err error
			if w.ch != nil {
				if err = <-w.ch; err != nil {
					w.deps.Failed() // not stored: a retry must store it
				}
			}
			if err == nil {
				err = w.deps.Wait()
			}
			if err != nil {
				w.rp.ErrorCode = kafkaerr.Code(err)
				w.rp.BaseOffset = -1
				msg := err.Error()
				w.rp.ErrorMessage = &msg
			}
		}
	}
	return resp, waitFn
}

// appendProduced appends a partition's batches as Produce does: through
// the topic's dedup window (p.Log.Append without one), counted in the
// partition's metrics unless they were an idempotent retry, and handed to
// the syncer, whose channel (nil unless wait under fsync=always) reports
// their durability. The caller waits for it, then for deps (the first
// copies of the records the window dropped).
func (b *Broker) appendProduced(t *topics.Topic, p *topics.Partition, dd dedup.Settings, records []byte, now time.Time, wait bool) (slog.AppendResult, dedup.Deps, <-chan error, error) {
	res, deps, err := b.dedup.Append(t, p, dd, records, now)
	if err != nil {
		return res, deps, nil, err
	}
	if !res.Duplicate {
		p.M.BytesIn.Add(float64(len(records)))
		p.M.RecordsIn.Add(float64(res.LastOffset - res.BaseOffset + 1))
	}
	return res, deps, b.syncer.Appended(p, res.BaseOffset, res.LastOffset+1, wait), nil
}

// hasTransactionalBatch reports whether any batch has the transactional
// attribute bit set. Malformed input returns false: the log rejects it.
func hasTransactionalBatch(records []byte) bool {
	for len(records) > 0 {
		batch, rest, err := protocol.NextBatch(records)
		if err != nil {
			return false
		}
		if h, err := protocol.ParseBatchHeader(batch); err == nil && h.IsTransactional() {
			return true
		}
		records = rest
	}
	return false
}
