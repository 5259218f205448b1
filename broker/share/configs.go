package share

// Share-group configs (kip932.md §7), at two levels:
//
//   - broker level, group.share.*: the defaults of every share group and
//     the bounds a group may choose within. They are read from the
//     dynamic broker configs (Broker.dyn, set through
//     IncrementalAlterConfigs/AlterConfigs on the BROKER resource, where
//     broker_configs.go lists shareBrokerConfigDefs with their ranges) and
//     fall back to Kafka's defaults. A value that does not parse or is out
//     of range is ignored (the default applies); the BROKER resource
//     handlers refuse it at the door.
//   - group level, share.* (resource type GROUP = 32): per-group
//     overrides, validated against the broker bounds (INVALID_CONFIG
//     outside them), persisted in the metadata store as one JSON map per
//     group under meta/group-config/<url.PathEscape(group)> before the
//     answer, and applied to loaded share-partitions at their next
//     operation.
//
// The GROUP resource also holds Kafka's KIP-848 consumer-group configs,
// consumer.session.timeout.ms and consumer.heartbeat.interval.ms, in the
// same way: their defaults and bounds are the broker configs
// group.consumer.* (groupBrokerConfigDefs in broker_configs.go), and the
// KIP-848 coordinator reads them per group at each use
// (groups.Coordinator.ConsumerSettings). Unlike Kafka, which refuses at
// startup a group.consumer.{session.timeout,heartbeat.interval}.ms outside
// its min/max, Shoal applies such a broker default as it is (tests
// shorten it), and describes it so.
//
// Shoal departs from Kafka in one default: the in-flight window per
// share-partition (share.partition.max.record.locks) defaults to 120,000
// records and may be raised to 1,000,000 (Kafka: 2,000 / 4,000), because
// the state machine stores runs of offsets, not one entry per record.
//
// Tests shorten acquisition locks by lowering the broker-level
// group.share.min.record.lock.duration.ms (Kafka's own range for it is
// [1000, 30000]) and then setting share.record.lock.duration.ms on the
// group.

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/configs"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/meta"
	"github.com/shoal-mq/shoal/sharegroup"
)

// BrokerIntConfig is one broker-level integer config of the group
// coordinators (share groups and consumer groups, both here).
type BrokerIntConfig struct {
	Name   string
	Def    int64
	Lo, Hi int64 // valid range of the value itself
	Doc    string
}

// BrokerConfigDefs are the broker-level share-group configs with
// Kafka's names, defaults and ranges (4.3 ShareGroupConfig,
// GroupCoordinatorConfig), except the in-flight window (see above).
var BrokerConfigDefs = []BrokerIntConfig{
	{"group.share.delivery.count.limit", 5, 2, 25, "Default share.delivery.count.limit: deliveries of a record before it is archived."},
	{"group.share.heartbeat.interval.ms", 5000, 1, math.MaxInt32, "Default share.heartbeat.interval.ms."},
	{"group.share.max.delivery.count.limit", 10, 5, 25, "Upper bound of share.delivery.count.limit."},
	{"group.share.max.heartbeat.interval.ms", 15000, 1, math.MaxInt32, "Upper bound of share.heartbeat.interval.ms."},
	{"group.share.max.partition.max.record.locks", sharegroup.MaxMaxInFlight, 100, sharegroup.MaxMaxInFlight, "Upper bound of share.partition.max.record.locks."},
	{"group.share.max.record.lock.duration.ms", 60000, 30000, 3600000, "Upper bound of share.record.lock.duration.ms."},
	{"group.share.max.session.timeout.ms", 60000, 1, math.MaxInt32, "Upper bound of share.session.timeout.ms."},
	{"group.share.max.share.sessions", 2000, 1, math.MaxInt32, "Share sessions this broker keeps; a new one beyond gets SHARE_SESSION_LIMIT_REACHED."},
	{"group.share.max.size", 200, 1, 1000, "Members per share group; a new member beyond gets GROUP_MAX_SIZE_REACHED."},
	{"group.share.min.delivery.count.limit", 2, 2, 5, "Lower bound of share.delivery.count.limit."},
	{"group.share.min.heartbeat.interval.ms", 5000, 1, math.MaxInt32, "Lower bound of share.heartbeat.interval.ms."},
	{"group.share.min.partition.max.record.locks", 100, 100, sharegroup.MaxMaxInFlight, "Lower bound of share.partition.max.record.locks."},
	{"group.share.min.record.lock.duration.ms", 15000, 1000, 30000, "Lower bound of share.record.lock.duration.ms."},
	{"group.share.min.session.timeout.ms", 45000, 1, math.MaxInt32, "Lower bound of share.session.timeout.ms."},
	{"group.share.partition.max.record.locks", sharegroup.DefaultMaxInFlight, 100, sharegroup.MaxMaxInFlight, "Default share.partition.max.record.locks: the in-flight window of a share-partition (Shoal: 120000; Kafka: 2000)."},
	{"group.share.record.lock.duration.ms", 30000, 1000, 3600000, "Default share.record.lock.duration.ms: the acquisition lock."},
	{"group.share.session.timeout.ms", 45000, 1, math.MaxInt32, "Default share.session.timeout.ms."},
}

// GroupBrokerConfigDefs are the consumer-group coordinator's broker
// configs (package groups reads them through groups.Options:
// Broker.brokerConfig, Coordinator.GroupBrokerInt), with Kafka's
// names, defaults and ranges; group.consumer.{min,max}.* bound the group
// configs consumer.* (below). They are
// dynamic here: Kafka reads most of them at startup only, but nothing in
// Shoal depends on them being fixed.
var GroupBrokerConfigDefs = []BrokerIntConfig{
	{"group.consumer.heartbeat.interval.ms", 5000, 1, math.MaxInt32, "Heartbeat interval given to KIP-848 consumer group members: default of the group config consumer.heartbeat.interval.ms."},
	{"group.consumer.max.heartbeat.interval.ms", 15000, 1, math.MaxInt32, "Upper bound of consumer.heartbeat.interval.ms."},
	{"group.consumer.max.session.timeout.ms", 60000, 1, math.MaxInt32, "Upper bound of consumer.session.timeout.ms."},
	{"group.consumer.max.size", math.MaxInt32, 1, math.MaxInt32, "Members per KIP-848 consumer group; one more gets GROUP_MAX_SIZE_REACHED."},
	{"group.consumer.min.heartbeat.interval.ms", 5000, 1, math.MaxInt32, "Lower bound of consumer.heartbeat.interval.ms."},
	{"group.consumer.min.session.timeout.ms", 45000, 1, math.MaxInt32, "Lower bound of consumer.session.timeout.ms."},
	{"group.consumer.session.timeout.ms", 45000, 1, math.MaxInt32, "A KIP-848 member that does not heartbeat for this long is fenced: default of the group config consumer.session.timeout.ms."},
	{"group.initial.rebalance.delay.ms", 3000, 0, math.MaxInt32, "How long the first rebalance of an empty classic group waits for more members."},
	{"group.max.session.timeout.ms", 1800000, 1, math.MaxInt32, "Largest session timeout a classic group member may ask for."},
	{"group.max.size", math.MaxInt32, 1, math.MaxInt32, "Members per classic group; one more gets GROUP_MAX_SIZE_REACHED."},
	{"group.min.session.timeout.ms", 6000, 1, math.MaxInt32, "Smallest session timeout a classic group member may ask for."},
	{"offset.metadata.max.bytes", 4096, 0, math.MaxInt32, "Largest metadata string of a committed offset; larger gets OFFSET_METADATA_TOO_LARGE."},
	{"offsets.retention.check.interval.ms", 600000, 1, math.MaxInt64, "How often expired offsets of empty groups are removed."},
	{"offsets.retention.minutes", 10080, 1, math.MaxInt32, "Committed offsets of a group that has been empty this long are removed."},
}

// groupBrokerConfigByName indexes both tables of broker-level group
// configs, for groupBrokerInt; a name is in one table only.
var groupBrokerConfigByName = func() map[string]*BrokerIntConfig {
	m := make(map[string]*BrokerIntConfig, len(BrokerConfigDefs)+len(GroupBrokerConfigDefs))
	for _, defs := range [][]BrokerIntConfig{BrokerConfigDefs, GroupBrokerConfigDefs} {
		for i := range defs {
			if m[defs[i].Name] != nil {
				panic("broker: group broker config " + defs[i].Name + " defined twice") // programming error
			}
			m[defs[i].Name] = &defs[i]
		}
	}
	return m
}()

// GroupBrokerInt returns a broker-level group config (share or consumer
// group): the dynamic override if it is valid, else the default.
func (c *Coordinator) GroupBrokerInt(name string) int64 {
	d := groupBrokerConfigByName[name]
	if d == nil {
		panic("broker: unknown group broker config " + name) // programming error
	}
	if v, ok := c.o.BrokerConfig(name); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= d.Lo && n <= d.Hi {
			return n
		}
	}
	return d.Def
}

// GroupConfigDef is one group-level config (share.* or consumer.*).
type GroupConfigDef struct {
	Name string
	Type kmsg.ConfigType
	// BrokerName is the broker config giving the default ("" = def).
	BrokerName string
	Def        string
	// MinName/MaxName are the broker configs bounding the value ("" = none).
	MinName, MaxName string
	floor            int64 // absolute lower bound of an int value
	Doc              string
	// check validates a non-int value.
	check func(v string) error
	// unclamped: the broker default applies as it is even outside the
	// bounds (see the top of the file).
	unclamped bool
}

var GroupConfigDefs = []GroupConfigDef{
	{Name: "consumer.heartbeat.interval.ms", Type: kmsg.ConfigTypeInt, BrokerName: "group.consumer.heartbeat.interval.ms",
		MinName: "group.consumer.min.heartbeat.interval.ms", MaxName: "group.consumer.max.heartbeat.interval.ms", floor: 1, unclamped: true,
		Doc: "The heartbeat interval given to KIP-848 consumer group members."},
	{Name: "consumer.session.timeout.ms", Type: kmsg.ConfigTypeInt, BrokerName: "group.consumer.session.timeout.ms",
		MinName: "group.consumer.min.session.timeout.ms", MaxName: "group.consumer.max.session.timeout.ms", floor: 1, unclamped: true,
		Doc: "A KIP-848 consumer group member not heartbeating for this long is fenced."},
	{Name: DLQCopyRecordConfig, Type: kmsg.ConfigTypeBoolean, Def: "false",
		Doc:   "Copy the original key, value and headers into dead-letter records (KIP-1191); false writes headers only.",
		check: configs.IsBool},
	{Name: DLQTopicNameConfig, Type: kmsg.ConfigTypeString, Def: "",
		Doc:   "The share group's dead-letter topic (KIP-1191): rejected records and records reaching the delivery count limit are copied there before they are archived. Blank: none.",
		check: func(string) error { return nil }}, // checkDLQTopicName needs the broker
	{Name: "share.acquire.mode", Type: kmsg.ConfigTypeString, Def: "batch_optimized",
		Doc:   "batch_optimized (whole log batches, may exceed MaxRecords) or record_limit (at most MaxRecords per fetch, KIP-1206); record_limit applies even to requests asking batch_optimized.",
		check: configs.OneOf("batch_optimized", "record_limit")},
	{Name: "share.auto.offset.reset", Type: kmsg.ConfigTypeString, Def: "latest",
		Doc:   "Where a share-partition without state starts: latest, earliest or by_duration:<ISO-8601 duration>. Evaluated once, when the share-partition is initialized.",
		check: checkAutoOffsetReset},
	{Name: "share.delivery.count.limit", Type: kmsg.ConfigTypeInt, BrokerName: "group.share.delivery.count.limit",
		MinName: "group.share.min.delivery.count.limit", MaxName: "group.share.max.delivery.count.limit", floor: 2,
		Doc: "Deliveries of a record before it is archived."},
	// Delivery rate limits (issue 6): records acquired per second by the
	// whole group, or by each message group; quota.go.
	{Name: "share.delivery.rate.limit", Type: kmsg.ConfigTypeInt, Def: "0", floor: 0,
		Doc: "Records per second this share group may acquire (0: unlimited), for the whole group or per message group (share.delivery.rate.limit.scope); the burst is one second of it."},
	{Name: "share.delivery.rate.limit.scope", Type: kmsg.ConfigTypeString, Def: "group",
		Doc:   "group: share.delivery.rate.limit bounds the whole group's deliveries; message-group: each message group's.",
		check: configs.OneOf("group", "message-group")},
	{Name: "share.heartbeat.interval.ms", Type: kmsg.ConfigTypeInt, BrokerName: "group.share.heartbeat.interval.ms",
		MinName: "group.share.min.heartbeat.interval.ms", MaxName: "group.share.max.heartbeat.interval.ms", floor: 1,
		Doc: "The heartbeat interval given to members."},
	{Name: "share.isolation.level", Type: kmsg.ConfigTypeString, Def: "read_uncommitted",
		Doc:   "read_uncommitted (up to the high watermark) or read_committed (up to the last stable offset, skipping aborted transactions).",
		check: configs.OneOf("read_uncommitted", "read_committed")},
	{Name: "share.message.group.fair", Type: kmsg.ConfigTypeBoolean, Def: "false",
		Doc:   "Deliver message groups round-robin, so a group with many records cannot delay the others (needs share.message.group.source).",
		check: configs.IsBool},
	{Name: "share.message.group.ordered", Type: kmsg.ConfigTypeBoolean, Def: "false",
		Doc:   "Deliver each message group's records strictly in offset order, one in flight per group at a time, groups in parallel (SQS FIFO; needs share.message.group.source).",
		check: configs.IsBool},
	{Name: "share.message.group.source", Type: kmsg.ConfigTypeString, Def: "none",
		Doc:   "Where a record's message-group id comes from: none, key (the record key) or header:NAME (that header's value). Records without one are each a group of their own.",
		check: checkMessageGroupSource},
	{Name: "share.partition.max.record.locks", Type: kmsg.ConfigTypeInt, BrokerName: "group.share.partition.max.record.locks",
		MinName: "group.share.min.partition.max.record.locks", MaxName: "group.share.max.partition.max.record.locks", floor: 100,
		Doc: "The in-flight window of each share-partition (SPEO-SPSO)."},
	{Name: "share.record.lock.duration.ms", Type: kmsg.ConfigTypeInt, BrokerName: "group.share.record.lock.duration.ms",
		MinName: "group.share.min.record.lock.duration.ms", MaxName: "group.share.max.record.lock.duration.ms", floor: 1000,
		Doc: "The acquisition lock duration."},
	{Name: "share.redelivery.backoff.max.ms", Type: kmsg.ConfigTypeInt, Def: "60000", floor: 0,
		Doc: "The cap of share.redelivery.backoff.ms's doubling."},
	{Name: "share.redelivery.backoff.ms", Type: kmsg.ConfigTypeInt, Def: "0", floor: 0,
		Doc: "Delay before a released or lock-expired record is delivered again, doubling per delivery up to share.redelivery.backoff.max.ms; 0 = none. Not persisted: after a restart such records are available at once."},
	{Name: "share.renew.acknowledge.enable", Type: kmsg.ConfigTypeBoolean, Def: "true",
		Doc:   "Whether RENEW acknowledgements (KIP-1222) are accepted.",
		check: configs.IsBool},
	{Name: "share.session.timeout.ms", Type: kmsg.ConfigTypeInt, BrokerName: "group.share.session.timeout.ms",
		MinName: "group.share.min.session.timeout.ms", MaxName: "group.share.max.session.timeout.ms", floor: 1,
		Doc: "A member not heartbeating for this long is removed from the group."},
}

var groupConfigByName = func() map[string]*GroupConfigDef {
	m := make(map[string]*GroupConfigDef, len(GroupConfigDefs))
	for i := range GroupConfigDefs {
		m[GroupConfigDefs[i].Name] = &GroupConfigDefs[i]
	}
	return m
}()

// bounds returns the broker bounds of an int group config.
func (c *Coordinator) groupConfigBounds(d *GroupConfigDef) (lo, hi int64) {
	lo, hi = d.floor, math.MaxInt32
	if d.MinName != "" {
		lo = max(lo, c.GroupBrokerInt(d.MinName))
	}
	if d.MaxName != "" {
		hi = c.GroupBrokerInt(d.MaxName)
	}
	return lo, hi
}

// groupConfigDefault is the default of a group config: its broker config
// (clamped into the bounds) or the static default.
func (c *Coordinator) groupConfigDefault(d *GroupConfigDef) string {
	if d.BrokerName == "" {
		return d.Def
	}
	n := c.GroupBrokerInt(d.BrokerName)
	if !d.unclamped {
		lo, hi := c.groupConfigBounds(d)
		n = min(max(n, lo), hi)
	}
	return strconv.FormatInt(n, 10)
}

// checkGroupConfig validates one group config value against the
// current broker bounds.
func (c *Coordinator) checkGroupConfig(name, value string) error {
	d := groupConfigByName[name]
	if d == nil {
		return kafkaerr.Refuse(kafkaerr.ErrInvalidConfig, "Unknown group config name: %s", name)
	}
	if d.check != nil {
		if err := d.check(value); err != nil {
			return kafkaerr.Refuse(kafkaerr.ErrInvalidConfig, "Invalid value %s for configuration %s: %v", value, name, err)
		}
		if name == DLQTopicNameConfig {
			return c.checkDLQTopicName(value)
		}
		return nil
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return kafkaerr.Refuse(kafkaerr.ErrInvalidConfig, "Invalid value %s for configuration %s: Not a number of type %s", value, name, d.Type.String())
	}
	lo, hi := c.groupConfigBounds(d)
	if n < lo || n > hi {
		return kafkaerr.Refuse(kafkaerr.ErrInvalidConfig, "Invalid value %d for configuration %s: must be in the range [%d, %d]", n, name, lo, hi)
	}
	return nil
}

// checkAutoOffsetReset accepts latest, earliest and
// by_duration:<non-negative ISO-8601 duration>.
func checkAutoOffsetReset(v string) error {
	switch {
	case v == "latest", v == "earliest":
		return nil
	case strings.HasPrefix(v, "by_duration:"):
		_, err := parseISODuration(strings.TrimPrefix(v, "by_duration:"))
		return err
	}
	return fmt.Errorf("value %q is not one of latest, earliest, by_duration:<duration>", v)
}

// parseISODuration parses the subset of ISO-8601 durations Java's
// Duration.parse accepts: PnDTnHnMn.nS, each part optional, non-negative.
func parseISODuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not an ISO-8601 duration (PnDTnHnMn.nS)", s)
	if len(s) < 2 || (s[0] != 'P' && s[0] != 'p') {
		return 0, bad
	}
	s = s[1:]
	var total float64
	inTime, seen := false, false
	units := map[byte]float64{'D': 24 * 3600, 'H': 3600, 'M': 60, 'S': 1}
	for len(s) > 0 {
		if s[0] == 'T' || s[0] == 't' {
			if inTime {
				return 0, bad
			}
			inTime = true
			s = s[1:]
			continue
		}
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		if i == 0 || i == len(s) {
			return 0, bad
		}
		n, err := strconv.ParseFloat(s[:i], 64)
		if err != nil {
			return 0, bad
		}
		u := s[i] &^ 0x20 // upper case
		mult, ok := units[u]
		if !ok || (u == 'D') == inTime || (u != 'S' && strings.Contains(s[:i], ".")) {
			return 0, bad
		}
		total += n * mult
		seen = true
		s = s[i+1:]
	}
	if !seen || total > float64(math.MaxInt64)/1e9 {
		return 0, bad
	}
	return time.Duration(total * 1e9), nil
}

// shareGroupSettings are the effective configs of one share group.
type shareGroupSettings struct {
	sessionTimeout    time.Duration
	heartbeatInterval time.Duration
	lockDuration      time.Duration
	deliveryLimit     int
	maxInFlight       int
	autoOffsetReset   string
	readCommitted     bool
	recordLimit       bool
	renewEnabled      bool
	dlqTopic          string // errors.deadletterqueue.topic.name ("" = none)
	dlqCopy           bool   // errors.deadletterqueue.copy.record.enable
	dlqOwned          bool   // dlqTopic is an Owned group's: no prefix or opt-in rule
	orderedBatch      int    // an Owned group's (sharegroup.Config.OrderedBatch)
	groupSource       messageGroupSource
	groupMode         sharegroup.GroupMode
	backoff           time.Duration
	backoffMax        time.Duration
	// lock, when lockSet, is this request's acquisition lock instead of
	// lockDuration (Receive: SQS's VisibilityTimeout); not a group config.
	lock    time.Duration
	lockSet bool
}

// partitionConfig is the share-partition state machine's configuration.
func (s shareGroupSettings) partitionConfig() sharegroup.Config {
	return sharegroup.Config{
		RecordLockDuration:   s.lockDuration,
		DeliveryCountLimit:   s.deliveryLimit,
		MaxInFlight:          s.maxInFlight,
		RenewDisabled:        !s.renewEnabled,
		DeadLetter:           s.dlqTopic != "",
		Groups:               s.groupMode,
		RedeliveryBackoff:    s.backoff,
		RedeliveryBackoffMax: s.backoffMax,
		OrderedBatch:         s.orderedBatch,
	}
}

// shareConfigStore holds the group-level overrides. Readers take mu for
// reading; writers serialise on writeMu, persist, then swap under mu.
// Settings are resolved once per request (shareSettings) and handed to
// each share-partition operation, which applies them if they differ from
// the partition's current configuration, so a change of a group or a
// broker-level config takes effect at the next request.
type shareConfigStore struct {
	writeMu sync.Mutex
	mu      sync.RWMutex
	m       map[string]map[string]string // group → name → value
}

func (s *shareConfigStore) overrides(group string) map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m[group]
}

func loadShareGroupConfigs(db *badger.DB) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	err := meta.ScanJSON(db, meta.PrefixGroupConfig, func(name string, m map[string]string) error {
		group, err := url.PathUnescape(name)
		if err != nil {
			return fmt.Errorf("broker: group config key %q: %w", meta.PrefixGroupConfig+name, err)
		}
		out[group] = m
		return nil
	})
	return out, err
}

// groupConfigValue is the effective value of a group config given the
// group's overrides: the override, else the default. An int override
// outside the current broker bounds (they were changed after it was set)
// is clamped into them.
func (c *Coordinator) groupConfigValue(over map[string]string, name string) string {
	d := groupConfigByName[name]
	v, ok := over[name]
	switch {
	case !ok:
	case d.check != nil:
		if d.check(v) == nil {
			return v
		}
	default:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			lo, hi := c.groupConfigBounds(d)
			return strconv.FormatInt(min(max(n, lo), hi), 10)
		}
	}
	return c.groupConfigDefault(d)
}

// GroupConfigInt is the effective value of an int config of group.
func (c *Coordinator) GroupConfigInt(group, name string) int64 {
	n, _ := strconv.ParseInt(c.groupConfigValue(c.configs.overrides(group), name), 10, 64)
	return n
}

// shareSettings resolves the effective share configs of group.
func (c *Coordinator) shareSettings(group string) shareGroupSettings {
	over := c.configs.overrides(group)
	get := func(name string) string { return c.groupConfigValue(over, name) }
	num := func(name string) int64 { n, _ := strconv.ParseInt(get(name), 10, 64); return n }
	st := shareGroupSettings{
		sessionTimeout:    time.Duration(num("share.session.timeout.ms")) * time.Millisecond,
		heartbeatInterval: time.Duration(num("share.heartbeat.interval.ms")) * time.Millisecond,
		lockDuration:      time.Duration(num("share.record.lock.duration.ms")) * time.Millisecond,
		deliveryLimit:     int(num("share.delivery.count.limit")),
		maxInFlight:       int(num("share.partition.max.record.locks")),
		autoOffsetReset:   get("share.auto.offset.reset"),
		readCommitted:     get("share.isolation.level") == "read_committed",
		recordLimit:       get("share.acquire.mode") == "record_limit",
		renewEnabled:      get("share.renew.acknowledge.enable") == "true",
		dlqTopic:          get(DLQTopicNameConfig),
		dlqCopy:           get(DLQCopyRecordConfig) == "true",
		groupSource:       parseMessageGroupSource(get("share.message.group.source")),
		groupMode:         messageGroupMode(get),
		backoff:           time.Duration(num("share.redelivery.backoff.ms")) * time.Millisecond,
		backoffMax:        time.Duration(num("share.redelivery.backoff.max.ms")) * time.Millisecond,
	}
	if c.o.Owned != nil {
		if o, ok := c.o.Owned(group); ok {
			st.deliveryLimit, st.renewEnabled, st.autoOffsetReset = o.DeliveryLimit, true, "earliest"
			st.dlqTopic, st.dlqCopy, st.dlqOwned = o.DeadLetterTopic, o.DeadLetterTopic != "", o.DeadLetterTopic != ""
			if o.OrderedBy != "" {
				st.groupMode, st.groupSource = sharegroup.GroupsOrdered, messageGroupSource{header: o.OrderedBy}
				st.orderedBatch = o.OrderedBatch
			}
		}
	}
	return st
}

// checkGroupResource validates a GROUP resource name.
func checkGroupResource(group string) error {
	if group == "" {
		return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Group name must not be empty.")
	}
	return nil
}

// GroupConfigEntries describes every group config of group
// (DescribeConfigs, resource type GROUP): the override (GROUP_CONFIG),
// else the dynamic broker default (DYNAMIC_DEFAULT_BROKER_CONFIG), else
// the default. The group need not exist, as in Kafka.
func (c *Coordinator) GroupConfigEntries(group string) ([]configs.Entry, error) {
	if err := checkGroupResource(group); err != nil {
		return nil, err
	}
	over := c.configs.overrides(group)
	out := make([]configs.Entry, 0, len(GroupConfigDefs))
	for i := range GroupConfigDefs {
		d := &GroupConfigDefs[i]
		e := configs.Entry{Name: d.Name, Type: d.Type, Doc: d.Doc, Source: kmsg.ConfigSourceDefaultConfig}
		if v, ok := over[d.Name]; ok {
			v := v
			e.Value, e.Source = &v, kmsg.ConfigSourceGroupConfig
			e.Synonyms = append(e.Synonyms, configs.Synonym{Name: d.Name, Value: &v, Source: kmsg.ConfigSourceGroupConfig})
		}
		def := c.groupConfigDefault(d)
		defName, defSource := d.Name, kmsg.ConfigSourceDefaultConfig
		if d.BrokerName != "" {
			defName = d.BrokerName
			if _, set := c.o.BrokerConfig(d.BrokerName); set {
				defSource = kmsg.ConfigSourceDynamicDefaultBrokerConfig
			}
		}
		if e.Value == nil {
			e.Value, e.Source = &def, defSource
		}
		e.Synonyms = append(e.Synonyms, configs.Synonym{Name: defName, Value: &def, Source: defSource})
		out = append(out, e)
	}
	return out, nil
}

// IncrementalAlterGroupConfigs applies IncrementalAlterConfigs operations
// to a GROUP resource, all or nothing: SET and DELETE; APPEND and
// SUBTRACT are INVALID_CONFIG (no group config is a list); an unknown
// name or a value outside the broker bounds is INVALID_CONFIG.
func (c *Coordinator) IncrementalAlterGroupConfigs(group string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) error {
	if err := checkGroupResource(group); err != nil {
		return err
	}
	co := configs.Ops{
		Lookup: func(name string) (kmsg.ConfigType, string, bool) {
			d := groupConfigByName[name]
			if d == nil {
				return 0, "", false
			}
			return d.Type, c.groupConfigDefault(d), true
		},
		Check: func(name string, value *string) error {
			if value == nil {
				if groupConfigByName[name] == nil {
					return kafkaerr.Refuse(kafkaerr.ErrInvalidConfig, "Unknown group config name: %s", name)
				}
				return nil
			}
			return c.checkGroupConfig(name, *value)
		},
		Bad: kafkaerr.ErrInvalidConfig,
	}
	return c.updateGroupConfigs(group, validateOnly, func(cur map[string]string) (map[string]string, error) {
		return co.Apply(cur, ops)
	})
}

// AlterGroupConfigs replaces a GROUP resource's overrides (AlterConfigs):
// configs left out revert to their defaults. The caller has refused null
// values and duplicate names.
func (c *Coordinator) AlterGroupConfigs(group string, configs []kmsg.AlterConfigsRequestResourceConfig, validateOnly bool) error {
	if err := checkGroupResource(group); err != nil {
		return err
	}
	next := make(map[string]string, len(configs))
	for _, rc := range configs {
		if rc.Value == nil {
			return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Null value not supported for : %s", rc.Name)
		}
		if err := c.checkGroupConfig(rc.Name, *rc.Value); err != nil {
			return err
		}
		next[rc.Name] = *rc.Value
	}
	return c.updateGroupConfigs(group, validateOnly, func(map[string]string) (map[string]string, error) {
		return next, nil
	})
}

// updateGroupConfigs replaces group's overrides with update(copy of
// current), checks cross-config rules, persists, then publishes them.
func (c *Coordinator) updateGroupConfigs(group string, validateOnly bool, update func(cur map[string]string) (map[string]string, error)) error {
	s := &c.configs
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	cur := map[string]string{}
	for k, v := range s.overrides(group) {
		cur[k] = v
	}
	next, err := update(cur)
	if err != nil {
		return err
	}
	// Kafka's GroupConfig rule: the heartbeat interval must be below the
	// session timeout.
	for _, prefix := range []string{"consumer.", "share."} {
		hbName, sName := prefix+"heartbeat.interval.ms", prefix+"session.timeout.ms"
		hbv, sv := next[hbName], next[sName]
		if hbv == "" {
			hbv = c.groupConfigDefault(groupConfigByName[hbName])
		}
		if sv == "" {
			sv = c.groupConfigDefault(groupConfigByName[sName])
		}
		if hb, s := configs.Int(hbv, 0), configs.Int(sv, 0); hb >= s {
			return kafkaerr.Refuse(kafkaerr.ErrInvalidConfig, "%s must be less than %s", hbName, sName)
		}
	}
	if validateOnly {
		return nil
	}
	key := []byte(meta.PrefixGroupConfig + url.PathEscape(group))
	if err := meta.PutJSONOrDelete(c.o.Store.DB(), key, next); err != nil {
		return fmt.Errorf("broker: persist group configs: %w", err)
	}
	s.mu.Lock()
	if len(next) == 0 {
		delete(s.m, group)
	} else {
		s.m[group] = next
	}
	s.mu.Unlock()
	return nil
}
