package broker

// DescribeAcls (29).
//
// Behavior: the ACLs one filter selects (package acl: ANY and MATCH as
// Kafka's), grouped by resource pattern, in a stable order. It needs
// Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED); with the
// authorizer off it is SECURITY_DISABLED, and a filter Kafka would
// refuse (an unknown type or operation) INVALID_REQUEST.
//
// Version notes: v1 adds the pattern type (the oldest Kafka 4 serves);
// v2 is flexible; v3 adds the User resource type and is otherwise v2.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(29, 1, 3, handleDescribeAcls) }

func handleDescribeAcls(c *conn, req *kmsg.DescribeACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := acl.Filter{
		ResourceType: acl.ResourceType(req.ResourceType), ResourceName: req.ResourceName,
		PatternType: acl.PatternType(req.ResourcePatternType), Principal: req.Principal, Host: req.Host,
		Operation: acl.Operation(req.Operation), Permission: acl.Permission(req.PermissionType),
	}
	switch {
	case c.b.authz == nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr("No authorizer is configured (authorizer.class.name).")
		return resp
	case !c.mayCluster(acl.Describe):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
		return resp
	}
	var cur *kmsg.DescribeACLsResponseResource
	for _, b := range c.b.authz.Bindings(f) { // sorted: one pattern's bindings are adjacent
		if cur == nil || int8(cur.ResourceType) != int8(b.ResourceType) || cur.ResourceName != b.ResourceName ||
			int8(cur.ResourcePatternType) != int8(b.PatternType) {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
			r.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
			resp.Resources = append(resp.Resources, r)
			cur = &resp.Resources[len(resp.Resources)-1]
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host = b.Principal, b.Host
		a.Operation, a.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		cur.ACLs = append(cur.ACLs, a)
	}
	return resp
}
