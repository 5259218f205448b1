package broker

import (
	"fmt"
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/configs"
	"github.com/shoal-mq/shoal/broker/dedup"
)

// topicConfigDefs are the topic configs Shoal implements. A name outside
// this table is refused with INVALID_CONFIG rather than stored and
// silently ignored.
var topicConfigDefs = append([]configs.Def{
	{Name: "cleanup.policy", BrokerName: "log.cleanup.policy", Type: kmsg.ConfigTypeList, Default: "delete",
		Doc: "delete removes old segments by retention.ms and retention.bytes; compact keeps the last record of every key (the log cleaner); compact,delete does both. Compaction is not yet available on a cluster's replicated topics.",
		Check: func(v string) error {
			if _, _, ok := configs.CleanupPolicy(v); !ok {
				return fmt.Errorf("value %q is not a list of delete and compact", v)
			}
			return nil
		}},
	{Name: "min.cleanable.dirty.ratio", BrokerName: "log.cleaner.min.cleanable.ratio", Type: kmsg.ConfigTypeDouble, Default: "0.5",
		Doc: "A compacted log is cleaned once its uncleaned part is at least this share of its cleanable bytes.", Check: configs.FloatRange(0, 1)},
	{Name: "min.compaction.lag.ms", BrokerName: "log.cleaner.min.compaction.lag.ms", Type: kmsg.ConfigTypeLong, Default: "0",
		Doc: "A record stays uncompacted for at least this long.", Check: configs.IntRange(0, math.MaxInt64)},
	{Name: "max.compaction.lag.ms", BrokerName: "log.cleaner.max.compaction.lag.ms", Type: kmsg.ConfigTypeLong, Default: "9223372036854775807",
		Doc: "A compacted log whose oldest uncleaned record is older than this is cleaned whatever its dirty ratio; its active segment also rolls after this long, if sooner than segment.ms.", Check: configs.IntRange(1, math.MaxInt64)},
	{Name: "delete.retention.ms", BrokerName: "log.cleaner.delete.retention.ms", Type: kmsg.ConfigTypeLong, Default: "86400000",
		Doc: "A tombstone (null value) of a compacted topic stays this long after the first clean that keeps it (its delete horizon, KIP-534), then the cleaner removes it; so does a commit marker of a transaction left without records, counted from the marker's timestamp.", Check: configs.IntRange(0, math.MaxInt64)},
	{Name: "compression.type", BrokerName: "compression.type", Type: kmsg.ConfigTypeString, Default: "producer",
		Doc:   "Batches are stored as the producer compressed them; Shoal never recompresses, so only producer is accepted.",
		Check: configs.OneOf("producer")},
	{Name: "retention.ms", BrokerName: "log.retention.ms", Type: kmsg.ConfigTypeLong, Default: "604800000",
		Doc: "Delete segments whose newest record is older than this (-1: keep forever).", Check: configs.IntRange(-1, math.MaxInt64)},
	{Name: "retention.bytes", BrokerName: "log.retention.bytes", Type: kmsg.ConfigTypeLong, Default: "-1",
		Doc: "Delete the oldest segments while the partition is larger than this (-1: no limit).", Check: configs.IntRange(-1, math.MaxInt64)},
	{Name: "segment.bytes", BrokerName: "log.segment.bytes", Type: kmsg.ConfigTypeInt, Default: "1073741824",
		Doc: "Roll a new segment file at this size.", Check: configs.IntRange(1<<20, math.MaxInt32)},
	{Name: "segment.ms", BrokerName: "log.roll.ms", Type: kmsg.ConfigTypeLong, Default: "604800000",
		Doc: "Roll a new segment after this long even if it is not full.", Check: configs.IntRange(1, math.MaxInt64)},
	{Name: "max.message.bytes", BrokerName: "message.max.bytes", Type: kmsg.ConfigTypeInt, Default: "1048588",
		Doc: "Largest record batch accepted; larger ones get MESSAGE_TOO_LARGE.", Check: configs.IntRange(0, math.MaxInt32)},
	{Name: "index.interval.bytes", BrokerName: "log.index.interval.bytes", Type: kmsg.ConfigTypeInt, Default: "4096",
		Doc: "Bytes between entries of the sparse offset index.", Check: configs.IntRange(0, math.MaxInt32)},
	{Name: "errors.deadletterqueue.group.enable", Type: kmsg.ConfigTypeBoolean, Default: "false",
		Doc: "Whether share groups may use this topic as their dead-letter topic (KIP-1191).", Check: configs.IsBool},
	{Name: "flush.messages", BrokerName: "log.flush.interval.messages", Type: kmsg.ConfigTypeLong, Default: "9223372036854775807",
		Doc: "Under --fsync=interval, fsync a partition as soon as this many records are unsynced; under always every acknowledged write is already fsynced.", Check: configs.IntRange(1, math.MaxInt64)},
	{Name: "flush.ms", BrokerName: "log.flush.interval.ms", Type: kmsg.ConfigTypeLong, Default: "9223372036854775807",
		Doc: "Under --fsync=interval, the longest a record stays unsynced (checked every 100 ms; --flush-interval applies when it is shorter); under always every acknowledged write is already fsynced.", Check: configs.IntRange(0, math.MaxInt64)},
	{Name: "message.timestamp.type", BrokerName: "log.message.timestamp.type", Type: kmsg.ConfigTypeString, Default: "CreateTime",
		Doc: "Only CreateTime: batches are stored verbatim.", Check: configs.OneOf("CreateTime")},
	{Name: "min.insync.replicas", BrokerName: "min.insync.replicas", Type: kmsg.ConfigTypeInt, Default: "1",
		Doc: "Shoal is a single replica: with a value above 1, acks=all produce fails with NOT_ENOUGH_REPLICAS, as on Kafka.", Check: configs.IntRange(1, math.MaxInt32)},
	// Shoal's per-topic rate limits (package quota): bytes per second for all
	// clients together, the burst one second of it; 0 is unlimited.
	{Name: "producer.byte.rate", Type: kmsg.ConfigTypeLong, Default: "0",
		Doc: "Produce bytes per second into this topic, all clients together (0: unlimited); over it producers are throttled.", Check: configs.IntRange(0, math.MaxInt64)},
	{Name: "consumer.byte.rate", Type: kmsg.ConfigTypeLong, Default: "0",
		Doc: "Fetch bytes per second from this topic, all clients together (0: unlimited); over it consumers are throttled.", Check: configs.IntRange(0, math.MaxInt64)},
	{Name: "unclean.leader.election.enable", BrokerName: "unclean.leader.election.enable", Type: kmsg.ConfigTypeBoolean, Default: "false",
		Doc: "Accepted for compatibility; meaningless on a single replica.", Check: configs.IsBool},
}, dedup.ConfigDefs...) // package dedup

var topicConfigByName = func() map[string]*configs.Def {
	m := make(map[string]*configs.Def, len(topicConfigDefs))
	for i := range topicConfigDefs {
		m[topicConfigDefs[i].Name] = &topicConfigDefs[i]
	}
	return m
}()

// validateTopicConfig checks one topic config name and value.
func validateTopicConfig(name, value string) error {
	d, ok := topicConfigByName[name]
	if !ok {
		return fmt.Errorf("unknown or unsupported topic config %q", name)
	}
	if d.Check != nil {
		if err := d.Check(value); err != nil {
			return fmt.Errorf("invalid value for %s: %v", name, err)
		}
	}
	return nil
}

// sortedTopicConfigNames returns every supported topic config name.
func sortedTopicConfigNames() []string {
	names := make([]string, 0, len(topicConfigDefs))
	for _, d := range topicConfigDefs {
		names = append(names, d.Name)
	}
	sort.Strings(names)
	return names
}

// dedupSettingsFor resolves the dedup configs of a topic's overrides.
func (b *Broker) dedupSettingsFor(overrides map[string]string) dedup.Settings {
	return dedup.SettingsFrom(func(name string) string { v, _ := b.topicConfigValue(overrides, name); return v })
}

// checkTopicConfig is validateTopicConfig plus what this broker cannot
// do: a cluster's replicas are not compacted yet (each replica's log
// is raft's log, whose entries a cleaner must not rewrite under it),
// so compact is refused there rather than accepted and ignored.
func (b *Broker) checkTopicConfig(name, value string) error {
	if err := validateTopicConfig(name, value); err != nil {
		return err
	}
	if name == "cleanup.policy" && b.cluster != nil {
		if compact, _, _ := configs.CleanupPolicy(value); compact {
			return fmt.Errorf("invalid value for cleanup.policy: compaction is not available on a cluster yet")
		}
	}
	return nil
}
