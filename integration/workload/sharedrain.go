package workload

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareDrain is a share group (KIP-932) of Consumers franz-go share
// consumers draining a pre-filled topic, accepting every record. Nothing
// may be lost (at the end every share-partition's start offset is its
// end, every record was delivered, and none was archived at the delivery
// limit without an accept confirmed), and no record is delivered again
// once its accept was confirmed (no delivery with a higher count, none
// polled well after the confirmation): confirmed means FlushAcks
// returned and every ShareAckCallback result for the record's partition
// since the accept was made reported success.
type ShareDrain struct {
	Common
	Consumers int
	// Lock is share.record.lock.duration.ms: how soon a record whose
	// consumer lost its connection is delivered to another (default 2 s).
	Lock time.Duration
	// MaxRecords is each consumer's ShareMaxRecords.
	MaxRecords int32
}

// ShareDrainResult is what a ShareDrain run saw.
type ShareDrainResult struct {
	// Consumed: violations are deliveries after a confirmed accept.
	Consumed
	// Confirmed and Unconfirmed count accepts by outcome.
	Confirmed, Unconfirmed int
}

func (r ShareDrainResult) String() string {
	return fmt.Sprintf("%s, %d accepts confirmed (%d not)", r.Consumed, r.Confirmed, r.Unconfirmed)
}

type shareDelivery struct {
	count    int32
	consumer int
	at       time.Time // when the poll returned it
}

// shareConfirm is a record's confirmed accept.
type shareConfirm struct {
	count int32     // the delivery count it accepted; 0: none
	at    time.Time // when the confirmation came
}

// shareDeliveryLimit is the group's share.delivery.count.limit: high, so
// that a record is archived unaccepted only if every accept of it went
// missing that many times, which the drain counts as a loss.
const shareDeliveryLimit = 10

// lateDelivery is how long after an accept was confirmed a delivery of
// the record counts as a redelivery whatever its count: longer than a
// poll's records take to reach the application.
const lateDelivery = 500 * time.Millisecond

// Run fills the topic, drains it and checks the history.
func (c ShareDrain) Run(ctx context.Context) (ShareDrainResult, error) {
	var res ShareDrainResult
	c.defaults()
	if c.Consumers <= 0 {
		c.Consumers = 4
	}
	if c.Lock <= 0 {
		c.Lock = 2 * time.Second
	}
	if c.MaxRecords <= 0 {
		c.MaxRecords = 100
	}
	topic, group := c.Name+"-in", c.Name+"-sg"
	if c.BrokerConfigs == nil {
		c.BrokerConfigs = map[string]string{}
	}
	if _, ok := c.BrokerConfigs["group.share.min.record.lock.duration.ms"]; !ok {
		c.BrokerConfigs["group.share.min.record.lock.duration.ms"] = "1000"
	}
	if err := c.setup(ctx, topic); err != nil {
		return res, err
	}
	adm, err := c.directClient()
	if err != nil {
		return res, err
	}
	defer adm.Close()
	if err := SetGroupConfigs(ctx, adm, group,
		"share.auto.offset.reset", "earliest",
		"share.delivery.count.limit", strconv.Itoa(shareDeliveryLimit),
		"share.record.lock.duration.ms", strconv.Itoa(int(c.Lock/time.Millisecond))); err != nil {
		return res, err
	}
	if err := c.produceInput(ctx, topic); err != nil {
		return res, err
	}
	ends, err := (GroupConsume{Common: c.Common}).endOffsets(ctx, topic)
	if err != nil {
		return res, err
	}

	var (
		mu         sync.Mutex
		deliveries = make([][]shareDelivery, c.Records)
		confirmed  = make([]shareConfirm, c.Records)
	)
	crew := newCrew(ctx, c.Consumers, 0, c.Seed, func(ctx context.Context, i int, stop <-chan struct{}) error {
		return c.runConsumer(ctx, i, group, topic, stop, func(id int, count int32) {
			mu.Lock()
			deliveries[id] = append(deliveries[id], shareDelivery{count, i, time.Now()})
			mu.Unlock()
		}, func(ids []int, counts []int32, ok bool) {
			mu.Lock()
			defer mu.Unlock()
			for k, id := range ids {
				if ok {
					res.Confirmed++
					if counts[k] > confirmed[id].count {
						confirmed[id] = shareConfirm{counts[k], time.Now()}
					}
				} else {
					res.Unconfirmed++
				}
			}
		})
	})
	drained := false
	for !drained && ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
		drained = shareDrained(ctx, adm, group, topic, ends)
	}
	_, _, res.Errors = crew.stop()

	mu.Lock()
	defer mu.Unlock()
	for id, ds := range deliveries {
		res.Deliveries += len(ds)
		top := int32(0)
		for _, d := range ds {
			top = max(top, d.count)
		}
		cf := confirmed[id]
		switch {
		case len(ds) == 0:
			res.Missing++
		case cf.count == 0 && top >= shareDeliveryLimit:
			res.Missing++ // archived at the limit, never accepted
		case len(ds) > 1:
			res.Redelivered++
		}
		if cf.count == 0 {
			continue
		}
		for _, d := range ds {
			// After its accept was confirmed, a record is delivered
			// again if a delivery has a higher count, or comes well
			// after the confirmation (a lost accept redelivered at the
			// same count).
			late := d.at.Sub(cf.at) > lateDelivery
			if d.count > cf.count || late {
				res.violate("%s delivered to consumer %d at count %d, %v after its accept at count %d was confirmed",
					Value(id), d.consumer, d.count, d.at.Sub(cf.at).Round(time.Millisecond), cf.count)
			}
		}
	}
	if !drained {
		return res, fmt.Errorf("the share group did not drain the topic: %w", ctx.Err())
	}
	return res, nil
}

// runConsumer runs one share consumer until stop (nil) or an error.
// delivered is called for each record delivered, acked for each poll's
// accepts of one partition with whether they were confirmed.
func (c ShareDrain) runConsumer(ctx context.Context, idx int, group, topic string, stop <-chan struct{},
	delivered func(id int, count int32), acked func(ids []int, counts []int32, ok bool)) error {
	var (
		resMu   sync.Mutex
		results []kgo.ShareAckResult
	)
	opts := append(c.clientOpts(),
		kgo.ShareGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ShareMaxRecords(c.MaxRecords),
		kgo.FetchMaxWait(300*time.Millisecond),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			resMu.Lock()
			defer resMu.Unlock()
			results = append(results, rs...)
		}),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	take := func() []kgo.ShareAckResult {
		resMu.Lock()
		defer resMu.Unlock()
		out := results
		results = nil
		return out
	}
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		recs := cl.PollRecords(pctx, int(2*c.MaxRecords)).Records()
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if len(recs) == 0 {
			continue
		}
		take() // earlier polls' results are not about these
		type batch struct {
			ids    []int
			counts []int32
		}
		byPart := map[int32]*batch{}
		for _, r := range recs {
			id, ok := valueIndex(r.Value)
			if !ok || id < 0 || id >= c.Records {
				r.Ack(kgo.AckRelease)
				continue
			}
			delivered(id, r.DeliveryCount())
			r.Ack(kgo.AckAccept)
			b := byPart[r.Partition]
			if b == nil {
				b = &batch{}
				byPart[r.Partition] = b
			}
			b.ids, b.counts = append(b.ids, id), append(b.counts, r.DeliveryCount())
		}
		c.work(stop)
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ferr := cl.FlushAcks(fctx)
		cancel()
		outcomes := take()
		for p, b := range byPart {
			reported, failed := false, false
			for _, o := range outcomes {
				if o.Partition == p {
					reported = true
					failed = failed || o.Err != nil
				}
			}
			acked(b.ids, b.counts, ferr == nil && reported && !failed)
		}
	}
}

// shareDrained reports whether every share-partition's start offset is
// its end.
func shareDrained(ctx context.Context, cl *kgo.Client, group, topic string, ends map[int32]int64) bool {
	got, err := kadm.NewClient(cl).DescribeShareGroupOffsets(ctx, group)
	if err != nil || got.Error() != nil {
		return false
	}
	for p, end := range ends {
		o, ok := got[group].Offsets.Lookup(topic, p)
		if !ok || o.Err != nil || o.StartOffset < end {
			return false
		}
	}
	return true
}

// SetGroupConfigs sets configs (name, value, name, value...) of group
// with IncrementalAlterConfigs (kadm has no helper for group configs).
func SetGroupConfigs(ctx context.Context, cl *kgo.Client, group string, kv ...string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = kv[i], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kv[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Resources) != 1 {
		return fmt.Errorf("IncrementalAlterConfigs: %d resources in the response", len(resp.Resources))
	}
	r := resp.Resources[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		return fmt.Errorf("IncrementalAlterConfigs GROUP %s: %w: %s", group, err, msg)
	}
	return nil
}
