package broker

// Share-partition offsets for the admin APIs DescribeShareGroupOffsets
// (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92).

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shoal-mq/shoal/sharegroup"
	"github.com/shoal-mq/shoal/sharegroup/store"
)

// describeOffset returns the SPSO and lag (KIP-1226) of a share-partition,
// or -1/-1 when it has no state. What it returns is durable: with an
// acknowledgement's write in flight (shareCoordinator.acknowledge), it
// answers once that write is; if the write fails, from the state reloaded.
func (c *shareCoordinator) describeOffset(key store.Key, st shareGroupSettings, lp *partition) (start, lag int64, code int16) {
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
		start, lag = p.SPSO(), p.Lag(lp.log.HighWatermark())
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
func (c *shareCoordinator) resetOffset(key store.Key, st shareGroupSettings, lp *partition, offset int64) int16 {
	ls, hw := lp.log.LogStartOffset(), lp.log.HighWatermark()
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
	if _, _, code := c.b.partitionByID(key.TopicID, key.Partition); code != 0 {
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
		c.lg.Error("resetting share-partition failed", zapShareKey(key), zapErr(err))
		return shareErrorCode(err)
	}
	return 0
}
