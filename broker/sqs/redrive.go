package sqs

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Dead-letter queues: a queue's RedrivePolicy makes its share group's
// delivery limit the policy's maxReceiveCount and its dead-letter topic
// the target queue's topic (share.Owned); the share coordinator's
// KIP-1191 writer copies a message whose receives ran out, headers (and
// so its MessageId) included, into the target before it is gone from the
// source.

func init() {
	register("ListDeadLetterSourceQueues", (*Server).listDeadLetterSourceQueues)
}

type redrivePolicy struct {
	target string // queue name
	arn    string
	max    int
}

// parseRedrive reads a RedrivePolicy value ("" removes it).
func (s *Server) parseRedrive(v string) (*redrivePolicy, *apiError) {
	if v == "" {
		return nil, nil
	}
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(v))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, errf(errInvalidAttributeValue, "Invalid value for the parameter RedrivePolicy. Reason: Redrive policy is not a valid JSON map.")
	}
	bad := func(reason string) *apiError {
		return invalidParam("Value %s for parameter RedrivePolicy is invalid. Reason: %s", v, reason)
	}
	for k := range m {
		if k != "deadLetterTargetArn" && k != "maxReceiveCount" {
			return nil, bad("Only following attributes are supported: [deadLetterTargetArn, maxReceiveCount].")
		}
	}
	arn, _ := m["deadLetterTargetArn"].(string)
	if arn == "" {
		return nil, bad("Redrive policy does not contain mandatory attribute: deadLetterTargetArn.")
	}
	var n int64
	switch c := m["maxReceiveCount"].(type) {
	case json.Number:
		n, _ = c.Int64()
	case string:
		n, _ = strconv.ParseInt(c, 10, 64)
	case nil:
		return nil, bad("Redrive policy does not contain mandatory attribute: maxReceiveCount.")
	}
	if n < 1 || n > 1000 {
		return nil, bad("Invalid value for maxReceiveCount: " + strconv.FormatInt(n, 10) + ", valid values are from 1 to 1000 both inclusive.")
	}
	prefix := "arn:aws:sqs:" + s.cfg.Region + ":" + s.cfg.Account + ":"
	name, ok := strings.CutPrefix(arn, prefix)
	if !ok || s.mu.queues[name] == nil {
		return nil, bad("Dead letter target does not exist.")
	}
	return &redrivePolicy{target: name, arn: arn, max: int(n)}, nil
}

// redriveJSON is the policy as AWS answers it.
func (p *redrivePolicy) json() string {
	b, _ := json.Marshal(map[string]any{"deadLetterTargetArn": p.arn, "maxReceiveCount": p.max})
	return string(b)
}

// checkRedriveAllow reads a RedriveAllowPolicy value.
func checkRedriveAllow(v string) *apiError {
	if v == "" {
		return nil
	}
	var p struct {
		Permission string   `json:"redrivePermission"`
		Sources    []string `json:"sourceQueueArns"`
	}
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return errf(errInvalidAttributeValue, "Invalid value for the parameter RedriveAllowPolicy. Reason: Amazon SQS can't create the redrive allow policy, as it's in an unsupported format.")
	}
	switch p.Permission {
	case "allowAll", "denyAll":
		if len(p.Sources) > 0 {
			return errf(errInvalidAttributeValue, "Invalid value for the parameter RedriveAllowPolicy. Reason: Amazon SQS can't create the redrive allow policy. To specify one or more source queues, you must set redrivePermission to byQueue.")
		}
	case "byQueue":
		if len(p.Sources) == 0 || len(p.Sources) > 10 {
			return errf(errInvalidAttributeValue, "Invalid value for the parameter RedriveAllowPolicy. Reason: Amazon SQS can't create the redrive allow policy. When you specify the byQueue permission type, you must also specify one or more sourceQueueArns (at most 10).")
		}
	default:
		return errf(errInvalidAttributeValue, "Invalid value for the parameter RedriveAllowPolicy. Reason: Amazon SQS can't create the redrive allow policy. Redrive permission can only be one of allowAll, denyAll, byQueue.")
	}
	return nil
}

// allowsSource reports whether a dead-letter queue's RedriveAllowPolicy
// lets srcARN use it.
func allowsSource(dlq *queue, srcARN string) bool {
	v := dlq.Attrs["RedriveAllowPolicy"]
	if v == "" {
		return true // allowAll, AWS's default
	}
	var p struct {
		Permission string   `json:"redrivePermission"`
		Sources    []string `json:"sourceQueueArns"`
	}
	_ = json.Unmarshal([]byte(v), &p)
	switch p.Permission {
	case "denyAll":
		return false
	case "byQueue":
		return contains(p.Sources, srcARN)
	}
	return true
}

// applyRedrive validates attrs' RedrivePolicy for q (s.mu held) and
// writes it in AWS's form into attrs.
func (s *Server) applyRedrive(q *queue, attrs map[string]string) *apiError {
	v, ok := attrs["RedrivePolicy"]
	if !ok {
		return nil
	}
	p, aerr := s.parseRedrive(v)
	if aerr != nil || p == nil {
		return aerr
	}
	dlq := s.mu.queues[p.target]
	switch {
	case p.target == q.Name:
		return invalidParam("Value %s for parameter RedrivePolicy is invalid. Reason: Dead letter target can't be the same as the source.", v)
	case dlq.fifo() != q.fifo():
		return invalidParam("Value %s for parameter RedrivePolicy is invalid. Reason: Dead-letter queue must be same type of queue as the source.", v)
	case !allowsSource(dlq, s.arn(q.Name)):
		return invalidParam("Value %s for parameter RedrivePolicy is invalid. Reason: Queue %s does not allow this queue to use it as a dead-letter queue (RedriveAllowPolicy).", v, p.arn)
	}
	attrs["RedrivePolicy"] = p.json()
	return nil
}

// lastDeadLetter is the queue record's LastDeadLetter after attrs
// are applied (s.mu held).
func (s *Server) lastDeadLetter(cur string, attrs map[string]string) string {
	if v := attrs["RedrivePolicy"]; v != "" {
		if p, _ := s.parseRedrive(v); p != nil {
			return s.mu.queues[p.target].Topic
		}
	}
	return cur
}

// GroupSettings are what a queue's share group takes from the queue
// (share.Owned).
type GroupSettings struct {
	Limit           int    // maxReceiveCount; 0: none
	DeadLetterTopic string // the redrive target's topic
	OrderedBy       string // FIFO: the message-group header
	OrderedBatch    int    // FIFO: messages of one group per receive
}

// QueueGroup reports whether group is a queue's share group, and its
// settings (share.Options.Owned). It takes no lock: the share
// coordinator asks it holding share-partition locks, which a queue's
// creation may wait for (a topic deletion to finish).
func (s *Server) QueueGroup(group string) (GroupSettings, bool) {
	if m := s.groups.Load(); m != nil {
		gs, ok := (*m)[group]
		return gs, ok
	}
	return GroupSettings{}, false
}

// publishLocked recomputes what QueueGroup answers (s.mu held).
func (s *Server) publishLocked() {
	m := make(map[string]GroupSettings, len(s.mu.queues))
	for _, q := range s.mu.queues {
		var gs GroupSettings
		if q.fifo() {
			gs.OrderedBy, gs.OrderedBatch = hdrGroup, maxBatchEntries
		}
		gs.DeadLetterTopic = q.LastDeadLetter
		if v := q.Attrs["RedrivePolicy"]; v != "" {
			if p, _ := s.parseRedrive(v); p != nil {
				gs.Limit, gs.DeadLetterTopic = p.max, s.mu.queues[p.target].Topic
			}
		}
		// Without a policy (any more), or with its target queue gone:
		// no limit, and what was already on its way keeps going to the
		// last target, or waits in the source while that is gone (the
		// writer never gives up for a queue), never dropped.
		m[q.Group] = gs
	}
	s.groups.Store(&m)
}

func (s *Server) listDeadLetterSourceQueues(r *http.Request, in input) (any, *apiError) {
	q, aerr := s.queueFrom(in)
	if aerr != nil {
		return nil, aerr
	}
	pg, aerr := pageOf(in)
	if aerr != nil {
		return nil, aerr
	}
	arn := s.arn(q.Name)
	s.mu.Lock()
	var names []string
	for _, n := range sortedNames(s.mu.queues) {
		if v := s.mu.queues[n].Attrs["RedrivePolicy"]; v != "" && n > pg.after {
			if p, _ := s.parseRedrive(v); p != nil && p.arn == arn {
				names = append(names, n)
			}
		}
	}
	s.mu.Unlock()
	names, next := pg.cut(names)
	out := map[string]any{}
	if next != "" {
		out["NextToken"] = next
	}
	urls := make([]string, len(names))
	for i, n := range names {
		urls[i] = s.queueURL(r, n)
	}
	out["queueUrls"] = urls
	return out, nil
}

// sourceARN is a dead-lettered record's DeadLetterQueueSourceArn: the
// queue whose topic the KIP-1191 writer names.
func (s *Server) sourceARN(topic string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.mu.queues {
		if q.Topic == topic {
			return s.arn(q.Name)
		}
	}
	return ""
}
