package broker

// DeleteGroups (42).
//
// Behavior: deletes empty groups with their committed offsets, durably,
// before answering. Per group: INVALID_GROUP_ID for an empty id,
// GROUP_ID_NOT_FOUND for an unknown group, NON_EMPTY_GROUP while it has
// members (classic or KIP-848, including a static member that left with
// epoch -2 and may come back), NOT_COORDINATOR if the store fails. Share
// groups are deleted here too, with their share-partition state
// (share/groups.go), as in Kafka.
//
// Version notes: v1 throttling; v2 flexible; v3 per-group error message.
//
// Authorization: Delete on each group (GROUP_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(42, 0, 3, handleDeleteGroups) }

func handleDeleteGroups(c *conn, req *kmsg.DeleteGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		sg := kmsg.NewDeleteGroupsResponseGroup()
		sg.Group = name
		if sg.ErrorCode = c.groupCode(acl.Delete, name); sg.ErrorCode != 0 {
			resp.Groups = append(resp.Groups, sg)
			continue
		}
		code, msg, isShare := c.b.shares.DeleteGroup(name)
		if !isShare {
			code, msg = c.b.groups.DeleteGroup(name)
		}
		sg.ErrorCode = code
		if sg.ErrorCode != 0 && req.Version >= 3 {
			sg.ErrorMessage = &msg
		}
		resp.Groups = append(resp.Groups, sg)
	}
	return resp
}
