package broker

// Config administration shared by DescribeConfigs (32), AlterConfigs (33),
// IncrementalAlterConfigs (44) and CreateTopics (19): describing topic and
// broker configs as entries, and the two read-modify-write paths that
// change them under the topic Admin's lock (package topics).
//
// Persist, then answer: a change is written to the metadata store before
// it is applied in memory and to the partition logs, and the response is
// sent after both.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/configs"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/topics"
)

// topicConfigEntries describes every topic config of a topic with the
// given overrides: the override, else the dynamic broker default, else
// Kafka's default.
func (b *Broker) topicConfigEntries(overrides map[string]string) []configs.Entry {
	out := make([]configs.Entry, 0, len(topicConfigDefs))
	for _, name := range sortedTopicConfigNames() {
		d := topicConfigByName[name]
		v, kind := b.topicConfigValue(overrides, name)
		e := configs.Entry{Name: name, Value: &v, Type: d.Type, Doc: d.Doc}
		switch kind {
		case sourceTopic:
			e.Source = kmsg.ConfigSourceDynamicTopicConfig
		case sourceStaticBroker:
			e.Source = kmsg.ConfigSourceStaticBrokerConfig
		case sourceDynamicBroker:
			e.Source = kmsg.ConfigSourceDynamicDefaultBrokerConfig
		default:
			e.Source = kmsg.ConfigSourceDefaultConfig
		}
		if ov, ok := overrides[name]; ok {
			e.Synonyms = append(e.Synonyms, configs.Synonym{Name: name, Value: &ov, Source: kmsg.ConfigSourceDynamicTopicConfig})
		}
		defName := name
		if d.BrokerName != "" {
			defName = d.BrokerName
			b.dyn.RLock()
			bv, ok := b.dyn.m[d.BrokerName]
			b.dyn.RUnlock()
			if ok {
				e.Synonyms = append(e.Synonyms, configs.Synonym{Name: d.BrokerName, Value: &bv, Source: kmsg.ConfigSourceDynamicDefaultBrokerConfig})
			}
			if sv, ok := b.cfg.BrokerConfigs[d.BrokerName]; ok {
				e.Synonyms = append(e.Synonyms, configs.Synonym{Name: d.BrokerName, Value: &sv, Source: kmsg.ConfigSourceStaticBrokerConfig})
			}
		}
		def := d.Default
		e.Synonyms = append(e.Synonyms, configs.Synonym{Name: defName, Value: &def, Source: kmsg.ConfigSourceDefaultConfig})
		out = append(out, e)
	}
	return out
}

// checkTopicResource resolves the topic of a TOPIC config resource.
func (b *Broker) checkTopicResource(name string) (*topics.Topic, error) {
	if err := topics.ValidName(name); err != nil {
		return nil, err
	}
	t := b.topics.Get(name)
	if t == nil {
		return nil, kafkaerr.Refuse(kafkaerr.ErrUnknownTopic, "The topic '%s' does not exist.", name)
	}
	return t, nil
}

// updateBrokerConfigs replaces the dynamic broker config overrides with
// update(current), persists the difference in one metadata transaction,
// and re-applies the log config of every partition (the broker defaults
// sit behind every topic without an override). Like a topic's config
// change (topics.Admin.UpdateConfigs) it holds the topic Admin's lock
// throughout; b.dyn is only locked to swap the map.
func (b *Broker) updateBrokerConfigs(validateOnly bool, update func(cur map[string]string) (map[string]string, error)) error {
	return b.topicAdmin.Exclusive(func() error { return b.updateBrokerConfigsLocked(validateOnly, update) })
}

func (b *Broker) updateBrokerConfigsLocked(validateOnly bool, update func(cur map[string]string) (map[string]string, error)) error {
	cur := b.dynamicBrokerConfigs()
	next, err := update(b.dynamicBrokerConfigs())
	if err != nil || validateOnly {
		return err
	}
	changes := map[string]*string{}
	for k, v := range next {
		if old, ok := cur[k]; !ok || old != v {
			v := v
			changes[k] = &v
		}
	}
	for k := range cur {
		if _, ok := next[k]; !ok {
			changes[k] = nil
		}
	}
	if len(changes) == 0 {
		return nil
	}
	if err := b.meta.SetBrokerConfigs(changes); err != nil {
		b.lg.Error("persisting broker configs failed", zap.Error(err))
		return err
	}
	b.dyn.Lock()
	b.dyn.m = next
	b.dyn.Unlock()
	if _, ok := changes["offsets.retention.check.interval.ms"]; ok {
		b.groups.WakeRetention()
	}
	for _, t := range b.topics.All() {
		parts, configs := b.topics.Snapshot(t)
		lc := b.logConfig(configs)
		for _, p := range parts {
			p.Log.SetConfig(lc)
		}
	}
	b.lg.Info("altered broker configs", zap.Any("configs", next))
	return nil
}

// hasDuplicateNames reports whether a config name repeats.
func hasDuplicateNames(names []string) bool {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			return true
		}
		seen[n] = true
	}
	return false
}

// resourceKey identifies a config resource for duplicate detection.
type resourceKey struct {
	typ  kmsg.ConfigResourceType
	name string
}

// duplicateResources returns the resources named more than once; Kafka
// refuses each of them with INVALID_REQUEST.
func duplicateResources(keys []resourceKey) map[resourceKey]bool {
	n := map[resourceKey]int{}
	for _, k := range keys {
		n[k]++
	}
	dup := map[resourceKey]bool{}
	for k, c := range n {
		if c > 1 {
			dup[k] = true
		}
	}
	return dup
}

// unsupportedResource is the refusal for resource types we do not
// serve configs for (yet): BROKER_LOGGER, CLIENT_METRICS, GROUP.
func unsupportedResource(typ kmsg.ConfigResourceType) error {
	return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Unsupported resource type: %s", typ.String())
}

// alterResources runs alter for each resource of an AlterConfigs or
// IncrementalAlterConfigs request, refusing every resource named more
// than once, and reports each outcome through set.
func (b *Broker) alterResources(api string, keys []resourceKey, alter func(i int) error, set func(i int, code int16, msg *string)) {
	dup := duplicateResources(keys)
	for i := range keys {
		var err error
		if dup[keys[i]] {
			err = kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Each resource must appear at most once.")
		} else {
			err = alter(i)
		}
		code := kafkaerr.Code(err)
		if code == kerr.KafkaStorageError.Code {
			b.lg.Error(api+" failed", zapErr(err))
		}
		set(i, code, kafkaerr.Message(err))
	}
}
