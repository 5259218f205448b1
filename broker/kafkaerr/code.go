package kafkaerr

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	slog "github.com/shoal-mq/shoal/log"
	"github.com/shoal-mq/shoal/sharegroup"
)

// Code is the one table mapping domain errors to Kafka error codes
// (architecture.md §10 rule 7). Anything unknown is a storage failure:
// the log is sticky-failed and the client should retry elsewhere or
// later (KAFKA_STORAGE_ERROR is retriable in every client).
func Code(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, slog.ErrCorruptMessage):
		return kerr.CorruptMessage.Code
	case errors.Is(err, slog.ErrMessageTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, slog.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, slog.ErrUnsupportedMessageFormat):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, slog.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, slog.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, slog.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, slog.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, slog.ErrStorage), errors.Is(err, slog.ErrCorruption):
		// The partition is offline until a restart runs recovery.
		return kerr.KafkaStorageError.Code
	case errors.Is(err, slog.ErrClosed), errors.Is(err, slog.ErrReplicated):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, ErrInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, ErrRequestTimedOut):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, ErrInvalidRequest):
		return kerr.InvalidRequest.Code
	case errors.Is(err, ErrTopicAuthorization):
		return kerr.TopicAuthorizationFailed.Code
	case errors.Is(err, ErrGroupAuthorization):
		return kerr.GroupAuthorizationFailed.Code
	case errors.Is(err, ErrClusterAuthorization):
		return kerr.ClusterAuthorizationFailed.Code
	case errors.Is(err, ErrThrottlingQuota):
		return kerr.ThrottlingQuotaExceeded.Code
	case errors.Is(err, ErrQuotaEntityType):
		return kerr.UnsupportedVersion.Code
	case errors.Is(err, ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, ErrInvalidReplicationFactor):
		return kerr.InvalidReplicationFactor.Code
	case errors.Is(err, ErrInvalidReplicaAssignment):
		return kerr.InvalidReplicaAssignment.Code
	case errors.Is(err, ErrPolicyViolation):
		return kerr.PolicyViolation.Code
	case errors.Is(err, ErrUnknownTopic):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, ErrUnknownTopicID):
		return kerr.UnknownTopicID.Code
	case errors.Is(err, sharegroup.ErrInvalidRecordState):
		return kerr.InvalidRecordState.Code
	case errors.Is(err, sharegroup.ErrInvalidRequest):
		return kerr.InvalidRequest.Code
	case errors.Is(err, sharegroup.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	default:
		return kerr.KafkaStorageError.Code
	}
}
