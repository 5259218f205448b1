package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group and share phases read the topic the produce phase wrote, each
// with a group of its own, so every phase of a round sees the same fresh
// records and none depends on what another consumed.

// Group commit modes (--group-commit).
const (
	groupCommitPoll = "poll" // DisableAutoCommit + BlockRebalanceOnPoll, CommitUncommittedOffsets after every poll
	groupCommitAuto = "auto" // kgo's autocommit (every 5 s) plus one CommitUncommittedOffsets when drained
)

func balancer(name string) (kgo.GroupBalancer, error) {
	switch name {
	case "cooperative-sticky":
		return kgo.CooperativeStickyBalancer(), nil
	case "sticky":
		return kgo.StickyBalancer(), nil
	case "range":
		return kgo.RangeBalancer(), nil
	case "roundrobin", "round-robin":
		return kgo.RoundRobinBalancer(), nil
	}
	return nil, fmt.Errorf("unknown balancer %q (want cooperative-sticky, sticky, range, roundrobin)", name)
}

// offsetSet remembers which offsets of each partition have been seen, so
// that "every record at least once" is checked exactly and duplicates are
// counted. Its maps are written only by newOffsetSet; mark is safe for
// concurrent use.
type offsetSet struct {
	start map[int32]int64
	end   map[int32]int64
	bits  map[int32][]atomic.Uint64
	total int64
	seen  atomic.Int64
}

func newOffsetSet(start, end map[int32]int64) *offsetSet {
	s := &offsetSet{start: start, end: end, bits: map[int32][]atomic.Uint64{}}
	for p, e := range end {
		n := e - start[p]
		if n < 0 {
			n = 0
		}
		s.total += n
		s.bits[p] = make([]atomic.Uint64, (n+63)/64)
	}
	return s
}

// mark records partition p offset off: it returns 1 the first time, 0 for
// a duplicate and -1 for an offset outside [start, end).
func (s *offsetSet) mark(p int32, off int64) int {
	words, ok := s.bits[p]
	i := off - s.start[p]
	if !ok || i < 0 || off >= s.end[p] {
		return -1
	}
	bit := uint64(1) << uint(i%64)
	if words[i/64].Or(bit)&bit != 0 {
		return 0
	}
	s.seen.Add(1)
	return 1
}

// complete reports whether every offset of the range has been seen.
func (s *offsetSet) complete() bool { return s.seen.Load() >= s.total }

// logRange lists the start and end offsets of every partition of topic.
func (w *workload) logRange(ctx context.Context, topic string) (start, end map[int32]int64, err error) {
	ends, err := w.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list end offsets: %w", err)
	}
	starts, err := w.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list start offsets: %w", err)
	}
	start, end = map[int32]int64{}, map[int32]int64{}
	ends.Each(func(lo kadm.ListedOffset) { end[lo.Partition] = lo.Offset })
	starts.Each(func(lo kadm.ListedOffset) { start[lo.Partition] = lo.Offset })
	return start, end, nil
}

// drainSet lists the log range and checks it holds what produce wrote.
func (w *workload) drainSet(ctx context.Context, topic string, p *phaseResult) *offsetSet {
	start, end, err := w.logRange(ctx, topic)
	if err != nil {
		p.errs.add(err)
		return nil
	}
	set := newOffsetSet(start, end)
	if w.produced > 0 && set.total != w.produced {
		p.errs.add(fmt.Errorf("the log holds %d records (end - start offsets) but %d were acknowledged", set.total, w.produced))
	}
	if set.total == 0 {
		p.errs.add(errors.New("nothing to consume"))
		return nil
	}
	return set
}

// drainCounters are shared by the members of one group or share phase.
type drainCounters struct {
	set        *offsetSet
	bytes      atomic.Int64 // values of distinct records
	dups       atomic.Int64 // records seen again
	startedAt  time.Time
	firstNanos atomic.Int64 // when the first record arrived, since startedAt (+1 so that 0 means none)
	doneNanos  atomic.Int64 // when the last distinct record arrived, since startedAt
	// when 10% and 90% of the distinct records had arrived, since
	// startedAt (0: not yet)
	tenNanos, ninetyNanos atomic.Int64
	stopPoll              context.CancelFunc
}

// finish fills p's counts and times once the members have stopped:
// p.Seconds runs from the first record delivered to now, and
// p.StartupSeconds from creating the clients to the first record.
func (d *drainCounters) finish(p *phaseResult) {
	total := time.Since(d.startedAt)
	p.Seconds = total.Seconds()
	if first := d.firstNanos.Load(); first > 0 {
		startup := time.Duration(first - 1)
		p.StartupSeconds = startup.Seconds()
		p.Seconds = (total - startup).Seconds()
	}
	p.Records, p.Bytes, p.Duplicates = d.set.seen.Load(), d.bytes.Load(), d.dups.Load()
	if t10, t90 := d.tenNanos.Load(), d.ninetyNanos.Load(); t10 > 0 && t90 > t10 {
		n := d.set.total*9/10 - d.set.total/10
		p.SteadyRecordsPerSec = float64(n) / time.Duration(t90-t10).Seconds()
	}
}

// see accounts one delivered record and stops the polls once every record
// has been seen.
func (d *drainCounters) see(w *workload, p *phaseResult, r *kgo.Record) {
	if d.firstNanos.Load() == 0 {
		d.firstNanos.CompareAndSwap(0, int64(time.Since(d.startedAt))+1)
	}
	switch d.set.mark(r.Partition, r.Offset) {
	case 1:
		d.bytes.Add(int64(len(r.Value)))
		p.prog.n.Add(1)
		switch seen := d.set.seen.Load(); {
		case seen >= d.set.total*9/10:
			d.ninetyNanos.CompareAndSwap(0, int64(time.Since(d.startedAt)))
			fallthrough
		case seen >= d.set.total/10:
			d.tenNanos.CompareAndSwap(0, int64(time.Since(d.startedAt)))
		}
		if len(r.Value) != w.o.valueSize {
			p.errs.add(fmt.Errorf("partition %d offset %d: value of %d bytes, produced %d", r.Partition, r.Offset, len(r.Value), w.o.valueSize))
		}
		if d.set.complete() && d.doneNanos.CompareAndSwap(0, int64(time.Since(d.startedAt))) {
			d.stopPoll()
		}
	case 0:
		d.dups.Add(1)
	default:
		p.errs.add(fmt.Errorf("partition %d offset %d: outside the produced range", r.Partition, r.Offset))
	}
}

func fetchErrors(p *phaseResult, fs kgo.Fetches) {
	fs.EachError(func(t string, part int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
			p.errs.add(fmt.Errorf("fetch %s/%d: %w", t, part, err))
		}
	})
}

// groupClient is one member of a classic consumer group.
func (w *workload) groupClient(topic, group string, bal kgo.GroupBalancer) (*kgo.Client, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(w.seeds...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Balancers(bal),
		kgo.FetchMaxBytes(w.o.fetchMaxBytes),
		kgo.FetchMaxPartitionBytes(w.o.fetchMaxPartBytes),
		kgo.WithLogger(kgoLogger(w.o.clientLog, w.stderr)),
	}
	if w.o.groupCommit == groupCommitPoll {
		opts = append(opts, kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())
	}
	return newKgoClient(w.o, opts...)
}

// group drains topic with o.groupMembers members of one consumer group,
// each its own client, committing as o.groupCommit says. The clock runs
// from the first record delivered to any member until every record has
// been consumed at least once and every member's commit of what it
// consumed has been answered; the time from creating the clients to the
// first record (joining, the first rebalance, offset fetch) is reported
// apart. Then the group's committed offsets must equal the end offsets.
func (w *workload) group(ctx context.Context, topic, group string, p *phaseResult) {
	set := w.drainSet(ctx, topic, p)
	if set == nil {
		return
	}
	bal, err := balancer(w.o.groupBalancer)
	if err != nil {
		p.errs.add(err)
		return
	}
	pctx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	d := &drainCounters{set: set, startedAt: time.Now(), stopPoll: stopPoll}

	clients := make([]*kgo.Client, 0, w.o.groupMembers)
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	for i := 0; i < w.o.groupMembers; i++ {
		cl, err := w.groupClient(topic, group, bal)
		if err != nil {
			p.errs.add(err)
			return
		}
		clients = append(clients, cl)
	}
	commit := func(cl *kgo.Client) {
		if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
			p.errs.add(fmt.Errorf("commit: %w", err))
		}
	}
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				fs := cl.PollFetches(pctx)
				fetchErrors(p, fs)
				fs.EachRecord(func(r *kgo.Record) { d.see(w, p, r) })
				if w.o.groupCommit == groupCommitPoll {
					commit(cl) // commits with ctx: the last poll's commit completes after pctx is canceled
					cl.AllowRebalance()
				}
			}
			if w.o.groupCommit == groupCommitAuto {
				commit(cl)
			}
		}()
	}
	wg.Wait()
	d.finish(p)
	if ctx.Err() != nil {
		return
	}
	if !set.complete() {
		p.errs.add(fmt.Errorf("consumed %d of %d records", set.seen.Load(), set.total))
	}

	// Untimed: the committed offsets must be the end offsets.
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	offs, err := w.adm.FetchOffsets(vctx, group)
	if err != nil {
		p.errs.add(fmt.Errorf("fetch committed offsets: %w", err))
		return
	}
	for part, end := range set.end {
		o, ok := offs.Lookup(topic, part)
		switch {
		case !ok:
			p.errs.add(fmt.Errorf("partition %d: no committed offset, end offset %d", part, end))
		case o.Err != nil:
			p.errs.add(fmt.Errorf("partition %d: committed offset: %w", part, o.Err))
		case o.At != end:
			p.errs.add(fmt.Errorf("partition %d: committed offset %d, end offset %d", part, o.At, end))
		}
	}
}

// setShareAutoOffsetReset sets share.auto.offset.reset=earliest on group
// through IncrementalAlterConfigs on the GROUP resource, so that the share
// group starts at the beginning of the log instead of its end.
func (w *workload) setShareAutoOffsetReset(ctx context.Context, group string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name = "share.auto.offset.reset"
	cfg.Op = kmsg.IncrementalAlterConfigOpSet
	cfg.Value = kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, w.adm.client)
	if err != nil {
		return err
	}
	if len(resp.Resources) != 1 {
		return fmt.Errorf("%d resources in the response, want 1", len(resp.Resources))
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		msg := ""
		if m := resp.Resources[0].ErrorMessage; m != nil {
			msg = ": " + *m
		}
		return fmt.Errorf("%w%s", err, msg)
	}
	return nil
}

// shareClient is one share-group consumer.
func (w *workload) shareClient(topic, group string, onAck func(*kgo.Client, kgo.ShareAckResults)) (*kgo.Client, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(w.seeds...),
		kgo.ShareGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ShareAckCallback(onAck),
		kgo.FetchMaxBytes(w.o.fetchMaxBytes),
		kgo.FetchMaxPartitionBytes(w.o.fetchMaxPartBytes),
		kgo.WithLogger(kgoLogger(w.o.clientLog, w.stderr)),
	}
	if w.o.shareMaxRecords > 0 {
		opts = append(opts, kgo.ShareMaxRecords(w.o.shareMaxRecords))
	}
	return newKgoClient(w.o, opts...)
}

// share drains topic with o.shareMembers share consumers of one share
// group, accepting every record. The clock runs from the first record
// delivered until every record has been delivered at least once and every
// member's FlushAcks has returned (each accept answered by the broker);
// the time from creating the clients to the first record is reported
// apart. Then the share-partition start offsets must equal the end
// offsets: everything was accepted.
func (w *workload) share(ctx context.Context, topic, group string, p *phaseResult) {
	set := w.drainSet(ctx, topic, p)
	if set == nil {
		return
	}
	if err := w.setShareAutoOffsetReset(ctx, group); err != nil {
		p.errs.add(fmt.Errorf("IncrementalAlterConfigs GROUP %s share.auto.offset.reset=earliest: %w", group, err))
		return
	}
	onAck := func(_ *kgo.Client, rs kgo.ShareAckResults) {
		for _, r := range rs {
			if r.Err != nil {
				p.errs.add(fmt.Errorf("ack %s/%d: %w", r.Topic, r.Partition, r.Err))
			}
		}
	}
	pctx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	d := &drainCounters{set: set, startedAt: time.Now(), stopPoll: stopPoll}

	clients := make([]*kgo.Client, 0, w.o.shareMembers)
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	for i := 0; i < w.o.shareMembers; i++ {
		cl, err := w.shareClient(topic, group, onAck)
		if err != nil {
			p.errs.add(err)
			return
		}
		clients = append(clients, cl)
	}
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				fs := cl.PollRecords(pctx, -1)
				fetchErrors(p, fs)
				fs.EachRecord(func(r *kgo.Record) {
					r.Ack(kgo.AckAccept)
					d.see(w, p, r)
				})
			}
			if err := cl.FlushAcks(ctx); err != nil && ctx.Err() == nil {
				p.errs.add(fmt.Errorf("flush acks: %w", err))
			}
		}()
	}
	wg.Wait()
	d.finish(p)
	if ctx.Err() != nil {
		return
	}
	if !set.complete() {
		p.errs.add(fmt.Errorf("accepted %d of %d records", set.seen.Load(), set.total))
	}

	// Untimed: every share-partition's start offset must have reached the
	// end offset. Acks were answered, so this should hold at once; allow a
	// few seconds anyway before calling it an error.
	vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var mismatch []string
	for {
		mismatch = mismatch[:0]
		got, err := w.adm.DescribeShareGroupOffsets(vctx, group)
		if err == nil {
			err = got[group].Err
		}
		if err != nil {
			mismatch = append(mismatch, "DescribeShareGroupOffsets: "+err.Error())
		} else {
			for part, end := range set.end {
				o, ok := got[group].Offsets.Lookup(topic, part)
				switch {
				case !ok:
					mismatch = append(mismatch, fmt.Sprintf("partition %d: no share-partition offset, end offset %d", part, end))
				case o.Err != nil:
					mismatch = append(mismatch, fmt.Sprintf("partition %d: share-partition offset: %v", part, o.Err))
				case o.StartOffset != end:
					mismatch = append(mismatch, fmt.Sprintf("partition %d: share-partition start offset %d, end offset %d", part, o.StartOffset, end))
				}
			}
		}
		if len(mismatch) == 0 || !sleepCtx(vctx, 200*time.Millisecond) {
			break
		}
	}
	for _, m := range mismatch {
		p.errs.add(errors.New(m))
	}
}
