package broker

// ConsumerGroupHeartbeat (68).
//
// Behavior: the KIP-848 consumer group protocol (package groups, consumer.go).
// Epoch 0 joins (or, for a static member whose previous instance left
// with epoch -2, takes over its place); a positive epoch heartbeats and
// reports owned partitions; -1 leaves; -2 leaves temporarily (static
// members). The broker computes the target assignment with the uniform
// (default) or range assignor and walks each member towards it:
// partitions are revoked before they are given to another member. The
// answer carries the member epoch, the heartbeat interval
// (group.consumer.heartbeat.interval.ms, default 5000) and the assignment
// when the request was a full one or the assignment changed. State
// changes are stored before the answer.
//
// Errors: INVALID_REQUEST for malformed requests (Kafka's messages);
// UNSUPPORTED_ASSIGNOR; INVALID_REGULAR_EXPRESSION (v1); GROUP_ID_NOT_FOUND
// for an unknown group with a non-zero epoch, or a classic group with
// members; UNKNOWN_MEMBER_ID; FENCED_MEMBER_EPOCH; FENCED_INSTANCE_ID;
// UNRELEASED_INSTANCE_ID when a static instance joins while its previous
// member has not left; GROUP_MAX_SIZE_REACHED (group.consumer.max.size);
// NOT_COORDINATOR if storing the group fails.
//
// Version notes: v0 lets the coordinator name a member that joins with an
// empty member id; v1 (KIP-1082) requires the client to name itself and
// adds SubscribedTopicRegex (RE2 syntax, matched against whole topic
// names, re-evaluated as topics come and go).
//
// Authorization: Read on the group (GROUP_AUTHORIZATION_FAILED); a
// subscription naming a topic the member may not Describe is
// TOPIC_AUTHORIZATION_FAILED, as Kafka 4; a regex subscription reaches
// only the topics the member may Describe (package groups asks the ACLs
// as it resolves it).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/groups"
)

func init() { registerSimple(68, 0, 1, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(c *conn, req *kmsg.ConsumerGroupHeartbeatRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode = c.groupCode(acl.Read, req.Group); resp.ErrorCode != 0 {
		return resp
	}
	if t, denied := c.undescribable(req.SubscribedTopicNames); denied {
		resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("The member is not authorized to describe topic " + t + ".")
		return resp
	}
	c.b.groups.ConsumerHeartbeat(groups.Client{ID: c.clientID, Host: c.host, Principal: c.principal, IP: c.quota.ip}, req, resp)
	return resp
}
