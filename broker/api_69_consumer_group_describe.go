package broker

// ConsumerGroupDescribe (69).
//
// Behavior: describes KIP-848 consumer groups: state (Empty,
// Reconciling, Stable; Assigning never lasts, the target assignment is
// computed at once), group and assignment epochs, the selected assignor,
// and per member its epoch, client, subscription, current and target
// assignment (with topic names). INVALID_GROUP_ID for an empty id,
// GROUP_ID_NOT_FOUND for an unknown group or a classic one (which
// DescribeGroups describes), each with a message.
//
// Version notes: v1 adds the member type (always 1, consumer protocol:
// classic members in consumer groups are not served).
//
// Authorization: Describe on each group (GROUP_AUTHORIZATION_FAILED); a
// group whose members subscribe to or are assigned a topic the caller may
// not Describe is TOPIC_AUTHORIZATION_FAILED, as Kafka 4.
// AuthorizedOperations, when asked, is KIP-430's set for the group.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(69, 0, 1, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(c *conn, req *kmsg.ConsumerGroupDescribeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, name := range req.Groups {
		if code := c.groupCode(acl.Describe, name); code != 0 {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode, g.AuthorizedOperations = name, code, math.MinInt32
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g := c.b.groups.ConsumerDescribe(name, req.Version, req.IncludeAuthorizedOperations)
		var ts []string
		for _, m := range g.Members {
			if c.b.authz == nil {
				break
			}
			ts = append(ts, m.SubscribedTopics...)
			for _, a := range [][]kmsg.AssignmentTopicPartition{m.Assignment.TopicPartitions, m.TargetAssignment.TopicPartitions} {
				for _, tp := range a {
					ts = append(ts, tp.Topic)
				}
			}
		}
		if _, denied := c.undescribable(ts); denied {
			d := kmsg.NewConsumerGroupDescribeResponseGroup()
			d.Group, d.ErrorCode, d.AuthorizedOperations = name, kerr.TopicAuthorizationFailed.Code, math.MinInt32
			d.ErrorMessage = kmsg.StringPtr("The described group uses topics that the client is not authorized to describe.")
			g = d
		} else if req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
			g.AuthorizedOperations = c.authorizedOps(true, acl.Group, name)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
