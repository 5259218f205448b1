package broker

// InitProducerId (22).
//
// Behavior: serves idempotent producers: a null TransactionalID gets a
// fresh producer id with epoch 0. Ids come from a durable badger sequence
// (metaStore.nextProducerID), so an id is never handed out twice, even
// across restarts. As in Kafka, a request without a transactional id is
// always given a new id: an idempotent producer that sends its current
// id and epoch to bump the epoch (KIP-360, v3+) simply gets a new id,
// whose sequences start from 0 on every partition. A ProducerID without
// an epoch, or the reverse, is INVALID_REQUEST, and an empty
// TransactionalID is INVALID_REQUEST, as in Kafka.
//
// Transactions are not served yet (a later issue): a non-empty
// TransactionalID gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, the same
// code Produce gives a transactional batch. Every client treats it as
// fatal and reports it at once (franz-go, sarama, librdkafka, kafka-go,
// kafka-python), whereas COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR
// would make them retry until their timeouts expire. Clients normally
// fail even earlier, on FindCoordinator for the transaction coordinator.
//
// Version notes: v1 is the same as v0 (throttling after the response);
// v2 is flexible; v3 adds ProducerID/ProducerEpoch for the epoch bump;
// v4 adds PRODUCER_FENCED for transactional producers; v5 (KIP-890)
// changes nothing for idempotent producers.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

func init() { registerSimple(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(c *conn, req *kmsg.InitProducerIDRequest) kmsg.Response {
	b := c.b
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case req.Version >= 3 && (req.ProducerID == -1) != (req.ProducerEpoch == -1):
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.TransactionalID != nil && *req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.TransactionalID != nil:
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	default:
		id, err := b.meta.nextProducerID()
		if err != nil {
			b.lg.Error("allocating a producer id failed", zap.Error(err))
			resp.ErrorCode = kerr.KafkaStorageError.Code
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
	}
	return resp
}
