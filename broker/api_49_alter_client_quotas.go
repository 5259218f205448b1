package broker

// AlterClientQuotas (49).
//
// Behavior: each entry sets and removes quota keys of one entity
// (package quota), all or nothing, independently of the other entries. The
// result is written to the metadata store (meta/client-quota/...) before
// the answer and applies to the next request of every connection, with
// no restart. An entity whose last key is removed is deleted. Refusals
// are INVALID_REQUEST with Kafka's wording: an empty entity, an entity
// type other than user, client-id and ip, a type named twice, an empty
// name, an ip that is not an IP address, ip combined with user or
// client-id, an unknown key or one the entity type does not take
// (connection_creation_rate is for ip only), a key named twice, a value
// that is zero or negative, not integral for the byte and connection
// rates, or a quota_mode other than 0 or 1. ValidateOnly checks and
// changes nothing.
//
// Version notes: v1 is flexible.
//
// Authorization: AlterConfigs on the cluster (CLUSTER_AUTHORIZATION_FAILED
// for every entry).

import (
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/quota"
)

func init() { registerSimple(49, 0, 1, handleAlterClientQuotas) }

func handleAlterClientQuotas(c *conn, req *kmsg.AlterClientQuotasRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	allowed := c.mayCluster(acl.AlterConfigs)
	for _, re := range req.Entries {
		out := kmsg.NewAlterClientQuotasResponseEntry()
		comps := make([]quota.Component, len(re.Entity))
		for i, e := range re.Entity {
			comps[i] = quota.Component{Type: e.Type, Name: e.Name}
			oe := kmsg.NewAlterClientQuotasResponseEntryEntity()
			oe.Type, oe.Name = e.Type, e.Name
			out.Entity = append(out.Entity, oe)
		}
		ops := make([]quota.Op, len(re.Ops))
		for i, op := range re.Ops {
			ops[i] = quota.Op{Key: op.Key, Value: op.Value, Remove: op.Remove}
		}
		var err error
		if !allowed {
			err = kafkaerr.Refuse(kafkaerr.ErrClusterAuthorization, "Authorization failed.")
		} else {
			err = c.b.quotas.Alter(comps, ops, req.ValidateOnly)
		}
		if err != nil {
			if _, refused := err.(*kafkaerr.RequestError); !refused {
				c.lg.Error("altering client quota failed", zap.Error(err))
			}
		}
		out.ErrorCode, out.ErrorMessage = kafkaerr.Code(err), kafkaerr.Message(err)
		resp.Entries = append(resp.Entries, out)
	}
	return resp
}
