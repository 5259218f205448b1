package broker

// DescribeConfigs (32).
//
// Behavior: for a TOPIC resource, every topic config Shoal implements
// (configs.go) with its effective value and source: the topic override
// (DYNAMIC_TOPIC_CONFIG), else the dynamic broker default
// (DYNAMIC_DEFAULT_BROKER_CONFIG), else Kafka's default (DEFAULT_CONFIG).
// An invalid topic name gets INVALID_TOPIC_EXCEPTION, an unknown topic
// UNKNOWN_TOPIC_OR_PARTITION. For a BROKER resource named by our node id,
// every broker config (broker_configs.go): the dynamic ones with their
// override or default, the read-only ones (ReadOnly true) from the
// broker's startup Config; named "" (the cluster default), only the
// dynamic overrides that are set. Another broker id, or a name that is
// not a number, gets INVALID_REQUEST, as in Kafka. A GROUP resource lists
// the share-group configs (share/configs.go). BROKER_LOGGER and
// CLIENT_METRICS resources get INVALID_REQUEST. Errors are per resource.
//
// ConfigNames filters the answer; a null or empty list means every
// config, and names we do not know are left out, as Kafka does. Nothing
// is sensitive. Synonyms list the sources a value could come from, most
// specific first (the override, the dynamic broker default, the
// default), as Kafka orders them.
//
// Version notes: v0 (IsDefault instead of Source, no synonyms) is gone
// from Kafka 4 and not served; v1 adds IncludeSynonyms and Source; v2
// is the same as v1; v3 adds ConfigType and IncludeDocumentation; v4 is
// flexible.
//
// Authorization: DescribeConfigs on the topic (TOPIC_AUTHORIZATION_FAILED),
// the group (GROUP_AUTHORIZATION_FAILED) or, for a broker, broker logger
// or client-metrics resource, the cluster (CLUSTER_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/configs"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
)

func init() { registerSimple(32, 1, 4, handleDescribeConfigs) }

func handleDescribeConfigs(c *conn, req *kmsg.DescribeConfigsRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	docs := req.Version >= 3 && req.IncludeDocumentation
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		err := c.configsDenied(acl.DescribeConfigs, rr.ResourceType, rr.ResourceName)
		var entries []configs.Entry
		if err == nil {
			entries, err = b.describeConfigResource(rr.ResourceType, rr.ResourceName)
		}
		if err != nil {
			sr.ErrorCode = kafkaerr.Code(err)
			sr.ErrorMessage = kafkaerr.Message(err)
			if sr.ErrorCode == kerr.KafkaStorageError.Code {
				b.lg.Error("describe configs failed", zapErr(err))
			}
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		for _, e := range configs.Filter(entries, rr.ConfigNames) {
			sr.Configs = append(sr.Configs, e.DescribeConfig(req.IncludeSynonyms, docs))
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

// describeConfigResource returns every config entry of one resource.
func (b *Broker) describeConfigResource(typ kmsg.ConfigResourceType, name string) ([]configs.Entry, error) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		t, err := b.checkTopicResource(name)
		if err != nil {
			return nil, err
		}
		_, overrides := b.topics.Snapshot(t)
		return b.topicConfigEntries(overrides), nil
	case kmsg.ConfigResourceTypeBroker:
		if err := b.brokerResourceName(name); err != nil {
			return nil, err
		}
		return b.brokerConfigEntries(name != ""), nil
	case kmsg.ConfigResourceTypeGroupConfig:
		return b.shares.GroupConfigEntries(name)
	default:
		return nil, unsupportedResource(typ)
	}
}
