package broker

// Heartbeat (12).
//
// Behavior: keeps a classic group member's session alive. A member must
// heartbeat within its session timeout or it is removed and the group
// rebalances; a member waiting in JoinGroup or SyncGroup needs no
// heartbeat. While the group is in its join phase the answer is
// REBALANCE_IN_PROGRESS (the member should rejoin); in
// CompletingRebalance and Stable it is no error.
//
// Errors: INVALID_GROUP_ID; UNKNOWN_MEMBER_ID (unknown member or group,
// or an empty group); FENCED_INSTANCE_ID for a static member's old id;
// ILLEGAL_GENERATION for another generation.
//
// Version notes: v1 throttling; v3 group.instance.id; v4 flexible.
//
// Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(12, 0, 4, handleHeartbeat) }

func handleHeartbeat(c *conn, req *kmsg.HeartbeatRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if resp.ErrorCode = c.groupCode(acl.Read, req.Group); resp.ErrorCode == 0 {
		resp.ErrorCode = c.b.groups.Heartbeat(req)
	}
	return resp
}
