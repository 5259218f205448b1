package broker

// JoinGroup (11).
//
// Behavior: the classic group protocol's join phase (package groups, classic.go).
// A new dynamic member gets MEMBER_ID_REQUIRED and its member id from v4
// on (KIP-394) and must join again with it; before v4 it joins at once.
// A static member (group.instance.id, v5+) joins at once; if its instance
// id is already held, the new member id takes over the old one's place
// and assignment and the old id is fenced (FENCED_INSTANCE_ID); in a
// Stable group whose protocol does not change this causes no rebalance
// (the leader gets SkipAssignment from v9, KIP-814).
//
// A join that starts or takes part in a rebalance waits (two-phase, the
// connection keeps reading) until every member has rejoined, or the
// longest rebalance timeout of the members has passed; members that did
// not rejoin are then removed. The first rebalance of an empty group
// also waits group.initial.rebalance.delay.ms (default 3000) for more
// members. The generation then advances, the protocol is chosen by vote
// (each member votes for its most preferred protocol that all members
// support), and every waiting member is answered; the leader gets every
// member's metadata and runs the assignor.
//
// Errors: INVALID_GROUP_ID for an empty group id; INVALID_SESSION_TIMEOUT
// outside [group.min.session.timeout.ms, group.max.session.timeout.ms]
// (default 6000..1800000); INCONSISTENT_GROUP_PROTOCOL for a protocol
// type or set the group cannot use; UNKNOWN_MEMBER_ID for an unknown
// member id or group; FENCED_INSTANCE_ID; GROUP_MAX_SIZE_REACHED
// (group.max.size). When the broker shuts down a waiting join gets
// NOT_COORDINATOR.
//
// Version notes: v0 has no rebalance timeout (the session timeout is
// used, as Kafka did); v1 adds it; v2 throttling; v4 MEMBER_ID_REQUIRED;
// v5 group.instance.id; v6 flexible; v7 protocol type in the response;
// v8 a reason string (logged by nothing, accepted); v9 SkipAssignment.
//
// Authorization: Read on the group, else GROUP_AUTHORIZATION_FAILED.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/groups"
)

func init() { register(11, 0, 9, handleJoinGroup) }

func handleJoinGroup(c *conn, req *kmsg.JoinGroupRequest) (kmsg.Response, func()) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	if resp.ErrorCode = c.groupCode(acl.Read, req.Group); resp.ErrorCode != 0 {
		return resp, nil
	}
	ch := c.b.groups.Join(groups.Client{ID: c.clientID, Host: c.host, Principal: c.principal, IP: c.quota.ip}, req, resp)
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
			groups.JoinError(resp, kerr.NotCoordinator.Code, req.MemberID)
		}
	}
}
