package broker

// DescribeGroups (15).
//
// Behavior: describes classic groups: state, protocol type, and members
// with client id and host. The selected protocol, each member's metadata
// for it and each member's assignment are reported only when the group
// is Stable (empty otherwise), as in Kafka. An unknown group is reported
// in state Dead with no error before v6, and with GROUP_ID_NOT_FOUND and
// a message from v6. So is a KIP-848 consumer group ("not a classic
// group"; ConsumerGroupDescribe describes those), as in Kafka. An empty
// group id is INVALID_GROUP_ID.
//
// Version notes: v1 throttling; v3 authorized operations (Shoal has no
// ACLs: every group operation when asked, "not requested" otherwise); v4
// group.instance.id; v5 flexible; v6 per-group error message.
//
// Authorization: Describe on each group (GROUP_AUTHORIZATION_FAILED for
// that group); AuthorizedOperations (v3+, when asked) is KIP-430's set of
// what the caller may do on the group.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(15, 0, 6, handleDescribeGroups) }

func handleDescribeGroups(c *conn, req *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		if code := c.groupCode(acl.Describe, name); code != 0 {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode, g.AuthorizedOperations = name, code, math.MinInt32
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g := c.b.groups.Describe(name, req.Version, req.IncludeAuthorizedOperations)
		if req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
			g.AuthorizedOperations = c.authorizedOps(true, acl.Group, name)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
