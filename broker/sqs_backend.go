package broker

// The SQS API's listener and its Backend (package sqs): queue topics
// created, altered and deleted through the topic admin, messages appended
// as a produce with acks=all would be (dedup windows, metrics, answered
// once durable), received and settled through the share coordinator's
// direct consumer, queue records and the receipt-handle secret in the
// metadata store.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/meta"
	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/broker/share"
	"github.com/shoal-mq/shoal/broker/sqs"
	slog "github.com/shoal-mq/shoal/log"
)

const (
	prefixSQSTask  = "meta/sqs-task/"
	prefixSQSQueue = "meta/sqs-queue/"
	keySQSSecret   = "meta/sqs-secret"
)

type sqsBackend struct {
	b    *Broker
	turn atomic.Uint32 // round-robin partition of appends
}

// startSQS binds Config.SQSAddr and serves the SQS API; no-op when it is
// empty, and on a cluster (not served there yet).
func (b *Broker) startSQS() error {
	if b.cfg.SQSAddr == "" {
		return nil
	}
	if b.cluster != nil {
		b.lg.Info("the SQS API is not served on a cluster yet", zap.String("sqs_addr", b.cfg.SQSAddr))
		return nil
	}
	cfg := sqs.Config{AdvertisedURL: b.cfg.SQSAdvertisedURL, Account: b.cfg.SQSAccount,
		Region: b.cfg.SQSRegion, Partitions: b.cfg.DefaultPartitions}
	if b.cfg.SQSAuth == "sigv4" {
		if b.cfg.SQSCredentialsFile == "" {
			return fmt.Errorf("broker: shoal.sqs.auth=sigv4 needs shoal.sqs.credentials.file")
		}
		creds, err := sqs.LoadCredentials(b.cfg.SQSCredentialsFile)
		if err != nil {
			return fmt.Errorf("broker: shoal.sqs.credentials.file: %w", err)
		}
		cfg.Credentials = creds
	}
	if b.authz != nil {
		cfg.Authorize = b.allowed
	}
	srv, err := sqs.New(cfg, &sqsBackend{b: b}, b.lg.Named("sqs"))
	if err != nil {
		return fmt.Errorf("broker: sqs: %w", err)
	}
	srv.Observe = func(action, code string, took time.Duration) {
		b.metrics.SQSRequests.WithLabelValues(action, code).Inc()
		b.metrics.SQSSeconds.WithLabelValues(action).Observe(took.Seconds())
	}
	b.sqs.Store(srv)
	ln, err := net.Listen("tcp", b.cfg.SQSAddr)
	if err != nil {
		return fmt.Errorf("broker: sqs listen %s: %w", b.cfg.SQSAddr, err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return b.ctx }}
	b.sqsHTTP.srv, b.sqsHTTP.ln = hs, ln
	b.goroutine(func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.lg.Error("sqs server failed", zap.Error(err))
		}
	})
	return nil
}

// SQSAddr is the bound address of the SQS API ("" when not served).
func (b *Broker) SQSAddr() string {
	if b.sqsHTTP.ln == nil {
		return ""
	}
	return b.sqsHTTP.ln.Addr().String()
}

func (b *Broker) stopSQS() {
	if b.sqsHTTP.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = b.sqsHTTP.srv.Shutdown(ctx)
	}
	if srv := b.sqs.Load(); srv != nil {
		srv.Close() // its move tasks
	}
}

// sqsOwned is share.Options.Owned: a queue's group has the queue's
// settings.
func (b *Broker) sqsOwned(group string) (share.Owned, bool) {
	srv := b.sqs.Load()
	if srv == nil {
		return share.Owned{}, false
	}
	o, ok := srv.QueueGroup(group)
	return share.Owned{DeliveryLimit: o.Limit, DeadLetterTopic: o.DeadLetterTopic, OrderedBy: o.OrderedBy, OrderedBatch: o.OrderedBatch}, ok
}

func (s *sqsBackend) CreateTopic(name string, partitions int32, configs map[string]string) ([16]byte, error) {
	b := s.b
	for k, v := range configs {
		if err := b.checkTopicConfig(k, v); err != nil {
			return [16]byte{}, err
		}
	}
	t, err := b.topicAdmin.Create(name, partitions, configs, false)
	if errors.Is(err, kafkaerr.ErrTopicExists) {
		return [16]byte{}, sqs.ErrTopicExists
	}
	if err != nil {
		return [16]byte{}, err
	}
	return t.ID, nil
}

func (s *sqsBackend) DeleteTopic(name, group string, keepTopic bool) error {
	b := s.b
	if t := b.topics.Get(name); t != nil && !keepTopic {
		if err := b.topicAdmin.Delete(t); err != nil { // its share state goes with it
			return err
		}
	}
	if code, msg, _ := b.shares.DeleteGroup(group); code != 0 {
		return fmt.Errorf("deleting share group %s: %s", group, msg)
	}
	return nil
}

func (s *sqsBackend) AlterTopic(name string, configs map[string]string) error {
	b := s.b
	t := b.topics.Get(name)
	if t == nil {
		return fmt.Errorf("topic %s does not exist", name)
	}
	return b.topicAdmin.UpdateConfigs(t, false, func(cur map[string]string) (map[string]string, error) {
		next := make(map[string]string, len(cur)+len(configs))
		for k, v := range cur {
			next[k] = v
		}
		for k, v := range configs {
			next[k] = v
		}
		return next, nil
	})
}

func (s *sqsBackend) TopicID(name string) ([16]byte, bool) {
	t := s.b.topics.Get(name)
	if t == nil {
		return [16]byte{}, false
	}
	return t.ID, true
}

func (s *sqsBackend) Append(topic string, partition int32, recs []sqs.Record) ([]sqs.Position, error) {
	b := s.b
	t := b.topics.Get(topic)
	if t == nil {
		return nil, fmt.Errorf("topic %s does not exist", topic)
	}
	parts, cfgs := b.topics.Snapshot(t)
	if len(parts) == 0 {
		return nil, fmt.Errorf("topic %s has no partitions", topic)
	}
	if partition < 0 || int(partition) >= len(parts) {
		partition = int32(s.turn.Add(1) % uint32(len(parts)))
	}
	p := parts[partition]
	var raw []byte
	first := recs[0].Timestamp.UnixMilli()
	maxTs := first
	for i, r := range recs {
		ts := r.Timestamp.UnixMilli()
		maxTs = max(maxTs, ts)
		kr := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: ts - first, Key: r.Key, Value: r.Value, Headers: r.Headers}
		raw = records.AppendRecord(raw, &kr)
	}
	batch := records.EncodeBatch(raw, int32(len(recs)), first, maxTs)
	now := time.Now()
	res, deps, ch, err := b.appendProduced(t, p, b.dedupSettingsFor(cfgs), batch, now, true)
	if errors.Is(err, slog.ErrMessageTooLarge) {
		return nil, fmt.Errorf("%w: %v", sqs.ErrTooLarge, err)
	}
	if err != nil {
		return nil, err
	}
	if ch != nil {
		if err := <-ch; err != nil {
			deps.Failed()
			return nil, err
		}
	}
	if err := deps.Wait(); err != nil {
		return nil, err
	}
	// The log keeps a dropped record's offset as a hole: the i-th record
	// is at base+i, or where its first copy is.
	out := make([]sqs.Position, len(recs))
	for i := range out {
		out[i] = sqs.Position{Partition: partition, Offset: res.BaseOffset + int64(i)}
	}
	for _, o := range deps.Origins() {
		out[o.Index] = sqs.Position{Partition: o.Partition, Offset: o.Offset}
	}
	return out, nil
}

func (s *sqsBackend) Partitions(topic string) int32 {
	t := s.b.topics.Get(topic)
	if t == nil {
		return 0
	}
	return s.b.topics.PartitionCount(t)
}

func (s *sqsBackend) Receive(ctx context.Context, r share.DirectReceive) ([]share.DirectRecord, error) {
	return s.b.shares.Receive(ctx, r)
}

func (s *sqsBackend) Settle(group string, topicID [16]byte, entries []share.DirectSettle) []error {
	return s.b.shares.Settle(group, topicID, entries)
}

func (s *sqsBackend) Counts(group, topic string, delays bool) (int64, int64, int64) {
	var ds *share.DelayScan
	if delays {
		ds = &share.DelayScan{NotBefore: sqs.DeliverAt, Horizon: sqs.MaxDelay}
	}
	return s.b.shares.DirectCounts(group, topic, ds)
}

func (s *sqsBackend) Purge(group, topic string) error { return s.b.shares.DirectPurge(group, topic) }

func (s *sqsBackend) SaveQueue(name string, rec []byte) error {
	return s.save(prefixSQSQueue+name, rec)
}

func (s *sqsBackend) LoadQueues() (map[string][]byte, error) { return s.load(prefixSQSQueue) }

func (s *sqsBackend) SaveTask(handle string, rec []byte) error {
	return s.save(prefixSQSTask+handle, rec)
}

func (s *sqsBackend) LoadTasks() (map[string][]byte, error) { return s.load(prefixSQSTask) }

// save stores rec under key durably (nil: deletes it).
func (s *sqsBackend) save(key string, rec []byte) error {
	return s.b.meta.DB().Update(func(txn *badger.Txn) error {
		if rec == nil {
			return txn.Delete([]byte(key))
		}
		return txn.Set([]byte(key), rec)
	})
}

func (s *sqsBackend) load(prefix string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := meta.ScanJSON(s.b.meta.DB(), prefix, func(name string, v json.RawMessage) error {
		out[name] = v
		return nil
	})
	return out, err
}

func (s *sqsBackend) Secret() ([]byte, error) {
	return meta.GetOrCreate(s.b.meta.DB(), []byte(keySQSSecret), func() []byte {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		return k
	})
}
