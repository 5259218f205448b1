package sqs

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shoal-mq/shoal/broker/acl"
)

func init() {
	register("CreateQueue", (*Server).createQueue)
	register("GetQueueUrl", (*Server).getQueueURL)
	register("ListQueues", (*Server).listQueues)
	register("DeleteQueue", (*Server).deleteQueue)
	register("GetQueueAttributes", (*Server).getQueueAttributes)
	register("SetQueueAttributes", (*Server).setQueueAttributes)
	register("PurgeQueue", (*Server).purgeQueue)
	register("TagQueue", (*Server).tagQueue)
	register("UntagQueue", (*Server).untagQueue)
	register("ListQueueTags", (*Server).listQueueTags)
}

// deletedRecently is how long a deleted queue's name cannot be reused.
const deletedRecently = 60 * time.Second

// topicConfigs are the configs of a queue's topic for its attributes.
func topicConfigs(q *queue) map[string]string {
	m := map[string]string{
		"retention.ms": strconv.FormatInt(q.intAttr("MessageRetentionPeriod")*1000, 10),
		// A 1 MiB message with its attributes, or a batch of 10 totalling
		// 1 MiB, in one record batch.
		"max.message.bytes": strconv.Itoa(2 << 20),
	}
	if q.fifo() { // the 5-minute deduplication interval, in the queue's scope
		m["dedup.window.ms"] = "300000"
		m["dedup.key"] = "header:" + hdrDedup
		m["dedup.message.group.header"] = hdrGroup
		m["dedup.scope"] = "topic"
		if q.attr("DeduplicationScope") == "messageGroup" {
			m["dedup.scope"] = "message-group"
		}
	}
	return m
}

func (s *Server) save(q *queue) *apiError {
	rec, err := json.Marshal(q)
	if err != nil {
		return internal(err)
	}
	if err := s.be.SaveQueue(q.Name, rec); err != nil {
		return internal(err)
	}
	return nil
}

func (s *Server) createQueue(r *http.Request, in input) (any, *apiError) {
	name, err := in.required("QueueName")
	if err != nil {
		return nil, err
	}
	attrs, err := in.strmap("Attributes")
	if err != nil {
		return nil, err
	}
	tags, err := in.strmap("tags")
	if err != nil {
		return nil, err
	}
	fifo := attrs["FifoQueue"] == "true"
	if aerr := checkQueueName(name, fifo || strings.HasSuffix(name, ".fifo")); aerr != nil {
		return nil, aerr
	}
	if strings.HasSuffix(name, ".fifo") && !fifo {
		return nil, invalidParam("The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.")
	}
	if aerr := checkAttrs(attrs, fifo, true); aerr != nil {
		return nil, aerr
	}
	if attrs["FifoQueue"] == "false" {
		delete(attrs, "FifoQueue") // the default
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if aerr := s.applyRedrive(&queue{Name: name, Attrs: attrs}, attrs); aerr != nil {
		return nil, aerr
	}
	if q := s.mu.queues[name]; q != nil {
		// Idempotent for the same attributes, as AWS: a differing one is
		// QueueAlreadyExists.
		for k, v := range attrs {
			if q.attr(k) != v {
				return nil, errf(errQueueNameExists, "A queue already exists with the same name and a different value for attribute %s", k)
			}
		}
		return map[string]any{"QueueUrl": s.queueURL(r, name)}, nil
	}
	if at, ok := s.mu.deleted[name]; ok && time.Since(at) < deletedRecently {
		return nil, errf(errQueueDeletedRecently, "You must wait 60 seconds after deleting a queue before you can create another with the same name.")
	}
	now := time.Now().Unix()
	q := &queue{Name: name, Topic: name, Group: groupPrefix + name, Attrs: attrs, Tags: tags, Created: now, Modified: now}
	if q.Attrs == nil {
		q.Attrs = map[string]string{}
	}
	id, terr := s.be.CreateTopic(q.Topic, s.cfg.Partitions, topicConfigs(q))
	switch {
	case errors.Is(terr, ErrTopicExists) && fifo:
		return nil, errf(errQueueNameExists, "A Kafka topic named %s exists: only a standard queue exposes an existing topic.", name)
	case errors.Is(terr, ErrTopicExists):
		// A Kafka topic of that name: exposed as a queue, its records
		// (from the earliest) messages. Its configs stay as they are.
		var ok bool
		if id, ok = s.be.TopicID(name); !ok {
			return nil, internal(terr)
		}
		q.Adopted = true
	case terr != nil:
		return nil, internal(terr)
	}
	q.TopicID = id
	q.LastDeadLetter = s.lastDeadLetter("", attrs)
	if aerr := s.save(q); aerr != nil {
		return nil, aerr
	}
	s.mu.queues[name] = q
	s.publishLocked()
	return map[string]any{"QueueUrl": s.queueURL(r, name)}, nil
}

func (s *Server) getQueueURL(r *http.Request, in input) (any, *apiError) {
	name, err := in.required("QueueName")
	if err != nil {
		return nil, err
	}
	if owner, ok, err := in.str("QueueOwnerAWSAccountId"); err != nil {
		return nil, err
	} else if ok && owner != s.cfg.Account {
		return nil, errf(errQueueDoesNotExist, "The specified queue does not exist.")
	}
	if _, aerr := s.queueNamed(name); aerr != nil {
		return nil, aerr
	}
	return map[string]any{"QueueUrl": s.queueURL(r, name)}, nil
}

// page is a listing's MaxResults (1 to 1000) and NextToken, the
// base64url of the last name of the page before.
type page struct {
	limit int
	paged bool // MaxResults given: a NextToken is answered
	after string
}

func pageOf(in input) (page, *apiError) {
	limit, aerr := in.bounded("MaxResults", 1, 1000, 1000, "MaxResults must be an integer between 1 and 1000.")
	if aerr != nil {
		return page{}, aerr
	}
	_, paged := in["MaxResults"]
	pg := page{limit: int(limit), paged: paged}
	token, _, aerr := in.str("NextToken")
	if aerr != nil || token == "" {
		return pg, aerr
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return page{}, invalidParam("Invalid NextToken value.")
	}
	pg.after = string(b)
	return pg, nil
}

// cut returns the page of names (sorted, after pg.after) and the token
// of the next one ("" if none).
func (pg page) cut(names []string) ([]string, string) {
	if len(names) <= pg.limit {
		return names, ""
	}
	names = names[:pg.limit]
	if !pg.paged {
		return names, ""
	}
	return names, base64.RawURLEncoding.EncodeToString([]byte(names[len(names)-1]))
}

func (s *Server) listQueues(r *http.Request, in input) (any, *apiError) {
	prefix, _, err := in.str("QueueNamePrefix")
	if err != nil {
		return nil, err
	}
	pg, err := pageOf(in)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	var names []string
	for _, n := range sortedNames(s.mu.queues) {
		if strings.HasPrefix(n, prefix) && n > pg.after {
			names = append(names, n)
		}
	}
	s.mu.Unlock()
	names = slices.DeleteFunc(names, func(n string) bool { return !s.may(r, acl.Describe, acl.Topic, n) })
	names, next := pg.cut(names)
	var urls []string
	for _, n := range names {
		urls = append(urls, s.queueURL(r, n))
	}
	out := map[string]any{}
	if len(urls) > 0 {
		out["QueueUrls"] = urls
	}
	if next != "" {
		out["NextToken"] = next
	}
	return out, nil
}

func (s *Server) deleteQueue(_ *http.Request, in input) (any, *apiError) {
	q, aerr := s.queueFrom(in)
	if aerr != nil {
		return nil, aerr
	}
	if err := s.be.DeleteTopic(q.Topic, q.Group, q.Adopted); err != nil {
		return nil, internal(err)
	}
	if err := s.be.SaveQueue(q.Name, nil); err != nil {
		return nil, internal(err)
	}
	s.mu.Lock()
	delete(s.mu.queues, q.Name)
	s.mu.deleted[q.Name] = time.Now()
	s.publishLocked()
	s.mu.Unlock()
	return map[string]any{}, nil
}

func (s *Server) getQueueAttributes(_ *http.Request, in input) (any, *apiError) {
	q, aerr := s.queueFrom(in)
	if aerr != nil {
		return nil, aerr
	}
	names, aerr := in.strings("AttributeNames")
	if aerr != nil {
		return nil, aerr
	}
	want := map[string]bool{}
	all := false
	for _, n := range names {
		_, settable := attrDefs[n]
		switch {
		case n == "All":
			all = true
		case settable || contains(computedAttrs, n):
			want[n] = true
		default:
			return nil, errf(errInvalidAttributeName, "Unknown Attribute %s.", n)
		}
	}
	s.mu.Lock()
	snap := *q
	snap.Attrs = maps.Clone(q.Attrs)
	s.mu.Unlock()
	out := map[string]string{}
	add := func(name, v string) {
		if all || want[name] {
			out[name] = v
		}
	}
	for name, d := range attrDefs {
		if d.unsupported != "" || d.fifoOnly && !snap.fifo() || name == "FifoQueue" && !snap.fifo() {
			continue
		}
		if v := snap.attr(name); v != "" {
			add(name, v)
		}
	}
	if all || want["ApproximateNumberOfMessages"] || want["ApproximateNumberOfMessagesNotVisible"] || want["ApproximateNumberOfMessagesDelayed"] {
		visible, inFlight, delayed := s.be.Counts(q.Group, q.Topic, true)
		add("ApproximateNumberOfMessages", strconv.FormatInt(visible, 10))
		add("ApproximateNumberOfMessagesNotVisible", strconv.FormatInt(inFlight, 10))
		add("ApproximateNumberOfMessagesDelayed", strconv.FormatInt(delayed, 10))
	}
	add("CreatedTimestamp", strconv.FormatInt(snap.Created, 10))
	add("LastModifiedTimestamp", strconv.FormatInt(snap.Modified, 10))
	add("QueueArn", s.arn(snap.Name))
	res := map[string]any{}
	if len(out) > 0 {
		res["Attributes"] = out
	}
	return res, nil
}

func (s *Server) setQueueAttributes(_ *http.Request, in input) (any, *apiError) {
	q, aerr := s.queueFrom(in)
	if aerr != nil {
		return nil, aerr
	}
	attrs, aerr := in.strmap("Attributes")
	if aerr != nil {
		return nil, aerr
	}
	if aerr := checkAttrs(attrs, q.fifo(), false); aerr != nil {
		return nil, aerr
	}
	aerr = s.update(q.Name, func(next *queue) *apiError {
		if aerr := s.applyRedrive(next, attrs); aerr != nil {
			return aerr
		}
		next.LastDeadLetter = s.lastDeadLetter(next.LastDeadLetter, attrs)
		maps.Copy(next.Attrs, attrs)
		for k, v := range next.Attrs {
			if v == "" && (k == "RedrivePolicy" || k == "RedriveAllowPolicy" || k == "Policy") {
				delete(next.Attrs, k) // "" removes a policy
			}
		}
		_, retention := attrs["MessageRetentionPeriod"]
		_, scope := attrs["DeduplicationScope"]
		if retention || scope {
			if err := s.be.AlterTopic(next.Topic, topicConfigs(next)); err != nil {
				return internal(err)
			}
		}
		return nil
	})
	if aerr != nil {
		return nil, aerr
	}
	return map[string]any{}, nil
}

// update changes queue name's record durably: fn edits a copy (maps
// cloned), which replaces the published record, never changed in place
// (requests read theirs without the lock).
func (s *Server) update(name string, fn func(next *queue) *apiError) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.mu.queues[name]
	if cur == nil {
		return errf(errQueueDoesNotExist, "The specified queue does not exist.")
	}
	next := *cur
	next.Attrs, next.Tags = maps.Clone(cur.Attrs), maps.Clone(cur.Tags)
	if next.Attrs == nil {
		next.Attrs = map[string]string{}
	}
	if aerr := fn(&next); aerr != nil {
		return aerr
	}
	next.Modified = time.Now().Unix()
	if aerr := s.save(&next); aerr != nil {
		return aerr
	}
	s.mu.queues[name] = &next
	s.publishLocked()
	return nil
}

func (s *Server) purgeQueue(_ *http.Request, in input) (any, *apiError) {
	q, aerr := s.queueFrom(in)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	if at, ok := s.mu.purged[q.Name]; ok && time.Since(at) < 60*time.Second {
		s.mu.Unlock()
		return nil, errf(errPurgeInProgress, "Only one PurgeQueue operation on %s is allowed every 60 seconds.", q.Name)
	}
	s.mu.purged[q.Name] = time.Now()
	s.mu.Unlock()
	if err := s.be.Purge(q.Group, q.Topic); err != nil {
		return nil, internal(err)
	}
	return map[string]any{}, nil
}

func (s *Server) tagQueue(_ *http.Request, in input) (any, *apiError) {
	q, aerr := s.queueFrom(in)
	if aerr != nil {
		return nil, aerr
	}
	tags, aerr := in.strmap("Tags")
	if aerr != nil {
		return nil, aerr
	}
	if len(tags) == 0 {
		return nil, missingParam("Tags")
	}
	return s.retag(q, func(m map[string]string) { maps.Copy(m, tags) })
}

func (s *Server) untagQueue(_ *http.Request, in input) (any, *apiError) {
	q, aerr := s.queueFrom(in)
	if aerr != nil {
		return nil, aerr
	}
	keys, aerr := in.strings("TagKeys")
	if aerr != nil {
		return nil, aerr
	}
	if len(keys) == 0 {
		return nil, missingParam("TagKeys")
	}
	return s.retag(q, func(m map[string]string) {
		for _, k := range keys {
			delete(m, k)
		}
	})
}

func (s *Server) retag(q *queue, change func(map[string]string)) (any, *apiError) {
	aerr := s.update(q.Name, func(next *queue) *apiError {
		if next.Tags == nil {
			next.Tags = map[string]string{}
		}
		change(next.Tags)
		if len(next.Tags) > 50 {
			return invalidParam("Too many tags added for queue %s.", q.Name)
		}
		return nil
	})
	if aerr != nil {
		return nil, aerr
	}
	return map[string]any{}, nil
}

func (s *Server) listQueueTags(_ *http.Request, in input) (any, *apiError) {
	q, aerr := s.queueFrom(in)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	tags := maps.Clone(q.Tags)
	s.mu.Unlock()
	out := map[string]any{}
	if len(tags) > 0 {
		out["Tags"] = tags
	}
	return out, nil
}

func contains(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}
