package broker

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/share"
	slog "github.com/shoal-mq/shoal/log"
)

// FsyncPolicy says when appended records are made durable.
type FsyncPolicy string

const (
	// FsyncAlways fsyncs before a produce with acks=1 or acks=all is
	// answered and before consumers can see the records (the high
	// watermark only moves past fsynced data). Fsyncs are grouped across
	// requests and partitions (group commit). This is the default.
	FsyncAlways FsyncPolicy = "always"
	// FsyncInterval answers as soon as the records are written to the
	// operating system and fsyncs every FlushInterval, like Kafka with
	// log.flush.interval.ms. A process crash loses nothing; a power loss
	// or kernel crash loses at most the last FlushInterval of
	// acknowledged records.
	FsyncInterval FsyncPolicy = "interval"
)

// Config is everything a broker needs to start. Use DefaultConfig and
// override fields; cmd/shoal maps flags and SHOAL_* variables onto it.
type Config struct {
	// ListenAddr is the host:port the Kafka listener binds
	// (SHOAL_LISTEN, --listen). Port 0 picks a free port.
	ListenAddr string
	// AdvertisedAddr is the host:port given to clients in Metadata
	// (SHOAL_ADVERTISED_ADDR). Empty means the bound listener address.
	AdvertisedAddr string
	// Listeners, if set, replaces ListenAddr with Kafka's listeners:
	// NAME://host:port,... (listeners.go), each listener's security
	// protocol from ListenerProtocols. AdvertisedListeners is Kafka's
	// advertised.listeners for them (a listener left out advertises its
	// bound address); it replaces AdvertisedAddr.
	Listeners           string
	AdvertisedListeners string
	// ListenerProtocols is Kafka's listener.security.protocol.map
	// (NAME:PROTOCOL,...); empty means Kafka's default, each protocol's
	// name mapping to itself.
	ListenerProtocols string
	// Security holds the security configs by Kafka's names (ssl.*, with
	// listener.name.<name>. overrides; security.Keys is the table).
	Security map[string]string
	// DataDir holds the partition logs (DataDir/logs) and the badger
	// metadata store (DataDir/meta). Created if missing.
	DataDir string
	// NodeID is this broker's node id (Kafka node.id).
	NodeID int32
	// Voters makes this broker one of a cluster (issue 29,
	// docs/CLUSTER.md): controller.quorum.voters, id@host:port of every
	// broker's peer listener, this one's (NodeID) included. Empty: a
	// single node, as before.
	Voters string
	// PeerListen is shoal.peer.listen, the address raft's peer listener
	// binds (default: this broker's entry in Voters).
	PeerListen string
	// AutoCreateTopics creates unknown topics on Metadata and Produce
	// (Kafka auto.create.topics.enable). Default true, as in Kafka.
	AutoCreateTopics bool
	// DefaultPartitions is num.partitions for auto-created topics.
	DefaultPartitions int32
	// DefaultReplicationFactor is default.replication.factor, the
	// replicas of auto-created topics and of CreateTopics with
	// ReplicationFactor -1 in a cluster; 0 (the default) places them on
	// every registered broker. A single node has one replica whatever
	// it says.
	DefaultReplicationFactor int16
	// BrokerSessionTimeout is broker.session.timeout.ms: in a cluster, a
	// broker the metadata group's leader has not heard from for this
	// long is fenced (its replicas reported offline) until it is back.
	// Kafka's default, 9 s.
	BrokerSessionTimeout time.Duration
	// AutoLeaderRebalance is auto.leader.rebalance.enable: in a
	// cluster, a partition led by another replica than its preferred
	// one (its first) hands leadership back to it once it is in sync,
	// when more than LeaderImbalancePercentage percent of the
	// partitions preferring that broker are led elsewhere, checked each
	// LeaderImbalanceCheckInterval (Kafka's defaults: true, 10, 300 s).
	AutoLeaderRebalance          bool
	LeaderImbalancePercentage    int
	LeaderImbalanceCheckInterval time.Duration
	// ReplicaLagMax is replica.lag.time.max.ms: in a cluster, a
	// follower that has not caught up with its leader's log end within
	// it leaves the partition's ISR (Kafka's default, 30 s).
	ReplicaLagMax time.Duration
	// Fsync is the durability policy; see FsyncPolicy.
	Fsync FsyncPolicy
	// FlushInterval is the fsync period under FsyncInterval
	// (Kafka log.flush.interval.ms).
	FlushInterval time.Duration
	// MaxRequestBytes is the largest request frame accepted
	// (Kafka socket.request.max.bytes, default 100 MiB). A larger frame
	// closes that connection.
	MaxRequestBytes int32
	// RetentionCheckInterval is how often retention runs
	// (Kafka log.retention.check.interval.ms, default 5 minutes).
	RetentionCheckInterval time.Duration
	// CheckpointInterval is how often, at most, a partition's recovery
	// point is written as its fsyncs move it (Kafka
	// log.flush.offset.checkpoint.interval.ms, default 1 minute; 0 means
	// the default). Recovery after a crash re-reads and CRC-checks only
	// what lies above it.
	CheckpointInterval time.Duration
	// ZeroAheadBytes is how many zero bytes, at most, a partition keeps
	// written and fsynced ahead of its active segment's data while its
	// fsyncs are small, so that they change no file metadata
	// (log.Config.ZeroAheadBytes). Only with FsyncAlways; 0 never.
	ZeroAheadBytes int64
	// ShareBatchCacheBytes bounds the parsed log batches kept for
	// message-group share fetches, across all share-partitions
	// (share/batchcache.go); 0 keeps none.
	ShareBatchCacheBytes int64
	// ShutdownTimeout bounds how long Close waits for in-flight requests.
	ShutdownTimeout time.Duration
	// IdleTimeout closes a connection that sends no request for this long
	// (Kafka connections.max.idle.ms, default 10 minutes). Closing it
	// ends its share sessions, releasing their records.
	IdleTimeout time.Duration
	// HTTPAddr is the host:port of the operations HTTP server: /metrics
	// (Prometheus), /healthz, /readyz and, with Pprof, /debug/pprof/.
	// Empty means no HTTP server: DefaultConfig leaves it empty so that
	// tests and programs embedding several brokers do not collide;
	// cmd/shoal defaults it to 127.0.0.1:9644 (shoal.http.listen).
	HTTPAddr string
	// SQSAddr is the host:port of the Amazon SQS API (package sqs); empty
	// disables it. cmd/shoal defaults it to 127.0.0.1:9324
	// (shoal.sqs.listen). A cluster does not serve it yet.
	SQSAddr string
	// SQSAdvertisedURL, SQSAccount and SQSRegion: the queue URLs' base
	// (empty: from the request), and the account id and region of queue
	// URLs and ARNs (defaults 000000000000, us-east-1).
	SQSAdvertisedURL, SQSAccount, SQSRegion string
	// SQSAuth is none (open mode) or sigv4: requests signed with a key
	// of SQSCredentialsFile (package sqs, LoadCredentials).
	SQSAuth, SQSCredentialsFile string
	// Pprof serves net/http/pprof under /debug/pprof/ on HTTPAddr.
	Pprof bool
	// BrokerConfigs are static values of dynamic broker configs (the
	// names of brokerConfigDefs, e.g. log.retention.ms), as Kafka reads
	// them from server.properties: a dynamic override set through
	// IncrementalAlterConfigs wins over them, and deleting the override
	// reverts to them. DescribeConfigs reports them as
	// STATIC_BROKER_CONFIG.
	BrokerConfigs map[string]string
	// Logger receives structured logs. Nil means zap.NewNop().
	Logger *zap.Logger

	// beforeRecovery, if set, runs in Start after the HTTP server is up
	// and before the metadata store and logs recover (tests of /readyz).
	beforeRecovery func(*Broker)
	// markerSyncDelay, if nonzero, replaces the default markerSyncDelay
	// (package txn); negative means none.
	markerSyncDelay time.Duration
	// shareBeforeCommit, if set, runs before each share-state group
	// commit; an error fails it (store.Options.BeforeCommit).
	shareBeforeCommit func() error
	// shareDLQ are the dead-letter writer's test hooks (share.DLQHooks).
	shareDLQ share.DLQHooks
	// beforeTopicCleanup, if set, runs when a topic deletion is about to
	// remove the topic's group offsets and share-group state; an error
	// fails the clean-up as a failed write would.
	beforeTopicCleanup func(topic string) error
	// txnOffsetBeforeLock and txnOffsetBeforeAdd, if set, run in
	// TxnOffsetCommit just before it locks its group, and once its checks
	// passed just before its pending offsets are added (tests of what may
	// interleave there).
	txnOffsetBeforeLock func(group string)
	txnOffsetBeforeAdd  func(group string)
	// offsetFetchAfterStable, if set, runs in an OffsetFetch with
	// RequireStable once it looked up the group's pending transactional
	// offsets, just before it reads the committed ones.
	offsetFetchAfterStable func(group string)
	// txnBeforeApply, if set, runs in a background transaction
	// completion once its markers are durable, just before it applies
	// the transaction's offsets to their groups.
	txnBeforeApply func(id string)
	// beforeDropMarks, if set, runs when a transaction's end left
	// partitions of group without pending offsets, just before their
	// deletion marks are dropped.
	beforeDropMarks func(group string)
	// expiryBeforeDelete, if set, runs in offset expiry once a group's
	// expired offsets are chosen, just before they are deleted.
	expiryBeforeDelete func(group string)
	// txnBeforeStep, if set, runs before a decided transaction's
	// completion step: "markers" (writing them; an error stops there as
	// a marker that cannot be appended does, leaving the decision
	// durable in Prepare* for the timeout loop) or "complete" (the
	// Complete* write; an error fails it as a failed write does).
	txnBeforeStep func(id, step string) error
	// txnStampedBeforeWrite, if set, runs before a
	// TxnOffsetCommit's own badger write; an error fails it.
	txnStampedBeforeWrite func() error
}

// DefaultConfig returns the configuration `go run ./cmd/shoal` uses.
func DefaultConfig() Config {
	return Config{
		ListenAddr:             "127.0.0.1:9092",
		SQSAccount:             "000000000000",
		SQSRegion:              "us-east-1",
		SQSAuth:                "none",
		DataDir:                "shoal-data",
		NodeID:                 0,
		AutoCreateTopics:       true,
		DefaultPartitions:      1,
		Fsync:                  FsyncAlways,
		FlushInterval:          time.Second,
		MaxRequestBytes:        100 << 20,
		RetentionCheckInterval: 5 * time.Minute,
		CheckpointInterval:     time.Minute,
		ZeroAheadBytes:         slog.DefaultZeroAheadBytes,
		ShareBatchCacheBytes:   share.DefaultBatchCacheBytes,
		ShutdownTimeout:        10 * time.Second,
		IdleTimeout:            10 * time.Minute,
		BrokerSessionTimeout:   9 * time.Second,

		AutoLeaderRebalance:          true,
		LeaderImbalancePercentage:    10,
		LeaderImbalanceCheckInterval: 300 * time.Second,
		ReplicaLagMax:                30 * time.Second,
	}
}

// Validate reports the first invalid field, naming it.
func (c *Config) Validate() error {
	switch {
	case c.ListenAddr == "" && c.Listeners == "":
		return fmt.Errorf("broker: listen address is empty")
	case c.DataDir == "":
		return fmt.Errorf("broker: data dir is empty")
	case c.ReplicaLagMax != 0 && c.ReplicaLagMax < time.Second:
		// Followers are seen caught up as of the raft tick before (100
		// ms): below a second a healthy one would leave the ISR.
		return fmt.Errorf("broker: replica.lag.time.max.ms %v must be at least 1000 ms", c.ReplicaLagMax)
	case c.NodeID < 0:
		return fmt.Errorf("broker: node id %d is negative", c.NodeID)
	case c.Voters != "":
		voters, err := ParseVoters(c.Voters)
		if err != nil {
			return fmt.Errorf("broker: controller.quorum.voters: %w", err)
		}
		if _, ok := voters[uint64(c.NodeID)]; !ok || c.NodeID < 1 {
			return fmt.Errorf("broker: node.id %d is not among controller.quorum.voters %s", c.NodeID, c.Voters)
		}
	case c.DefaultPartitions < 1:
		return fmt.Errorf("broker: num.partitions %d must be at least 1", c.DefaultPartitions)
	case c.Fsync != FsyncAlways && c.Fsync != FsyncInterval:
		return fmt.Errorf("broker: fsync policy %q is not one of always, interval", c.Fsync)
	case c.Fsync == FsyncInterval && c.FlushInterval <= 0:
		return fmt.Errorf("broker: flush interval %v must be positive", c.FlushInterval)
	case c.ShareBatchCacheBytes < 0:
		return fmt.Errorf("broker: share batch cache bytes %d is negative", c.ShareBatchCacheBytes)
	case c.ZeroAheadBytes < 0 || c.ZeroAheadBytes > 16<<20:
		return fmt.Errorf("broker: zero-ahead bytes %d is not in [0, 16 MiB]", c.ZeroAheadBytes)
	case c.CheckpointInterval < 0:
		return fmt.Errorf("broker: checkpoint interval %v is negative", c.CheckpointInterval)
	case c.IdleTimeout <= 0:
		return fmt.Errorf("broker: idle timeout %v must be positive", c.IdleTimeout)
	case c.MaxRequestBytes < 1024:
		return fmt.Errorf("broker: max request bytes %d is below 1024", c.MaxRequestBytes)
	}
	if _, err := c.listenerPlan(); err != nil {
		return err
	}
	names := make([]string, 0, len(c.BrokerConfigs))
	for name := range c.BrokerConfigs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v := c.BrokerConfigs[name]
		if err := validateBrokerConfig(name, &v); err != nil {
			return fmt.Errorf("broker: static broker config %s: %w", name, err)
		}
	}
	return nil
}

// ParseVoters parses controller.quorum.voters: id@host:port,... with
// distinct positive ids.
func ParseVoters(s string) (map[uint64]string, error) {
	out := map[uint64]string{}
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		id, addr, ok := strings.Cut(v, "@")
		n, err := strconv.ParseUint(id, 10, 31)
		if !ok || err != nil || n == 0 {
			return nil, fmt.Errorf("%q is not id@host:port with a positive id", v)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%q: %w", v, err)
		}
		if _, dup := out[n]; dup {
			return nil, fmt.Errorf("node %d is given twice", n)
		}
		out[n] = addr
	}
	return out, nil
}
