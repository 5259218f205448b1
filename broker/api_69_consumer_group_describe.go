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

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { registerSimple(69, 0, 1, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(c *conn, req *kmsg.ConsumerGroupDescribeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, name := range req.Groups {
		resp.Groups = append(resp.Groups, c.b.groups.ConsumerDescribe(name, req.Version, req.IncludeAuthorizedOperations))
	}
	return resp
}
