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

import (
	"github.com/twmb/franz-go/pkg/kmsg"

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
		return b.incrementalAlterResource(&req.Resources[i], req.ValidateOnly)
	}, func(i int, code int16, msg *string) {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = keys[i].typ, keys[i].name
		sr.ErrorCode, sr.ErrorMessage = code, msg
		resp.Resources[i] = sr
	})
	return resp
}

// configOps applies the operations of one resource to a copy of cur.
// lookup returns a config's type and default, or ok false when the name
// is unknown; check validates a name and its new value (nil: removal);
// bad is the kind of error type and null refusals get.
type configOps struct {
	lookup func(name string) (typ kmsg.ConfigType, def string, ok bool)
	check  func(name string, value *string) error
	bad    error
}

func (o configOps) apply(cur map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, error) {
	next := make(map[string]string, len(cur))
	for k, v := range cur {
		next[k] = v
	}
	for _, op := range ops {
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				return nil, kafkaerr.Refuse(o.bad, "Null value not supported for : %s", op.Name)
			}
			if err := o.check(op.Name, op.Value); err != nil {
				return nil, err
			}
			next[op.Name] = *op.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			if _, _, ok := o.lookup(op.Name); ok {
				if err := o.check(op.Name, nil); err != nil {
					return nil, err
				}
			}
			delete(next, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			typ, def, ok := o.lookup(op.Name)
			if !ok {
				return nil, kafkaerr.Refuse(o.bad, "Unknown or unsupported config: %s", op.Name)
			}
			if typ != kmsg.ConfigTypeList {
				return nil, kafkaerr.Refuse(o.bad, "Can't %s to key %s because its type is not LIST.", op.Op.String(), op.Name)
			}
			if op.Value == nil {
				return nil, kafkaerr.Refuse(o.bad, "Null value not supported for : %s", op.Name)
			}
			base, ok := next[op.Name]
			if !ok {
				base = def
			}
			v := configs.AppendList(base, *op.Value)
			if op.Op == kmsg.IncrementalAlterConfigOpSubtract {
				v = configs.SubtractList(base, *op.Value)
			}
			if err := o.check(op.Name, &v); err != nil {
				return nil, err
			}
			next[op.Name] = v
		default:
			return nil, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Unknown alter configs op type %d for %s", int8(op.Op), op.Name)
		}
	}
	return next, nil
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
		ops := configOps{
			lookup: func(name string) (kmsg.ConfigType, string, bool) {
				d := topicConfigByName[name]
				if d == nil {
					return 0, "", false
				}
				return d.Type, d.Default, true
			},
			check: func(name string, value *string) error {
				if value == nil {
					return nil
				}
				if err := validateTopicConfig(name, *value); err != nil {
					return kafkaerr.Refuse(kafkaerr.ErrInvalidConfig, "%v", err)
				}
				return nil
			},
			bad: kafkaerr.ErrInvalidConfig,
		}
		return b.topicAdmin.UpdateConfigs(t, validateOnly, func(cur map[string]string) (map[string]string, error) {
			return ops.apply(cur, rr.Configs)
		})
	case kmsg.ConfigResourceTypeBroker:
		if err := b.brokerResourceName(rr.ResourceName); err != nil {
			return err
		}
		ops := configOps{
			lookup: func(name string) (kmsg.ConfigType, string, bool) {
				d := brokerConfigByName[name]
				if d == nil {
					return 0, "", false
				}
				return d.typ, d.def, true
			},
			check: validateBrokerConfig,
			bad:   kafkaerr.ErrInvalidRequest,
		}
		return b.updateBrokerConfigs(validateOnly, func(cur map[string]string) (map[string]string, error) {
			return ops.apply(cur, rr.Configs)
		})
	case kmsg.ConfigResourceTypeGroupConfig:
		return b.shares.incrementalAlterGroupConfigs(rr.ResourceName, rr.Configs, validateOnly)
	default:
		return unsupportedResource(rr.ResourceType)
	}
}
