package broker

// ShareAcknowledge (79).
//
// Behavior: acknowledges records acquired through ShareFetch, within the
// member's share session (share/sessions.go). Epoch 0 is
// INVALID_SHARE_SESSION_EPOCH (only ShareFetch opens sessions); no
// session is SHARE_SESSION_NOT_FOUND; N > 0 must match the session's
// epoch (INVALID_SHARE_SESSION_EPOCH) and advances it. -1 processes the
// acknowledgements, releases the member's remaining records on the
// session's and the acknowledged partitions (not a delivery attempt) and
// drops the session; an empty Topics is fine. Acknowledgements are
// persisted before the answer and are all-or-nothing per partition; every
// acknowledged partition is answered with its ErrorCode (0 on success):
// INVALID_RECORD_STATE for offsets not acquired by this member (another
// member's, expired, already acknowledged, never initialized),
// INVALID_REQUEST for malformed batches, UNKNOWN_TOPIC_ID /
// UNKNOWN_TOPIC_OR_PARTITION for unknown partitions. The session's
// partitions are not changed. CurrentLeader is -1/-1.
//
// Version notes: v0 was removed in Kafka 4.1 and is not served; v2 adds
// IsRenewAck with ack type 4 (RENEW, KIP-1222: a fresh acquisition lock,
// refused with INVALID_RECORD_STATE when the group disables
// share.renew.acknowledge.enable) and AcquisitionLockTimeoutMillis.
//
// Authorization: as ShareFetch's: Read on the group, then on each topic.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() { registerSimple(79, 1, 2, handleShareAcknowledge) }

func handleShareAcknowledge(c *conn, req *kmsg.ShareAcknowledgeRequest) kmsg.Response {
	if !c.mayGroup(acl.Read, nameOf(req.GroupID)) {
		resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
		resp.ErrorCode, resp.ErrorMessage = kerr.GroupAuthorizationFailed.Code, kmsg.StringPtr("Authorization failed.")
		return resp
	}
	return c.b.shares.ServeAcknowledge(req, c.topicReader())
}
