package sharegroup

import "errors"

// Domain errors. The broker maps them to Kafka error codes in one table;
// match them with errors.Is, never by message.
var (
	// ErrInvalidRecordState: an acknowledged offset is not ACQUIRED by the
	// acknowledging member (another member's, already acknowledged, lock
	// expired, duplicate ack), or RENEW is disabled. Kafka INVALID_RECORD_STATE (121).
	ErrInvalidRecordState = errors.New("sharegroup: invalid record state")
	// ErrInvalidRequest: malformed acknowledgement batches (first > last,
	// not ascending, bad type list) or offsets past the in-flight window.
	// Kafka INVALID_REQUEST (42).
	ErrInvalidRequest = errors.New("sharegroup: invalid request")
	// ErrCorruptRecord: a persisted Record failed its checksum, could not be
	// decoded, or does not fit the state it is applied to. Storage
	// corruption: the partition must not be served.
	ErrCorruptRecord = errors.New("sharegroup: corrupt record")
	// ErrInvalidConfig: a Config field is out of bounds.
	ErrInvalidConfig = errors.New("sharegroup: invalid config")
)
