package broker

// SyncGroup (14).
//
// Behavior: the classic group protocol's sync phase (package groups, classic.go).
// After the join phase every member sends SyncGroup; the leader's carries
// the assignment. Followers that arrive first wait (two-phase) for it.
// When the leader's arrives, the assignment of every member (members the
// leader left out get an empty assignment, as in Kafka) is written to
// the metadata store together with the group's generation and members,
// and only then are the waiting members answered and the group Stable
// ("persist, then answer"). A member that syncs after that gets its
// assignment at once. Members that do not sync within the rebalance
// timeout are removed and the group rebalances.
//
// Errors: INVALID_GROUP_ID; UNKNOWN_MEMBER_ID (unknown member or group,
// or an empty group); FENCED_INSTANCE_ID; ILLEGAL_GENERATION;
// INCONSISTENT_GROUP_PROTOCOL (v5 protocol type or name differ from the
// group's); REBALANCE_IN_PROGRESS while the group is back in its join
// phase (also sent to waiting members when a rebalance starts);
// NOT_COORDINATOR if storing the assignment fails or the broker shuts
// down.
//
// Version notes: v1 throttling; v3 group.instance.id; v4 flexible; v5
// protocol type and name in request and response.
//
// Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { register(14, 0, 5, handleSyncGroup) }

func handleSyncGroup(c *conn, req *kmsg.SyncGroupRequest) (kmsg.Response, func()) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if resp.ErrorCode = c.groupCode(acl.Read, req.Group); resp.ErrorCode != 0 {
		return resp, nil
	}
	ch := c.b.groups.Sync(req, resp)
	if ch == nil {
		return resp, nil
	}
	return resp, func() {
		select {
		case r := <-ch:
			v := resp.Version
			*resp = *r
			resp.Version = v
		case <-c.b.ctx.Done():
			resp.ErrorCode = kerr.NotCoordinator.Code
		}
	}
}
