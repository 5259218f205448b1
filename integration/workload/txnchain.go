package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TxnChain is a consume-transform-produce stage run exactly once: a
// consumer group reading Records values read_committed from one topic,
// each member a franz-go GroupTransactSession that produces the values to
// a second topic and commits its input offsets in the same transaction
// (TxnOffsetCommit, KIP-447). Members whose session fails are replaced
// under the same transactional id (and instance id when Static), which
// fences the old one; with Churn set one member is replaced now and then,
// so the group rebalances during the run.
type TxnChain struct {
	Common
	// Members is how many GroupTransactSession members the group has.
	Members int
	// Protocol is the members' group protocol.
	Protocol Protocol
	// Static gives each member a group.instance.id (KIP-345).
	Static bool
	// Churn, if set, replaces a random member this often.
	Churn time.Duration
	// MaxPollRecords bounds the records of one transaction.
	MaxPollRecords int
}

// TxnChainResult is what a TxnChain run saw.
type TxnChainResult struct {
	Outcome
	// Txns and Committed count the transactions ended and committed.
	Txns, Committed int64
	// Restarts counts members replaced after their session failed;
	// Churned those replaced on purpose.
	Restarts, Churned int
	// Errors are the first session failures, for the log.
	Errors []string
}

// Run produces the input, runs the chain until the output holds every
// input value (or ctx ends), stops the members, waits until no
// transaction is open on the output, reads it until nothing more arrives
// for Quiet, and returns what the read_committed output held.
func (c TxnChain) Run(ctx context.Context) (TxnChainResult, error) {
	var res TxnChainResult
	c.defaults()
	if c.Members <= 0 {
		c.Members = 3
	}
	if c.MaxPollRecords <= 0 {
		c.MaxPollRecords = 500
	}
	in, out := c.Name+"-in", c.Name+"-out"
	if err := c.setup(ctx, in, out); err != nil {
		return res, err
	}
	if err := c.produceInput(ctx, in); err != nil {
		return res, err
	}

	var txns, cmts atomic.Int64
	group := c.Name + "-g"
	crew := newCrew(ctx, c.Members, c.Churn, c.Seed, func(ctx context.Context, idx int, stop <-chan struct{}) error {
		return c.runMember(ctx, idx, group, in, out, stop, &txns, &cmts)
	})
	v, err := c.newVerifier(out, kgo.ReadCommitted())
	if err != nil {
		crew.stop()
		return res, err
	}
	defer v.close()
	err = v.untilAll(ctx, crew.tick)
	res.Restarts, res.Churned, res.Errors = crew.stop()
	if err == nil {
		// Every member stopped: once no transaction is open on the
		// output, read it to the end, so a transaction a member ended
		// as it stopped (or as it left the group) is counted too.
		err = c.waitStable(ctx, out)
	}
	if err == nil {
		err = v.drain(ctx)
	}
	res.Outcome = v.outcome(c.Records)
	res.Txns, res.Committed = txns.Load(), cmts.Load()
	return res, err
}

// runMember runs one member until stop is closed (nil) or its session
// fails (the error).
func (c TxnChain) runMember(ctx context.Context, idx int, group, in, out string, stop <-chan struct{}, txns, cmts *atomic.Int64) error {
	opts := append(c.memberOpts(idx, group, in, c.Protocol, c.Static),
		kgo.TransactionalID(fmt.Sprintf("%s-txn-%d", c.Name, idx)),
		kgo.TransactionTimeout(20*time.Second),
		kgo.DefaultProduceTopic(out),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.ProducerLinger(0),
	)
	return TransactCopy(ctx, opts, c.MaxPollRecords, func() { c.work(stop) }, stop, txns, cmts)
}

// TransactCopy runs one GroupTransactSession member made with opts (a
// consumer group, a transactional id, a default produce topic) until
// stop is closed or ctx ends (nil) or its session fails (the error): it
// polls up to maxPoll records, produces each record's key and value in a
// transaction, calls work, and ends the transaction with a commit of its
// input offsets. txns counts the transactions ended, cmts those
// committed.
func TransactCopy(ctx context.Context, opts []kgo.Opt, maxPoll int, work func(), stop <-chan struct{}, txns, cmts *atomic.Int64) error {
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return err
	}
	defer sess.Close()
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := sess.PollRecords(pctx, maxPoll)
		cancel()
		if fs.IsClientClosed() {
			return errors.New("client closed")
		}
		if ctx.Err() != nil {
			return nil
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, nil)
		})
		if work != nil {
			work()
		}
		ok, err := sess.End(ctx, kgo.TryCommit)
		txns.Add(1)
		if ok {
			cmts.Add(1)
		}
		if err != nil {
			return fmt.Errorf("end: %w", err)
		}
	}
}

// Protocol is how a consumer group's members balance.
type Protocol string

const (
	Eager       Protocol = "eager"       // classic protocol, range balancer (eager)
	Cooperative Protocol = "cooperative" // classic protocol, cooperative-sticky
	NextGen     Protocol = "consumer"    // KIP-848, the broker assigns
)

// Protocols are the ones a chain can run.
var Protocols = []Protocol{Eager, Cooperative, NextGen}

func (p Protocol) opts() []kgo.Opt {
	switch p {
	case Eager:
		return []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())}
	case NextGen:
		return []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer(), kgo.RangeBalancer()), kgo.ServerSideBalancer()}
	default:
		return []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}
	}
}

// Common is what every workload needs.
type Common struct {
	// Seeds are the addresses the workload's clients dial (a fault
	// proxy's, typically).
	Seeds []string
	// Direct are the broker's own addresses, for set-up, the input and
	// the verifier (Seeds if empty).
	Direct []string
	// Name prefixes the workload's topics, groups and ids.
	Name string
	// Records is how many input records there are.
	Records int
	// Partitions per topic.
	Partitions int32
	// Seed makes the workload's random choices repeatable.
	Seed uint64
	// Quiet is how long the output must stay unchanged after it holds
	// every value.
	Quiet time.Duration
	// Logger, if set, gets the clients' logs.
	Logger kgo.Logger
	// BrokerConfigs are set before the run (e.g.
	// group.initial.rebalance.delay.ms).
	BrokerConfigs map[string]string
	// Work is how long a member works on each poll's records before it
	// commits them (or ends its transaction): it paces a run so that
	// faults land mid-work.
	Work time.Duration
}

// ShoalGroupConfigs are broker configs that make a run's groups react
// in a test's time, as a test deployment of Kafka would set them: KIP-848
// members heartbeat every 300 ms and are fenced after 6 s without one
// (Kafka's defaults are 5 s and 45 s), and an empty classic group's
// first rebalance does not wait 3 s for more members.
var ShoalGroupConfigs = map[string]string{
	"group.initial.rebalance.delay.ms":         "0",
	"group.consumer.min.heartbeat.interval.ms": "100",
	"group.consumer.heartbeat.interval.ms":     "300",
	"group.consumer.min.session.timeout.ms":    "1000",
	"group.consumer.session.timeout.ms":        "6000",
}

func (c *Common) defaults() {
	if len(c.Direct) == 0 {
		c.Direct = c.Seeds
	}
	if c.Partitions <= 0 {
		c.Partitions = 6
	}
	if c.Quiet <= 0 {
		c.Quiet = 2 * time.Second
	}
}

// work waits Work, or less if stop closes.
func (c *Common) work(stop <-chan struct{}) {
	if c.Work <= 0 {
		return
	}
	select {
	case <-stop:
	case <-time.After(c.Work):
	}
}

func (c *Common) clientOpts() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Seeds...),
		kgo.ClientID(c.Name),
		kgo.DialTimeout(time.Second),
		kgo.RequestTimeoutOverhead(2 * time.Second),
		kgo.RetryTimeout(30 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}
	if c.Logger != nil {
		opts = append(opts, kgo.WithLogger(c.Logger))
	}
	return opts
}

// memberOpts are the options of member idx of a consumer group reading
// topic from its start: group protocol p, an instance id if static, and
// timeouts that notice a lost member in seconds.
func (c *Common) memberOpts(idx int, group, topic string, p Protocol, static bool) []kgo.Opt {
	opts := append(c.clientOpts(),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(6*time.Second),
		kgo.RebalanceTimeout(10*time.Second),
		kgo.HeartbeatInterval(300*time.Millisecond),
	)
	opts = append(opts, p.opts()...)
	if static {
		opts = append(opts, kgo.InstanceID(fmt.Sprintf("%s-inst-%d", c.Name, idx)))
	}
	return opts
}

func (c *Common) directClient(opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{kgo.SeedBrokers(c.Direct...), kgo.ClientID(c.Name + "-direct")}
	return kgo.NewClient(append(base, opts...)...)
}

// setup applies BrokerConfigs and creates the topics.
func (c *Common) setup(ctx context.Context, topics ...string) error {
	cl, err := c.directClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if len(c.BrokerConfigs) > 0 {
		var alters []kadm.AlterConfig
		for k, v := range c.BrokerConfigs {
			alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)})
		}
		rs, err := adm.AlterBrokerConfigs(ctx, alters)
		if err != nil {
			return fmt.Errorf("alter broker configs: %w", err)
		}
		for _, r := range rs {
			if r.Err != nil {
				return fmt.Errorf("alter broker configs: %w (%s)", r.Err, r.ErrMessage)
			}
		}
	}
	for _, t := range topics {
		r, err := adm.CreateTopic(ctx, c.Partitions, 1, nil, t)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	return nil
}

// Value is the value of input record i; ValueIndex parses it back.
func Value(i int) string { return fmt.Sprintf("v%08d", i) }

func valueIndex(v []byte) (int, bool) {
	var i int
	if _, err := fmt.Sscanf(string(v), "v%08d", &i); err != nil {
		return 0, false
	}
	return i, true
}

// produceInput writes Records values to topic, straight to the broker.
func (c *Common) produceInput(ctx context.Context, topic string) error {
	cl, err := c.directClient(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	var perr atomic.Value
	for i := range c.Records {
		cl.Produce(ctx, &kgo.Record{Key: []byte(Value(i)), Value: []byte(Value(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				perr.Store(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if err, _ := perr.Load().(error); err != nil {
		return fmt.Errorf("produce input: %w", err)
	}
	return nil
}

// Outcome is how many times each input value reached the output.
type Outcome struct {
	// Total is the records the output held; Distinct the input values
	// among them.
	Total, Distinct int
	// Missing and Duplicated list input values never seen, or seen more
	// than once (at most 20 each); NMissing and NDuplicated count them.
	Missing, Duplicated   []string
	NMissing, NDuplicated int
	// Foreign counts output records that are no input value.
	Foreign int
}

// ExactlyOnce reports whether every input value was seen exactly once.
func (o Outcome) ExactlyOnce() bool {
	return o.NMissing == 0 && o.NDuplicated == 0 && o.Foreign == 0
}

func (o Outcome) String() string {
	return fmt.Sprintf("%d records, %d distinct, %d missing %v, %d duplicated %v, %d foreign",
		o.Total, o.Distinct, o.NMissing, o.Missing, o.NDuplicated, o.Duplicated, o.Foreign)
}

// verifier reads an output topic from the start, straight from the
// broker, counting each value.
type verifier struct {
	cl       *kgo.Client
	quiet    time.Duration
	counts   []int
	distinct int
	total    int
	foreign  int
	first    map[int][2]int64 // value -> first (partition, offset), for duplicates
	dupAt    map[int][][2]int64
}

func (c *Common) newVerifier(topic string, iso kgo.IsolationLevel) (*verifier, error) {
	cl, err := c.directClient(
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	return &verifier{cl: cl, quiet: c.Quiet, counts: make([]int, c.Records), first: map[int][2]int64{}, dupAt: map[int][][2]int64{}}, nil
}

func (v *verifier) close() { v.cl.Close() }

// poll reads what one poll returns, counting each value, and reports
// how many records it got.
func (v *verifier) poll(ctx context.Context) int {
	pctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
	fs := v.cl.PollFetches(pctx)
	cancel()
	got := 0
	fs.EachRecord(func(r *kgo.Record) {
		got++
		v.total++
		i, ok := valueIndex(r.Value)
		if !ok || i < 0 || i >= len(v.counts) {
			v.foreign++
			return
		}
		if v.counts[i] == 0 {
			v.distinct++
			v.first[i] = [2]int64{int64(r.Partition), r.Offset}
		} else if len(v.dupAt) < 20 {
			v.dupAt[i] = append(v.dupAt[i], [2]int64{int64(r.Partition), r.Offset})
		}
		v.counts[i]++
	})
	return got
}

// untilAll polls until every input value was seen, calling tick between
// polls.
func (v *verifier) untilAll(ctx context.Context, tick func()) error {
	for v.distinct < len(v.counts) {
		if ctx.Err() != nil {
			return fmt.Errorf("output holds %d of %d values: %w", v.distinct, len(v.counts), ctx.Err())
		}
		v.poll(ctx)
		if tick != nil {
			tick()
		}
	}
	return nil
}

// drain polls until nothing new arrives for Quiet.
func (v *verifier) drain(ctx context.Context) error {
	quietSince := time.Now()
	for time.Since(quietSince) < v.quiet {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if v.poll(ctx) > 0 {
			quietSince = time.Now()
		}
	}
	return nil
}

// waitStable waits until topic's last stable offsets are its high
// watermarks: no transaction is open on it.
func (c *Common) waitStable(ctx context.Context, topic string) error {
	cl, err := c.directClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		hw, err1 := adm.ListEndOffsets(ctx, topic)
		lso, err2 := adm.ListCommittedOffsets(ctx, topic)
		if err1 == nil && err2 == nil && hw.Error() == nil && lso.Error() == nil {
			stable := true
			hw.Each(func(o kadm.ListedOffset) {
				if l, ok := lso.Lookup(topic, o.Partition); !ok || l.Offset != o.Offset {
					stable = false
				}
			})
			if stable {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("a transaction stayed open on %s: %w", topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (v *verifier) outcome(n int) Outcome {
	o := Outcome{Total: v.total, Foreign: v.foreign}
	for i, c := range v.counts {
		switch {
		case c == 0:
			o.NMissing++
			if len(o.Missing) < 20 {
				o.Missing = append(o.Missing, Value(i))
			}
		case c > 1:
			o.NDuplicated++
			if len(o.Duplicated) < 20 {
				at := slices.Concat([][2]int64{v.first[i]}, v.dupAt[i])
				o.Duplicated = append(o.Duplicated, fmt.Sprintf("%s x%d at %v", Value(i), c, at))
			}
		}
		if c > 0 {
			o.Distinct++
		}
	}
	return o
}
