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

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { registerSimple(77, 1, 1, handleShareGroupDescribe) }

func handleShareGroupDescribe(c *conn, req *kmsg.ShareGroupDescribeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, name := range req.GroupIDs {
		resp.Groups = append(resp.Groups, c.b.shares.Describe(name, req.IncludeAuthorizedOperations))
	}
	return resp
}
