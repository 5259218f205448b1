package broker

// DeleteAcls (31).
//
// Behavior: every ACL one of the filters selects (ANY and MATCH as
// Kafka's) is removed in one commit, durable before the answer and
// before the ACL stops applying; each filter's result lists what it
// matched (an ACL two filters match is listed under both, as Kafka
// does). A filter Kafka would refuse gets INVALID_REQUEST and deletes
// nothing. It needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED
// for every filter); with the authorizer off every filter is
// SECURITY_DISABLED.
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

func init() { registerSimple(31, 1, 3, handleDeleteAcls) }

func handleDeleteAcls(c *conn, req *kmsg.DeleteACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	fail := func(i int, code int16, msg string) {
		resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, kmsg.StringPtr(msg)
	}
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	switch {
	case c.b.authz == nil:
		for i := range resp.Results {
			fail(i, kerr.SecurityDisabled.Code, "No authorizer is configured (authorizer.class.name).")
		}
		return resp
	case !c.mayCluster(acl.Alter):
		for i := range resp.Results {
			fail(i, kerr.ClusterAuthorizationFailed.Code, "Deleting ACLs needs Alter on the cluster.")
		}
		return resp
	}
	var filters []acl.Filter
	var at []int
	for i, rf := range req.Filters {
		f := acl.Filter{
			ResourceType: acl.ResourceType(rf.ResourceType), ResourceName: rf.ResourceName,
			PatternType: acl.PatternType(rf.ResourcePatternType), Principal: rf.Principal, Host: rf.Host,
			Operation: acl.Operation(rf.Operation), Permission: acl.Permission(rf.PermissionType),
		}
		if err := f.Validate(); err != nil {
			fail(i, kerr.InvalidRequest.Code, err.Error())
			continue
		}
		filters, at = append(filters, f), append(at, i)
	}
	if len(filters) == 0 {
		return resp
	}
	removed, err := c.b.authz.Delete(filters)
	if err != nil {
		c.lg.Error("deleting ACLs failed", zap.Error(err))
		for _, i := range at {
			fail(i, kafkaerr.Code(err), err.Error())
		}
		return resp
	}
	for k, i := range at {
		for _, b := range removed[k] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
			m.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
			m.Principal, m.Host = b.Principal, b.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
			c.lg.Info("ACL deleted", zap.String("by", c.principal), zap.Stringer("acl", b))
		}
	}
	return resp
}
