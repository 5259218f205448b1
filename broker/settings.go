package broker

// Startup settings: the one table behind cmd/shoal's flags, its SHOAL_*
// environment variables, its Kafka-style properties file (--config) and
// the generated reference docs/CONFIG.md. Each setting has a key (Kafka's
// broker config name where Kafka has one, else shoal.*), a flag name, and
// one parser used for all three sources, so a value means the same
// wherever it is given.
//
// A properties file may also hold the dynamic broker configs
// (brokerConfigDefs, e.g. log.retention.ms or group.share.max.size): they
// become Config.BrokerConfigs, the static values behind the dynamic
// overrides IncrementalAlterConfigs sets, as in Kafka's server.properties.
//
// Regenerate docs/CONFIG.md with `go generate ./broker` (TestConfigDocUpToDate
// fails when it is stale).

//go:generate go run ../scripts/configdoc -out ../docs/CONFIG.md

import (
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shoal-mq/shoal/broker/security"
)

// DefaultHTTPAddr is where cmd/shoal serves /metrics, /healthz and
// /readyz unless told otherwise (Config.HTTPAddr).
const DefaultHTTPAddr = "127.0.0.1:9644"

// DefaultSQSAddr is where cmd/shoal serves the SQS API unless told
// otherwise (Config.SQSAddr): ElasticMQ's port.
const DefaultSQSAddr = "127.0.0.1:9324"

// Options is everything cmd/shoal reads from its flags, the environment
// and the properties file: the broker Config and the logger settings.
type Options struct {
	Config
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// LogFormat is console or json.
	LogFormat string
}

// DefaultOptions returns cmd/shoal's defaults: DefaultConfig with the
// HTTP server on DefaultHTTPAddr, info logs on the console.
func DefaultOptions() Options {
	o := Options{Config: DefaultConfig(), LogLevel: "info", LogFormat: "console"}
	o.HTTPAddr = DefaultHTTPAddr
	o.SQSAddr = DefaultSQSAddr
	return o
}

// SettingKind is how a setting's value is written.
type SettingKind string

const (
	KindString   SettingKind = "string"
	KindAddress  SettingKind = "host:port"
	KindBool     SettingKind = "boolean"
	KindInt      SettingKind = "int"
	KindDuration SettingKind = "duration" // milliseconds, or a Go duration such as 10m
)

// Setting is one startup setting.
type Setting struct {
	// Key is the properties-file name: Kafka's broker config name where
	// Kafka has the setting, else shoal.<...>.
	Key string
	// Flag is the command-line flag without dashes; the environment
	// variable is EnvName().
	Flag string
	Kind SettingKind
	Doc  string
	set  func(o *Options, v string) error
	get  func(o *Options) string
}

// EnvName is the setting's environment variable: SHOAL_ and the flag
// name in upper case with dashes as underscores.
func (s *Setting) EnvName() string {
	return "SHOAL_" + strings.ToUpper(strings.ReplaceAll(s.Flag, "-", "_"))
}

// Set parses v and stores it in o. The error does not name the setting;
// the caller knows where the value came from.
func (s *Setting) Set(o *Options, v string) error { return s.set(o, v) }

// Get formats the setting's current value in o.
func (s *Setting) Get(o *Options) string { return s.get(o) }

// Settings is every startup setting, sorted by key.
var Settings = func() []Setting {
	ss := []Setting{
		{Key: "listeners", Flag: "listen", Kind: KindString,
			Doc: "The Kafka listeners: NAME://host:port,... (Kafka's listeners), each name's security protocol from listener.security.protocol.map; a bare host:port is one PLAINTEXT listener. Port 0 picks a free port.",
			set: func(o *Options, v string) error {
				return setListeners(v, false, &o.ListenAddr, &o.Listeners)
			},
			get: func(o *Options) string { return firstNonEmpty(o.Listeners, o.ListenAddr) }},
		{Key: "advertised.listeners", Flag: "advertised-addr", Kind: KindString,
			Doc: "What Metadata gives clients for each listener: NAME://host:port,... (a bare host:port for a single PLAINTEXT listener). A listener left out advertises its bound address.",
			set: func(o *Options, v string) error {
				return setListeners(v, true, &o.AdvertisedAddr, &o.AdvertisedListeners)
			},
			get: func(o *Options) string { return firstNonEmpty(o.AdvertisedListeners, o.AdvertisedAddr) }},
		{Key: "listener.security.protocol.map", Flag: "listener-protocols", Kind: KindString,
			Doc: "Each listener name's security protocol: NAME:PROTOCOL,... with PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. Empty: Kafka's default, each protocol's name mapping to itself.",
			set: func(o *Options, v string) error {
				v = strings.TrimSpace(v)
				if v != "" {
					if _, err := security.ParseProtocolMap(v); err != nil {
						return err
					}
				}
				o.ListenerProtocols = v
				return nil
			},
			get: func(o *Options) string { return o.ListenerProtocols }},
		{Key: "log.dirs", Flag: "data-dir", Kind: KindString,
			Doc: "The data directory (one): partition logs in <dir>/logs, the badger metadata store in <dir>/meta, the share-group state change log in <dir>/share-log. Created if missing.",
			set: func(o *Options, v string) error {
				v = strings.TrimSpace(v)
				switch {
				case v == "":
					return fmt.Errorf("must not be empty")
				case strings.Contains(v, ","):
					return fmt.Errorf("%q: Shoal uses one data directory", v)
				}
				o.DataDir = v
				return nil
			},
			get: func(o *Options) string { return o.DataDir }},
		{Key: "node.id", Flag: "node-id", Kind: KindInt,
			Doc: "This broker's node id, reported in Metadata and DescribeCluster.",
			set: intSetting(0, math.MaxInt32, func(o *Options, n int64) { o.NodeID = int32(n) }),
			get: func(o *Options) string { return strconv.Itoa(int(o.NodeID)) }},
		{Key: "controller.quorum.voters", Flag: "voters", Kind: KindString,
			Doc: "Makes this broker one of a cluster whose partitions are replicated by raft (docs/CLUSTER.md): id@host:port of every broker's peer listener, this one's included, e.g. 1@127.0.0.1:9192,2@127.0.0.1:9193,3@127.0.0.1:9194. Empty: a single node.",
			set: func(o *Options, v string) error {
				v = strings.TrimSpace(v)
				if v != "" {
					if _, err := ParseVoters(v); err != nil {
						return err
					}
				}
				o.Voters = v
				return nil
			},
			get: func(o *Options) string { return o.Voters }},
		{Key: "shoal.peer.listen", Flag: "peer-listen", Kind: KindAddress,
			Doc: "Address the raft peer listener binds in a cluster (default: this broker's entry in controller.quorum.voters).",
			set: optionalAddress(func(o *Options) *string { return &o.PeerListen }),
			get: func(o *Options) string { return o.PeerListen }},
		{Key: "auto.create.topics.enable", Flag: "auto-create-topics", Kind: KindBool,
			Doc: "Create unknown topics on Metadata and Produce.",
			set: boolSetting(func(o *Options, b bool) { o.AutoCreateTopics = b }),
			get: func(o *Options) string { return strconv.FormatBool(o.AutoCreateTopics) }},
		{Key: "num.partitions", Flag: "num-partitions", Kind: KindInt,
			Doc: "Partitions of auto-created topics and of CreateTopics with NumPartitions -1.",
			set: intSetting(1, math.MaxInt32, func(o *Options, n int64) { o.DefaultPartitions = int32(n) }),
			get: func(o *Options) string { return strconv.Itoa(int(o.DefaultPartitions)) }},
		{Key: "default.replication.factor", Flag: "default-replication-factor", Kind: KindInt,
			Doc: "In a cluster: replicas of auto-created topics and of CreateTopics with ReplicationFactor -1; 0 places them on every broker of controller.quorum.voters (refused with INVALID_REPLICATION_FACTOR until all have registered). A single node keeps one replica.",
			set: intSetting(0, math.MaxInt16, func(o *Options, n int64) { o.DefaultReplicationFactor = int16(n) }),
			get: func(o *Options) string { return strconv.Itoa(int(o.DefaultReplicationFactor)) }},
		{Key: "broker.session.timeout.ms", Flag: "broker-session-timeout", Kind: KindDuration,
			Doc: "In a cluster: a broker the metadata group's leader has not heard from for this long is fenced: its replicas are reported offline (Metadata OfflineReplicas) and DescribeCluster leaves it out unless asked for fenced brokers, until it is back.",
			set: durationSetting(func(o *Options) *time.Duration { return &o.BrokerSessionTimeout }),
			get: func(o *Options) string { return o.BrokerSessionTimeout.String() }},
		{Key: "auto.leader.rebalance.enable", Flag: "auto-leader-rebalance", Kind: KindBool,
			Doc: "In a cluster: a partition led by another replica than its preferred one (the first of its replicas) hands leadership back to it once it is in sync, when more than leader.imbalance.per.broker.percentage of the partitions preferring that broker are led elsewhere (checked every leader.imbalance.check.interval.seconds), as after a broker's restart.",
			set: boolSetting(func(o *Options, b bool) { o.AutoLeaderRebalance = b }),
			get: func(o *Options) string { return strconv.FormatBool(o.AutoLeaderRebalance) }},
		{Key: "leader.imbalance.per.broker.percentage", Flag: "leader-imbalance-percentage", Kind: KindInt,
			Doc: "In a cluster, with auto.leader.rebalance.enable: the share of a broker's preferred partitions led elsewhere (percent) above which they are handed back to it.",
			set: intSetting(0, 100, func(o *Options, n int64) { o.LeaderImbalancePercentage = int(n) }),
			get: func(o *Options) string { return strconv.Itoa(o.LeaderImbalancePercentage) }},
		{Key: "leader.imbalance.check.interval.seconds", Flag: "leader-imbalance-check-interval", Kind: KindInt,
			Doc: "In a cluster, with auto.leader.rebalance.enable: how often (seconds) each partition's leader checks whether to hand leadership to its preferred replica.",
			set: intSetting(1, math.MaxInt32, func(o *Options, n int64) { o.LeaderImbalanceCheckInterval = time.Duration(n) * time.Second }),
			get: func(o *Options) string { return strconv.Itoa(int(o.LeaderImbalanceCheckInterval / time.Second)) }},
		{Key: "replica.lag.time.max.ms", Flag: "replica-lag-time-max", Kind: KindDuration,
			Doc: "In a cluster: a follower that has not caught up with its leader's log end for this long leaves the partition's ISR (Metadata, DescribeTopicPartitions; min.insync.replicas above a majority counts the ISR). At least 1000 ms.",
			set: durationSetting(func(o *Options) *time.Duration { return &o.ReplicaLagMax }),
			get: func(o *Options) string { return o.ReplicaLagMax.String() }},
		{Key: "socket.request.max.bytes", Flag: "max-request-bytes", Kind: KindInt,
			Doc: "Largest request frame accepted; a larger one closes the connection.",
			set: intSetting(1024, math.MaxInt32, func(o *Options, n int64) { o.MaxRequestBytes = int32(n) }),
			get: func(o *Options) string { return strconv.Itoa(int(o.MaxRequestBytes)) }},
		{Key: "connections.max.idle.ms", Flag: "idle-timeout", Kind: KindDuration,
			Doc: "Connections that send no request for this long are closed (their share sessions end, releasing their records).",
			set: durationSetting(func(o *Options) *time.Duration { return &o.IdleTimeout }),
			get: func(o *Options) string { return o.IdleTimeout.String() }},
		{Key: "log.retention.check.interval.ms", Flag: "retention-check-interval", Kind: KindDuration,
			Doc: "How often retention (retention.ms, retention.bytes) runs.",
			set: durationSetting(func(o *Options) *time.Duration { return &o.RetentionCheckInterval }),
			get: func(o *Options) string { return o.RetentionCheckInterval.String() }},
		{Key: "log.flush.offset.checkpoint.interval.ms", Flag: "checkpoint-interval", Kind: KindDuration,
			Doc: "How often, at most, a partition's recovery point is written as fsyncs move it; recovery after a crash re-reads and CRC-checks only what lies above it.",
			set: durationSetting(func(o *Options) *time.Duration { return &o.CheckpointInterval }),
			get: func(o *Options) string { return o.CheckpointInterval.String() }},
		{Key: "shoal.log.zero.ahead.bytes", Flag: "zero-ahead-bytes", Kind: KindInt,
			Doc: "With shoal.fsync.policy=always, the zeros a partition keeps written and fsynced ahead of its active segment's data while its fsyncs are small, so that they write no file metadata (about half as long on ext4 here); a roll or a clean shutdown cuts them off. They take disk space that DescribeLogDirs and retention.bytes do not count (batches only, as Kafka's). At most 16 MiB; 0 never writes ahead.",
			set: intSetting(0, 16<<20, func(o *Options, n int64) { o.ZeroAheadBytes = n }),
			get: func(o *Options) string { return strconv.FormatInt(o.ZeroAheadBytes, 10) }},
		{Key: "shoal.fsync.policy", Flag: "fsync", Kind: KindString,
			Doc: "Durability: always fsyncs before acknowledging acks=1/all produce (grouped across requests); interval acknowledges at once and fsyncs every shoal.fsync.interval.ms (a power loss can lose that window).",
			set: func(o *Options, v string) error {
				if p := FsyncPolicy(v); p != FsyncAlways && p != FsyncInterval {
					return fmt.Errorf("%q is not always or interval", v)
				}
				o.Fsync = FsyncPolicy(v)
				return nil
			},
			get: func(o *Options) string { return string(o.Fsync) }},
		{Key: "shoal.fsync.interval.ms", Flag: "flush-interval", Kind: KindDuration,
			Doc: "Fsync period under shoal.fsync.policy=interval.",
			set: durationSetting(func(o *Options) *time.Duration { return &o.FlushInterval }),
			get: func(o *Options) string { return o.FlushInterval.String() }},
		{Key: "shoal.share.batch.cache.bytes", Flag: "share-batch-cache-bytes", Kind: KindInt,
			Doc: "Bytes of recently read log batches, parsed, kept for share fetches in a message-group mode (fair or ordered), across all share-partitions; 0 keeps none. Batches over 4 MiB are never kept.",
			set: intSetting(0, math.MaxInt64, func(o *Options, n int64) { o.ShareBatchCacheBytes = n }),
			get: func(o *Options) string { return strconv.FormatInt(o.ShareBatchCacheBytes, 10) }},
		{Key: "shoal.shutdown.timeout.ms", Flag: "shutdown-timeout", Kind: KindDuration,
			Doc: "How long shutdown waits for in-flight requests before closing their connections.",
			set: durationSetting(func(o *Options) *time.Duration { return &o.ShutdownTimeout }),
			get: func(o *Options) string { return o.ShutdownTimeout.String() }},
		{Key: "shoal.http.listen", Flag: "http-addr", Kind: KindAddress,
			Doc: "Address of the operations HTTP server: /metrics (Prometheus), /healthz, /readyz. Empty disables it.",
			set: optionalAddress(func(o *Options) *string { return &o.HTTPAddr }),
			get: func(o *Options) string { return o.HTTPAddr }},
		{Key: "shoal.sqs.listen", Flag: "sqs-addr", Kind: KindAddress,
			Doc: "Address of the Amazon SQS API (AWS JSON 1.0 and Query protocols; docs/SQS.md): a queue is a topic and the share group sqs.<queue>. Empty disables it; a cluster does not serve it yet.",
			set: optionalAddress(func(o *Options) *string { return &o.SQSAddr }),
			get: func(o *Options) string { return o.SQSAddr }},
		{Key: "shoal.sqs.advertised.url", Flag: "sqs-advertised-url", Kind: KindString,
			Doc: "scheme://host:port of the queue URLs the SQS API answers with. Empty: http:// and the Host the request came to.",
			set: func(o *Options, v string) error {
				v = strings.TrimSpace(v)
				if v != "" && !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
					return fmt.Errorf("%q: must start with http:// or https://", v)
				}
				o.SQSAdvertisedURL = v
				return nil
			},
			get: func(o *Options) string { return o.SQSAdvertisedURL }},
		{Key: "shoal.sqs.account.id", Flag: "sqs-account-id", Kind: KindString,
			Doc: "The AWS account id in queue URLs and ARNs (12 digits).",
			set: func(o *Options, v string) error {
				v = strings.TrimSpace(v)
				if len(v) != 12 || strings.Trim(v, "0123456789") != "" {
					return fmt.Errorf("%q: an account id is 12 digits", v)
				}
				o.SQSAccount = v
				return nil
			},
			get: func(o *Options) string { return o.SQSAccount }},
		{Key: "shoal.sqs.auth", Flag: "sqs-auth", Kind: KindString,
			Doc: "none: every SQS request is accepted, signed or not; sigv4: requests must carry an AWS Signature Version 4 of an access key in shoal.sqs.credentials.file (compared in constant time, dates at most 5 minutes off).",
			set: func(o *Options, v string) error {
				switch v = strings.ToLower(strings.TrimSpace(v)); v {
				case "none", "sigv4":
					o.SQSAuth = v
					return nil
				}
				return fmt.Errorf("%q: none or sigv4", v)
			},
			get: func(o *Options) string { return o.SQSAuth }},
		{Key: "shoal.sqs.credentials.file", Flag: "sqs-credentials-file", Kind: KindString,
			Doc: "The SQS API's access keys (shoal.sqs.auth=sigv4): one per line, ACCESS_KEY_ID SECRET_ACCESS_KEY [PRINCIPAL], the principal (default User:<ACCESS_KEY_ID>) what the ACLs see.",
			set: func(o *Options, v string) error { o.SQSCredentialsFile = strings.TrimSpace(v); return nil },
			get: func(o *Options) string { return o.SQSCredentialsFile }},
		{Key: "shoal.sqs.region", Flag: "sqs-region", Kind: KindString,
			Doc: "The AWS region in queue ARNs.",
			set: func(o *Options, v string) error {
				if strings.TrimSpace(v) == "" {
					return fmt.Errorf("must not be empty")
				}
				o.SQSRegion = strings.TrimSpace(v)
				return nil
			},
			get: func(o *Options) string { return o.SQSRegion }},
		{Key: "shoal.http.pprof.enable", Flag: "pprof", Kind: KindBool,
			Doc: "Serve net/http/pprof under /debug/pprof/ on the HTTP server.",
			set: boolSetting(func(o *Options, b bool) { o.Pprof = b }),
			get: func(o *Options) string { return strconv.FormatBool(o.Pprof) }},
		{Key: "shoal.log.level", Flag: "log-level", Kind: KindString,
			Doc: "Log level: debug, info, warn or error.",
			set: func(o *Options, v string) error {
				switch v {
				case "debug", "info", "warn", "error":
					o.LogLevel = v
					return nil
				}
				return fmt.Errorf("%q is not debug, info, warn or error", v)
			},
			get: func(o *Options) string { return o.LogLevel }},
		{Key: "shoal.log.format", Flag: "log-format", Kind: KindString,
			Doc: "Log format: console for people, json for machines.",
			set: func(o *Options, v string) error {
				if v != "console" && v != "json" {
					return fmt.Errorf("%q is not console or json", v)
				}
				o.LogFormat = v
				return nil
			},
			get: func(o *Options) string { return o.LogFormat }},
	}
	sort.Slice(ss, func(i, j int) bool { return ss[i].Key < ss[j].Key })
	return ss
}()

// SettingByKey returns the startup setting with this properties-file
// key, or nil.
func SettingByKey(key string) *Setting {
	for i := range Settings {
		if Settings[i].Key == key {
			return &Settings[i]
		}
	}
	return nil
}

// SetFileKey applies one properties-file entry to o: a startup setting,
// or the static value of a dynamic broker config (Config.BrokerConfigs).
// Unknown keys and bad values are errors naming the key.
func SetFileKey(o *Options, key, value string) error {
	if s := SettingByKey(key); s != nil {
		if err := s.Set(o, value); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	}
	if security.IsKey(key) {
		if err := security.CheckValue(key, value); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		if o.Security == nil {
			o.Security = map[string]string{}
		}
		o.Security[key] = value
		return nil
	}
	d := brokerConfigByName[key]
	switch {
	case d == nil:
		return fmt.Errorf("unknown config %q", key)
	case !d.dynamic():
		return fmt.Errorf("%s: set at startup through another key; see docs/CONFIG.md", key)
	case d.check != nil:
		if err := d.check(value); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	if o.BrokerConfigs == nil {
		o.BrokerConfigs = map[string]string{}
	}
	o.BrokerConfigs[key] = value
	return nil
}

// ParseProperties parses a Java-style properties file: key=value,
// key:value or key value per line; blank lines and lines starting with #
// or ! are ignored; a line ending in a backslash continues on the next.
// It returns the entries in file order with their line numbers. Escapes
// other than line continuation are not interpreted.
func ParseProperties(text string) ([]Property, error) {
	var out []Property
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := strings.TrimSpace(lines[i])
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + strings.TrimSpace(lines[i])
		}
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		sep := strings.IndexAny(line, "=: \t")
		key, value := line, ""
		if sep >= 0 {
			key = line[:sep]
			rest := strings.TrimLeft(line[sep:], " \t")
			if rest != "" && (rest[0] == '=' || rest[0] == ':') {
				rest = rest[1:]
			}
			value = strings.TrimSpace(rest)
		}
		if key == "" {
			return nil, fmt.Errorf("line %d: no key", lineNo)
		}
		out = append(out, Property{Key: key, Value: value, Line: lineNo})
	}
	return out, nil
}

// Property is one properties-file entry.
type Property struct {
	Key, Value string
	Line       int
}

// setListeners parses a listeners value: one PLAINTEXT endpoint is
// stored as host:port in addr (Shoal's single-listener form), anything
// else in list as given.
func setListeners(v string, emptyOK bool, addr, list *string) error {
	v = strings.TrimSpace(v)
	if v == "" {
		if !emptyOK {
			return fmt.Errorf("must not be empty")
		}
		*addr, *list = "", ""
		return nil
	}
	eps, err := security.ParseEndpoints(v)
	if err != nil {
		return err
	}
	if len(eps) == 1 && eps[0].Name == string(security.Plaintext) {
		*addr, *list = eps[0].Addr(), ""
		return nil
	}
	*list = v
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func intSetting(lo, hi int64, set func(*Options, int64)) func(*Options, string) error {
	return func(o *Options, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		if n < lo || n > hi {
			return fmt.Errorf("%d is outside [%d, %d]", n, lo, hi)
		}
		set(o, n)
		return nil
	}
}

func boolSetting(set func(*Options, bool)) func(*Options, string) error {
	return func(o *Options, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		set(o, b)
		return nil
	}
}

// durationSetting accepts milliseconds (Kafka's *.ms configs) or a Go
// duration ("10m", "1.5s"); the value must be positive.
func durationSetting(field func(*Options) *time.Duration) func(*Options, string) error {
	return func(o *Options, v string) error {
		v = strings.TrimSpace(v)
		var d time.Duration
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			if n > math.MaxInt64/int64(time.Millisecond) {
				return fmt.Errorf("%d ms is too long", n)
			}
			d = time.Duration(n) * time.Millisecond
		} else if d, err = time.ParseDuration(v); err != nil {
			return fmt.Errorf("%q is neither milliseconds nor a duration such as 10m", v)
		}
		if d <= 0 {
			return fmt.Errorf("%q must be positive", v)
		}
		*field(o) = d
		return nil
	}
}

// optionalAddress sets the field to a host:port, or to empty.
func optionalAddress(field func(o *Options) *string) func(*Options, string) error {
	return func(o *Options, v string) error {
		v = strings.TrimSpace(v)
		if v != "" {
			if _, _, err := net.SplitHostPort(v); err != nil {
				return fmt.Errorf("%q is not host:port", v)
			}
		}
		*field(o) = v
		return nil
	}
}
