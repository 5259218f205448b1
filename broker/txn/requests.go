package txn

import (
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/groups"
	"github.com/shoal-mq/shoal/protocol"
)

// The transaction coordinator's side of each transactional request: the
// handlers (api_22, 24, 25, 26, 28, 65, 66) decode, call one of these,
// and encode; their files keep the behaviour and version notes. Locks as
// in doc.go: each takes the one Txn.mu it needs (never two), and
// TxnOffsetCommit the group's lock under it.

// InitProducerID serves InitProducerId with a transactional id.
func (c *Coordinator) InitProducerID(req *kmsg.InitProducerIDRequest, now time.Time) (int64, int16, int16) {
	timeout := req.TransactionTimeoutMillis
	if timeout <= 0 || int64(timeout) > c.o.Setting("transaction.max.timeout.ms") {
		return -1, -1, kerr.InvalidTransactionTimeout.Code
	}
	t := c.lock(*req.TransactionalID, true)
	defer t.mu.Unlock()
	fresh := t.mu.ProducerID < 0
	retry := false
	if req.Version >= 3 && req.ProducerID >= 0 && !fresh {
		switch {
		case t.nextPendingLocked(req.ProducerID, req.ProducerEpoch):
			return -1, -1, kerr.ConcurrentTransactions.Code // the decision that answered it is still completing
		case req.ProducerID == t.mu.ProducerID && req.ProducerEpoch == t.mu.Epoch:
		case req.ProducerID == t.mu.LastProducerID && req.ProducerEpoch == t.mu.LastEpoch && t.mu.State != Ongoing:
			retry = true // the answer to the previous bump was lost
		default:
			return -1, -1, fencedCode(req.Version, 4)
		}
	}
	switch t.mu.State {
	case PrepareCommit, PrepareAbort:
		return -1, -1, kerr.ConcurrentTransactions.Code
	case Ongoing:
		if err := c.abortFencingLocked(t, now); err != nil {
			c.lg.Warn("aborting the open transaction of a re-initialised producer failed", zap.String("transactional_id", t.id), zap.Error(err))
			return -1, -1, kerr.ConcurrentTransactions.Code
		}
	}
	if retry {
		return t.mu.ProducerID, t.mu.Epoch, 0
	}
	snap := t.snapshotLocked()
	if err := c.bumpEpochLocked(t); err != nil {
		t.restoreLocked(snap)
		return -1, -1, kerr.NotCoordinator.Code
	}
	if req.Version < 3 || req.ProducerID < 0 {
		// A producer starting (no producer id named) takes the
		// transactional id over: as in Kafka (lastProducerEpoch =
		// NO_PRODUCER_EPOCH), no earlier epoch may pass as a retry of a
		// bump after this one, so a zombie's KIP-360 bump with the epoch
		// just left is fenced instead of joining the new producer's
		// epoch.
		t.mu.LastProducerID, t.mu.LastEpoch = -1, -1
	}
	t.mu.TimeoutMs = timeout
	t.mu.State = Empty
	t.mu.StartMs = -1
	if err := c.persistLocked(t, now); err != nil {
		t.restoreLocked(snap)
		return -1, -1, kerr.NotCoordinator.Code
	}
	return t.mu.ProducerID, t.mu.Epoch, 0
}

// TopicParts is one topic's partitions in an AddPartitionsToTxn.
type TopicParts struct {
	Topic      string
	Partitions []int32
}

// AddPartitions serves one transaction of an AddPartitionsToTxn: an add,
// or with verifyOnly a check. It returns a code per partition, in the
// request's order.
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, topics []TopicParts, version int16, verifyOnly bool) [][]int16 {
	now := time.Now()
	codes := make([][]int16, len(topics))
	setAll := func(code int16) [][]int16 {
		for i := range codes {
			for j := range codes[i] {
				if codes[i][j] == 0 {
					codes[i][j] = code
				}
			}
		}
		return codes
	}
	unknown := false
	for i, rt := range topics {
		codes[i] = make([]int16, len(rt.Partitions))
		for j, p := range rt.Partitions {
			if c.o.Topics.Partition(rt.Topic, p) == nil {
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
				unknown = true
			}
		}
	}
	switch {
	case unknown:
		return setAll(kerr.OperationNotAttempted.Code)
	case id == "":
		return setAll(kerr.InvalidRequest.Code)
	}
	t, code := c.lockChecked(id, pid, epoch, version, 2)
	if t == nil {
		return setAll(code)
	}
	defer t.mu.Unlock()
	switch t.mu.State {
	case PrepareCommit, PrepareAbort:
		return setAll(kerr.ConcurrentTransactions.Code)
	}
	if verifyOnly {
		for i, rt := range topics {
			for j, p := range rt.Partitions {
				if _, ok := t.mu.partitions[groups.TP{Topic: rt.Topic, Partition: p}]; !ok {
					codes[i][j] = kerr.TransactionAbortable.Code
				}
			}
		}
		return codes
	}
	if t.mu.State == Ongoing {
		have := true
		for _, rt := range topics {
			for _, p := range rt.Partitions {
				if _, ok := t.mu.partitions[groups.TP{Topic: rt.Topic, Partition: p}]; !ok {
					have = false
				}
			}
		}
		if have {
			return codes // nothing new: no write
		}
	}
	snap := t.snapshotLocked()
	t.beginLocked(now)
	for _, rt := range topics {
		for _, p := range rt.Partitions {
			t.mu.partitions[groups.TP{Topic: rt.Topic, Partition: p}] = struct{}{}
		}
	}
	if err := c.persistLocked(t, now); err != nil {
		t.restoreLocked(snap)
		return setAll(kerr.NotCoordinator.Code)
	}
	return codes
}

// AddOffsets serves AddOffsetsToTxn (api_25_add_offsets_to_txn.go has its rules).
func (c *Coordinator) AddOffsets(req *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	now := time.Now()
	switch {
	case req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	case req.Group == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	t, code := c.lockChecked(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Version, 2)
	if t == nil {
		resp.ErrorCode = code
		return resp
	}
	defer t.mu.Unlock()
	switch t.mu.State {
	case PrepareCommit, PrepareAbort:
		resp.ErrorCode = kerr.ConcurrentTransactions.Code
		return resp
	case Ongoing:
		if _, ok := t.mu.groups[req.Group]; ok {
			return resp
		}
	}
	snap := t.snapshotLocked()
	t.beginLocked(now)
	t.mu.groups[req.Group] = struct{}{}
	if err := c.persistLocked(t, now); err != nil {
		t.restoreLocked(snap)
		resp.ErrorCode = kerr.NotCoordinator.Code
	}
	return resp
}

// EndTxn serves EndTxn (api_26_end_txn.go has its rules).
func (c *Coordinator) EndTxn(req *kmsg.EndTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	t := c.lock(req.TransactionalID, false)
	if t == nil {
		resp.ErrorCode = kerr.InvalidProducerIDMapping.Code
		return resp
	}
	defer t.mu.Unlock()
	bump := req.Version >= 5
	same := func(st State) int16 {
		if (st == PrepareCommit || st == CompleteCommit) == req.Commit {
			return 0
		}
		return kerr.InvalidTxnState.Code
	}
	answer := func() kmsg.Response {
		if bump && resp.ErrorCode == 0 {
			resp.ProducerID, resp.ProducerEpoch = t.mu.ProducerID, t.mu.Epoch
			if n := t.mu.Next; n != nil {
				resp.ProducerID, resp.ProducerEpoch = n.ProducerID, n.Epoch
			}
		}
		return resp
	}
	st := t.mu.State
	if bump && t.mu.LastEnd && req.ProducerID == t.mu.LastProducerID && req.ProducerEpoch == t.mu.LastEpoch {
		// A retry of the EndTxn that moved the epoch.
		switch st {
		case CompleteCommit, CompleteAbort:
			resp.ErrorCode = same(st)
			return answer()
		case PrepareCommit, PrepareAbort:
			if resp.ErrorCode = same(st); resp.ErrorCode == 0 {
				resp.ErrorCode = kerr.ConcurrentTransactions.Code
			}
			return answer()
		}
	}
	if resp.ErrorCode = t.checkProducerLocked(req.ProducerID, req.ProducerEpoch, req.Version, 2); resp.ErrorCode != 0 {
		return resp
	}
	switch st {
	case Ongoing:
		if err := c.endTxnLocked(t, req.Commit, bump, time.Now()); err != nil {
			resp.ErrorCode = kerr.NotCoordinator.Code
		}
	case CompleteCommit, CompleteAbort, Empty:
		switch {
		case bump && !req.Commit:
			// Nothing open: an empty abort, moving the epoch.
			if err := c.endTxnLocked(t, false, true, time.Now()); err != nil {
				resp.ErrorCode = kerr.NotCoordinator.Code
			}
		case bump:
			// A retry comes with the epoch just left (above); at the
			// current one there is nothing to commit.
			resp.ErrorCode = kerr.InvalidTxnState.Code
		case st == Empty:
			resp.ErrorCode = kerr.InvalidTxnState.Code
		default:
			resp.ErrorCode = same(st)
		}
	case PrepareCommit, PrepareAbort:
		if resp.ErrorCode = same(st); resp.ErrorCode == 0 {
			resp.ErrorCode = kerr.ConcurrentTransactions.Code
		}
	default:
		resp.ErrorCode = kerr.InvalidTxnState.Code
	}
	return answer()
}

// TxnOffsetCommit serves TxnOffsetCommit (api_28_txn_offset_commit.go has its rules).
func (c *Coordinator) TxnOffsetCommit(req *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	now := time.Now()
	maxMetadata := c.o.Groups.MetadataMaxBytes()
	codes := make([][]int16, len(req.Topics))
	for i, rt := range req.Topics {
		codes[i] = make([]int16, len(rt.Partitions))
	}
	setAll := func(code int16) {
		for i := range codes {
			for j := range codes[i] {
				if codes[i][j] == 0 {
					codes[i][j] = code
				}
			}
		}
	}
	answer := func() kmsg.Response {
		for i, rt := range req.Topics {
			t := kmsg.NewTxnOffsetCommitResponseTopic()
			t.Topic = rt.Topic
			for j, p := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, codes[i][j]
				t.Partitions = append(t.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	}
	switch {
	case req.TransactionalID == "":
		setAll(kerr.InvalidRequest.Code)
		return answer()
	case req.Group == "":
		setAll(kerr.InvalidGroupID.Code)
		return answer()
	}
	t := c.lock(req.TransactionalID, false)
	if t == nil {
		setAll(kerr.InvalidProducerIDMapping.Code)
		return answer()
	}
	defer t.mu.Unlock()
	code := t.checkProducerLocked(req.ProducerID, req.ProducerEpoch, req.Version, 0)
	if code == kerr.ProducerFenced.Code {
		code = kerr.InvalidProducerEpoch.Code
	}
	implicit := false // the group joins the transaction with these offsets (v5+)
	if code == 0 {
		_, added := t.mu.groups[req.Group]
		switch {
		case added && t.mu.State == Ongoing:
		case req.Version < 5:
			code = kerr.InvalidTxnState.Code
		case t.mu.State == PrepareCommit || t.mu.State == PrepareAbort:
			code = kerr.ConcurrentTransactions.Code
		default:
			implicit = true
		}
	}
	if code == 0 {
		// The last transaction's completion may still be applying its
		// offsets, which takes group locks: it is waited for (as the
		// write below would) before ours is taken.
		if err := c.settleLocked(t, now); err != nil {
			code = kerr.NotCoordinator.Code
		}
	}
	var g *groups.Group
	if code == 0 {
		if h := c.o.OffsetBeforeLock; h != nil {
			h(req.Group)
		}
		g, code = c.o.Groups.LockTxnCommit(req)
	}
	if code != 0 {
		setAll(code)
		return answer()
	}
	// The group stays locked until the offsets are pending, durable and
	// stamped: offset expiry and deletions (OffsetDelete, DeleteGroups,
	// a deleted topic) read the pending offsets under this lock, so none
	// of them can decide on a partition without this commit and write
	// its deletion after it.
	defer g.ReleaseTxnCommit(now)
	snap := t.snapshotLocked()
	if implicit {
		t.beginLocked(now)
		t.mu.groups[req.Group] = struct{}{}
	}
	type cand struct {
		tp groups.TP
		oc groups.OffsetCommit
	}
	var cands []cand
	for i, rt := range req.Topics {
		for j, p := range rt.Partitions {
			switch {
			case c.o.Topics.Partition(rt.Topic, p.Partition) == nil:
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
			case p.Metadata != nil && groups.UTF16Len(*p.Metadata) > maxMetadata:
				codes[i][j] = kerr.OffsetMetadataTooLarge.Code
			default:
				oc := groups.OffsetCommit{Offset: p.Offset, LeaderEpoch: -1, CommitTime: now}
				if req.Version >= 2 {
					oc.LeaderEpoch = p.LeaderEpoch
				}
				if p.Metadata != nil {
					oc.Metadata = *p.Metadata
				}
				cands = append(cands, cand{groups.TP{Topic: rt.Topic, Partition: p.Partition}, oc})
			}
		}
	}
	if len(cands) == 0 {
		t.restoreLocked(snap)
		return answer()
	}
	// A partition named twice counts once, its last entry winning (Kafka
	// turns the request into a map); the undo below needs one entry each.
	idx := make(map[groups.TP]int, len(cands))
	uniq := cands[:0]
	for _, cd := range cands {
		if i, ok := idx[cd.tp]; ok {
			uniq[i] = cd
			continue
		}
		idx[cd.tp] = len(uniq)
		uniq = append(uniq, cd)
	}
	cands = uniq
	if h := c.o.OffsetBeforeAdd; h != nil {
		h(req.Group)
	}
	prev := map[groups.TP]groups.OffsetCommit{} // the pending offsets replaced
	tps := make([]groups.TP, len(cands))
	for i, cd := range cands {
		if oc, ok := t.mu.offsets[req.Group][cd.tp]; ok {
			prev[cd.tp] = oc
		}
		c.addPendingOffset(t, req.Group, cd.tp, cd.oc)
		tps[i] = cd.tp
	}
	if err := c.persistStampedLocked(t, now); err != nil {
		// Undo: restore replaced offsets, drop new ones.
		for _, tp := range tps {
			if oc, ok := prev[tp]; ok {
				c.restorePendingOffsetLocked(t, req.Group, tp, oc)
			} else {
				c.dropPendingOffsetLocked(t, req.Group, tp)
			}
		}
		t.restoreLocked(snap)
		setAll(kerr.NotCoordinator.Code)
		return answer()
	}
	c.stampLocked(t, req.Group, tps)
	return answer()
}

// Describe serves DescribeTransactions (api_65_describe_transactions.go).
func (c *Coordinator) Describe(req *kmsg.DescribeTransactionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		ts := kmsg.NewDescribeTransactionsResponseTransactionState()
		ts.TransactionalID = id
		t := c.lock(id, false)
		if t == nil || t.mu.ProducerID < 0 {
			if t != nil {
				t.mu.Unlock()
			}
			ts.ErrorCode = kerr.TransactionalIDNotFound.Code
			ts.ProducerID, ts.ProducerEpoch, ts.StartTimestamp = -1, -1, -1
			resp.TransactionStates = append(resp.TransactionStates, ts)
			continue
		}
		ts.State = t.mu.State.String()
		ts.TimeoutMillis = t.mu.TimeoutMs
		ts.StartTimestamp = t.mu.StartMs
		ts.ProducerID, ts.ProducerEpoch = t.mu.ProducerID, t.mu.Epoch
		names, parts := groups.ByTopic(t.mu.partitions)
		t.mu.Unlock()
		for _, n := range names {
			tt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			tt.Topic = n
			tt.Partitions = parts[n]
			ts.Topics = append(ts.Topics, tt)
		}
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp
}

// List serves ListTransactions (api_66_list_transactions.go).
func (c *Coordinator) List(req *kmsg.ListTransactionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var re *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		var err error
		if re, err = regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$"); err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp
		}
	}
	states := map[State]bool{}
	for _, name := range req.StateFilters {
		if st, ok := parseTxnState(name); ok {
			states[st] = true
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	pids := map[int64]bool{}
	for _, id := range req.ProducerIDFilters {
		pids[id] = true
	}
	now := time.Now().UnixMilli()
	for _, t := range c.all() {
		t.mu.Lock()
		pid, st, start := t.mu.ProducerID, t.mu.State, t.mu.StartMs
		t.mu.Unlock()
		switch {
		case pid < 0:
			continue
		case len(req.StateFilters) > 0 && !states[st]:
			continue
		case len(pids) > 0 && !pids[pid]:
			continue
		case req.Version >= 1 && req.DurationFilterMillis >= 0 && (start < 0 || now-start <= req.DurationFilterMillis):
			continue
		case re != nil && !re.MatchString(t.id):
			continue
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = t.id, pid, st.String()
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return resp
}

// AdmitProduceLocked checks a transactional produce to one partition
// against its txn (nil: unknown transactional id), filling sp's error on
// refusal. With implicit (Produce v12+, KIP-890 part 2) a partition not
// yet in the transaction is added to it, starting the transaction when
// none is open, as Kafka's partition leader asks its coordinator to. The
// add is made in memory only: the batch itself, durable before the
// produce is answered, records that the partition is in the transaction,
// and recover finds it there after a crash (an open transaction in a
// partition whose producer's txn does not list it). tx.mu held.
func (c *Coordinator) AdmitProduceLocked(tx *Txn, topic string, partition int32, records []byte, implicit bool, now time.Time, sp *kmsg.ProduceResponseTopicPartition) bool {
	refuse := func(code int16, msg string) bool {
		sp.ErrorCode = code
		sp.ErrorMessage = &msg
		return false
	}
	if tx == nil {
		return refuse(kerr.InvalidProducerIDMapping.Code, "unknown transactional id")
	}
	// Every batch is checked: one plain batch in front must not carry a
	// transactional one past the checks, opening a transaction in the log
	// that the coordinator never ends (its LSO would stop there).
	for rest := records; len(rest) > 0; {
		batch, next, err := protocol.NextBatch(rest)
		if err != nil {
			return true // the log judges malformed batches
		}
		rest = next
		h, err := protocol.ParseBatchHeader(batch)
		if err != nil || !h.IsTransactional() {
			continue // plain batches: the log judges them
		}
		switch {
		case tx.nextPendingLocked(h.ProducerID, h.ProducerEpoch):
			return refuse(kerr.ConcurrentTransactions.Code, "the previous transaction is still being completed")
		case h.ProducerID != tx.mu.ProducerID:
			return refuse(kerr.InvalidProducerIDMapping.Code, "the producer id is not the transactional id's")
		case h.ProducerEpoch != tx.mu.Epoch:
			return refuse(kerr.InvalidProducerEpoch.Code, "the producer epoch is not the transactional id's current epoch")
		}
		tp := groups.TP{Topic: topic, Partition: partition}
		if _, ok := tx.mu.partitions[tp]; ok && tx.mu.State == Ongoing {
			continue
		}
		if !implicit {
			return refuse(kerr.InvalidTxnState.Code, "the partition was not added to the transaction")
		}
		switch tx.mu.State {
		case PrepareCommit, PrepareAbort:
			return refuse(kerr.ConcurrentTransactions.Code, "the previous transaction is still being completed")
		case Ongoing:
		default: // Empty, Complete*: this batch starts a transaction
			// After a decision that kept the epoch, a replay of it at
			// start would end this transaction too: wait until the
			// previous completion is durable. A bumped one skips
			// partitions already marked, so it need not be waited for.
			// A failed one is redone first too.
			if cmp := tx.mu.completing; cmp != nil && (!cmp.bumped || closed(cmp.done) && cmp.err != nil) {
				if err := c.settleLocked(tx, now); err != nil {
					return refuse(kerr.KafkaStorageError.Code, "the previous transaction's completion could not be written: "+err.Error())
				}
			}
			tx.beginLocked(now)
		}
		tx.mu.partitions[tp] = struct{}{}
	}
	return true
}
