package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/cluster"
	"github.com/shoal-mq/shoal/broker/configs"
	"github.com/shoal-mq/shoal/broker/dedup"
	"github.com/shoal-mq/shoal/broker/groups"
	"github.com/shoal-mq/shoal/broker/meta"
	"github.com/shoal-mq/shoal/broker/metrics"
	"github.com/shoal-mq/shoal/broker/quota"
	"github.com/shoal-mq/shoal/broker/security"
	"github.com/shoal-mq/shoal/broker/share"
	"github.com/shoal-mq/shoal/broker/sqs"
	"github.com/shoal-mq/shoal/broker/topics"
	"github.com/shoal-mq/shoal/broker/txn"
	slog "github.com/shoal-mq/shoal/log"
)

// Broker is one running Shoal node. Create it with Start; stop it with
// Close. All exported methods are safe for concurrent use.
type Broker struct {
	// sqs is the SQS API (sqs_backend.go), once started; sqsHTTP its
	// server.
	sqs     atomic.Pointer[sqs.Server]
	sqsHTTP httpServer

	cfg       Config
	lg        *zap.Logger
	fs        slog.FS
	meta      *meta.Store
	clusterID string
	topics    *topics.Registry // the topics and their partitions: package topics
	// topicAdmin creates, deletes, grows and reconfigures topics, one at
	// a time; dynamic broker config changes run under its lock too.
	topicAdmin *topics.Admin
	dedup      *dedup.Window // the dedup window's ids per topic: package dedup
	syncer     *topics.Syncer

	fetchSessions *fetchSessionCache
	groups        *groups.Coordinator
	shares        *share.Coordinator // share groups (KIP-932): package share
	txns          *txn.Coordinator   // transactions, package txn
	// cluster is this broker's part of a cluster (cluster.go); nil on a
	// single node.
	cluster *cluster.Node

	metrics *metrics.Metrics // Prometheus collectors: package metrics, metrics_state.go
	http    *httpServer
	// ready is set once recovery has finished and the listener serves
	// (/readyz), and cleared when Close begins. Everything Start builds
	// is visible to whoever loads it true.
	ready  atomic.Bool
	quotas *quota.Manager // client quotas and rate limits: package quota

	// dyn holds dynamic broker config overrides (IncrementalAlterConfigs
	// on the broker resource), persisted in the metadata store.
	dyn struct {
		sync.RWMutex
		m map[string]string
	}

	listeners []*listener           // listeners.go; bound in Start, then read-only
	creds     *security.Credentials // SCRAM credentials (SASL, security/credentials.go)
	// superUsers is super.users (read-only after Start).
	superUsers map[string]bool
	// authz is the ACL authorizer (authorizer.class.name); nil when off,
	// and then every request is allowed (authz.go).
	authz   *acl.Authorizer
	connIDs atomic.Uint64   // the last conn.id given
	ctx     context.Context // cancelled when Close begins
	cancel  context.CancelFunc
	wg      sync.WaitGroup // every background goroutine, see goroutine
	connWG  sync.WaitGroup // connection goroutines, see connGoroutine
	// syncStop stops the syncer. It is closed only after every connection
	// has finished, so no produce waits for an fsync that never comes.
	syncStop  chan struct{}
	closeOnce sync.Once
	closeErr  error

	conns struct {
		sync.Mutex
		m map[*conn]struct{}
	}
}

// Start starts the operations HTTP server (Config.HTTPAddr, /readyz not
// ready yet), opens the data directory (running log recovery), binds the
// listener and begins serving. It returns once the broker accepts
// connections.
func Start(cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.BrokerConfigs = maps.Clone(cfg.BrokerConfigs) // read without a lock from now on
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("broker: data dir: %w", err)
	}
	b := &Broker{
		cfg:           cfg,
		lg:            lg,
		fs:            slog.OSFS(),
		topics:        topics.NewRegistry(),
		fetchSessions: newFetchSessionCache(1000),
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.syncStop = make(chan struct{})
	b.conns.m = map[*conn]struct{}{}
	b.metrics = newMetrics(b)
	// The HTTP server comes up before recovery, so /healthz answers and
	// /readyz says "not ready" while the logs and metadata recover.
	if err := b.startHTTP(); err != nil {
		b.cancel()
		return nil, err
	}
	if cfg.beforeRecovery != nil {
		cfg.beforeRecovery(b)
	}
	var err error
	if b.meta, err = meta.Open(cfg.DataDir, lg); err != nil {
		b.cancel()
		b.stopHTTP()
		return nil, err
	}
	fail := func(err error) (*Broker, error) {
		b.cancel()
		b.stopHTTP()
		if b.groups != nil {
			b.groups.Close()
		}
		if b.shares != nil {
			b.shares.Close()
		}
		b.topics.Close()
		b.meta.Close()
		return nil, err
	}
	if b.clusterID, err = b.meta.ClusterID(); err != nil {
		return fail(err)
	}
	if cfg.Voters != "" {
		voters, _ := ParseVoters(cfg.Voters) // checked by Validate
		b.clusterID = clusterIDOf(voters)
		b.meta.SetProducerIDBase(int64(cfg.NodeID) << 40)
	}
	if b.dyn.m, err = b.meta.BrokerConfigs(); err != nil {
		return fail(err)
	}
	throttled := func(scope string, d time.Duration) {
		b.metrics.QuotaThrottle.WithLabelValues(scope).Observe(d.Seconds())
	}
	if b.quotas, err = quota.New(b.meta.DB(), throttled); err != nil {
		return fail(err)
	}
	b.syncer = topics.NewSyncer(topics.SyncOptions{Always: cfg.Fsync == FsyncAlways, FlushInterval: cfg.FlushInterval,
		FsyncSeconds: b.metrics.FsyncSeconds, Logger: lg, Stop: b.syncStop})
	b.dedup = dedup.New(dedup.Options{Registry: b.topics, Syncer: b.syncer, Always: cfg.Fsync == FsyncAlways, Logger: lg})
	b.topicAdmin = topics.NewAdmin(topics.Options{
		Registry: b.topics, Store: b.meta, DataDir: cfg.DataDir, FS: b.fs,
		LogConfig: b.logConfig, Metrics: b.metrics, Logger: lg,
		Forget:         b.dedup.Forget,
		DropOffsets:    func(topic string) error { return b.groups.DropTopicOffsets(topic) },
		DropShareState: func(id [16]byte) error { return b.shares.DeleteTopicState(id) }, // nil-safe before the shares load
		BeforeCleanup:  cfg.beforeTopicCleanup,
		Clustered:      cfg.Voters != "",
		// Only a cluster's topics are replicated, so only they call it.
		ReplicateConfigs: b.replicateTopicConfigs,
		ReplicateDelete:  b.replicateTopicDelete,
	})
	began := time.Now()
	if err := b.topicAdmin.Load(); err != nil {
		return fail(err)
	}
	lg.Info("recovered logs", zap.Int("topics", len(b.topics.All())), zap.Duration("took", time.Since(began)))
	b.superUsers, _ = security.ParseSuperUsers(security.Settings(cfg.Security).For("", "super.users")) // checked by Validate
	// The ACLs come before the coordinators, which ask them (a regex
	// subscription's reach).
	if sec := security.Settings(cfg.Security); sec.For("", "authorizer.class.name") != "" {
		b.authz, err = acl.New(acl.Options{Store: b.meta, SuperUsers: b.superUsers,
			AllowEveryoneIfNoACLFound: strings.EqualFold(sec.For("", "allow.everyone.if.no.acl.found"), "true")})
		if err != nil {
			return fail(fmt.Errorf("broker: ACLs: %w", err))
		}
	}
	b.groups = groups.New(groups.Options{
		Topics: b.topics, Store: b.meta, Logger: lg, Done: b.ctx.Done(),
		IsShareGroup: func(name string) bool { return b.shares.IsShareGroup(name) }, // nil-safe
		BrokerConfig: b.brokerConfig,
		// Not nil-safe: the groups read configs only once loaded
		// (groups.Load, below, after share.New) or serving requests.
		GroupConfigInt:         func(group, name string) int64 { return b.shares.GroupConfigInt(group, name) },
		GroupBrokerInt:         func(name string) int64 { return b.shares.GroupBrokerInt(name) },
		OffsetFetchAfterStable: cfg.offsetFetchAfterStable, ExpiryBeforeDelete: cfg.expiryBeforeDelete,
		MayDescribe: b.mayDescribeTopic,
	})
	// The share coordinator holds the group configs, which the loaded
	// KIP-848 groups read (consumerSettings): it comes first.
	if b.shares, err = share.New(share.Options{
		Store: b.meta, Topics: b.topics, Admin: b.topicAdmin, Syncer: b.syncer,
		Metrics: b.metrics, Quotas: b.quotas, Logger: lg, Ctx: b.ctx,
		DataDir: cfg.DataDir, FsyncAlways: cfg.Fsync == FsyncAlways,
		BatchCacheBytes: cfg.ShareBatchCacheBytes, DefaultPartitions: cfg.DefaultPartitions,
		BrokerConfig:    b.brokerConfig,
		IsConsumerGroup: func(name string) bool { return b.groups.Exists(name) },
		Owned:           b.sqsOwned,
		BeforeCommit:    cfg.shareBeforeCommit,
		DLQ:             cfg.shareDLQ,
	}); err != nil {
		return fail(err)
	}
	if err := b.groups.Load(); err != nil {
		return fail(err)
	}
	b.txns = txn.New(txn.Options{
		Store: b.meta, Topics: b.topics, Syncer: b.syncer, Groups: b.groups, Logger: lg,
		Done: b.ctx.Done(), Setting: b.txnSetting, MarkerSyncDelay: cfg.markerSyncDelay,
		OffsetBeforeLock: cfg.txnOffsetBeforeLock, OffsetBeforeAdd: cfg.txnOffsetBeforeAdd,
		BeforeApply: cfg.txnBeforeApply, BeforeDropMarks: cfg.beforeDropMarks,
		BeforeStep:         cfg.txnBeforeStep,
		StampedBeforeWrite: cfg.txnStampedBeforeWrite,
	})
	if err := b.txns.Load(); err != nil {
		return fail(err)
	}
	b.txns.Recover() // complete transactions decided before a crash
	if b.creds, err = security.LoadCredentials(b.meta); err != nil {
		return fail(fmt.Errorf("broker: SCRAM credentials: %w", err))
	}
	if err := b.topicAdmin.FinishDeletions(""); err != nil {
		return fail(fmt.Errorf("broker: finishing interrupted topic deletions: %w", err))
	}
	if err := b.listen(); err != nil {
		return fail(err)
	}
	if cfg.Voters != "" {
		if err := b.startCluster(); err != nil {
			b.closeListeners()
			return fail(err)
		}
	}
	b.goroutine(b.syncer.Run)
	b.goroutine(b.retentionLoop)
	b.goroutine(b.cleanerLoop)
	b.goroutine(b.groups.ExpireLoop)
	b.goroutine(b.txns.ExpireLoop)
	for _, l := range b.listeners {
		b.goroutine(func() { b.acceptLoop(l) })
	}
	b.goroutine(b.shares.ResumeDLQ) // dead-letter writes pending at a crash (share/dlq.go)
	if err := b.startSQS(); err != nil {
		_ = b.Close()
		return nil, err
	}
	b.ready.Store(true)
	for _, l := range b.listeners {
		if l.mechanisms != nil && len(b.superUsers) == 0 && b.authz == nil {
			lg.Warn("super.users is unset: any client may create and delete SCRAM credentials (as in Kafka without an authorizer); set super.users", zap.String("listener", l.name))
			break
		}
	}
	bound, adv := b.describeListeners()
	lg.Info("serving", zap.String("listeners", bound), zap.String("advertised", adv),
		zap.String("cluster_id", b.clusterID), zap.Int32("node_id", cfg.NodeID), zap.String("fsync", string(cfg.Fsync)))
	return b, nil
}

// Run starts a broker and serves until ctx is done, then shuts down
// gracefully.
func Run(ctx context.Context, cfg Config) error {
	b, err := Start(cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	return b.Close()
}

// ClusterID returns the cluster id, stable across restarts.
func (b *Broker) ClusterID() string { return b.clusterID }

// goroutine starts f tracked by b.wg, so Close can wait for every
// goroutine the broker started.
func (b *Broker) goroutine(f func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
}

// connGoroutine starts f tracked by b.connWG.
func (b *Broker) connGoroutine(f func()) {
	b.connWG.Add(1)
	go func() {
		defer b.connWG.Done()
		f()
	}()
}

func (b *Broker) acceptLoop(l *listener) {
	var delay time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if b.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			// Temporary errors such as EMFILE: back off like net/http.
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay *= 2; delay > time.Second {
				delay = time.Second
			}
			b.lg.Warn("accept failed", zap.Error(err), zap.Duration("retry_in", delay))
			select {
			case <-time.After(delay):
			case <-b.ctx.Done():
				return
			}
			continue
		}
		delay = 0
		// Connection limits (quota_accept.go): wait for a slot under
		// max.connections; refused ones are closed.
		if !b.waitConnSlot() {
			nc.Close()
			return
		}
		if !b.admitConn(nc) {
			continue
		}
		c := newConn(b, l, nc)
		b.conns.Lock()
		if b.ctx.Err() != nil {
			b.conns.Unlock()
			nc.Close()
			b.connReleased(c)
			return
		}
		b.conns.m[c] = struct{}{}
		b.metrics.Connections.Inc()
		b.metrics.ConnectionsAccepted.Inc()
		// Under conns so Close, which takes conns after cancelling ctx,
		// never waits on connWG while an Add can still happen.
		b.connGoroutine(c.serve)
		b.conns.Unlock()
	}
}

func (b *Broker) removeConn(c *conn) {
	b.conns.Lock()
	delete(b.conns.m, c)
	b.conns.Unlock()
	b.metrics.Connections.Dec()
	b.connReleased(c) // connection limits (quota_accept.go)
}

// Close shuts down gracefully: stop accepting, let every connection
// finish the request it is processing and send its response, fsync and
// close every log, close the metadata store.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.lg.Info("shutting down")
		b.ready.Store(false)
		b.cancel()
		b.closeListeners()
		b.stopSQS()
		b.conns.Lock()
		for c := range b.conns.m {
			c.stopReading()
		}
		b.conns.Unlock()
		// Connections finish the request they are processing and send
		// its response (a produce may still wait for its fsync, so the
		// syncer keeps running until they are done).
		done := make(chan struct{})
		go func() { b.connWG.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(b.cfg.ShutdownTimeout):
			b.lg.Warn("shutdown timeout: closing remaining connections")
			b.conns.Lock()
			for c := range b.conns.m {
				c.nc.Close()
			}
			b.conns.Unlock()
			<-done
		}
		close(b.syncStop)
		b.stopHTTP()
		b.wg.Wait()
		// Background transaction completions wait for marker fsyncs
		// (the per-partition fsync loops run on demand) and write to
		// groups and badger: let them end before those close.
		b.txns.Wait()
		b.groups.Close()
		b.shares.Close()
		var clusterErr error
		if b.cluster != nil {
			clusterErr = b.cluster.Close() // its groups write the logs: before they close
		}
		b.closeErr = errors.Join(clusterErr, b.topics.Close(), b.meta.Close())
		b.lg.Info("shut down", zap.Error(b.closeErr))
	})
	return b.closeErr
}

func (b *Broker) retentionLoop() {
	tk := time.NewTicker(b.cfg.RetentionCheckInterval)
	defer tk.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case now := <-tk.C:
			b.topics.EnforceRetention(now, b.lg)
		}
	}
}

// brokerConfig returns the effective value of a dynamic broker config
// when one is set: the dynamic override, else the static value from
// Config.BrokerConfigs. ok false means Kafka's default applies.
func (b *Broker) brokerConfig(name string) (string, bool) {
	v, ok, _ := b.brokerConfigSource(name)
	return v, ok
}

// brokerConfigSource is brokerConfig, also saying whether the value is
// the dynamic override (true) or the static one.
func (b *Broker) brokerConfigSource(name string) (v string, ok, dynamic bool) {
	b.dyn.RLock()
	v, ok = b.dyn.m[name]
	b.dyn.RUnlock()
	if ok {
		return v, true, true
	}
	v, ok = b.cfg.BrokerConfigs[name]
	return v, ok, false
}

// topicConfigValue resolves a topic config: topic override, then the
// dynamic broker default, then Kafka's default.
func (b *Broker) topicConfigValue(configs map[string]string, name string) (string, configSourceKind) {
	if v, ok := configs[name]; ok {
		return v, sourceTopic
	}
	d := topicConfigByName[name]
	if d == nil {
		return "", sourceDefault
	}
	if d.BrokerName != "" {
		if v, ok, dynamic := b.brokerConfigSource(d.BrokerName); ok {
			if !dynamic {
				return v, sourceStaticBroker
			}
			return v, sourceDynamicBroker
		}
	}
	return d.Default, sourceDefault
}

type configSourceKind int8

const (
	sourceDefault configSourceKind = iota
	sourceTopic
	sourceDynamicBroker
	sourceStaticBroker
)

// logConfig builds the log.Config for a topic's overrides.
func (b *Broker) logConfig(overrides map[string]string) slog.Config {
	lc := slog.DefaultConfig()
	get := func(name string) string { v, _ := b.topicConfigValue(overrides, name); return v }
	lc.SegmentBytes = configs.Int(get("segment.bytes"), lc.SegmentBytes)
	lc.SegmentMs = configs.Int(get("segment.ms"), lc.SegmentMs)
	lc.RetentionMs = configs.Int(get("retention.ms"), lc.RetentionMs)
	lc.RetentionBytes = configs.Int(get("retention.bytes"), lc.RetentionBytes)
	lc.IndexIntervalBytes = int32(configs.Int(get("index.interval.bytes"), int64(lc.IndexIntervalBytes)))
	lc.MaxMessageBytes = int32(configs.Int(get("max.message.bytes"), int64(lc.MaxMessageBytes)))
	lc.FlushMessages = configs.Int(get("flush.messages"), lc.FlushMessages)
	lc.FlushMs = configs.Int(get("flush.ms"), lc.FlushMs)
	lc.CheckpointIntervalMs = b.cfg.CheckpointInterval.Milliseconds()
	lc.StartWriteback = b.cfg.Fsync == FsyncAlways
	lc.ZeroAheadBytes = 0
	if b.cfg.Fsync == FsyncAlways {
		lc.ZeroAheadBytes = b.cfg.ZeroAheadBytes
	}
	switch compact, del, _ := configs.CleanupPolicy(get("cleanup.policy")); {
	case compact && del:
		lc.Cleanup = slog.CleanupCompactDelete
	case compact:
		lc.Cleanup = slog.CleanupCompact
	}
	lc.MinCleanableDirtyRatio = configs.Float(get("min.cleanable.dirty.ratio"), lc.MinCleanableDirtyRatio)
	lc.MinCompactionLagMs = configs.Int(get("min.compaction.lag.ms"), lc.MinCompactionLagMs)
	lc.MaxCompactionLagMs = configs.Int(get("max.compaction.lag.ms"), lc.MaxCompactionLagMs)
	lc.DeleteRetentionMs = configs.Int(get("delete.retention.ms"), lc.DeleteRetentionMs)
	return lc
}

// connClosed runs when a connection ends (hook for per-connection state
// such as share sessions).
func (b *Broker) connClosed(c *conn) {
	if b.shares != nil {
		b.shares.ConnClosed(c.id) // drop its share sessions, release their records
	}
}

func zapPartition(p *topics.Partition) zap.Field {
	return zap.String("partition", p.Topic+"-"+strconv.Itoa(int(p.Index)))
}

func zapErr(err error) zap.Field { return zap.Error(err) }
