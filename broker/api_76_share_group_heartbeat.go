package broker

// ShareGroupHeartbeat (76).
//
// Behavior: joins (MemberEpoch 0, creating the group), heartbeats and
// leaves (-1) a share group; member ids are chosen by the client and only
// checked to be non-blank. Every member gets its partitions from the
// server-side "simple" assignor: several members may share a partition.
// Epochs, rejoins, assignment delivery and session timeouts are described
// in share/groups.go. A group id used by a classic or consumer group is
// GROUP_ID_NOT_FOUND. HeartbeatIntervalMillis is the group's
// share.heartbeat.interval.ms.
//
// Version notes: v0 (Kafka 4.0 early access) was removed in Kafka 4.1
// and is not served; v1 is the current format (TOPIC_AUTHORIZATION_FAILED
// is possible; Shoal has no ACLs).
//
// Authorization: Read on the group (GROUP_AUTHORIZATION_FAILED); a
// subscription naming a topic the member may not Describe is
// TOPIC_AUTHORIZATION_FAILED.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(76, 1, 1, handleShareGroupHeartbeat) }

func handleShareGroupHeartbeat(c *conn, req *kmsg.ShareGroupHeartbeatRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	if resp.ErrorCode = c.groupCode(acl.Read, req.GroupID); resp.ErrorCode != 0 {
		return resp
	}
	if t, denied := c.undescribable(req.SubscribedTopicNames); denied {
		resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("The member is not authorized to describe topic " + t + ".")
		return resp
	}
	c.b.shares.Heartbeat(c.shareClient(), req, resp)
	return resp
}
