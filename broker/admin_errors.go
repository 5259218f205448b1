package broker

import (
	"errors"
	"fmt"
)

// Refusals of admin requests (topics, partitions, configs). Each is a
// sentinel mapped to its Kafka code in errorCode (errors.go); handlers
// wrap one in a requestError carrying the message sent to the client.
var (
	errInvalidRequest           = errors.New("broker: invalid request")            // INVALID_REQUEST
	errInvalidConfig            = errors.New("broker: invalid config")             // INVALID_CONFIG
	errInvalidPartitions        = errors.New("broker: invalid partitions")         // INVALID_PARTITIONS
	errInvalidReplicationFactor = errors.New("broker: invalid replication factor") // INVALID_REPLICATION_FACTOR
	errInvalidReplicaAssignment = errors.New("broker: invalid replica assignment") // INVALID_REPLICA_ASSIGNMENT
	errPolicyViolation          = errors.New("broker: policy violation")           // POLICY_VIOLATION
	errUnknownTopic             = errors.New("broker: unknown topic or partition") // UNKNOWN_TOPIC_OR_PARTITION
	errUnknownTopicID           = errors.New("broker: unknown topic id")           // UNKNOWN_TOPIC_ID
)

// requestError is a refusal: kind selects the error code, msg is the
// human-readable ErrorMessage, worded like Kafka's where Kafka has one.
type requestError struct {
	kind error
	msg  string
}

func (e *requestError) Error() string { return e.msg }
func (e *requestError) Unwrap() error { return e.kind }

// refuse builds a requestError of the given kind.
func refuse(kind error, format string, args ...any) error {
	return &requestError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// errorMessage is the ErrorMessage for err: nil for success, the message
// of a refusal, or the error text otherwise.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
