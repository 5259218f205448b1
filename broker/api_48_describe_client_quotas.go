package broker

// DescribeClientQuotas (48).
//
// Behavior: lists the client quota entities (package quota) matching every
// filter component, with all their values. A component matches an entity
// that has that entity type with the exact name (MatchType 0; a null
// name there means the default), the default name (1) or any given name
// (2); Strict leaves out entities with types not named in the filter; no
// components list everything. As Kafka answers: an empty entity type, a
// type named twice, a match string with MatchType 1 or 2, or ip mixed
// with user or client-id is INVALID_REQUEST; an entity type other than
// user, client-id and ip, or an unknown match type, is
// UNSUPPORTED_VERSION ("Custom entity type ... not supported").
//
// Version notes: v1 is flexible.
//
// Authorization: DescribeConfigs on the cluster
// (CLUSTER_AUTHORIZATION_FAILED).

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
	"github.com/shoal-mq/shoal/broker/quota"
)

func init() { registerSimple(48, 0, 1, handleDescribeClientQuotas) }

func handleDescribeClientQuotas(c *conn, req *kmsg.DescribeClientQuotasRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !c.mayCluster(acl.DescribeConfigs) {
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr("Authorization failed.")
		return resp
	}
	in := make([]quota.FilterIn, len(req.Components))
	for i, rc := range req.Components {
		in[i] = quota.FilterIn{Type: rc.EntityType, Match: int8(rc.MatchType), Name: rc.Match}
	}
	described, err := c.b.quotas.Describe(in, req.Strict)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kafkaerr.Code(err), kafkaerr.Message(err)
		return resp
	}
	for _, d := range described {
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, comp := range d.Components {
			ee := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = comp.Type, comp.Name
			entry.Entity = append(entry.Entity, ee)
		}
		keys := make([]string, 0, len(d.Values))
		for k := range d.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, d.Values[k]
			entry.Values = append(entry.Values, v)
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return resp
}
