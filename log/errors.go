package log

import "errors"

// Sentinel errors. Every error returned by this package wraps one of them
// (the broker maps them to Kafka error codes with errors.Is).
var (
	// ErrCorruptMessage: a produced batch has a bad CRC or is truncated
	// (Kafka CORRUPT_MESSAGE).
	ErrCorruptMessage = errors.New("log: corrupt message")
	// ErrMessageTooLarge: a produced batch is larger than max.message.bytes
	// or cannot fit in a segment (Kafka MESSAGE_TOO_LARGE).
	ErrMessageTooLarge = errors.New("log: message too large")
	// ErrInvalidRecord: recordCount does not match lastOffsetDelta+1, a
	// batch has no records, or a produce request is empty (Kafka
	// INVALID_RECORD).
	ErrInvalidRecord = errors.New("log: invalid record")
	// ErrUnsupportedMessageFormat: a produced batch has magic != 2 (Kafka
	// UNSUPPORTED_FOR_MESSAGE_FORMAT).
	ErrUnsupportedMessageFormat = errors.New("log: unsupported message format")
	// ErrOffsetOutOfRange: a read or DeleteRecords offset outside the log
	// (Kafka OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrOutOfOrderSequence: an idempotent batch's sequence does not follow
	// the producer's last one (Kafka OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = errors.New("log: out of order sequence number")
	// ErrInvalidProducerEpoch: an idempotent batch carries an epoch older
	// than the producer's current one (Kafka INVALID_PRODUCER_EPOCH).
	ErrInvalidProducerEpoch = errors.New("log: invalid producer epoch")
	// ErrInvalidTxnState: a producer with a transaction open in this
	// partition sent a non-transactional batch (Kafka INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("log: invalid transaction state")
	// ErrOrdinalOutOfRange: a batch ordinal outside [FirstOrdinal,
	// NextOrdinal] (ReadOrdinals, OrdinalOffset, TruncateFrom).
	ErrOrdinalOutOfRange = errors.New("log: ordinal out of range")
	// ErrInvalidTruncation: TruncateFrom would remove records below the
	// high watermark, which consumers may have read.
	ErrInvalidTruncation = errors.New("log: truncation below the high watermark")
	// ErrReplicated: Append, AppendCompacted or WriteMarker on a raft
	// replica's log (Config.Replica), which only its raft group writes
	// (Prepare, AppendReplicated): a write around raft would fork the
	// replicas (Kafka NOT_LEADER_OR_FOLLOWER).
	ErrReplicated = errors.New("log: replica log written only through raft")
	// ErrClosed: the partition was closed.
	ErrClosed = errors.New("log: partition closed")
	// ErrStorage: a file operation failed. After a failed write or sync the
	// partition is sticky-failed: every later Append and Sync returns the
	// same error (Kafka KAFKA_STORAGE_ERROR).
	ErrStorage = errors.New("log: storage error")
	// ErrCorruption: data that was known to be durable (below the recovery
	// point) is damaged; Open refuses to serve the partition rather than
	// silently dropping acknowledged records.
	ErrCorruption = errors.New("log: corruption")
)
