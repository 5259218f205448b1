package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// startTarget starts target name with its data in dir and returns the
// bootstrap addresses and a function that shuts it down.
func startTarget(o *options, name, dir string, stderr io.Writer) ([]string, func() error, error) {
	o.clientOpts = nil
	o.replicationFactor, o.offsetGaps = o.rfFlag, false
	switch name {
	case targetShoal:
		return startShoal(o, dir, zapLogger(o.brokerLog, stderr).Named("shoal"))
	case targetShoalSec, targetShoalSecNoACL:
		return startShoalSASLSSL(o, dir, zapLogger(o.brokerLog, stderr).Named("shoal"), name == targetShoalSec)
	case targetShoalCluster, targetShoalClusterRF1:
		seeds, stop, err := startShoalCluster(o, dir, zapLogger(o.brokerLog, stderr).Named("shoal"))
		if name == targetShoalClusterRF1 {
			o.replicationFactor = 1
		}
		return seeds, stop, err
	case targetKfake:
		return startKfake(o, dir, stderr)
	case targetCeiling:
		return startCeiling(o, stderr)
	case targetExternal:
		opts, err := seedClientOpts(o)
		if err != nil {
			return nil, nil, err
		}
		o.clientOpts = opts
		return o.seeds, func() error { return nil }, nil
	}
	return nil, nil, fmt.Errorf("unknown target %q", name)
}

// startKfake starts a one-broker kfake cluster persisting to dir with an
// fsync of the segment and index files after every produced batch.
func startKfake(o *options, dir string, stderr io.Writer) ([]string, func() error, error) {
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.DataDir(dir),
		kfake.SyncWrites(),
		kfake.WithLogger(kfake.BasicLogger(stderr, kfakeLevel(o.brokerLog))),
	)
	if err != nil {
		return nil, nil, err
	}
	return c.ListenAddrs(), func() error { c.Close(); return nil }, nil
}

// startCeiling starts a kfake that stores nothing: produce is acknowledged
// without storing (BlackholeProduce) and every fetch is answered from one
// canned batch of o.valueSize records (SyntheticFetch). What the clients
// reach against it is the most this machine's client side can do.
func startCeiling(o *options, stderr io.Writer) ([]string, func() error, error) {
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.BlackholeProduce(),
		kfake.SyntheticFetch(kfake.SyntheticBatch{RecordBytes: o.valueSize, RandomFrac: 1}),
		kfake.WithLogger(kfake.BasicLogger(stderr, kfakeLevel(o.brokerLog))),
	)
	if err != nil {
		return nil, nil, err
	}
	return c.ListenAddrs(), func() error { c.Close(); return nil }, nil
}

func kfakeLevel(l string) kfake.LogLevel {
	switch l {
	case "error":
		return kfake.LogLevelError
	case "warn":
		return kfake.LogLevelWarn
	case "info":
		return kfake.LogLevelInfo
	case "debug":
		return kfake.LogLevelDebug
	}
	return kfake.LogLevelNone
}

func kgoLogger(l string, w io.Writer) kgo.Logger {
	lvl := kgo.LogLevelNone
	switch l {
	case "error":
		lvl = kgo.LogLevelError
	case "warn":
		lvl = kgo.LogLevelWarn
	case "info":
		lvl = kgo.LogLevelInfo
	case "debug":
		lvl = kgo.LogLevelDebug
	}
	return kgo.BasicLogger(w, lvl, func() string { return "kgo " })
}

func zapLogger(l string, w io.Writer) *zap.Logger {
	if l == "none" {
		return zap.NewNop()
	}
	lvl, err := zapcore.ParseLevel(l)
	if err != nil {
		lvl = zapcore.WarnLevel
	}
	enc := zap.NewDevelopmentEncoderConfig()
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(w), lvl)
	return zap.New(core)
}

// runTarget starts a fresh target, runs the selected phases against it and
// shuts it down. Failures are recorded in the result, not returned.
func runTarget(ctx context.Context, o *options, name string, round int, stderr io.Writer) *targetRun {
	res := &targetRun{Target: name, Round: round}
	dir, err := os.MkdirTemp(o.dir, "shoal-bench-"+name+"-")
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(stderr, "remove %s: %v\n", dir, err)
		}
		// Flush whatever this target left dirty so the next one does not
		// pay for it, then let the machine settle.
		syncDisks()
		sleepCtx(ctx, o.cooldown)
	}()

	memStart := sampleMem()
	peakOK := resetPeakRSS()
	if o.profileDir != "" {
		stopProfile, err := startProfile(o.profileDir, fmt.Sprintf("%s-r%d.pprof", name, round))
		if err != nil {
			fmt.Fprintf(stderr, "cpu profile: %v\n", err)
		} else {
			defer stopProfile()
		}
	}
	seeds, stop, err := startTarget(o, name, dir, stderr)
	if err != nil {
		res.Error = "start: " + err.Error()
		return res
	}
	stopped := false
	stopTarget := func() {
		if !stopped {
			stopped = true
			t0 := time.Now()
			if err := stop(); err != nil {
				res.Error = joinErr(res.Error, "close: "+err.Error())
			}
			stop = nil // drop the broker so the final memory sample can free it
			res.CloseSeconds = time.Since(t0).Seconds()
		}
	}
	defer stopTarget()
	res.Seeds = seeds

	suffix := strconv.FormatInt(time.Now().UnixNano()/1e6, 36)
	topic, e2eTopic, txnTopic := "bench-"+suffix, "bench-e2e-"+suffix, "bench-txn-"+suffix
	adm, err := newAdmin(o, seeds, stderr)
	if err != nil {
		res.Error = "admin client: " + err.Error()
		return res
	}
	defer adm.Close()
	for _, t := range []string{topic, e2eTopic, txnTopic} {
		if err := createTopic(ctx, o, adm, t, stderr); err != nil {
			res.Error = err.Error()
			return res
		}
	}

	w := &workload{o: o, seeds: seeds, adm: adm, label: fmt.Sprintf("%s r%d", name, round), stderr: stderr, synthetic: name == targetCeiling}
	if o.phases[phaseProduce] {
		res.Produce = w.measure(ctx, phaseProduce, func(ctx context.Context, p *phaseResult) { w.produce(ctx, topic, p) })
	}
	if o.phases[phaseConsume] && res.Produce != nil && res.Produce.Records > 0 {
		w.produced = res.Produce.Records
		res.Consume = w.measure(ctx, phaseConsume, func(ctx context.Context, p *phaseResult) { w.consume(ctx, topic, p) })
	}
	if o.phases[phaseE2E] && name != targetCeiling { // nothing stored, nothing to see end to end
		res.E2E = w.measure(ctx, phaseE2E, func(ctx context.Context, p *phaseResult) { w.endToEnd(ctx, e2eTopic, p) })
	}
	// The group and share phases drain the produce phase's topic, each
	// with a fresh group. The ceiling target stores nothing and serves only
	// Fetch synthetically, so there is nothing for them to drain.
	drain := res.Produce != nil && res.Produce.Records > 0 && name != targetCeiling
	if o.phases[phaseGroup] && drain {
		w.produced = res.Produce.Records
		res.Group = w.measure(ctx, phaseGroup, func(ctx context.Context, p *phaseResult) { w.group(ctx, topic, topic+"-group", p) })
	}
	if o.phases[phaseShare] && drain {
		w.produced = res.Produce.Records
		res.Share = w.measure(ctx, phaseShare, func(ctx context.Context, p *phaseResult) { w.share(ctx, topic, topic+"-share", p) })
	}
	if o.phases[phaseTxn] && name != targetCeiling {
		res.Txn = w.measure(ctx, phaseTxn, func(ctx context.Context, p *phaseResult) { w.txnProduce(ctx, txnTopic, p) })
		if res.Produce != nil && res.Produce.RecordsPerSec > 0 && res.Txn.RecordsPerSec > 0 {
			fmt.Fprintf(stderr, "%s txn: %.0f%% of the plain produce rate\n", w.label, 100*res.Txn.RecordsPerSec/res.Produce.RecordsPerSec)
		}
	}
	if name == targetExternal { // in-process targets take their topics with their data dir
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := adm.DeleteTopics(dctx, topic, e2eTopic, txnTopic); err != nil {
			fmt.Fprintf(stderr, "delete topics: %v\n", err)
		}
		var groups []string
		if res.Group != nil {
			groups = append(groups, topic+"-group")
		}
		if res.Share != nil {
			groups = append(groups, topic+"-share")
		}
		if len(groups) > 0 {
			if _, err := adm.DeleteGroups(dctx, groups...); err != nil {
				fmt.Fprintf(stderr, "delete groups: %v\n", err)
			}
		}
		cancel()
	}
	adm.Close()
	stopTarget()
	memEnd := sampleMem()
	res.Mem = &memDelta{Before: memStart, After: memEnd, PeakRSSBytes: -1}
	if peakOK { // phases reset VmHWM: take the largest of their peaks too
		res.Mem.PeakRSSBytes = procStatus("VmHWM:")
		for _, ph := range res.phaseList() {
			if p := ph.p; p.Mem != nil && p.Mem.PeakRSSBytes > res.Mem.PeakRSSBytes {
				res.Mem.PeakRSSBytes = p.Mem.PeakRSSBytes
			}
		}
	}
	return res
}

func startProfile(dir, name string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// admin is a kadm client plus the kgo client under it for raw requests.
type admin struct {
	*kadm.Client
	client *kgo.Client
	once   sync.Once
}

// Close closes the client once; later calls do nothing.
func (a *admin) Close() { a.once.Do(a.client.Close) }

func newAdmin(o *options, seeds []string, stderr io.Writer) (*admin, error) {
	cl, err := newKgoClient(o, kgo.SeedBrokers(seeds...), kgo.WithLogger(kgoLogger(o.clientLog, stderr)))
	if err != nil {
		return nil, err
	}
	return &admin{Client: kadm.NewClient(cl), client: cl}, nil
}

// createTopic creates topic and waits until every partition has a leader.
// When CreateTopics fails (say the broker does not serve it), it falls back
// to auto-creation through Metadata and accepts the topic if it has
// o.partitions partitions (in-process Shoal auto-creates with that many).
func createTopic(ctx context.Context, o *options, adm *admin, topic string, stderr io.Writer) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(cctx, o.partitions, o.replicationFactor, nil, topic)
	if err == nil {
		err = resp.Err
	}
	autoCreate := false
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		fmt.Fprintf(stderr, "create topic %s: %v; falling back to auto-creation by Metadata\n", topic, err)
		autoCreate = true
	}
	var last error
	for {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		req.AllowAutoTopicCreation = autoCreate
		md, err := req.RequestWith(cctx, adm.client)
		if err == nil {
			err = errors.New("topic missing from metadata")
			for _, t := range md.Topics {
				if t.Topic == nil || *t.Topic != topic {
					continue
				}
				err = kerr.ErrorForCode(t.ErrorCode)
				if err == nil && len(t.Partitions) != int(o.partitions) {
					err = fmt.Errorf("%d partitions, want %d", len(t.Partitions), o.partitions)
				}
				for _, p := range t.Partitions {
					if err == nil && (p.ErrorCode != 0 || p.Leader < 0) {
						err = fmt.Errorf("partition %d: leader %d: %v", p.Partition, p.Leader, kerr.ErrorForCode(p.ErrorCode))
					}
				}
			}
		}
		if err == nil {
			return nil
		}
		last = err
		if !sleepCtx(cctx, 50*time.Millisecond) {
			return fmt.Errorf("topic %s did not become ready: %v", topic, last)
		}
	}
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// memSample is the process-wide memory picture after returning freed
// memory to the OS: both brokers and the clients live in this process.
type memSample struct {
	RSSBytes       int64 `json:"rss_bytes"`
	HeapInuseBytes int64 `json:"heap_inuse_bytes"`
}

type memDelta struct {
	Before memSample `json:"before"`
	After  memSample `json:"after"`
	// PeakRSSBytes is VmHWM at the end, after resetting it at the start
	// through /proc/self/clear_refs; -1 when the kernel does not allow it.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
}

// resetPeakRSS makes VmHWM start again from the current RSS.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

func sampleMem() memSample {
	runtime.GC()         // a first cycle moves sync.Pool contents to the victim cache,
	debug.FreeOSMemory() // the second frees them and returns freed spans to the OS
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSample{RSSBytes: vmRSS(), HeapInuseBytes: int64(ms.HeapInuse)}
}

// vmRSS reads VmRSS from /proc/self/status; -1 when unavailable.
func vmRSS() int64 { return procStatus("VmRSS:") }

// procStatus reads a kB field of /proc/self/status in bytes; -1 when unavailable.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	return -1
}

// newKgoClient is kgo.NewClient with the target's client options
// (options.clientOpts) added.
func newKgoClient(o *options, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(opts, o.clientOpts...)...)
}

// seedClientOpts are the clients' TLS and SASL options for an external
// broker (--seeds-tls-ca, --seeds-scram-sha-512).
func seedClientOpts(o *options) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if o.seedTLSCA != "" {
		pem, err := os.ReadFile(o.seedTLSCA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--seeds-tls-ca %s: no certificate", o.seedTLSCA)
		}
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: pool}))
	}
	if o.seedSCRAM512 != "" {
		user, pass, ok := strings.Cut(o.seedSCRAM512, ":")
		if !ok {
			return nil, fmt.Errorf("--seeds-scram-sha-512: want user:password")
		}
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	}
	return opts, nil
}
