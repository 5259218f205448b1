package broker

// FindCoordinator (10).
//
// Behavior: Shoal is the only node, so it coordinates every consumer
// group: a key of type 0 (group) is answered with this broker, whatever
// the group id. Type 2 (share coordinator, v6+) is answered with this
// broker too when the key is a valid groupId:topicId:partition share
// partition key, and with INVALID_REQUEST otherwise, as Kafka does.
//
// Type 1 (transaction coordinator, package txn): this broker for any
// non-empty transactional id; an empty one is INVALID_REQUEST, as in
// Kafka. Any other type is INVALID_REQUEST.
//
// Version notes: v1 adds the key type and ErrorMessage; v3 is flexible;
// v4 batches keys (KIP-699: CoordinatorKeys in, one Coordinator entry per
// key out, the single-key fields unused); v5 only signals that the client
// handles TRANSACTION_ABORTABLE; v6 adds the share coordinator type.
//
// Authorization: Describe on the group (GROUP_AUTHORIZATION_FAILED) or
// on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the
// share coordinator type is for brokers, ClusterAction on the cluster
// (CLUSTER_AUTHORIZATION_FAILED).

import (
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(10, 0, 6, handleFindCoordinator) }

func handleFindCoordinator(c *conn, req *kmsg.FindCoordinatorRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		sc := kmsg.NewFindCoordinatorResponseCoordinator()
		sc.Key = key
		var code int16
		switch req.CoordinatorType {
		case 0:
			code = c.groupCode(acl.Describe, key)
		case 1:
			switch {
			case !c.mayTxn(acl.Describe, key):
				code = kerr.TransactionalIDAuthorizationFailed.Code
			case key == "":
				code = kerr.InvalidRequest.Code
			}
		case 2:
			switch {
			case !c.mayCluster(acl.ClusterAction):
				code = kerr.ClusterAuthorizationFailed.Code
			case req.Version < 6 || !validSharePartitionKey(key):
				code = kerr.InvalidRequest.Code
			}
		default:
			code = kerr.InvalidRequest.Code
		}
		if code != 0 {
			sc.ErrorCode, sc.NodeID, sc.Host, sc.Port = code, -1, "", -1
			msg := kerr.ErrorForCode(code).(*kerr.Error).Description
			sc.ErrorMessage = &msg
		} else if b.cluster != nil {
			// Coordinators are not replicated yet: each key has one
			// broker, the same for every client (cluster.go).
			sc.NodeID, sc.Host, sc.Port = b.clusterCoordinator(key)
			if sc.NodeID < 0 {
				sc.ErrorCode = kerr.CoordinatorNotAvailable.Code
			}
		} else {
			sc.NodeID, sc.Host, sc.Port = b.cfg.NodeID, c.ln.advHost, c.ln.advPort
		}
		resp.Coordinators = append(resp.Coordinators, sc)
	}
	if req.Version < 4 {
		sc := resp.Coordinators[0]
		resp.Coordinators = nil
		resp.ErrorCode, resp.ErrorMessage = sc.ErrorCode, sc.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = sc.NodeID, sc.Host, sc.Port
	}
	return resp
}

// validSharePartitionKey checks a share coordinator key,
// "groupId:topicId:partition": at least three ':'-separated parts, a
// non-blank group id (which may itself contain ':'), a non-empty topic id
// and an integer partition.
func validSharePartitionKey(key string) bool {
	parts := strings.Split(key, ":")
	if len(parts) < 3 {
		return false
	}
	n := len(parts)
	if _, err := strconv.ParseInt(parts[n-1], 10, 32); err != nil {
		return false
	}
	return parts[n-2] != "" && strings.TrimSpace(strings.Join(parts[:n-2], ":")) != ""
}
