package broker

// AlterConfigs (33).
//
// Behavior: the legacy, non-incremental alter: the configs given for a
// resource replace its whole override set (a config left out reverts to
// its default). Each resource is all-or-nothing: every config is
// validated first, and only then is the new set persisted and applied.
// Resources are independent of one another.
//
// TOPIC: names and values are checked against the topic config table
// (configs.go); an unknown name or a bad value is INVALID_CONFIG with a
// message, an invalid topic name INVALID_TOPIC_EXCEPTION, an unknown
// topic UNKNOWN_TOPIC_OR_PARTITION. The new overrides are applied to
// every partition log at once.
//
// BROKER (our node id, or "" for the cluster default; both address the
// one set of dynamic broker configs, see broker_configs.go): only the
// dynamic broker configs may be set; a read-only one gets INVALID_REQUEST
// "Cannot update these configs dynamically", as Kafka answers for broker
// resources, and so does a bad value or an unknown name. The new
// defaults are applied to every partition log without a topic override.
//
// As in Kafka, a null value is INVALID_REQUEST, and so are a config named
// twice in one resource and a resource named twice in one request.
// ValidateOnly validates and changes nothing. GROUP resources set the
// share-group configs (share/configs.go). Other resource types get
// INVALID_REQUEST.
//
// Version notes: v0 and v1 are the same (v1 only means throttling after
// the response); v2 is flexible.
//
// Authorization: AlterConfigs on the resource, with DescribeConfigs' rules
// and errors.

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
)

func init() { registerSimple(33, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(c *conn, req *kmsg.AlterConfigsRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	keys := make([]resourceKey, len(req.Resources))
	for i, rr := range req.Resources {
		keys[i] = resourceKey{rr.ResourceType, rr.ResourceName}
	}
	resp.Resources = make([]kmsg.AlterConfigsResponseResource, len(req.Resources))
	b.alterResources("alter configs", keys, func(i int) error {
		if err := c.configsDenied(acl.AlterConfigs, keys[i].typ, keys[i].name); err != nil {
			return err
		}
		return b.alterConfigsResource(&req.Resources[i], req.ValidateOnly)
	}, func(i int, code int16, msg *string) {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = keys[i].typ, keys[i].name
		sr.ErrorCode, sr.ErrorMessage = code, msg
		resp.Resources[i] = sr
	})
	return resp
}

func (b *Broker) alterConfigsResource(rr *kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	names := make([]string, len(rr.Configs))
	var nulls []string
	for i, cfg := range rr.Configs {
		names[i] = cfg.Name
		if cfg.Value == nil {
			nulls = append(nulls, cfg.Name)
		}
	}
	if hasDuplicateNames(names) {
		return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Error due to duplicate config keys")
	}
	if len(nulls) > 0 {
		return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Null value not supported for : %s", strings.Join(nulls, ","))
	}
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		t, err := b.checkTopicResource(rr.ResourceName)
		if err != nil {
			return err
		}
		next := make(map[string]string, len(rr.Configs))
		for _, cfg := range rr.Configs {
			if err := b.checkTopicConfig(cfg.Name, *cfg.Value); err != nil {
				return kafkaerr.Refuse(kafkaerr.ErrInvalidConfig, "%v", err)
			}
			next[cfg.Name] = *cfg.Value
		}
		return b.topicAdmin.UpdateConfigs(t, validateOnly, func(map[string]string) (map[string]string, error) {
			return next, nil
		})
	case kmsg.ConfigResourceTypeBroker:
		if err := b.brokerResourceName(rr.ResourceName); err != nil {
			return err
		}
		next := make(map[string]string, len(rr.Configs))
		for _, cfg := range rr.Configs {
			if err := validateBrokerConfig(cfg.Name, cfg.Value); err != nil {
				return err
			}
			next[cfg.Name] = *cfg.Value
		}
		return b.updateBrokerConfigs(validateOnly, func(map[string]string) (map[string]string, error) {
			return next, nil
		})
	case kmsg.ConfigResourceTypeGroupConfig:
		return b.shares.AlterGroupConfigs(rr.ResourceName, rr.Configs, validateOnly)
	default:
		return unsupportedResource(rr.ResourceType)
	}
}
