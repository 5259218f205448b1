package broker

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// configDef describes one topic config (and the broker config that gives
// its default), with Kafka's names, types and defaults. Values are kept
// as strings, as on the wire.
type configDef struct {
	name       string          // topic config name, e.g. retention.ms
	brokerName string          // broker-level default, e.g. log.retention.ms ("" = none)
	typ        kmsg.ConfigType // as reported by DescribeConfigs
	def        string          // Kafka's default
	doc        string
	// check validates a value; nil accepts anything of the type.
	check func(v string) error
}

func intRange(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("value %q is not an integer", v)
		}
		if n < lo || n > hi {
			return fmt.Errorf("value %d is outside [%d, %d]", n, lo, hi)
		}
		return nil
	}
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, ok := range vals {
			if v == ok {
				return nil
			}
		}
		return fmt.Errorf("value %q is not one of %v", v, vals)
	}
}

func isBool(v string) error {
	if v != "true" && v != "false" {
		return fmt.Errorf("value %q is not true or false", v)
	}
	return nil
}

// topicConfigDefs are the topic configs Shoal implements. A name outside
// this table is refused with INVALID_CONFIG rather than stored and
// silently ignored.
var topicConfigDefs = append([]configDef{
	{name: "cleanup.policy", brokerName: "log.cleanup.policy", typ: kmsg.ConfigTypeList, def: "delete",
		doc:   "Only delete is supported: Shoal does not compact logs, so compact is refused rather than ignored.",
		check: oneOf("delete")},
	{name: "compression.type", brokerName: "compression.type", typ: kmsg.ConfigTypeString, def: "producer",
		doc:   "Batches are stored as the producer compressed them; Shoal never recompresses, so only producer is accepted.",
		check: oneOf("producer")},
	{name: "retention.ms", brokerName: "log.retention.ms", typ: kmsg.ConfigTypeLong, def: "604800000",
		doc: "Delete segments whose newest record is older than this (-1: keep forever).", check: intRange(-1, math.MaxInt64)},
	{name: "retention.bytes", brokerName: "log.retention.bytes", typ: kmsg.ConfigTypeLong, def: "-1",
		doc: "Delete the oldest segments while the partition is larger than this (-1: no limit).", check: intRange(-1, math.MaxInt64)},
	{name: "segment.bytes", brokerName: "log.segment.bytes", typ: kmsg.ConfigTypeInt, def: "1073741824",
		doc: "Roll a new segment file at this size.", check: intRange(1<<20, math.MaxInt32)},
	{name: "segment.ms", brokerName: "log.roll.ms", typ: kmsg.ConfigTypeLong, def: "604800000",
		doc: "Roll a new segment after this long even if it is not full.", check: intRange(1, math.MaxInt64)},
	{name: "max.message.bytes", brokerName: "message.max.bytes", typ: kmsg.ConfigTypeInt, def: "1048588",
		doc: "Largest record batch accepted; larger ones get MESSAGE_TOO_LARGE.", check: intRange(0, math.MaxInt32)},
	{name: "index.interval.bytes", brokerName: "log.index.interval.bytes", typ: kmsg.ConfigTypeInt, def: "4096",
		doc: "Bytes between entries of the sparse offset index.", check: intRange(0, math.MaxInt32)},
	{name: "errors.deadletterqueue.group.enable", typ: kmsg.ConfigTypeBoolean, def: "false",
		doc: "Whether share groups may use this topic as their dead-letter topic (KIP-1191).", check: isBool},
	{name: "flush.messages", brokerName: "log.flush.interval.messages", typ: kmsg.ConfigTypeLong, def: "9223372036854775807",
		doc: "Under --fsync=interval, fsync a partition as soon as this many records are unsynced; under always every acknowledged write is already fsynced.", check: intRange(1, math.MaxInt64)},
	{name: "flush.ms", brokerName: "log.flush.interval.ms", typ: kmsg.ConfigTypeLong, def: "9223372036854775807",
		doc: "Under --fsync=interval, the longest a record stays unsynced (checked every 100 ms; --flush-interval applies when it is shorter); under always every acknowledged write is already fsynced.", check: intRange(0, math.MaxInt64)},
	{name: "message.timestamp.type", brokerName: "log.message.timestamp.type", typ: kmsg.ConfigTypeString, def: "CreateTime",
		doc: "Only CreateTime: batches are stored verbatim.", check: oneOf("CreateTime")},
	{name: "min.insync.replicas", brokerName: "min.insync.replicas", typ: kmsg.ConfigTypeInt, def: "1",
		doc: "Shoal is a single replica: with a value above 1, acks=all produce fails with NOT_ENOUGH_REPLICAS, as on Kafka.", check: intRange(1, math.MaxInt32)},
	// Shoal's per-topic rate limits (quota.go): bytes per second for all
	// clients together, the burst one second of it; 0 is unlimited.
	{name: "producer.byte.rate", typ: kmsg.ConfigTypeLong, def: "0",
		doc: "Produce bytes per second into this topic, all clients together (0: unlimited); over it producers are throttled.", check: intRange(0, math.MaxInt64)},
	{name: "consumer.byte.rate", typ: kmsg.ConfigTypeLong, def: "0",
		doc: "Fetch bytes per second from this topic, all clients together (0: unlimited); over it consumers are throttled.", check: intRange(0, math.MaxInt64)},
	{name: "unclean.leader.election.enable", brokerName: "unclean.leader.election.enable", typ: kmsg.ConfigTypeBoolean, def: "false",
		doc: "Accepted for compatibility; meaningless on a single replica.", check: isBool},
}, dedupTopicConfigDefs...) // dedup.go

var topicConfigByName = func() map[string]*configDef {
	m := make(map[string]*configDef, len(topicConfigDefs))
	for i := range topicConfigDefs {
		m[topicConfigDefs[i].name] = &topicConfigDefs[i]
	}
	return m
}()

// validateTopicConfig checks one topic config name and value.
func validateTopicConfig(name, value string) error {
	d, ok := topicConfigByName[name]
	if !ok {
		return fmt.Errorf("unknown or unsupported topic config %q", name)
	}
	if d.check != nil {
		if err := d.check(value); err != nil {
			return fmt.Errorf("invalid value for %s: %v", name, err)
		}
	}
	return nil
}

// sortedTopicConfigNames returns every supported topic config name.
func sortedTopicConfigNames() []string {
	names := make([]string, 0, len(topicConfigDefs))
	for _, d := range topicConfigDefs {
		names = append(names, d.name)
	}
	sort.Strings(names)
	return names
}
