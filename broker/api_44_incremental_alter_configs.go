package broker

// IncrementalAlterConfigs (44).
//
// Behavior: applies operations to a resource's current overrides, each
// resource all-or-nothing (every operation is checked before anything is
// persisted) and independent of the others:
//
//   - SET sets an override after validating the value;
//   - DELETE removes an override (the config reverts to its default); a
//     name without an override is a no-op;
//   - APPEND / SUBTRACT add items to / remove items from a LIST config
//     (cleanup.policy, log.cleanup.policy), starting from the override or,
//     without one, the config's default, as Kafka does; the result is
//     validated like a SET.
//
// TOPIC resources answer INVALID_CONFIG for an unknown name, a bad value,
// a null SET value, or APPEND/SUBTRACT on a non-LIST config (Kafka's
// controller wording: "Can't APPEND to key ... because its type is not
// LIST."); BROKER resources answer INVALID_REQUEST for all of those and
// for read-only configs ("Cannot update these configs dynamically"), as
// Kafka's broker-side validation does. A config named twice in one
// resource, a resource named twice in one request, and an unknown
// operation are INVALID_REQUEST. Unknown topics, invalid topic names, the
// BROKER resource name and other resource types are handled as in
// AlterConfigs. ValidateOnly validates and changes nothing.
//
// Version notes: v1 is flexible.
//
// Authorization: AlterConfigs on the resource, with DescribeConfigs' rules
// and errors.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/configs"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
)

func init() { registerSimple(44, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(c *conn, req *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	keys := make([]resourceKey, len(req.Resources))
	for i, rr := range req.Resources {
		keys[i] = resourceKey{rr.ResourceType, rr.ResourceName}
	}
	resp.Resources = make([]kmsg.IncrementalAlterConfigsResponseResource, len(req.Resources))
	b.alterResources("incremental alter configs", keys, func(i int) error {
		if err := c.configsDenied(acl.AlterConfigs, keys[i].typ, keys[i].name); err != nil {
			return err
		}
		return b.incrementalAlterResource(&req.Resources[i], req.ValidateOnly)
	}, func(i int, code int16, msg *string) {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = keys[i].typ, keys[i].name
		sr.ErrorCode, sr.ErrorMessage = code, msg
		resp.Resources[i] = sr
	})
	return resp
}

func (b *Broker) incrementalAlterResource(rr *kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	names := make([]string, len(rr.Configs))
	for i, cfg := range rr.Configs {
		names[i] = cfg.Name
	}
	if hasDuplicateNames(names) {
		return kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Error due to duplicate config keys")
	}
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		t, err := b.checkTopicResource(rr.ResourceName)
		if err != nil {
			return err
		}
		ops := configs.Ops{
			Lookup: func(name string) (kmsg.ConfigType, string, bool) {
				d := topicConfigByName[name]
				if d == nil {
					return 0, "", false
				}
				return d.Type, d.Default, true
			},
			Check: func(name string, value *string) error {
				if value == nil {
					return nil
				}
				if err := b.checkTopicConfig(name, *value); err != nil {
					return kafkaerr.Refuse(kafkaerr.ErrInvalidConfig, "%v", err)
				}
				return nil
			},
			Bad: kafkaerr.ErrInvalidConfig,
		}
		return b.topicAdmin.UpdateConfigs(t, validateOnly, func(cur map[string]string) (map[string]string, error) {
			return ops.Apply(cur, rr.Configs)
		})
	case kmsg.ConfigResourceTypeBroker:
		if err := b.brokerResourceName(rr.ResourceName); err != nil {
			return err
		}
		ops := configs.Ops{
			Lookup: func(name string) (kmsg.ConfigType, string, bool) {
				d := brokerConfigByName[name]
				if d == nil {
					return 0, "", false
				}
				return d.typ, d.def, true
			},
			Check: validateBrokerConfig,
			Bad:   kafkaerr.ErrInvalidRequest,
		}
		return b.updateBrokerConfigs(validateOnly, func(cur map[string]string) (map[string]string, error) {
			return ops.Apply(cur, rr.Configs)
		})
	case kmsg.ConfigResourceTypeGroupConfig:
		return b.shares.IncrementalAlterGroupConfigs(rr.ResourceName, rr.Configs, validateOnly)
	default:
		return unsupportedResource(rr.ResourceType)
	}
}
