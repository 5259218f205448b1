package workload

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupConsume is a consumer group committing synchronously: each member
// polls (rebalances held off while it works, kgo.BlockRebalanceOnPoll),
// commits what it polled with OffsetCommit and waits for the answer. It
// must consume every record at least once and never consume a record
// again once a commit past it was answered: a member that takes a
// partition over starts at the last answered commit or later, and at an
// offset some member committed (or the log start), never past records
// nobody committed.
type GroupConsume struct {
	Common
	Members  int
	Protocol Protocol
	Static   bool
	// Churn, if set, replaces a random member this often.
	Churn time.Duration
	// MaxPollRecords bounds one poll, and so one commit.
	MaxPollRecords int
}

// GroupConsumeResult is what a GroupConsume run saw.
type GroupConsumeResult struct {
	// Consumed: violations are records polled after a commit past them
	// was answered, and members starting a partition past records
	// nobody committed.
	Consumed
	// Commits counts commits answered without error, Failed those that
	// were not.
	Commits, Failed int
	Churned         int
	Restarts        int
}

func (r GroupConsumeResult) String() string {
	return fmt.Sprintf("%s, %d commits answered (%d failed)", r.Consumed, r.Commits, r.Failed)
}

type delivery struct {
	offset int64
	at     time.Time
	member int
}

type answeredCommit struct {
	offset int64 // the next offset to consume
	at     time.Time
	member int
}

// groupLog is what the members of a GroupConsume did.
type groupLog struct {
	mu         sync.Mutex
	deliveries map[int32][]delivery
	commits    map[int32][]answeredCommit
	// attempts are every commit sent, answered or not: partition →
	// offset → when it was first sent.
	attempts map[int32]map[int64]time.Time
	nCommits int
	nFailed  int
}

// Run produces the input, consumes it until every record was polled and
// the group's committed offsets reach the end, and checks the history.
func (c GroupConsume) Run(ctx context.Context) (GroupConsumeResult, error) {
	var res GroupConsumeResult
	c.defaults()
	if c.Members <= 0 {
		c.Members = 3
	}
	if c.MaxPollRecords <= 0 {
		c.MaxPollRecords = 100
	}
	topic, group := c.Name+"-in", c.Name+"-g"
	if err := c.setup(ctx, topic); err != nil {
		return res, err
	}
	if err := c.produceInput(ctx, topic); err != nil {
		return res, err
	}
	ends, err := c.endOffsets(ctx, topic)
	if err != nil {
		return res, err
	}
	lg := &groupLog{deliveries: map[int32][]delivery{}, commits: map[int32][]answeredCommit{}, attempts: map[int32]map[int64]time.Time{}}
	crew := newCrew(ctx, c.Members, c.Churn, c.Seed, func(ctx context.Context, idx int, stop <-chan struct{}) error {
		return c.runMember(ctx, idx, group, topic, stop, lg)
	})
	adm, err := c.directClient()
	if err != nil {
		crew.stop()
		return res, err
	}
	defer adm.Close()
	done := false
	for !done && ctx.Err() == nil {
		crew.tick()
		time.Sleep(250 * time.Millisecond)
		done = lg.seenAll(ends) && c.committedAll(ctx, adm, group, topic, ends)
	}
	res.Restarts, res.Churned, res.Errors = crew.stop()
	lg.check(&res, ends)
	if !done {
		return res, fmt.Errorf("the group did not consume and commit everything: %w", ctx.Err())
	}
	return res, nil
}

func (c GroupConsume) runMember(ctx context.Context, idx int, group, topic string, stop <-chan struct{}, lg *groupLog) error {
	opts := append(c.memberOpts(idx, group, topic, c.Protocol, c.Static),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollRecords(pctx, c.MaxPollRecords)
		cancel()
		if fs.IsClientClosed() || ctx.Err() != nil {
			cl.AllowRebalance()
			return nil
		}
		recs := fs.Records()
		if len(recs) == 0 {
			cl.AllowRebalance()
			continue
		}
		now := time.Now()
		lg.mu.Lock()
		for _, r := range recs {
			lg.deliveries[r.Partition] = append(lg.deliveries[r.Partition], delivery{r.Offset, now, idx})
		}
		lg.mu.Unlock()
		c.work(stop)
		offs := cl.UncommittedOffsets()
		lg.attempted(offs, time.Now())
		cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			lg.answered(idx, req, resp, err, time.Now())
		})
		cl.AllowRebalance()
	}
}

// answered records an OffsetCommit's outcome: each partition answered
// without error counts, with the offset its request carried and when
// the answer came.
func (lg *groupLog) answered(idx int, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error, at time.Time) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if err != nil || resp == nil || req == nil {
		lg.nFailed++
		return
	}
	sent := map[string]map[int32]int64{}
	for _, t := range req.Topics {
		sent[t.Topic] = map[int32]int64{}
		for _, p := range t.Partitions {
			sent[t.Topic][p.Partition] = p.Offset
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			off, ok := sent[t.Topic][p.Partition]
			if kerr.ErrorForCode(p.ErrorCode) != nil || !ok {
				lg.nFailed++
				continue
			}
			lg.nCommits++
			lg.commits[p.Partition] = append(lg.commits[p.Partition], answeredCommit{off, at, idx})
		}
	}
}

// attempted records the offsets of a commit about to be sent.
func (lg *groupLog) attempted(offs map[string]map[int32]kgo.EpochOffset, at time.Time) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for _, ps := range offs {
		for p, eo := range ps {
			m := lg.attempts[p]
			if m == nil {
				m = map[int64]time.Time{}
				lg.attempts[p] = m
			}
			if _, ok := m[eo.Offset]; !ok {
				m[eo.Offset] = at
			}
		}
	}
}

func (c GroupConsume) endOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	cl, err := c.directClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	lo, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return ends, lo.Error()
}

func (c GroupConsume) committedAll(ctx context.Context, cl *kgo.Client, group, topic string, ends map[int32]int64) bool {
	got, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return false
	}
	for p, end := range ends {
		o, ok := got.Lookup(topic, p)
		if !ok || o.Err != nil || o.At < end {
			return false
		}
	}
	return true
}

func (lg *groupLog) seenAll(ends map[int32]int64) bool {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for p, end := range ends {
		seen := make([]bool, end)
		n := int64(0)
		for _, d := range lg.deliveries[p] {
			if d.offset < end && !seen[d.offset] {
				seen[d.offset] = true
				n++
			}
		}
		if n < end {
			return false
		}
	}
	return true
}

// check fills res from the history: a delivery of an offset below a
// commit answered before it is a violation.
func (lg *groupLog) check(res *GroupConsumeResult, ends map[int32]int64) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	res.Commits, res.Failed = lg.nCommits, lg.nFailed
	for p, end := range ends {
		ds := lg.deliveries[p]
		cs := lg.commits[p]
		sort.Slice(cs, func(i, j int) bool { return cs[i].at.Before(cs[j].at) })
		count := make([]int, end)
		// best[i] is the highest of the first i+1 commits answered.
		best := make([]answeredCommit, len(cs))
		for i, c := range cs {
			best[i] = c
			if i > 0 && best[i-1].offset > c.offset {
				best[i] = best[i-1]
			}
		}
		prev := map[int]int64{} // member → its last delivery's offset
		for _, d := range ds {
			res.Deliveries++
			if d.offset >= 0 && d.offset < end {
				count[d.offset]++
			}
			// Where a member starts consuming the partition (its first
			// delivery of it, or one after a gap): at the log start or
			// an offset committed before, never past records nobody
			// committed.
			if last, ok := prev[d.member]; !ok || d.offset != last+1 {
				if at, sent := lg.attempts[p][d.offset]; d.offset != 0 && (!sent || !at.Before(d.at)) {
					res.violate("partition %d: member %d started at offset %d, which no commit before it named", p, d.member, d.offset)
				}
			}
			prev[d.member] = d.offset
			// The commits answered before this delivery.
			n := sort.Search(len(cs), func(i int) bool { return !cs[i].at.Before(d.at) })
			if n == 0 || d.offset >= best[n-1].offset {
				continue
			}
			by := best[n-1]
			res.violate("partition %d offset %d polled by member %d %v after member %d's commit of %d was answered",
				p, d.offset, d.member, d.at.Sub(by.at).Round(time.Microsecond), by.member, by.offset)
		}
		for _, n := range count {
			switch {
			case n == 0:
				res.Missing++
			case n > 1:
				res.Redelivered++
			}
		}
	}
}
