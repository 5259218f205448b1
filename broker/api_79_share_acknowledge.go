package broker

// ShareAcknowledge (79).
//
// Behavior: acknowledges records acquired through ShareFetch, within the
// member's share session (share_sessions.go). Epoch 0 is
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

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerSimple(79, 1, 2, handleShareAcknowledge) }

func handleShareAcknowledge(c *conn, req *kmsg.ShareAcknowledgeRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	fail := func(code int16, msg string) kmsg.Response {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	group, member := derefString(req.GroupID), derefString(req.MemberID)
	renew := req.Version >= 2 && req.IsRenewAck
	if code, msg := checkShareIDs(group, member); code != 0 {
		return fail(code, msg)
	}
	switch {
	case req.ShareSessionEpoch == 0:
		return fail(kerr.InvalidShareSessionEpoch.Code, "ShareAcknowledge cannot open a share session (epoch 0).")
	}
	sc := b.shares
	st := b.shares.shareSettings(group)
	resp.AcquisitionLockTimeoutMillis = int32(st.lockDuration.Milliseconds())
	sess := sc.sessions.get(shareSessionKey{group, member})
	if sess == nil {
		return fail(kerr.ShareSessionNotFound.Code, "")
	}
	defer sess.mu.Unlock()
	if req.ShareSessionEpoch != -1 {
		if req.ShareSessionEpoch != sess.mu.epoch {
			return fail(kerr.InvalidShareSessionEpoch.Code, "")
		}
		sess.mu.epoch = nextShareEpoch(req.ShareSessionEpoch)
	}

	var col shareAckCollector
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			a := col.add(shareTP{rt.TopicID, rp.Partition})
			for _, ab := range rp.AcknowledgementBatches {
				a.addBatch(ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes, renew)
			}
			if len(rp.AcknowledgementBatches) == 0 && a.code == 0 {
				a.code, a.msg = kerr.InvalidRequest.Code, "No acknowledgement batches."
			}
		}
	}
	sess.spreadHeads(time.Now(), len(col.acks) > 0)
	sc.acknowledge(time.Now(), group, st, member, col.acks)
	sess.ackedLocked()
	if req.ShareSessionEpoch == -1 {
		sc.sessions.remove(sess)
		tps := sess.partsLocked()
		for _, a := range col.acks {
			tps = append(tps, a.tp)
		}
		sc.releaseMember(group, member, tps)
	}

	idx := map[[16]byte]int{}
	for _, a := range col.acks {
		i, ok := idx[a.tp.topicID]
		if !ok {
			i = len(resp.Topics)
			idx[a.tp.topicID] = i
			t := kmsg.NewShareAcknowledgeResponseTopic()
			t.TopicID = a.tp.topicID
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewShareAcknowledgeResponseTopicPartition()
		p.Partition = a.tp.partition
		p.ErrorCode = a.code
		if a.code != 0 && a.msg != "" {
			msg := a.msg
			p.ErrorMessage = &msg
		}
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
	}
	return resp
}
