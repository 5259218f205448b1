package configs

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/kafkaerr"
)

// Ops applies IncrementalAlterConfigs operations of one resource to a
// copy of its current values (Apply). Lookup returns a config's type and
// default, or ok false when the name is unknown; Check validates a name
// and its new value (nil: removal); Bad is the kind of error type and
// null refusals get.
type Ops struct {
	Lookup func(name string) (typ kmsg.ConfigType, def string, ok bool)
	Check  func(name string, value *string) error
	Bad    error
}

// Apply returns cur with ops applied (SET, DELETE, APPEND, SUBTRACT, as
// Kafka's IncrementalAlterConfigs), or the first refusal.
func (o Ops) Apply(cur map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, error) {
	next := make(map[string]string, len(cur))
	for k, v := range cur {
		next[k] = v
	}
	for _, op := range ops {
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				return nil, kafkaerr.Refuse(o.Bad, "Null value not supported for : %s", op.Name)
			}
			if err := o.Check(op.Name, op.Value); err != nil {
				return nil, err
			}
			next[op.Name] = *op.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			if _, _, ok := o.Lookup(op.Name); ok {
				if err := o.Check(op.Name, nil); err != nil {
					return nil, err
				}
			}
			delete(next, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			typ, def, ok := o.Lookup(op.Name)
			if !ok {
				return nil, kafkaerr.Refuse(o.Bad, "Unknown or unsupported config: %s", op.Name)
			}
			if typ != kmsg.ConfigTypeList {
				return nil, kafkaerr.Refuse(o.Bad, "Can't %s to key %s because its type is not LIST.", op.Op.String(), op.Name)
			}
			if op.Value == nil {
				return nil, kafkaerr.Refuse(o.Bad, "Null value not supported for : %s", op.Name)
			}
			base, ok := next[op.Name]
			if !ok {
				base = def
			}
			v := AppendList(base, *op.Value)
			if op.Op == kmsg.IncrementalAlterConfigOpSubtract {
				v = SubtractList(base, *op.Value)
			}
			if err := o.Check(op.Name, &v); err != nil {
				return nil, err
			}
			next[op.Name] = v
		default:
			return nil, kafkaerr.Refuse(kafkaerr.ErrInvalidRequest, "Unknown alter configs op type %d for %s", int8(op.Op), op.Name)
		}
	}
	return next, nil
}
