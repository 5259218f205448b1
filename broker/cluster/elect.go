package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/replica"
)

// Preferred leader elections (Kafka's ElectLeaders, election type
// PREFERRED), as a user asks for them after a failover moved leaders
// away, or to move them back sooner than the automatic rebalance
// (balance) would.
//
// Kafka's controller elects by decree: it writes the new leader into
// the metadata log. Here each partition's raft group elects its own
// leader, so the metadata log carries an instruction instead: an
// elect_preferred record naming the partitions, which every broker
// applies and the leader of each acts on, handing leadership to the
// preferred replica through raft's leadership transfer (as balance
// does). The record holds a deadline, the request's, so that a broker
// replaying its log after a restart, or applying it late, does not act
// on an old request; and only a broker caught up with the metadata log
// acts on it at all.
//
// The broker asked answers once the preferred replicas lead (the
// leaders they publish in the metadata log), where Kafka's controller
// answers once its decree is committed: a transfer can fail (the
// preferred replica cannot catch up within an election timeout), and
// the answer says whether it happened.

// ErrElectionNotNeeded is an election of a preferred replica that
// leads already (Kafka's ELECTION_NOT_NEEDED).
var ErrElectionNotNeeded = errors.New("cluster: the preferred replica is the leader already")

// ErrPreferredNotAvailable is an election of a preferred replica that
// cannot lead: fenced, or not in the partition's ISR (Kafka's
// PREFERRED_LEADER_NOT_AVAILABLE). The error returned wraps it with the
// reason.
var ErrPreferredNotAvailable = errors.New("cluster: the preferred replica is not available")

// electRequest is an elect_preferred record's body.
type electRequest struct {
	Partitions []electPartition `json:"partitions"`
	// Until is the request's deadline (Unix milliseconds): applied
	// later, the record is not acted on.
	Until int64 `json:"until"`
}

type electPartition struct {
	Name    string   `json:"name"` // <topic>-<index>
	TopicID [16]byte `json:"topic_id"`
}

// ElectPreferred elects the preferred replica (the first) of each
// partition (<topic>-<index>) its leader, and returns each partition's
// outcome: nil once the preferred replica leads; ErrUnknownPartition;
// ErrElectionNotNeeded; ErrPreferredNotAvailable (wrapped) when it is
// fenced or not in the ISR the leader last published; ctx's error when
// it does not lead by ctx's end (a transfer that did not happen).
func (n *Node) ElectPreferred(ctx context.Context, names []string) map[string]error {
	out := make(map[string]error, len(names))
	if err := n.WaitCaughtUp(ctx); err != nil {
		for _, name := range names {
			out[name] = err
		}
		return out
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	req := &electRequest{Until: deadline.UnixMilli()}
	type target struct {
		preferred uint64
		topicID   [16]byte
	}
	want := map[string]target{} // the partitions to wait for
	n.mu.Lock()
	for _, name := range names {
		t, idx := n.image.partitionOf(name)
		if t == nil {
			out[name] = ErrUnknownPartition
			continue
		}
		rs := t.Partitions[idx]
		pref := rs[0]
		ps, published := n.image.Partitions[name]
		switch {
		case published && ps.Leader == pref:
			out[name] = ErrElectionNotNeeded
		case n.image.Fenced[pref]:
			out[name] = fmt.Errorf("%w: broker %d is fenced", ErrPreferredNotAvailable, pref)
		case !published || !slices.Contains(ps.ISR, pref):
			out[name] = fmt.Errorf("%w: replica %d is not in the ISR", ErrPreferredNotAvailable, pref)
		default:
			if _, dup := want[name]; !dup {
				want[name] = target{pref, t.ID}
				req.Partitions = append(req.Partitions, electPartition{Name: name, TopicID: t.ID})
			}
		}
	}
	n.mu.Unlock()
	if len(want) == 0 {
		return out
	}
	if outcome, err := n.propose(ctx, record{Op: "elect_preferred", Elect: req}); err != nil || outcome != "" {
		if err == nil {
			err = fmt.Errorf("cluster: elect_preferred: %s", outcome)
		}
		for name := range want {
			out[name] = err
		}
		return out
	}
	poll := time.NewTicker(n.cfg.Tick / 2)
	defer poll.Stop()
	for {
		n.mu.Lock()
		for name, w := range want {
			if t := n.image.topicOf(name); t == nil || t.ID != w.topicID { // deleted meanwhile
				out[name] = ErrUnknownPartition
				delete(want, name)
			} else if ps, ok := n.image.Partitions[name]; ok && ps.Leader == w.preferred {
				out[name] = nil
				delete(want, name)
			}
		}
		n.mu.Unlock()
		if len(want) == 0 {
			return out
		}
		select {
		case <-ctx.Done():
			for name := range want {
				out[name] = ctx.Err()
			}
			return out
		case <-n.stop:
			for name := range want {
				out[name] = errors.New("cluster: node closed")
			}
			return out
		case <-poll.C:
		}
	}
}

// applyElect acts on an applied elect_preferred record (metadata
// group's goroutine): each group it names that this broker runs hands
// leadership to its preferred replica whenever it leads, until the
// request's deadline (electPreferred). Not on a broker still catching
// up with the metadata log (replaying it after a restart), nor past the
// deadline.
func (n *Node) applyElect(req *electRequest) {
	until := time.UnixMilli(req.Until)
	if !n.caughtUp.Load() || !time.Now().Before(until) {
		return
	}
	for _, p := range req.Partitions {
		n.mu.Lock()
		g := n.groups[p.Name]
		n.mu.Unlock()
		if g != nil && g.topicID == p.TopicID {
			queued := g.queue(func() {
				if g.electUntil.IsZero() { // a new election: try at once
					g.electNext, g.electWait = time.Time{}, 0
				} // else one asked again: its waits go on (a client retrying does not make more tries)
				if until.After(g.electUntil) {
					g.electUntil = until
				}
				g.electPreferred(time.Now())
			})
			if !queued {
				n.logger.Warn("preferred leader election: the partition's work queue is full; not asked", zap.String("group", p.Name))
			}
		}
	}
}

// electPreferred, on a partition's leader that is not its preferred
// replica, while a preferred election asked of it runs (electUntil),
// hands leadership to the preferred one when it is in the ISR
// (Replica.InSync) and not fenced, as Kafka's preferred election
// requires (checked each tick until then). raft refuses proposals while
// the transfer is pending, so a transfer not done within transferTicks
// is cancelled (group.transfer): a replica in the ISR whose disk is
// slow costs the leader's produces that long a try, where it cost them
// whole election timeouts (review: over a thousand refusals in 4 s),
// while a healthy one catches up and campaigns in an fsync and a round
// trip. (A gate of the whole log durable there never passed under a
// steady produce load; review.) After a try that did not happen it
// waits one election timeout, then twice as long each time, until the
// deadline; a third replica that takes over meanwhile follows the
// request too. The election is over once the preferred replica has
// led: one that fails later is not handed leadership again by it.
// Group goroutine: at the record's apply and each tick.
func (g *group) electPreferred(now time.Time) {
	if g.electUntil.IsZero() {
		return
	}
	lead, isLeader := g.r.Leader()
	if !now.Before(g.electUntil) || g.preferred == 0 || lead == g.preferred {
		g.electUntil, g.electWait = time.Time{}, 0
		return
	}
	if !isLeader || now.Before(g.electNext) {
		return
	}
	if g.n.Fenced(g.preferred) || !slices.Contains(g.r.InSync(), g.preferred) {
		return // checked again next tick
	}
	g.electWait = min(max(2*g.electWait, electionTimeout(g.n.cfg.Tick)), 32*electionTimeout(g.n.cfg.Tick))
	g.electNext = now.Add(g.electWait)
	g.n.logger.Info("preferred leader election: handing leadership to the preferred replica",
		zap.String("group", g.name), zap.Uint64("to", g.preferred))
	if err := g.transfer(g.preferred); err != nil {
		g.n.logger.Warn("leadership transfer failed", zap.String("group", g.name), zap.Error(err))
	}
}

// electionTimeout is raft's election timeout with ticks of tick
// (replica.Config.ElectionTick, whose default the groups use).
func electionTimeout(tick time.Duration) time.Duration {
	return time.Duration(replica.DefaultElectionTick) * tick
}
