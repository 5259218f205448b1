package broker

// Broker configs: the Kafka broker configs Shoal reports through
// DescribeConfigs and accepts through AlterConfigs and
// IncrementalAlterConfigs on the BROKER resource.
//
// Two kinds, as in Kafka's "update mode":
//
//   - cluster-wide (dynamic): the broker defaults behind topic configs
//     (topicConfigDefs[].brokerName, e.g. log.retention.ms behind
//     retention.ms). Overrides live in Broker.dyn and in the metadata
//     store (meta/broker-config/<name>), survive restarts, and are
//     re-applied at once to every partition log without a topic override.
//     Names, types, defaults and validation come from the topic table, so
//     the two can never disagree.
//   - read-only: what Config (flags, SHOAL_* variables) decides at start,
//     reported so tools can see it; changing one is refused with
//     INVALID_REQUEST "Cannot update these configs dynamically", as Kafka
//     does (KAFKA-13609 explains why Kafka uses INVALID_REQUEST rather
//     than INVALID_CONFIG for broker resources).
//
// Kafka has two levels of dynamic broker config: per broker (resource
// name = the node id) and the cluster default (resource name ""). With a
// single broker both mean the same thing, so Shoal keeps one set,
// reachable through either name, and reports it as
// DYNAMIC_DEFAULT_BROKER_CONFIG (the source topicConfigValue gives topic
// configs inheriting it). Describing "" lists just the overrides that are
// set, as Kafka does for the cluster default; describing the node id
// lists every config.
//
// Names Kafka knows but Shoal does not implement are refused with
// INVALID_REQUEST rather than stored and silently ignored (Kafka stores
// unknown broker config names as custom configs).

import (
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/configs"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/security"
	"github.com/shoal-mq/shoal/broker/share"
)

// brokerConfigDef is one broker config: dynamic (def and check set) or
// read-only (static set).
type brokerConfigDef struct {
	name string
	typ  kmsg.ConfigType
	doc  string
	// def and check are a dynamic config's default and validation: those
	// of the topic config it is the default of, or of a share-group
	// broker config (share/configs.go).
	def   string
	check func(string) error
	// static returns the read-only value from the broker's Config
	// (ok false: unset, reported as a null value).
	static func(c *Config) (v string, ok bool)
}

func (d *brokerConfigDef) dynamic() bool { return d.static == nil }

// brokerConfigDefs is every broker config, sorted by name.
var brokerConfigDefs = func() []brokerConfigDef {
	str := func(s string) (string, bool) { return s, true }
	defs := []brokerConfigDef{
		{name: "advertised.listeners", typ: kmsg.ConfigTypeString,
			doc: "What Metadata gives clients for each listener (--advertised-addr); unset means each listener's bound address.",
			static: func(c *Config) (string, bool) {
				switch {
				case c.AdvertisedListeners != "":
					return c.AdvertisedListeners, true
				case c.AdvertisedAddr != "":
					return "PLAINTEXT://" + c.AdvertisedAddr, true
				}
				return "", false
			}},
		{name: "auto.create.topics.enable", typ: kmsg.ConfigTypeBoolean,
			doc:    "Create unknown topics on Metadata and Produce (--auto-create-topics).",
			static: func(c *Config) (string, bool) { return str(strconv.FormatBool(c.AutoCreateTopics)) }},
		{name: "auto.leader.rebalance.enable", typ: kmsg.ConfigTypeBoolean,
			doc:    "In a cluster: partitions led elsewhere hand leadership back to their preferred replica once it is in sync, past leader.imbalance.per.broker.percentage (--auto-leader-rebalance).",
			static: func(c *Config) (string, bool) { return str(strconv.FormatBool(c.AutoLeaderRebalance)) }},
		{name: "broker.id", typ: kmsg.ConfigTypeInt,
			doc:    "This broker's id; the same as node.id.",
			static: func(c *Config) (string, bool) { return str(strconv.Itoa(int(c.NodeID))) }},
		{name: "broker.session.timeout.ms", typ: kmsg.ConfigTypeInt,
			doc:    "In a cluster: a broker the metadata group's leader has not heard from for this long is fenced (its replicas offline) until it is back (--broker-session-timeout).",
			static: func(c *Config) (string, bool) { return str(durationMs(c.BrokerSessionTimeout)) }},
		{name: "connections.max.idle.ms", typ: kmsg.ConfigTypeLong,
			doc:    "Connections that send no request for this long are closed (--idle-timeout).",
			static: func(c *Config) (string, bool) { return str(durationMs(c.IdleTimeout)) }},
		{name: "default.replication.factor", typ: kmsg.ConfigTypeInt,
			doc: "Replicas of auto-created topics and of CreateTopics with ReplicationFactor -1: on a single node 1; in a cluster the setting, or every broker of controller.quorum.voters when it is 0.",
			static: func(c *Config) (string, bool) {
				if c.Voters == "" {
					return str("1")
				}
				return str(strconv.Itoa(int(c.DefaultReplicationFactor)))
			}},
		{name: "delete.topic.enable", typ: kmsg.ConfigTypeBoolean,
			doc:    "DeleteTopics is always served.",
			static: func(c *Config) (string, bool) { return str("true") }},
		{name: "leader.imbalance.check.interval.seconds", typ: kmsg.ConfigTypeLong,
			doc: "In a cluster, with auto.leader.rebalance.enable: how often each partition's leader checks whether to hand leadership to its preferred replica (--leader-imbalance-check-interval).",
			static: func(c *Config) (string, bool) {
				return str(strconv.Itoa(int(c.LeaderImbalanceCheckInterval / time.Second)))
			}},
		{name: "leader.imbalance.per.broker.percentage", typ: kmsg.ConfigTypeInt,
			doc:    "In a cluster, with auto.leader.rebalance.enable: the share of a broker's preferred partitions led elsewhere above which they are handed back to it (--leader-imbalance-percentage).",
			static: func(c *Config) (string, bool) { return str(strconv.Itoa(c.LeaderImbalancePercentage)) }},
		{name: "listeners", typ: kmsg.ConfigTypeString,
			doc: "The Kafka listeners, NAME://host:port,... (--listen).",
			static: func(c *Config) (string, bool) {
				if c.Listeners != "" {
					return str(c.Listeners)
				}
				return str("PLAINTEXT://" + c.ListenAddr)
			}},
		{name: "listener.security.protocol.map", typ: kmsg.ConfigTypeString,
			doc: "Each listener name's security protocol (--listener-protocols).",
			static: func(c *Config) (string, bool) {
				if c.ListenerProtocols != "" {
					return str(c.ListenerProtocols)
				}
				return str("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL")
			}},
		{name: "log.dirs", typ: kmsg.ConfigTypeString,
			doc: "The data directory (--data-dir): partition logs in <dir>/logs, metadata in <dir>/meta, the share-group change log in <dir>/share-log.",
			static: func(c *Config) (string, bool) {
				dir := c.DataDir
				if abs, err := filepath.Abs(dir); err == nil {
					dir = abs
				}
				return dir, true
			}},
		{name: "log.flush.offset.checkpoint.interval.ms", typ: kmsg.ConfigTypeInt,
			doc:    "How often, at most, a partition's recovery point is written as fsyncs move it (--checkpoint-interval).",
			static: func(c *Config) (string, bool) { return str(durationMs(c.CheckpointInterval)) }},
		{name: "log.retention.check.interval.ms", typ: kmsg.ConfigTypeLong,
			doc:    "How often retention runs.",
			static: func(c *Config) (string, bool) { return str(durationMs(c.RetentionCheckInterval)) }},
		{name: "node.id", typ: kmsg.ConfigTypeInt,
			doc:    "This broker's node id (--node-id).",
			static: func(c *Config) (string, bool) { return str(strconv.Itoa(int(c.NodeID))) }},
		{name: "num.partitions", typ: kmsg.ConfigTypeInt,
			doc:    "Partitions of auto-created topics and of CreateTopics with NumPartitions -1.",
			static: func(c *Config) (string, bool) { return str(strconv.Itoa(int(c.DefaultPartitions))) }},
		{name: "replica.lag.time.max.ms", typ: kmsg.ConfigTypeLong,
			doc:    "In a cluster: a follower not caught up with its leader's log end for this long leaves the partition's ISR (--replica-lag-time-max).",
			static: func(c *Config) (string, bool) { return str(durationMs(c.ReplicaLagMax)) }},
		{name: "socket.request.max.bytes", typ: kmsg.ConfigTypeInt,
			doc:    "The largest request frame accepted; a larger one closes the connection.",
			static: func(c *Config) (string, bool) { return str(strconv.Itoa(int(c.MaxRequestBytes))) }},
	}
	for i := range topicConfigDefs {
		td := &topicConfigDefs[i]
		if td.BrokerName == "" {
			continue
		}
		defs = append(defs, brokerConfigDef{name: td.BrokerName, typ: td.Type, doc: td.Doc, def: td.Default, check: td.Check})
	}
	for _, gd := range share.GroupBrokerConfigDefs { // share/configs.go
		defs = append(defs, brokerConfigDef{name: gd.Name, typ: kmsg.ConfigTypeLong, doc: gd.Doc,
			def: strconv.FormatInt(gd.Def, 10), check: configs.IntRange(gd.Lo, gd.Hi)})
	}
	for _, td := range txnBrokerConfigDefs {
		defs = append(defs, brokerConfigDef{name: td.name, typ: kmsg.ConfigTypeLong, doc: td.doc,
			def: strconv.FormatInt(td.def, 10), check: configs.IntRange(td.lo, td.hi)})
	}
	for i := range share.BrokerConfigDefs {
		sd := &share.BrokerConfigDefs[i]
		defs = append(defs, brokerConfigDef{name: sd.Name, typ: kmsg.ConfigTypeLong, doc: sd.Doc,
			def: strconv.FormatInt(sd.Def, 10), check: configs.IntRange(sd.Lo, sd.Hi)})
	}
	for _, dd := range share.DLQBrokerConfigDefs { // share/dlq.go
		defs = append(defs, brokerConfigDef{name: dd.Name, typ: dd.Type, doc: dd.Doc, def: dd.Def, check: dd.Check})
	}
	defs = append(defs, cleanerBrokerConfigDefs...) // cleaner.go
	// Broker-wide rate limits and connection limits (quota_limits.go).
	for _, qd := range quotaBrokerConfigDefs {
		defs = append(defs, brokerConfigDef{name: qd.name, typ: kmsg.ConfigTypeLong, doc: qd.doc,
			def: strconv.FormatInt(qd.def, 10), check: configs.IntRange(qd.lo, qd.hi)})
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].name < defs[j].name })
	return defs
}()

var brokerConfigByName = func() map[string]*brokerConfigDef {
	m := make(map[string]*brokerConfigDef, len(brokerConfigDefs))
	for i := range brokerConfigDefs {
		m[brokerConfigDefs[i].name] = &brokerConfigDefs[i]
	}
	return m
}()

// validateBrokerConfig checks that name may be changed dynamically and
// that value (nil: revert to the default) is valid for it. Failures are
// INVALID_REQUEST, as Kafka answers for broker resources.
func validateBrokerConfig(name string, value *string) error {
	d := brokerConfigByName[name]
	switch {
	case d == nil:
		return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Unknown or unsupported broker config: %s", name)
	case !d.dynamic():
		return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Cannot update these configs dynamically: Set(%s)", name)
	case value == nil:
		return nil
	}
	if d.check != nil {
		if err := d.check(*value); err != nil {
			return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Invalid value %s for configuration %s: %v", *value, name, err)
		}
	}
	return nil
}

// staticConfigValue returns a read-only config's value and whether it is
// Shoal's default (DEFAULT_CONFIG) rather than set at start
// (STATIC_BROKER_CONFIG).
func staticConfigValue(d *brokerConfigDef, c *Config) (*string, bool) {
	v, ok := d.static(c)
	def := DefaultConfig()
	dv, dok := d.static(&def)
	isDefault := ok == dok && v == dv
	if !ok {
		return nil, isDefault
	}
	return &v, isDefault
}

// dynamicBrokerConfigs returns a copy of the dynamic overrides.
func (b *Broker) dynamicBrokerConfigs() map[string]string {
	b.dyn.RLock()
	defer b.dyn.RUnlock()
	out := make(map[string]string, len(b.dyn.m))
	for k, v := range b.dyn.m {
		out[k] = v
	}
	return out
}

// brokerConfigEntries describes the broker configs: every one when
// all is true (resource name = our node id), else only the dynamic
// overrides that are set (resource name "", the cluster default).
func (b *Broker) brokerConfigEntries(all bool) []configs.Entry {
	dyn := b.dynamicBrokerConfigs()
	var out []configs.Entry
	for i := range brokerConfigDefs {
		d := &brokerConfigDefs[i]
		e := configs.Entry{Name: d.name, Type: d.typ, Doc: d.doc}
		if d.dynamic() {
			v, set := dyn[d.name]
			if !set && !all {
				continue
			}
			def := d.def
			sv, static := b.cfg.BrokerConfigs[d.name]
			switch {
			case set:
				e.Value, e.Source = &v, kmsg.ConfigSourceDynamicDefaultBrokerConfig
				e.Synonyms = append(e.Synonyms, configs.Synonym{Name: d.name, Value: &v, Source: kmsg.ConfigSourceDynamicDefaultBrokerConfig})
			case static:
				e.Value, e.Source = &sv, kmsg.ConfigSourceStaticBrokerConfig
			default:
				e.Value, e.Source = &def, kmsg.ConfigSourceDefaultConfig
			}
			if static {
				e.Synonyms = append(e.Synonyms, configs.Synonym{Name: d.name, Value: &sv, Source: kmsg.ConfigSourceStaticBrokerConfig})
			}
			e.Synonyms = append(e.Synonyms, configs.Synonym{Name: d.name, Value: &def, Source: kmsg.ConfigSourceDefaultConfig})
		} else {
			if !all {
				continue
			}
			v, isDefault := staticConfigValue(d, &b.cfg)
			e.Value, e.ReadOnly = v, true
			e.Source = kmsg.ConfigSourceStaticBrokerConfig
			if isDefault {
				e.Source = kmsg.ConfigSourceDefaultConfig
			}
			e.Synonyms = append(e.Synonyms, configs.Synonym{Name: d.name, Value: v, Source: e.Source})
		}
		out = append(out, e)
	}
	if all {
		out = append(out, b.securityConfigEntries()...)
	}
	return out
}

// securityConfigEntries describes the security configs (read-only, as
// they are set at start): every key with its value or default, and the
// listener.name.<listener>. overrides set; keys and passwords as Kafka
// describes sensitive configs, without their values.
func (b *Broker) securityConfigEntries() []configs.Entry {
	sec := security.Settings(b.cfg.Security)
	var out []configs.Entry
	for _, k := range security.Keys {
		e := configs.Entry{Name: k.Name, Type: kmsg.ConfigTypeString, Doc: k.Doc, ReadOnly: true, Sensitive: k.Sensitive}
		v := sec.For("", k.Name)
		e.Value, e.Source = &v, kmsg.ConfigSourceDefaultConfig
		if _, set := b.cfg.Security[k.Name]; set {
			e.Source = kmsg.ConfigSourceStaticBrokerConfig
		}
		e.Synonyms = []configs.Synonym{{Name: k.Name, Value: e.Value, Source: e.Source}}
		out = append(out, e)
	}
	names := make([]string, 0, len(b.cfg.Security))
	for name := range b.cfg.Security {
		if strings.HasPrefix(name, "listener.name.") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		v := strings.TrimSpace(b.cfg.Security[name])
		_, key, _ := strings.Cut(strings.TrimPrefix(name, "listener.name."), ".")
		k := security.KeyNamed(key)
		e := configs.Entry{Name: name, Type: kmsg.ConfigTypeString, Value: &v, Source: kmsg.ConfigSourceStaticBrokerConfig,
			ReadOnly: true, Sensitive: k == nil || k.Sensitive}
		if k != nil {
			e.Doc = k.Doc
		}
		e.Synonyms = []configs.Synonym{{Name: name, Value: &v, Source: e.Source}}
		out = append(out, e)
	}
	return out
}

// brokerResourceName checks a BROKER resource name: our node id, or ""
// for the cluster default. Anything else is INVALID_REQUEST, as Kafka
// answers for another broker's id.
func (b *Broker) brokerResourceName(name string) error {
	if name == "" {
		return nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Illegal non-integral BROKER resource type name: %s", name)
	}
	if int32(id) != b.cfg.NodeID {
		return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Unexpected broker id, expected %d or empty string, but received %s", b.cfg.NodeID, name)
	}
	return nil
}

// durationMs formats a duration as Kafka's millisecond configs do.
func durationMs(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// intBrokerConfigDef is one broker-level integer config (the
// transaction coordinator's, txn_configs.go; the broker-wide limits,
// quota_limits.go): Kafka's name, default and range.
type intBrokerConfigDef struct {
	name   string
	def    int64
	lo, hi int64 // valid range of the value itself
	doc    string
}
