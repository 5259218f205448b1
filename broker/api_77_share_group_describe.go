package broker

// ShareGroupDescribe (77).
//
// Behavior: describes each requested share group: state (Empty without
// members, else Stable), group and assignment epochs, the assignor
// ("simple") and every member with its subscription and assignment
// (topic ids and names). An unknown group, or a group id of another
// type, is GROUP_ID_NOT_FOUND with state Dead. AuthorizedOperations is
// INT32_MIN unless requested (then every group operation: Shoal has no
// ACLs).
//
// Version notes: v0 was removed in Kafka 4.1 and is not served.
//
// Authorization: Describe on each group (GROUP_AUTHORIZATION_FAILED); a
// group whose members use a topic the caller may not Describe is
// TOPIC_AUTHORIZATION_FAILED. AuthorizedOperations, when asked, is
// KIP-430's set for the group.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(77, 1, 1, handleShareGroupDescribe) }

func handleShareGroupDescribe(c *conn, req *kmsg.ShareGroupDescribeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, name := range req.GroupIDs {
		if code := c.groupCode(acl.Describe, name); code != 0 {
			g := kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID, g.ErrorCode, g.AuthorizedOperations = name, code, math.MinInt32
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g := c.b.shares.Describe(name, req.IncludeAuthorizedOperations)
		var ts []string
		for _, m := range g.Members {
			if c.b.authz == nil {
				break
			}
			ts = append(ts, m.SubscribedTopicNames...)
			for _, tp := range m.Assignment.TopicPartitions {
				ts = append(ts, tp.Topic)
			}
		}
		if _, denied := c.undescribable(ts); denied {
			d := kmsg.NewShareGroupDescribeResponseGroup()
			d.GroupID, d.ErrorCode, d.AuthorizedOperations = name, kerr.TopicAuthorizationFailed.Code, math.MinInt32
			d.ErrorMessage = kmsg.StringPtr("The described group uses topics that the client is not authorized to describe.")
			g = d
		} else if req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
			g.AuthorizedOperations = c.authorizedOps(true, acl.Group, name)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
