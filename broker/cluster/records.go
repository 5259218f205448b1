package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/log"
)

// DeleteRecords on a replicated partition (docs/CLUSTER.md). The leader
// proposes a "delete_records" internal entry in the partition's own
// raft log, and every replica moves its log start offset there as it
// applies the entry: the deleted records stay deleted whichever replica
// leads next, as Kafka's followers follow their leader's log start
// offset. Applied again after a restart, the entry changes nothing.

// partitionRecord is an internal entry of a partition group.
type partitionRecord struct {
	Op     string `json:"op"` // "delete_records"
	Offset int64  `json:"offset"`
	// Request names the proposal, whose proposer waits for its apply
	// on the leader (group.deletes).
	Request string `json:"request,omitempty"`
}

// deleteResult answers a DeleteRecords: the log start offset after it.
type deleteResult struct {
	low int64
	err error
}

// DeleteRecords moves the log start offset of partition (<topic>-<index>),
// which this broker leads, to offset (-1: the high watermark) on every
// replica, and returns the log start offset here once this replica
// applied it. An offset above the high watermark, or below -1, is
// log.ErrOffsetOutOfRange; one at or below the log start changes
// nothing. A broker that does not lead the partition answers
// *ErrNotLeader.
func (n *Node) DeleteRecords(ctx context.Context, partition string, offset int64) (int64, error) {
	n.mu.Lock()
	g := n.groups[partition]
	n.mu.Unlock()
	if g == nil || g == n.meta {
		return -1, ErrUnknownPartition
	}
	if !n.caughtUp.Load() {
		return -1, &ErrNotLeader{}
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	req := hex.EncodeToString(id[:])
	ch := make(chan deleteResult, 1)
	if !g.queue(func() { g.proposeDelete(offset, req, ch) }) {
		return -1, &ErrNotLeader{Leader: g.status().Leader}
	}
	select {
	case r := <-ch:
		return r.low, r.err
	case <-ctx.Done():
		g.queue(func() { delete(g.deletes, req) })
		return -1, ctx.Err()
	}
}

// proposeDelete checks a DeleteRecords on the leader and proposes it
// (group goroutine); ch is answered now, or once the entry applied.
func (g *group) proposeDelete(offset int64, req string, ch chan deleteResult) {
	if lead, isLeader := g.r.Leader(); !isLeader {
		ch <- deleteResult{-1, &ErrNotLeader{Leader: lead}}
		return
	}
	hw, start := g.p.HighWatermark(), g.p.LogStartOffset()
	if offset == -1 {
		offset = hw
	}
	switch {
	case offset < 0 || offset > hw:
		ch <- deleteResult{start, fmt.Errorf("%w: delete records before %d with high watermark %d", log.ErrOffsetOutOfRange, offset, hw)}
		return
	case offset <= start:
		ch <- deleteResult{start, nil}
		return
	}
	body, err := json.Marshal(partitionRecord{Op: "delete_records", Offset: offset, Request: req})
	if err == nil {
		err = g.r.ProposeInternal(body)
	}
	if err != nil { // dropped: raft is handing leadership over, say
		ch <- deleteResult{-1, &ErrNotLeader{}}
		return
	}
	if g.deletes == nil {
		g.deletes = map[string]chan deleteResult{}
	}
	g.deletes[req] = ch
}

// applyPartition applies a committed internal entry of a partition
// group (inside Process, on its goroutine): a delete_records raises the
// log start offset the group moves to once Process returned (its high
// watermark then covers every entry before this one, so the offset is
// below it).
func (g *group) applyPartition(_ uint64, body []byte) {
	var r partitionRecord
	if err := json.Unmarshal(body, &r); err != nil || r.Op != "delete_records" {
		g.n.logger.Warn("unknown internal entry in a partition's log", zap.String("group", g.name), zap.ByteString("body", body))
		return
	}
	g.deleteTo = max(g.deleteTo, r.Offset)
	if ch, ok := g.deletes[r.Request]; ok && r.Request != "" {
		delete(g.deletes, r.Request)
		g.deleted = append(g.deleted, ch)
	}
}

// moveLogStart moves the log start offset to what applied delete_records
// entries asked (group goroutine, after Process) and answers their
// proposers here.
func (g *group) moveLogStart() {
	low, err := g.p.LogStartOffset(), error(nil)
	if g.deleteTo > low {
		low, err = g.p.DeleteRecordsBefore(min(g.deleteTo, g.p.HighWatermark()))
		if err != nil && !errors.Is(err, log.ErrClosed) {
			// A storage error: the log is failed from now on, and this
			// is not retried each loop (a restart applies it again).
			g.n.logger.Error("cannot move a partition's log start offset", zap.String("group", g.name), zap.Error(err))
			g.deleteTo = 0
		} else if err == nil && g.n.cfg.OnHighWatermark != nil {
			g.n.cfg.OnHighWatermark(g.name) // long polls below the new start learn of it
		}
	}
	for _, ch := range g.deleted {
		ch <- deleteResult{low, err}
	}
	g.deleted = g.deleted[:0]
}

// failDeletes answers the DeleteRecords waiting here with ErrNotLeader
// naming leader (0: none known): leadership was lost, or the group
// stopped, and their entries may never commit here (the client
// retries).
func (g *group) failDeletes(leader uint64) {
	for req, ch := range g.deletes {
		ch <- deleteResult{-1, &ErrNotLeader{Leader: leader}}
		delete(g.deletes, req)
	}
	for _, ch := range g.deleted {
		ch <- deleteResult{-1, &ErrNotLeader{Leader: leader}}
	}
	g.deleted = g.deleted[:0]
}
