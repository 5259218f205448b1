package broker

// LeaveGroup (13).
//
// Behavior: removes members from a classic group, which then rebalances
// (a group left without members becomes Empty at the next generation). A
// member is named by its member id, or, for administrative removal of a
// static member, by its group.instance.id with an empty member id. A
// member id handed out with MEMBER_ID_REQUIRED but not used yet is
// simply forgotten. A member with a JoinGroup or SyncGroup waiting gets
// UNKNOWN_MEMBER_ID for it.
//
// Errors: INVALID_GROUP_ID for an empty group id (top level); per member
// UNKNOWN_MEMBER_ID (unknown member, instance or group) and
// FENCED_INSTANCE_ID (instance id held by another member id). Before v3
// there is one member and its error is the top-level error.
//
// Version notes: v1 throttling; v3 batches members (KIP-345) with
// instance ids and per-member errors; v4 flexible; v5 a reason string
// (accepted, unused).
//
// Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(13, 0, 5, handleLeaveGroup) }

func handleLeaveGroup(c *conn, req *kmsg.LeaveGroupRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	members := req.Members
	if req.Version < 3 {
		members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	if resp.ErrorCode = c.groupCode(acl.Read, req.Group); resp.ErrorCode != 0 {
		return resp
	}
	code, out := c.b.groups.Leave(req.Group, members)
	resp.ErrorCode = code
	if req.Version < 3 {
		if code == 0 && len(out) == 1 {
			resp.ErrorCode = out[0].ErrorCode
		}
		return resp
	}
	resp.Members = out
	return resp
}
