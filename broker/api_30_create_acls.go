package broker

// CreateAcls (30).
//
// Behavior: each creation is checked on its own (package acl's Validate,
// Kafka's rules: a concrete resource type, LITERAL or PREFIXED, a
// type:name principal, the cluster named kafka-cluster, ...) and a bad
// one gets INVALID_REQUEST with the reason, without keeping the others
// from being created. The valid ones are written to the metadata store
// in one commit, durable before the answer and before they apply; a
// binding that already exists is kept once. It needs Alter on the
// cluster (CLUSTER_AUTHORIZATION_FAILED for every creation); with the
// authorizer off every creation is SECURITY_DISABLED.
//
// Version notes: v1 adds the pattern type (the oldest Kafka 4 serves);
// v2 is flexible; v3 adds the User resource type.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
)

func init() { registerSimple(30, 1, 3, handleCreateAcls) }

func handleCreateAcls(c *conn, req *kmsg.CreateACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	fail := func(code int16, msg string) kmsg.Response {
		for i := range resp.Results {
			resp.Results[i] = kmsg.NewCreateACLsResponseResult()
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, kmsg.StringPtr(msg)
		}
		return resp
	}
	switch {
	case c.b.authz == nil:
		return fail(kerr.SecurityDisabled.Code, "No authorizer is configured (authorizer.class.name).")
	case !c.mayCluster(acl.Alter):
		return fail(kerr.ClusterAuthorizationFailed.Code, "Creating ACLs needs Alter on the cluster.")
	}
	var valid []acl.Binding
	var at []int // valid[k] is creation at[k]
	for i, cr := range req.Creations {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		b := acl.Binding{
			ResourceType: acl.ResourceType(cr.ResourceType), ResourceName: cr.ResourceName,
			PatternType: acl.PatternType(cr.ResourcePatternType), Principal: cr.Principal, Host: cr.Host,
			Operation: acl.Operation(cr.Operation), Permission: acl.Permission(cr.PermissionType),
		}
		if err := b.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			continue
		}
		valid, at = append(valid, b), append(at, i)
	}
	if len(valid) == 0 {
		return resp
	}
	if err := c.b.authz.Create(valid); err != nil {
		c.lg.Error("creating ACLs failed", zap.Error(err))
		for _, i := range at {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kafkaerr.Code(err), kmsg.StringPtr(err.Error())
		}
		return resp
	}
	for _, b := range valid {
		c.lg.Info("ACL created", zap.String("by", c.principal), zap.Stringer("acl", b))
	}
	return resp
}
