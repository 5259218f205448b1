package sqs

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// queue is one queue's record (persisted as JSON by the Backend): its
// topic and share group, the attributes a caller set (AWS's wire
// strings), its tags and timestamps.
type queue struct {
	Name    string   `json:"name"`
	Topic   string   `json:"topic"`
	Group   string   `json:"group"`
	TopicID [16]byte `json:"topic_id"`
	// Adopted: the topic existed before the queue (a Kafka topic exposed
	// as a queue); DeleteQueue leaves it.
	Adopted bool `json:"adopted,omitempty"`
	// LastDeadLetter is the topic of the last redrive target: records
	// already on their way there when the policy went away still go
	// (QueueGroup), waiting if it is gone, never dropped.
	LastDeadLetter string            `json:"last_dead_letter,omitempty"`
	Attrs          map[string]string `json:"attrs"`
	Tags           map[string]string `json:"tags,omitempty"`
	Created        int64             `json:"created"`  // unix seconds
	Modified       int64             `json:"modified"` // unix seconds
}

func (q *queue) fifo() bool { return q.Attrs["FifoQueue"] == "true" }

// attr is the effective value of a settable attribute.
func (q *queue) attr(name string) string {
	if v, ok := q.Attrs[name]; ok {
		return v
	}
	return attrDefs[name].def
}

func (q *queue) intAttr(name string) int64 {
	n, _ := strconv.ParseInt(q.attr(name), 10, 64)
	return n
}

// attrDef is a settable queue attribute: its default and its check.
type attrDef struct {
	def      string
	lo, hi   int64 // integer attributes
	integer  bool
	fifoOnly bool
	check    func(v string) error
	// unsupported: refused until Shoal implements it (docs/SQS.md).
	unsupported string
}

var attrDefs = map[string]attrDef{
	"DelaySeconds":                  {def: "0", integer: true, lo: 0, hi: 900},
	"MaximumMessageSize":            {def: "1048576", integer: true, lo: 1024, hi: 1048576},
	"MessageRetentionPeriod":        {def: "345600", integer: true, lo: 60, hi: 1209600},
	"ReceiveMessageWaitTimeSeconds": {def: "0", integer: true, lo: 0, hi: 20},
	"VisibilityTimeout":             {def: "30", integer: true, lo: 0, hi: 43200},
	"Policy":                        {check: checkJSON},
	"RedrivePolicy":                 {}, // Server.applyRedrive
	"RedriveAllowPolicy":            {},
	"KmsMasterKeyId":                {},
	"KmsDataKeyReusePeriodSeconds":  {def: "300", integer: true, lo: 60, hi: 86400},
	"SqsManagedSseEnabled":          {def: "true", check: checkBool},
	"FifoQueue":                     {check: checkBool},
	"ContentBasedDeduplication":     {def: "false", fifoOnly: true, check: checkBool},
	"DeduplicationScope":            {def: "queue", fifoOnly: true, check: oneOf("messageGroup", "queue")},
	"FifoThroughputLimit":           {def: "perQueue", fifoOnly: true, check: oneOf("perQueue", "perMessageGroupId")},
}

// computedAttrs are the read-only attributes GetQueueAttributes answers.
var computedAttrs = []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
	"ApproximateNumberOfMessagesDelayed", "CreatedTimestamp", "LastModifiedTimestamp", "QueueArn"}

func checkBool(v string) error {
	if v != "true" && v != "false" {
		return fmt.Errorf("must be true or false")
	}
	return nil
}

func checkJSON(v string) error {
	if v != "" && !json.Valid([]byte(v)) {
		return fmt.Errorf("must be a JSON document")
	}
	return nil
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, a := range vals {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(vals, ", "))
	}
}

// checkAttrs validates attributes given at CreateQueue (create) or
// SetQueueAttributes against the queue kind.
func checkAttrs(attrs map[string]string, fifo, create bool) *apiError {
	for name, v := range attrs {
		d, ok := attrDefs[name]
		if !ok {
			return errf(errInvalidAttributeName, "Unknown Attribute %s.", name)
		}
		switch {
		case name == "RedriveAllowPolicy":
			if aerr := checkRedriveAllow(v); aerr != nil {
				return aerr
			}
		case d.unsupported != "":
			return errf(errInvalidAttributeName, "Attribute %s is not supported: %s.", name, d.unsupported)
		case name == "FifoQueue" && !create:
			return errf(errInvalidAttributeValue, "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.")
		case d.fifoOnly && !fifo:
			return errf(errInvalidAttributeName, "You can specify the %s only when FifoQueue is set to true.", name)
		case d.integer:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < d.lo || n > d.hi {
				return errf(errInvalidAttributeValue, "Invalid value for the parameter %s.", name)
			}
		case d.check != nil:
			if err := d.check(v); err != nil {
				return errf(errInvalidAttributeValue, "Invalid value for the parameter %s. Reason: %v.", name, err)
			}
		}
	}
	if fifo && attrs["FifoThroughputLimit"] == "perMessageGroupId" && attrs["DeduplicationScope"] != "messageGroup" {
		return errf(errInvalidAttributeValue, "Invalid value for the parameter FifoThroughputLimit. Reason: perMessageGroupId is only available with DeduplicationScope messageGroup.")
	}
	return nil
}

var queueNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

// checkQueueName validates a queue name: 1 to 80 characters of
// [A-Za-z0-9_-], a FIFO queue's ending in .fifo (counted).
func checkQueueName(name string, fifo bool) *apiError {
	base := name
	if fifo {
		if !strings.HasSuffix(name, ".fifo") {
			return invalidParam("The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.")
		}
		base = strings.TrimSuffix(name, ".fifo")
	}
	if len(name) > 80 || !queueNameRE.MatchString(base) {
		if fifo {
			return invalidParam("The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.")
		}
		return invalidParam("Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	return nil
}
