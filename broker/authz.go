package broker

// Authorization (issue 28): every handler asks the connection whether
// its principal may do an operation on a resource before it acts, with
// the rows of Kafka's authorization table (docs/SECURITY.md has ours).
// With the authorizer off (authorizer.class.name unset, Kafka's
// default) every question is answered yes.
//
// Handlers check authorization before existence, as Kafka does, so a
// caller who may not see a topic cannot learn whether it exists: it
// gets TOPIC_AUTHORIZATION_FAILED either way.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/kafkaerr"
)

// authorize reports whether c's principal may do op on the resource.
// A denial is counted and logged at debug level (Kafka logs them on its
// authorizer logger).
func (c *conn) authorize(op acl.Operation, typ acl.ResourceType, name string) bool {
	if c.visible(op, typ, name) {
		return true
	}
	c.b.metrics.AuthzDenied.Inc()
	if ce := c.lg.Check(zap.DebugLevel, "authorization denied"); ce != nil {
		ce.Write(zap.String("principal", c.principal), zap.String("operation", op.String()),
			zap.String("resource", typ.String()+":"+name))
	}
	return false
}

// visible is authorize for filtering (all-topics Metadata, ListGroups):
// a resource left out of an answer is not a denial worth counting.
func (c *conn) visible(op acl.Operation, typ acl.ResourceType, name string) bool {
	return c.b.allowed(c.principal, c.quota.ip, op, typ, name)
}

// allowed asks the authorizer (yes when it is off).
func (b *Broker) allowed(principal, host string, op acl.Operation, typ acl.ResourceType, name string) bool {
	return b.authz == nil || b.authz.Authorize(acl.Request{Principal: principal, Host: host, Operation: op, Type: typ, Name: name})
}

func (c *conn) mayTopic(op acl.Operation, topic string) bool {
	return c.authorize(op, acl.Topic, topic)
}

func (c *conn) mayGroup(op acl.Operation, group string) bool {
	return c.authorize(op, acl.Group, group)
}

func (c *conn) mayCluster(op acl.Operation) bool {
	return c.authorize(op, acl.Cluster, acl.ClusterName)
}

func (c *conn) mayTxn(op acl.Operation, id string) bool {
	return c.authorize(op, acl.TransactionalID, id)
}

// mayDescribeTopic is the groups' question for a member's regex
// subscription (groups.Options.MayDescribe): may principal, from ip,
// Describe topic? Not counted as a denial: leaving a topic out of what a
// regex reaches is filtering.
func (b *Broker) mayDescribeTopic(principal, ip, topic string) bool {
	return b.allowed(principal, ip, acl.Describe, acl.Topic, topic)
}

// mayAnyOf reports whether c may do op on some resource of typ (Kafka's
// authorizeByResourceType, used where Write on any topic stands in for
// IdempotentWrite on the cluster, KIP-679).
func (c *conn) mayAnyOf(op acl.Operation, typ acl.ResourceType) bool {
	a := c.b.authz
	return a == nil || a.AuthorizeAny(c.principal, c.quota.ip, op, typ)
}

// authorizedOps is KIP-430's bit set of what c may do on a resource
// (bit 1<<operation for each of the type's operations it is allowed),
// or INT32_MIN when the request did not ask (include false).
func (c *conn) authorizedOps(include bool, typ acl.ResourceType, name string) int32 {
	if !include {
		return math.MinInt32
	}
	var bits int32
	for _, op := range acl.Supported(typ) {
		if c.visible(op, typ, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// clusterOps is the cluster's KIP-430 set for Metadata and
// DescribeCluster: 0 for a caller who may not Describe the cluster, as
// Kafka.
func (c *conn) clusterOps(include bool) int32 {
	if include && !c.visible(acl.Describe, acl.Cluster, acl.ClusterName) {
		return 0
	}
	return c.authorizedOps(include, acl.Cluster, acl.ClusterName)
}

// authzSplit sorts items into those check allows (code 0) and the
// denied ones with their error codes. With the authorizer off it
// returns items whole.
func authzSplit[T any](c *conn, items []T, check func(*T) int16) (kept, denied []T, codes []int16) {
	if c.b.authz == nil {
		return items, nil, nil
	}
	kept = items[:0:0] // nil only if items is: a null list may mean "all"
	for i := range items {
		if code := check(&items[i]); code != 0 {
			denied, codes = append(denied, items[i]), append(codes, code)
		} else {
			kept = append(kept, items[i])
		}
	}
	return kept, denied, codes
}

// topicName is the topic an id-or-name request field names: name
// itself before topic ids, else the topic with id; known is false when
// no topic has the id (the owning package then answers
// UNKNOWN_TOPIC_ID, and there is no name to authorize).
func (c *conn) topicName(name string, id [16]byte, byID bool) (_ string, known bool) {
	if !byID {
		return name, true
	}
	t := c.b.topics.GetID(id)
	if t == nil {
		return "", false
	}
	return t.Name, true
}

// topicCheck is the usual check function for authzSplit: groupCode for
// every topic when the group was denied, else TOPIC_AUTHORIZATION_FAILED
// for a known topic without op.
func (c *conn) topicCheck(groupCode int16, op acl.Operation, name string, id [16]byte, byID bool) int16 {
	if groupCode != 0 {
		return groupCode
	}
	if n, known := c.topicName(name, id, byID); known && !c.mayTopic(op, n) {
		return kerr.TopicAuthorizationFailed.Code
	}
	return 0
}

// groupCode is 0 when c may do op on group, else GROUP_AUTHORIZATION_FAILED.
func (c *conn) groupCode(op acl.Operation, group string) int16 {
	if c.mayGroup(op, group) {
		return 0
	}
	return kerr.GroupAuthorizationFailed.Code
}

// configsDenied is the refusal of op (DescribeConfigs or AlterConfigs)
// on a config resource, or nil: a topic needs op on the topic, a group
// on the group, a broker, broker logger or client-metrics resource on
// the cluster, as Kafka.
func (c *conn) configsDenied(op acl.Operation, typ kmsg.ConfigResourceType, name string) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !c.mayTopic(op, name) {
			return kafkaerr.Refuse(kafkaerr.ErrTopicAuthorization, "Authorization failed.")
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !c.mayGroup(op, name) {
			return kafkaerr.Refuse(kafkaerr.ErrGroupAuthorization, "Authorization failed.")
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		if !c.mayCluster(op) {
			return kafkaerr.Refuse(kafkaerr.ErrClusterAuthorization, "Authorization failed.")
		}
	}
	return nil
}

// topicReader is, for one request, a cached "may the caller Read this
// topic?" (nil with the authorizer off), for the share coordinator.
func (c *conn) topicReader() func(topic string) bool {
	if c.b.authz == nil {
		return nil
	}
	seen := map[string]bool{}
	return func(topic string) bool {
		ok, hit := seen[topic]
		if !hit {
			ok = c.mayTopic(acl.Read, topic)
			seen[topic] = ok
		}
		return ok
	}
}

// undescribable reports the first of topics the caller may not
// Describe (consumer and share group heartbeats and describes refuse a
// subscription or assignment naming one, as Kafka 4). An empty name is
// a name like any other: no ACL covers it.
func (c *conn) undescribable(topics []string) (string, bool) {
	if c.b.authz == nil {
		return "", false
	}
	for _, t := range topics {
		if !c.mayTopic(acl.Describe, t) {
			return t, true
		}
	}
	return "", false
}

// nameOf is a nullable id as the resource name it authorizes ("" for
// null).
func nameOf(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
