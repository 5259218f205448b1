package share

import (
	"context"
	"encoding/binary"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/shoal-mq/shoal/broker/meta"
	"github.com/shoal-mq/shoal/broker/metrics"
	"github.com/shoal-mq/shoal/broker/quota"
	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/broker/topics"
	slog "github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/protocol"
)

// testShare is a share coordinator over real topics, syncer, quota
// manager and metadata store in a directory of its own, with no broker
// and no sockets: the package's tests drive share-partitions through it
// directly, as the root's handlers do. Logs are fsynced as with
// fsync=always.
type testShare struct {
	t      testing.TB
	dir    string
	lg     *zap.Logger
	opts   []func(*Options)
	store  *meta.Store
	topics *topics.Registry
	admin  *topics.Admin
	syncer *topics.Syncer
	quotas *quota.Manager
	c      *Coordinator

	ctx     context.Context
	cancel  context.CancelFunc
	stop    chan struct{} // stops the syncer
	wg      sync.WaitGroup
	closeMu sync.Mutex
	closed  bool

	cfgMu     sync.RWMutex
	brokerCfg map[string]string // dynamic broker configs (BrokerConfig)
}

// newTestShare opens a share coordinator on dir (a new temporary
// directory if ""), with opts applied to its Options last. It is closed
// when the test ends (close is idempotent).
func newTestShare(t testing.TB, dir string, opts ...func(*Options)) *testShare {
	t.Helper()
	return newTestShareCfg(t, dir, nil, opts...)
}

// newTestShareCfg is newTestShare with the dynamic broker configs cfg
// set before the coordinator starts.
func newTestShareCfg(t testing.TB, dir string, cfg map[string]string, opts ...func(*Options)) *testShare {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	h := &testShare{t: t, dir: dir, lg: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), opts: opts, brokerCfg: map[string]string{}}
	for k, v := range cfg {
		h.brokerCfg[k] = v
	}
	var err error
	h.store, err = meta.Open(dir, h.lg)
	require.NoError(t, err)
	m := metrics.New(nil)
	h.topics = topics.NewRegistry()
	h.stop = make(chan struct{})
	h.syncer = topics.NewSyncer(topics.SyncOptions{Always: true, FsyncSeconds: m.FsyncSeconds, Logger: h.lg, Stop: h.stop})
	h.wg.Add(1)
	go func() { defer h.wg.Done(); h.syncer.Run() }()
	h.admin = topics.NewAdmin(topics.Options{
		Registry: h.topics, Store: h.store, DataDir: dir, FS: slog.OSFS(),
		LogConfig: func(map[string]string) slog.Config { return slog.DefaultConfig() },
		Metrics:   m, Logger: h.lg,
		Forget:         func([16]byte) {},
		DropOffsets:    func(string) error { return nil },
		DropShareState: func(id [16]byte) error { return h.c.DeleteTopicState(id) }, // nil-safe before New
	})
	require.NoError(t, h.admin.Load())
	h.quotas, err = quota.New(h.store.DB(), nil)
	require.NoError(t, err)
	h.ctx, h.cancel = context.WithCancel(context.Background())
	o := Options{
		Store: h.store, Topics: h.topics, Admin: h.admin, Syncer: h.syncer,
		Metrics: m, Quotas: h.quotas, Logger: h.lg, Ctx: h.ctx,
		DataDir: dir, FsyncAlways: true,
		BatchCacheBytes: DefaultBatchCacheBytes, DefaultPartitions: 1,
		BrokerConfig:    h.brokerConfig,
		IsConsumerGroup: func(string) bool { return false },
	}
	for _, f := range opts {
		f(&o)
	}
	h.c, err = New(o)
	require.NoError(t, err)
	h.wg.Add(1)
	go func() { defer h.wg.Done(); h.c.ResumeDLQ() }()
	t.Cleanup(h.close)
	return h
}

// close stops the coordinator, then the syncer, and closes the logs and
// the store, as Broker.Close does.
func (h *testShare) close() {
	h.closeMu.Lock()
	defer h.closeMu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	h.cancel()
	h.c.Close()
	close(h.stop)
	h.wg.Wait()
	require.NoError(h.t, h.topics.Close())
	require.NoError(h.t, h.store.Close())
}

// restart closes h and opens a coordinator on the same directory with
// the same options and dynamic broker configs (a clean restart).
func (h *testShare) restart() *testShare {
	h.t.Helper()
	h.close()
	h.cfgMu.RLock()
	cfg := maps.Clone(h.brokerCfg)
	h.cfgMu.RUnlock()
	return newTestShareCfg(h.t, h.dir, cfg, h.opts...)
}

func (h *testShare) brokerConfig(name string) (string, bool) {
	h.cfgMu.RLock()
	defer h.cfgMu.RUnlock()
	v, ok := h.brokerCfg[name]
	return v, ok
}

// setBrokerConfig sets a dynamic broker config, as IncrementalAlterConfigs
// on the BROKER resource does.
func (h *testShare) setBrokerConfig(name, value string) {
	h.cfgMu.Lock()
	h.brokerCfg[name] = value
	h.cfgMu.Unlock()
}

// setGroupConfigs sets group configs (name, value pairs) as
// IncrementalAlterConfigs on the GROUP resource does.
func (h *testShare) setGroupConfigs(group string, kv ...string) {
	h.t.Helper()
	var ops []kmsg.IncrementalAlterConfigsRequestResourceConfig
	for i := 0; i < len(kv); i += 2 {
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Op, op.Value = kv[i], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kv[i+1])
		ops = append(ops, op)
	}
	require.NoError(h.t, h.c.IncrementalAlterGroupConfigs(group, ops, false))
}

// createTopic creates topic with partitions and topic configs cfgs.
func (h *testShare) createTopic(name string, partitions int32, cfgs map[string]string) *topics.Topic {
	h.t.Helper()
	t, err := h.admin.Create(name, partitions, cfgs, false)
	require.NoError(h.t, err)
	return t
}

// tp names partition p of topic as share requests do.
func (h *testShare) tp(topic string, p int32) shareTP {
	h.t.Helper()
	t := h.topics.Get(topic)
	require.NotNil(h.t, t, "topic %s", topic)
	return shareTP{topicID: t.ID, partition: p}
}

// appendBatch appends raw record batches to partition p of topic and
// waits until they are durable (the high watermark is past them). It
// returns the first offset.
func (h *testShare) appendBatch(topic string, p int32, batch []byte) int64 {
	h.t.Helper()
	lp := h.topics.Partition(topic, p)
	require.NotNil(h.t, lp, "%s-%d", topic, p)
	res, err := lp.Log.Append(batch, time.Now())
	require.NoError(h.t, err)
	require.NoError(h.t, <-h.syncer.Appended(lp, res.BaseOffset, res.LastOffset+1, true))
	return res.BaseOffset
}

// produceValues creates topic with one partition if it does not exist
// and appends the values "0".."n-1" at offsets 0..n-1 (of a new topic),
// in batches of 10, as the root's test of the same name does through a
// client.
func (h *testShare) produceValues(topic string, n int) {
	h.t.Helper()
	if h.topics.Get(topic) == nil {
		h.createTopic(topic, 1, nil)
	}
	for i := 0; i < n; i += 10 {
		var recs []testRecord
		for j := i; j < min(i+10, n); j++ {
			recs = append(recs, testRecord{value: []byte(strconv.Itoa(j))})
		}
		h.appendBatch(topic, 0, encodeBatch(recs, batchOpts{}))
	}
}

// testRecord is one record of encodeBatch.
type testRecord struct {
	key, value []byte
	headers    []kmsg.Header
}

// batchOpts are a batch's producer fields (producerID 0 without
// transactional: no producer, -1).
type batchOpts struct {
	transactional bool
	producerID    int64
	epoch         int16
	sequence      int32
	codec         protocol.Compression // CompressionNone: uncompressed
}

// encodeBatch encodes recs as one v2 record batch (base offset 0; the
// log assigns offsets), compressed with o.codec.
func encodeBatch(recs []testRecord, o batchOpts) []byte {
	var raw []byte
	for i, r := range recs {
		rec := kmsg.Record{OffsetDelta: int32(i), Key: r.key, Value: r.value, Headers: r.headers}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		raw = rec.AppendTo(raw)
	}
	attrs := int16(0)
	if o.codec != protocol.CompressionNone {
		var err error
		if raw, err = records.Compress(raw, o.codec); err != nil {
			panic(err)
		}
		attrs |= int16(o.codec)
	}
	pid, epoch, seq := o.producerID, o.epoch, o.sequence
	if o.transactional {
		attrs |= protocol.AttrTransactional
	} else if pid == 0 {
		pid, epoch, seq = -1, -1, -1 // no producer
	}
	now := time.Now().UnixMilli()
	b := (&kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		NumRecords: int32(len(recs)), Records: raw}).AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-protocol.BatchLengthPrefix))
	protocol.SetBatchCRC(b)
	return b
}
