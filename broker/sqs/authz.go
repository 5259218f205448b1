package sqs

// Authorization: when the broker's authorizer is on, an SQS action is
// authorized with Kafka's ACLs on the queue's topic and share group, for
// the principal the request's access key maps to (User:ANONYMOUS
// unsigned), as the Kafka request doing the same would be:
//
//	CreateQueue                          CREATE on the cluster or the topic
//	DeleteQueue, PurgeQueue              DELETE on the topic
//	SendMessage(Batch)                   WRITE on the topic
//	ReceiveMessage, DeleteMessage(Batch),
//	ChangeMessageVisibility(Batch)       READ on the topic and on the group
//	SetQueueAttributes, Tag/UntagQueue,
//	Add/RemovePermission                 ALTER_CONFIGS on the topic
//	GetQueueAttributes, ListQueueTags    DESCRIBE_CONFIGS on the topic
//	GetQueueUrl, ListDeadLetterSourceQueues,
//	ListMessageMoveTasks                 DESCRIBE on the topic
//	StartMessageMoveTask                 READ on the source's topic and group, WRITE
//	                                     on each destination's topic
//	ListQueues                           lists the queues DESCRIBE allows
//	CancelMessageMoveTask                the task's handle (12 random bytes)
//
// A refusal is AccessDenied (403), as AWS answers.

import (
	"context"
	"net"
	"net/http"

	"github.com/shoal-mq/shoal/broker/acl"
)

// Authorizer answers whether a principal from host may do op on a
// resource (nil: everything is allowed).
type Authorizer func(principal, host string, op acl.Operation, typ acl.ResourceType, name string) bool

type access struct {
	op    acl.Operation
	group bool // also op on the queue's share group
}

var permissions = map[string][]access{
	"DeleteQueue":                  {{op: acl.Delete}},
	"PurgeQueue":                   {{op: acl.Delete}},
	"SendMessage":                  {{op: acl.Write}},
	"SendMessageBatch":             {{op: acl.Write}},
	"ReceiveMessage":               {{op: acl.Read, group: true}},
	"DeleteMessage":                {{op: acl.Read, group: true}},
	"DeleteMessageBatch":           {{op: acl.Read, group: true}},
	"ChangeMessageVisibility":      {{op: acl.Read, group: true}},
	"ChangeMessageVisibilityBatch": {{op: acl.Read, group: true}},
	"SetQueueAttributes":           {{op: acl.AlterConfigs}},
	"TagQueue":                     {{op: acl.AlterConfigs}},
	"UntagQueue":                   {{op: acl.AlterConfigs}},
	"AddPermission":                {{op: acl.AlterConfigs}},
	"RemovePermission":             {{op: acl.AlterConfigs}},
	"GetQueueAttributes":           {{op: acl.DescribeConfigs}},
	"ListQueueTags":                {{op: acl.DescribeConfigs}},
	"GetQueueUrl":                  {{op: acl.Describe}},
	"ListDeadLetterSourceQueues":   {{op: acl.Describe}},
	"StartMessageMoveTask":         {{op: acl.Read, group: true}},
	"ListMessageMoveTasks":         {{op: acl.Describe}},
}

type principalKey struct{}

// anonymous is an unsigned request's principal (Kafka's for an
// unauthenticated client).
const anonymous = "User:ANONYMOUS"

func withPrincipal(r *http.Request, p string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
}

func principalOf(r *http.Request) string {
	if p, ok := r.Context().Value(principalKey{}).(string); ok {
		return p
	}
	return anonymous
}

func hostOf(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return h
}

// may reports whether r's principal may do op on typ name.
func (s *Server) may(r *http.Request, op acl.Operation, typ acl.ResourceType, name string) bool {
	return s.authz == nil || s.authz(principalOf(r), hostOf(r), op, typ, name)
}

// authorize checks action's permissions before it runs.
func (s *Server) authorize(r *http.Request, action string, in input) *apiError {
	if s.authz == nil {
		return nil
	}
	denied := func(what string) *apiError {
		return errf(errAccessDenied, "Access to the resource %s is denied.", what)
	}
	if action == "CreateQueue" {
		name, _, _ := in.str("QueueName")
		if !s.may(r, acl.Create, acl.Cluster, acl.ClusterName) && !s.may(r, acl.Create, acl.Topic, name) {
			return denied(s.queueURL(r, name))
		}
		return nil
	}
	perms, ok := permissions[action]
	if !ok {
		return nil // ListQueues filters; unknown actions fail on their own
	}
	// The queue is the one the action acts on, named by the parameter
	// the action reads, never by another one the request also carries.
	var name string
	switch action {
	case "GetQueueUrl":
		name, _, _ = in.str("QueueName")
	case "StartMessageMoveTask", "ListMessageMoveTasks":
		arn, _, _ := in.str("SourceArn")
		name = arnName(arn)
	default:
		u, _, _ := in.str("QueueUrl")
		_, name, _ = splitQueueURL(u)
	}
	topic := name
	if q, aerr := s.queueNamed(name); aerr == nil {
		topic = q.Topic
	}
	for _, p := range perms {
		if !s.may(r, p.op, acl.Topic, topic) || p.group && !s.may(r, p.op, acl.Group, groupPrefix+name) {
			return denied(s.queueURL(r, name))
		}
	}
	if action == "StartMessageMoveTask" {
		// And WRITE where it moves to (without DestinationArn: each
		// message's source, checked as it moves, movetasks.go).
		if dst, _, _ := in.str("DestinationArn"); dst != "" {
			dname := arnName(dst)
			dtopic := dname
			if q, aerr := s.queueNamed(dname); aerr == nil {
				dtopic = q.Topic
			}
			if !s.may(r, acl.Write, acl.Topic, dtopic) {
				return denied(s.queueURL(r, dname))
			}
		}
	}
	return nil
}
