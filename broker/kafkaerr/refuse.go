package kafkaerr

import (
	"errors"
	"fmt"
)

// Refusals of admin requests (topics, partitions, configs). Each is a
// sentinel mapped to its Kafka code by Code (code.go); handlers
// wrap one in a RequestError carrying the message sent to the client.
var (
	ErrInvalidRequest           = errors.New("broker: invalid request")              // INVALID_REQUEST
	ErrInvalidConfig            = errors.New("broker: invalid config")               // INVALID_CONFIG
	ErrInvalidPartitions        = errors.New("broker: invalid partitions")           // INVALID_PARTITIONS
	ErrInvalidReplicationFactor = errors.New("broker: invalid replication factor")   // INVALID_REPLICATION_FACTOR
	ErrInvalidReplicaAssignment = errors.New("broker: invalid replica assignment")   // INVALID_REPLICA_ASSIGNMENT
	ErrPolicyViolation          = errors.New("broker: policy violation")             // POLICY_VIOLATION
	ErrUnknownTopic             = errors.New("broker: unknown topic or partition")   // UNKNOWN_TOPIC_OR_PARTITION
	ErrUnknownTopicID           = errors.New("broker: unknown topic id")             // UNKNOWN_TOPIC_ID
	ErrTopicExists              = errors.New("broker: topic already exists")         // TOPIC_ALREADY_EXISTS
	ErrInvalidTopic             = errors.New("broker: invalid topic name")           // INVALID_TOPIC_EXCEPTION
	ErrThrottlingQuota          = errors.New("broker: throttling quota exceeded")    // THROTTLING_QUOTA_EXCEEDED
	ErrTopicAuthorization       = errors.New("broker: topic authorization failed")   // TOPIC_AUTHORIZATION_FAILED
	ErrGroupAuthorization       = errors.New("broker: group authorization failed")   // GROUP_AUTHORIZATION_FAILED
	ErrClusterAuthorization     = errors.New("broker: cluster authorization failed") // CLUSTER_AUTHORIZATION_FAILED
	ErrRequestTimedOut          = errors.New("broker: request timed out")            // REQUEST_TIMED_OUT
	// ErrQuotaEntityType is UNSUPPORTED_VERSION: Kafka's answer to a
	// DescribeClientQuotas filter on a custom entity type or match type.
	ErrQuotaEntityType = errors.New("broker: unsupported quota filter")
)

// RequestError is a refusal: kind selects the error code, msg is the
// human-readable ErrorMessage, worded like Kafka's where Kafka has one.
type RequestError struct {
	kind error
	msg  string
}

func (e *RequestError) Error() string { return e.msg }
func (e *RequestError) Unwrap() error { return e.kind }

// Refuse builds a RequestError of the given kind.
func Refuse(kind error, format string, args ...any) error {
	return &RequestError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Message is the ErrorMessage for err: nil for success, the message
// of a refusal, or the error text otherwise.
func Message(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
