package sqs

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/share"
)

// Backend is what the SQS API needs of the broker: topics, appends, the
// share group's direct consumer, and a durable place for queue records.
// The root package implements it (sqs_backend.go).
type Backend interface {
	// CreateTopic creates a queue's topic with configs; ErrTopicExists
	// if a topic of that name exists.
	CreateTopic(name string, partitions int32, configs map[string]string) ([16]byte, error)
	// DeleteTopic deletes a queue's share group and, unless keepTopic
	// (an adopted Kafka topic), its topic.
	DeleteTopic(name, group string, keepTopic bool) error
	// AlterTopic sets configs of a queue's topic.
	AlterTopic(name string, configs map[string]string) error
	// TopicID is the topic's id, and whether it exists.
	TopicID(name string) ([16]byte, bool)
	// Append appends records to a partition of topic (-1: the backend
	// picks) and returns once they are durable, with where each is: a
	// record the topic's dedup window dropped is where its first copy
	// is. ErrTooLarge if the topic's max.message.bytes refuses them.
	Append(topic string, partition int32, recs []Record) ([]Position, error)
	// Partitions is the topic's partition count.
	Partitions(topic string) int32
	// Receive, Settle, Counts and Purge are the share group's direct
	// consumer (package share).
	Receive(ctx context.Context, r share.DirectReceive) ([]share.DirectRecord, error)
	Settle(group string, topicID [16]byte, entries []share.DirectSettle) []error
	// Counts with delays set also reads the log past the share group's
	// end offset for delayed messages (sqs.deliver-at) no receive has
	// reached, which otherwise count as visible.
	Counts(group, topic string, delays bool) (visible, inFlight, delayed int64)
	Purge(group, topic string) error
	// SaveQueue stores a queue record durably (nil: deletes it);
	// LoadQueues returns every stored one.
	SaveQueue(name string, rec []byte) error
	LoadQueues() (map[string][]byte, error)
	// SaveTask and LoadTasks do the same for message move tasks.
	SaveTask(handle string, rec []byte) error
	LoadTasks() (map[string][]byte, error)
	// Secret is the broker's receipt-handle key, the same across
	// restarts.
	Secret() ([]byte, error)
}

// Position is where a record is.
type Position struct {
	Partition int32
	Offset    int64
}

// Record is a record to append.
type Record struct {
	Key, Value []byte
	Headers    []kmsg.Header
	Timestamp  time.Time
}
