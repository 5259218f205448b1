package broker

// ShareFetch (78).
//
// Behavior: acquires records of share-partitions for a share-group member
// and returns them with the raw log batches covering them, within a
// share session (share/sessions.go):
//
//   - Epoch 0 opens a session with the Topics partitions (acknowledgements
//     on it are INVALID_REQUEST: there is nothing they could refer to);
//     N > 0 must match the session's epoch (else
//     INVALID_SHARE_SESSION_EPOCH; no session: SHARE_SESSION_NOT_FOUND),
//     adds the Topics partitions, then removes ForgottenTopicsData; every
//     accepted request advances the epoch. -1 processes the
//     acknowledgements, releases the member's remaining records on the
//     session's partitions (not a delivery attempt) and drops the session,
//     fetching nothing.
//   - Piggybacked acknowledgements are applied before anything is
//     acquired, so the records they free can be re-acquired at once, and
//     their write syncs while the fetch acquires and reads; the response
//     goes out once it is durable (share.Coordinator.submitAcks). Other
//     members' fetches and acknowledgements do not wait for that write
//     either (share.Coordinator.acknowledge). Every partition
//     that carried acknowledgements appears in the response with its
//     AcknowledgeErrorCode (0 on success), data or not.
//     Acknowledgements are all-or-nothing per partition.
//   - The fetch covers every session partition, rotating the first one
//     by epoch for fairness, up to MaxRecords (500 if unset) and MaxBytes.
//     AcquiredRecords are sorted, non-overlapping, with delivery counts;
//     Records are whole log batches and always cover them; in a
//     message-group mode a batch holding records not acquired by this
//     fetch is sent trimmed to the acquired ones when that is smaller
//     (a batch with offset holes, as compaction leaves). Mode
//     batch_optimized (ShareAcquireMode 0) acquires whole log batches and
//     may exceed MaxRecords by the rest of the last batch; record_limit
//     (1, or the group's share.acquire.mode) acquires exactly up to
//     MaxRecords.
//   - If nothing was acquired the request waits up to MaxWaitMillis,
//     woken by appends to the session's partitions and by releases,
//     expiries and acknowledgements on its share-partitions. In ordered
//     mode a member holding records only its own acknowledgements can
//     free waits less: not at all the first time, then a quarter of the
//     time it has been fetching so, and never more than a quarter of
//     the time left until its earliest lock deadline
//     (shareSession.ownGroupsWait).
//   - A full (epoch 0) response lists every session partition; an
//     incremental one those with records, errors, just added or erroring
//     last time, plus every acknowledged partition. CurrentLeader is
//     -1/-1: Shoal leads everything.
//   - IsRenewAck (v2): MaxBytes, MinBytes, MaxRecords and MaxWaitMillis
//     must be 0 (else INVALID_REQUEST); only acknowledgements (RENEW and
//     others) are processed. Ack type 4 without IsRenewAck is
//     INVALID_REQUEST for that partition.
//   - Membership is not checked (kip932.md §4): any non-blank member id
//     may fetch any partition. A group id of a classic or consumer group is
//     GROUP_ID_NOT_FOUND; a share group is created by the session open if
//     it does not exist yet.
//
// Version notes: v0 was removed in Kafka 4.1 and is not served
// (PartitionMaxBytes is v0-only and ignored); v1 adds MaxRecords,
// BatchSize and AcquisitionLockTimeoutMillis; v2 adds ShareAcquireMode
// (KIP-1206) and IsRenewAck (KIP-1222).
//
// Authorization: Read on the group (the whole response
// GROUP_AUTHORIZATION_FAILED, nothing fetched nor acknowledged), then Read
// on each topic (TOPIC_AUTHORIZATION_FAILED per partition, for its records
// and its acknowledgements, which are not applied).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/share"
)

func init() { registerSimple(78, 1, 2, handleShareFetch) }

func handleShareFetch(c *conn, req *kmsg.ShareFetchRequest) kmsg.Response {
	if !c.mayGroup(acl.Read, nameOf(req.GroupID)) {
		resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
		resp.ErrorCode, resp.ErrorMessage = kerr.GroupAuthorizationFailed.Code, kmsg.StringPtr("Authorization failed.")
		return resp
	}
	return c.b.shares.ServeFetch(c.shareClient(), req, share.FetchIO{Arena: c.recordBuf, Parked: c.quota.parkedSince,
		Charge: c.shareFetchQuotaCharge, MayRead: c.topicReader()})
}
