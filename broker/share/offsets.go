package share

// Share-partition offsets for the admin APIs DescribeShareGroupOffsets
// (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92): the
// handlers decode, call one of the methods at the end of this file, and
// encode.

import (
	"bytes"
	"errors"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/topics"
	"github.com/shoal-mq/shoal/sharegroup"
	"github.com/shoal-mq/shoal/sharegroup/store"
)

// describeOffset returns the SPSO and lag (KIP-1226) of a share-partition,
// or -1/-1 when it has no state. What it returns is durable: with an
// acknowledgement's write in flight (Coordinator.acknowledge), it
// answers once that write is; if the write fails, from the state reloaded.
func (c *Coordinator) describeOffset(key store.Key, st shareGroupSettings, lp *topics.Partition) (start, lag int64, code int16) {
	sp := c.part(key)
	for retried := false; ; retried = true {
		sp.mu.Lock()
		err := sp.prepareLocked(time.Now(), st, false)
		switch {
		case errors.Is(err, errNoShareState):
			sp.mu.Unlock()
			return -1, -1, 0
		case err != nil:
			sp.mu.Unlock()
			return -1, -1, shareErrorCode(err)
		}
		p := sp.mu.p
		start, lag = p.SPSO(), p.Lag(lp.Log.HighWatermark())
		inFlight := sp.lastAckWriteLocked()
		sp.mu.Unlock()
		if inFlight == nil {
			return start, lag, 0
		}
		if err := inFlight.Wait(); err == nil {
			return start, lag, 0
		} else if retried {
			return -1, -1, shareErrorCode(err)
		}
	}
}

// resetOffset discards a share-partition's in-flight state and restarts
// it at offset (a new state epoch), creating it if it has no state.
// offset -1 means the high watermark, -2 the log start; others are
// clamped into [log start, high watermark].
func (c *Coordinator) resetOffset(key store.Key, st shareGroupSettings, lp *topics.Partition, offset int64) int16 {
	ls, hw := lp.Log.LogStartOffset(), lp.Log.HighWatermark()
	switch {
	case offset == -1:
		offset = hw
	case offset == -2:
		offset = ls
	case offset < 0:
		return kerr.InvalidRequest.Code
	default:
		offset = min(max(offset, ls), hw)
	}
	sp := c.part(key)
	sp.mu.Lock()
	// The topic may have been deleted since the caller found it. Its
	// share state is deleted under this lock after it left the registry
	// (deleteShareTopicState), so checked here no state outlives it.
	if _, _, code := c.o.Topics.PartitionByID(key.TopicID, key.Partition); code != 0 {
		sp.mu.Unlock()
		return kerr.UnknownTopicOrPartition.Code
	}
	now := time.Now()
	err := sp.prepareLocked(now, st, false)
	switch {
	case errors.Is(err, errNoShareState):
		var p *sharegroup.Partition
		var eff sharegroup.Effects
		if p, eff, err = sharegroup.New(st.partitionConfig(), 0, offset); err == nil {
			if err = sp.writeLocked(eff.Records); err == nil {
				sp.mu.p = p
			}
		}
	case err == nil:
		p := sp.mu.p
		err = sp.writeLocked(p.Reset(p.StateEpoch()+1, offset).Records)
	}
	sp.armLocked(now)
	sp.mu.Unlock()
	sp.waiters.notify()
	if err != nil {
		c.lg.Error("resetting share-partition failed", zapShareKey(key), zap.Error(err))
		return shareErrorCode(err)
	}
	return 0
}

// AlterOffsets serves AlterShareGroupOffsets (api_91_alter_share_group_offsets.go has its rules).
func (sc *Coordinator) AlterOffsets(req *kmsg.AlterShareGroupOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	fail := func(code int16, msg string) kmsg.Response {
		resp.ErrorCode = code
		resp.ErrorMessage = &msg
		return resp
	}
	if req.GroupID == "" {
		return fail(kerr.InvalidRequest.Code, "GroupId must be set.")
	}
	if sc.classicGroupExists(req.GroupID) {
		return fail(kerr.GroupIDNotFound.Code, "Group "+req.GroupID+" is not a share group.")
	}
	g, err := sc.lockGroup(req.GroupID, true)
	if err != nil {
		sc.lg.Error("creating share group failed", zap.Error(err))
		return fail(kerr.CoordinatorNotAvailable.Code, err.Error())
	}
	defer g.mu.Unlock()
	if len(g.mu.members) > 0 {
		return fail(kerr.NonEmptyGroup.Code, "The group is not empty.")
	}
	st := sc.shareSettings(req.GroupID)
	for _, rt := range req.Topics {
		ot := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t := sc.o.Topics.Get(rt.Topic)
		if t != nil {
			ot.TopicID = t.ID
		}
		for _, rp := range rt.Partitions {
			op := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			lp := sc.o.Topics.PartitionOf(t, rp.Partition)
			if lp == nil {
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				op.ErrorCode = sc.resetOffset(store.Key{Group: req.GroupID, TopicID: t.ID, Partition: rp.Partition}, st, lp, rp.StartOffset)
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	g.bumpLocked()
	return resp
}

// DeleteOffsets serves DeleteShareGroupOffsets (api_92_delete_share_group_offsets.go has its rules).
func (sc *Coordinator) DeleteOffsets(req *kmsg.DeleteShareGroupOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	fail := func(code int16, msg string) kmsg.Response {
		resp.ErrorCode = code
		resp.ErrorMessage = &msg
		return resp
	}
	g, _ := sc.lockGroup(req.GroupID, false)
	if g == nil {
		return fail(kerr.GroupIDNotFound.Code, "Group "+req.GroupID+" is not a share group.")
	}
	defer g.mu.Unlock()
	if len(g.mu.members) > 0 {
		return fail(kerr.NonEmptyGroup.Code, "The group is not empty.")
	}
	for _, rt := range req.Topics {
		ot := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t := sc.o.Topics.Get(rt.Topic)
		if t == nil {
			ot.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, ot)
			continue
		}
		ot.TopicID = t.ID
		if err := sc.deleteState(req.GroupID, map[[16]byte]bool{t.ID: true}); err != nil {
			sc.lg.Error("deleting share-partition state failed", zap.Error(err))
			ot.ErrorCode = kerr.KafkaStorageError.Code
			msg := err.Error()
			ot.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp
}

// DescribeOffsets serves DescribeShareGroupOffsets
// (api_90_describe_share_group_offsets.go has its rules).
func (sc *Coordinator) DescribeOffsets(req *kmsg.DescribeShareGroupOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, rg := range req.Groups {
		resp.Groups = append(resp.Groups, sc.describeGroupOffsets(rg))
	}
	return resp
}

// describeGroupOffsets describes one group's share-partitions: the ones
// asked for, or with no topics given every one with state.
func (sc *Coordinator) describeGroupOffsets(rg kmsg.DescribeShareGroupOffsetsRequestGroup) kmsg.DescribeShareGroupOffsetsResponseGroup {
	out := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
	out.GroupID = rg.GroupID
	if !sc.IsShareGroup(rg.GroupID) {
		out.ErrorCode = kerr.GroupIDNotFound.Code
		msg := "Group " + rg.GroupID + " is not a share group."
		out.ErrorMessage = &msg
		return out
	}
	st := sc.shareSettings(rg.GroupID)
	describe := func(key store.Key, lp *topics.Partition) kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition {
		rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
		rp.Partition = key.Partition
		rp.StartOffset, rp.Lag, rp.ErrorCode = sc.describeOffset(key, st, lp)
		return rp
	}
	if rg.Topics == nil {
		keys, err := sc.store.Keys(rg.GroupID)
		if err != nil {
			out.ErrorCode = kerr.KafkaStorageError.Code
			return out
		}
		sort.Slice(keys, func(i, j int) bool { return compareKeys(keys[i], keys[j]) < 0 })
		for _, k := range keys {
			t, lp, code := sc.o.Topics.PartitionByID(k.TopicID, k.Partition)
			if code != 0 {
				continue
			}
			n := len(out.Topics)
			if n == 0 || !bytes.Equal(out.Topics[n-1].TopicID[:], t.ID[:]) {
				rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				rt.Topic, rt.TopicID = t.Name, t.ID
				out.Topics = append(out.Topics, rt)
				n++
			}
			out.Topics[n-1].Partitions = append(out.Topics[n-1].Partitions, describe(k, lp))
		}
		return out
	}
	for _, rt := range rg.Topics {
		ot := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		ot.Topic = rt.Topic
		t := sc.o.Topics.Get(rt.Topic)
		if t != nil {
			ot.TopicID = t.ID
		}
		for _, p := range rt.Partitions {
			lp := sc.o.Topics.PartitionOf(t, p)
			if lp == nil {
				rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset = p, -1
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				ot.Partitions = append(ot.Partitions, rp)
				continue
			}
			ot.Partitions = append(ot.Partitions, describe(store.Key{Group: rg.GroupID, TopicID: t.ID, Partition: p}, lp))
		}
		out.Topics = append(out.Topics, ot)
	}
	return out
}
