package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// targetRun is one target in one round.
type targetRun struct {
	Target       string       `json:"target"`
	Round        int          `json:"round"`
	Seeds        []string     `json:"seeds,omitempty"`
	Produce      *phaseResult `json:"produce,omitempty"`
	Consume      *phaseResult `json:"consume,omitempty"`
	E2E          *phaseResult `json:"e2e,omitempty"`
	Group        *phaseResult `json:"group,omitempty"`
	Share        *phaseResult `json:"share,omitempty"`
	Txn          *phaseResult `json:"txn,omitempty"`
	Mem          *memDelta    `json:"process_mem,omitempty"` // before start, after close
	CloseSeconds float64      `json:"close_seconds"`
	Error        string       `json:"error,omitempty"`
}

// phaseResult is one workload phase against one target.
type phaseResult struct {
	Records       int64           `json:"records"`
	Bytes         int64           `json:"bytes"` // record values only
	Seconds       float64         `json:"seconds"`
	RecordsPerSec float64         `json:"records_per_sec"`
	MBPerSec      float64         `json:"mb_per_sec"` // MB = 2^20 bytes, as Kafka's perf tools
	Latency       *latencySummary `json:"latency,omitempty"`
	// Duplicates counts records delivered again after their first
	// delivery (group and share phases: at-least-once redeliveries).
	Duplicates int64 `json:"duplicates,omitempty"`
	// StartupSeconds is, for the group and share phases, the time from
	// creating the clients to the first record delivered; Seconds starts
	// there.
	StartupSeconds float64 `json:"startup_seconds,omitempty"`
	// SteadyRecordsPerSec is, for the group and share phases, the rate
	// between the deliveries of 10% and 90% of the distinct records: what
	// the consumers sustain, without the start and the final
	// acknowledgements' tail.
	SteadyRecordsPerSec float64   `json:"steady_records_per_sec,omitempty"`
	Errors              int64     `json:"errors"`
	ErrorSamples        []string  `json:"error_samples,omitempty"`
	Mem                 *memDelta `json:"mem"`
	// Timeline samples the phase's progress every timelineStep from its
	// start (the throughput-over-time plots).
	Timeline []timePoint `json:"timeline,omitempty"`

	errs *errSampler
	prog *progress
}

// workload runs the phases against one started target.
type workload struct {
	o      *options
	seeds  []string
	adm    *admin
	label  string
	stderr io.Writer
	// synthetic: the target serves canned fetches with a huge high
	// watermark, so consume stops after o.records records.
	synthetic bool
	// produced is how many records the produce phase had acknowledged;
	// consume checks the log holds exactly that many.
	produced int64
}

// measure wraps a phase with memory samples, a timeout and a progress line
// per second on stderr.
func (w *workload) measure(ctx context.Context, phase string, fn func(context.Context, *phaseResult)) *phaseResult {
	p := &phaseResult{Mem: &memDelta{Before: sampleMem(), PeakRSSBytes: -1}}
	peakOK := resetPeakRSS()
	pctx, cancel := context.WithTimeout(ctx, w.o.timeout)
	defer cancel()
	prog := &progress{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.Timeline = w.report(phase, prog, done)
	}()
	errs := &errSampler{}
	p.errs, p.prog = errs, prog
	// Goroutines started under these labels (ours and the kgo clients')
	// carry them into CPU profiles; broker goroutines do not, so
	// "go tool pprof -tagfocus side=client" separates the two.
	pprof.Do(pctx, pprof.Labels("side", "client", "phase", phase), func(lctx context.Context) { fn(lctx, p) })
	close(done)
	wg.Wait()
	if pctx.Err() != nil && ctx.Err() == nil {
		errs.add(fmt.Errorf("phase timed out after %v", w.o.timeout))
	}
	p.Errors, p.ErrorSamples = errs.snapshot()
	if p.Seconds > 0 {
		p.RecordsPerSec = float64(p.Records) / p.Seconds
		p.MBPerSec = float64(p.Bytes) / (1 << 20) / p.Seconds
	}
	if peakOK {
		p.Mem.PeakRSSBytes = procStatus("VmHWM:")
	}
	p.Mem.After = sampleMem()
	fmt.Fprintf(w.stderr, "%s %s: done: %d records in %.2fs = %.0f rec/s, %.1f MB/s", w.label, phase, p.Records, p.Seconds, p.RecordsPerSec, p.MBPerSec)
	if p.StartupSeconds > 0 {
		fmt.Fprintf(w.stderr, " after %.2fs to the first record", p.StartupSeconds)
	}
	if p.Duplicates > 0 {
		fmt.Fprintf(w.stderr, ", %d delivered more than once", p.Duplicates)
	}
	if p.Latency != nil {
		fmt.Fprintf(w.stderr, ", p50 %.2fms p99 %.2fms p999 %.2fms", p.Latency.P50Ms, p.Latency.P99Ms, p.Latency.P999Ms)
	}
	if p.Errors > 0 {
		fmt.Fprintf(w.stderr, ", %d errors: %s", p.Errors, strings.Join(p.ErrorSamples, "; "))
	}
	fmt.Fprintln(w.stderr)
	return p
}

// progress counts records for the once-a-second progress line.
type progress struct{ n atomic.Int64 }

// timePoint is one timeline sample: records done by Sec seconds into the
// phase, and the rate since the previous sample.
type timePoint struct {
	Sec           float64 `json:"sec"`
	Records       int64   `json:"records"`
	RecordsPerSec float64 `json:"records_per_sec"`
}

// timelineStep is the timeline's sampling period; progress lines are
// printed every progressEvery samples.
const (
	timelineStep  = 250 * time.Millisecond
	progressEvery = 4
)

// report prints a progress line per second on stderr until done and
// returns the timeline it sampled.
func (w *workload) report(phase string, prog *progress, done <-chan struct{}) []timePoint {
	t := time.NewTicker(timelineStep)
	defer t.Stop()
	total := w.o.records
	if phase == phaseE2E {
		total = int64(float64(w.o.e2eRate) * w.o.e2eDuration.Seconds())
	}
	start := time.Now()
	var (
		timeline    = []timePoint{{}} // the phase starts at 0 records
		last, shown int64
		lastAt      = start
		shownAt     = start
		tick        int
	)
	sample := func(now time.Time) {
		n := prog.n.Load()
		timeline = append(timeline, timePoint{Sec: now.Sub(start).Seconds(), Records: n, RecordsPerSec: float64(n-last) / now.Sub(lastAt).Seconds()})
		last, lastAt = n, now
	}
	for {
		select {
		case <-done:
			sample(time.Now())
			return timeline
		case now := <-t.C:
			sample(now)
			if tick++; tick%progressEvery == 0 {
				n := timeline[len(timeline)-1].Records
				rate := float64(n-shown) / now.Sub(shownAt).Seconds()
				pct := ""
				if total > 0 {
					pct = fmt.Sprintf(" (%3.0f%%)", 100*float64(n)/float64(total))
				}
				fmt.Fprintf(w.stderr, "%s %s: %5.1fs %10d records%s %10.0f rec/s\n", w.label, phase, now.Sub(start).Seconds(), n, pct, rate)
				shown, shownAt = n, now
			}
		}
	}
}

// errSampler counts errors and keeps the first few distinct messages.
type errSampler struct {
	mu      sync.Mutex
	n       int64
	samples map[string]int64
	order   []string
}

func (e *errSampler) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	msg := err.Error()
	if e.samples == nil {
		e.samples = map[string]int64{}
	}
	if _, ok := e.samples[msg]; !ok && len(e.order) >= 8 {
		return
	} else if !ok {
		e.order = append(e.order, msg)
	}
	e.samples[msg]++
}

func (e *errSampler) snapshot() (int64, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.order))
	for _, m := range e.order {
		out = append(out, fmt.Sprintf("%s (x%d)", m, e.samples[m]))
	}
	return e.n, out
}

func (w *workload) producerClient(topic string) (*kgo.Client, error) {
	c, err := codec(w.o.compression)
	if err != nil {
		return nil, err
	}
	return newKgoClient(w.o,
		kgo.SeedBrokers(w.seeds...),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent writes are kgo's default
		kgo.ProducerLinger(w.o.linger),
		kgo.MaxBufferedRecords(w.o.maxBuffered),
		kgo.ProducerBatchMaxBytes(w.o.batchMaxBytes),
		kgo.ProducerBatchCompression(c),
		kgo.WithLogger(kgoLogger(w.o.clientLog, w.stderr)),
	)
}

func (w *workload) consumerClient(topic string) (*kgo.Client, error) {
	return newKgoClient(w.o,
		kgo.SeedBrokers(w.seeds...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(w.o.fetchMaxBytes),
		kgo.FetchMaxPartitionBytes(w.o.fetchMaxPartBytes),
		kgo.WithLogger(kgoLogger(w.o.clientLog, w.stderr)),
	)
}

func codec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("unknown compression %q", name)
}

// inflight is a pooled record plus its send time. Its promise is a method
// value bound once, so steady-state producing allocates nothing per record.
type inflight struct {
	rec     kgo.Record
	sent    time.Time
	promise func(*kgo.Record, error)
	onDone  func(*inflight, error)
}

func (f *inflight) done(_ *kgo.Record, err error) { f.onDone(f, err) }

// produce sends o.records records of o.valueSize bytes from o.producers
// goroutines sharing one client, as fast as the client lets it, and
// measures the time from each Produce call to its promise.
func (w *workload) produce(ctx context.Context, topic string, p *phaseResult) {
	cl, err := w.producerClient(topic)
	if err != nil {
		p.errs.add(err)
		return
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		p.errs.add(err)
		return
	}
	value := make([]byte, w.o.valueSize) // shared by every record, never written after this
	_, _ = rand.Read(value)

	var (
		h     = new(histogram)
		acked atomic.Int64
		prog  = p.prog
		pool  sync.Pool
	)
	onDone := func(f *inflight, err error) {
		d := time.Since(f.sent)
		if err != nil {
			p.errs.add(err)
		} else {
			h.record(d)
			acked.Add(1)
			prog.n.Add(1)
		}
		f.rec = kgo.Record{}
		pool.Put(f)
	}
	pool.New = func() any {
		f := &inflight{onDone: onDone}
		f.promise = f.done
		return f
	}

	var wg sync.WaitGroup
	start := time.Now()
	for g := 0; g < w.o.producers; g++ {
		n := w.o.records / int64(w.o.producers)
		if int64(g) < w.o.records%int64(w.o.producers) {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); i < n && ctx.Err() == nil; i++ {
				f := pool.Get().(*inflight)
				f.rec.Value = value
				f.sent = time.Now()
				cl.Produce(ctx, &f.rec, f.promise)
			}
		}()
	}
	wg.Wait()
	if err := cl.Flush(ctx); err != nil {
		p.errs.add(fmt.Errorf("flush: %w", err))
	}
	p.Seconds = time.Since(start).Seconds()
	p.Records = acked.Load()
	p.Bytes = p.Records * int64(w.o.valueSize)
	p.Latency = h.summary()
}

// consume reads the topic from the start until every partition reaches the
// end offset it had when the phase began, checking offsets are contiguous.
func (w *workload) consume(ctx context.Context, topic string, p *phaseResult) {
	ends, err := w.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		p.errs.add(fmt.Errorf("list end offsets: %w", err))
		return
	}
	starts, err := w.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		p.errs.add(fmt.Errorf("list start offsets: %w", err))
		return
	}
	next := map[int32]int64{}
	end := map[int32]int64{}
	ends.Each(func(lo kadm.ListedOffset) {
		end[lo.Partition] = lo.Offset
		next[lo.Partition] = 0
	})
	starts.Each(func(lo kadm.ListedOffset) { next[lo.Partition] = lo.Offset })
	remaining, inLog := 0, int64(0)
	for part, e := range end {
		if next[part] < e {
			remaining++
			inLog += e - next[part]
		}
	}
	switch {
	case w.synthetic || w.produced == 0:
	case w.o.offsetGaps && inLog < w.produced:
		p.errs.add(fmt.Errorf("the log spans %d offsets (end - start) but %d records were acknowledged", inLog, w.produced))
	case !w.o.offsetGaps && inLog != w.produced:
		p.errs.add(fmt.Errorf("the log holds %d records (end - start offsets) but %d were acknowledged", inLog, w.produced))
	}
	if w.synthetic {
		remaining = 1 // until o.records are read
	}

	start := time.Now()
	cl, err := w.consumerClient(topic)
	if err != nil {
		p.errs.add(err)
		return
	}
	defer cl.Close()
	for remaining > 0 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(t string, part int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				p.errs.add(fmt.Errorf("fetch %s/%d: %w", t, part, err))
			}
		})
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if len(fp.Records) == 0 {
				return
			}
			exp := next[fp.Partition]
			for _, r := range fp.Records {
				if (r.Offset != exp && !w.o.offsetGaps || r.Offset < exp) && !w.synthetic {
					p.errs.add(fmt.Errorf("partition %d: offset %d, expected %d", fp.Partition, r.Offset, exp))
				}
				exp = r.Offset + 1
				p.Bytes += int64(len(r.Value))
				if len(r.Value) != w.o.valueSize {
					p.errs.add(fmt.Errorf("partition %d offset %d: value of %d bytes, produced %d", fp.Partition, r.Offset, len(r.Value), w.o.valueSize))
				}
			}
			p.Records += int64(len(fp.Records))
			p.prog.n.Add(int64(len(fp.Records)))
			if w.synthetic {
				if p.Records >= w.o.records && remaining > 0 {
					remaining = 0
				}
				return
			}
			before := next[fp.Partition]
			next[fp.Partition] = exp
			if before < end[fp.Partition] && exp >= end[fp.Partition] {
				remaining--
			}
			if w.o.offsetGaps && p.Records >= w.produced {
				remaining = 0 // every acknowledged record read; offsets have gaps
			}
		})
	}
	p.Seconds = time.Since(start).Seconds()
}

// endToEnd produces at a fixed rate with the send time (Unix ns) in the
// first 8 bytes of each value while a consumer in this process computes
// now - sent for every record.
func (w *workload) endToEnd(ctx context.Context, topic string, p *phaseResult) {
	prod, err := w.producerClient(topic)
	if err != nil {
		p.errs.add(err)
		return
	}
	defer prod.Close()
	cons, err := w.consumerClient(topic)
	if err != nil {
		p.errs.add(err)
		return
	}
	defer cons.Close()

	template := make([]byte, w.o.valueSize)
	_, _ = rand.Read(template)
	total := int64(w.o.e2eRate) * int64(w.o.e2eDuration) / int64(time.Second)
	if total < 1 {
		total = 1
	}
	h := new(histogram)
	var received atomic.Int64
	ready := make(chan struct{})
	consDone := make(chan struct{})

	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	defer func() { ccancel(); <-consDone }()
	go func() {
		defer close(consDone)
		warm := false
		for received.Load() < total && cctx.Err() == nil {
			fs := cons.PollFetches(cctx)
			now := time.Now().UnixNano()
			fs.EachError(func(t string, part int32, err error) {
				if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
					p.errs.add(fmt.Errorf("fetch %s/%d: %w", t, part, err))
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) < 8 {
					p.errs.add(fmt.Errorf("partition %d offset %d: short value", r.Partition, r.Offset))
					return
				}
				sent := int64(binary.BigEndian.Uint64(r.Value))
				if sent == 0 { // warm-up record
					if !warm {
						warm = true
						close(ready)
					}
					return
				}
				h.record(time.Duration(now - sent))
				received.Add(1)
				p.prog.n.Add(1)
			})
		}
	}()

	var pool sync.Pool
	onDone := func(f *inflight, err error) {
		if err != nil {
			p.errs.add(err)
		}
		f.rec = kgo.Record{Value: f.rec.Value}
		pool.Put(f)
	}
	pool.New = func() any {
		f := &inflight{onDone: onDone, rec: kgo.Record{Value: make([]byte, w.o.valueSize)}}
		f.promise = f.done
		return f
	}
	send := func(ts int64) {
		f := pool.Get().(*inflight)
		copy(f.rec.Value, template)
		binary.BigEndian.PutUint64(f.rec.Value, uint64(ts))
		prod.Produce(ctx, &f.rec, f.promise)
	}

	// Warm up: connections, metadata, producer id and the consumer's first
	// fetch, so the measured records see a running pipeline.
	warmTick := time.NewTicker(10 * time.Millisecond)
	warmDeadline := time.NewTimer(30 * time.Second)
warmup:
	for {
		send(0)
		select {
		case <-ready:
			break warmup
		case <-ctx.Done():
			warmTick.Stop()
			return
		case <-warmDeadline.C:
			warmTick.Stop()
			p.errs.add(errors.New("warm-up: the consumer saw no record within 30s"))
			return
		case <-warmTick.C:
		}
	}
	warmTick.Stop()
	warmDeadline.Stop()

	// Pace: by elapsed time t we should have sent rate*t records.
	start := time.Now()
	interval := time.Second / time.Duration(w.o.e2eRate)
	var sent int64
	for sent < total && ctx.Err() == nil {
		due := int64(time.Since(start)/interval) + 1
		for ; sent < due && sent < total; sent++ {
			send(time.Now().UnixNano())
		}
		if wait := time.Until(start.Add(time.Duration(sent) * interval)); wait > 0 {
			time.Sleep(wait)
		}
	}
	if err := prod.Flush(ctx); err != nil {
		p.errs.add(fmt.Errorf("flush: %w", err))
	}
	// Wait for the consumer to see everything (or the phase timeout).
	select {
	case <-consDone:
	case <-ctx.Done():
	}
	ccancel()
	<-consDone
	p.Seconds = time.Since(start).Seconds()
	p.Records = received.Load()
	p.Bytes = p.Records * int64(w.o.valueSize)
	p.Latency = h.summary()
	if p.Records < sent {
		p.errs.add(fmt.Errorf("received %d of %d records", p.Records, sent))
	}
}

// median of xs (xs is reordered).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

// txnProduce is the produce phase in transactions of o.txnRecords records
// (issue #7): o.producers transactional kgo clients, each with its own
// transactional id and otherwise the produce phase's settings, running in
// parallel as the plain phase's o.producers goroutines do. A transactional
// id's transactions are sequential: each transaction's records, then
// Flush and EndTransaction(TryCommit). The clock covers every
// transaction from the first Begin to the last commit.
func (w *workload) txnProduce(ctx context.Context, topic string, p *phaseResult) {
	c, err := codec(w.o.compression)
	if err != nil {
		p.errs.add(err)
		return
	}
	producers := max(w.o.producers, 1)
	clients := make([]*kgo.Client, 0, producers)
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	for g := range producers {
		cl, err := newKgoClient(w.o,
			kgo.SeedBrokers(w.seeds...),
			kgo.DefaultProduceTopic(topic),
			kgo.TransactionalID(fmt.Sprintf("%s-producer-%d", topic, g)),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(w.o.linger),
			kgo.MaxBufferedRecords(w.o.maxBuffered),
			kgo.ProducerBatchMaxBytes(w.o.batchMaxBytes),
			kgo.ProducerBatchCompression(c),
			kgo.WithLogger(kgoLogger(w.o.clientLog, w.stderr)),
		)
		if err != nil {
			p.errs.add(err)
			return
		}
		clients = append(clients, cl)
		if err := cl.Ping(ctx); err != nil {
			p.errs.add(err)
			return
		}
	}
	value := make([]byte, w.o.valueSize)
	_, _ = rand.Read(value)
	var acked, committed atomic.Int64
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			p.errs.add(err)
			return
		}
		acked.Add(1)
		p.prog.n.Add(1)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for g, cl := range clients {
		n := w.o.records / int64(producers)
		if int64(g) < w.o.records%int64(producers) {
			n++
		}
		wg.Go(func() {
			recs := make([]kgo.Record, w.o.txnRecords)
			for left := n; left > 0 && ctx.Err() == nil; {
				k := min(left, int64(w.o.txnRecords))
				left -= k
				if err := cl.BeginTransaction(); err != nil {
					p.errs.add(err)
					return
				}
				for i := range k {
					recs[i] = kgo.Record{Value: value}
					cl.Produce(ctx, &recs[i], promise)
				}
				// EndTransaction does not flush: the records must be
				// acknowledged first (and recs is reused by the next
				// transaction).
				if err := cl.Flush(ctx); err != nil {
					p.errs.add(fmt.Errorf("flush: %w", err))
					return
				}
				if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
					p.errs.add(fmt.Errorf("end transaction: %w", err))
					return
				}
				committed.Add(k)
			}
		})
	}
	wg.Wait()
	p.Seconds = time.Since(start).Seconds()
	p.Records = min(committed.Load(), acked.Load())
	p.Bytes = p.Records * int64(w.o.valueSize)
}
