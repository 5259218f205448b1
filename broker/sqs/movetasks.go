package sqs

// Message move tasks (DLQ redrive): StartMessageMoveTask moves the
// messages of a dead-letter queue to DestinationArn, or each back to the
// queue it came from (the KIP-1191 copy names it), at most
// MaxNumberOfMessagesPerSecond; each message is appended to the
// destination (durably) before it is deleted from the dead-letter queue,
// so a crash in between delivers it twice, never loses it. One task runs
// per source. Tasks are stored (Backend.SaveTask): a task running at a
// restart resumes, its count of messages moved as last saved (every 50
// moves and at its end); the 10 most recent per source are listed.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/share"
	"github.com/shoal-mq/shoal/sharegroup"
)

func init() {
	register("StartMessageMoveTask", (*Server).startMessageMoveTask)
	register("ListMessageMoveTasks", (*Server).listMessageMoveTasks)
	register("CancelMessageMoveTask", (*Server).cancelMessageMoveTask)
}

// moveTask is one task; mu guards its mutable fields.
type moveTask struct {
	handle      string
	source      *queue
	destination string // ARN, "" for each message's source
	rate        int    // messages per second (0: 500)
	started     int64  // unix ms
	toMove      int64
	cancel      context.CancelFunc
	// principal and host started it: WRITE on each destination is
	// theirs to have (authz.go).
	principal, host string
	// cancelled: CancelMessageMoveTask, not a shutdown, ended it.
	cancelled bool

	mu      sync.Mutex
	status  string // RUNNING, CANCELLING, CANCELLED, COMPLETED, FAILED
	moved   int64
	failure string
}

const maxMoveRate = 500

type moveTasks struct {
	mu    sync.Mutex
	bySrc map[string][]*moveTask // source queue name → newest last
}

func (s *Server) startMessageMoveTask(r *http.Request, in input) (any, *apiError) {
	srcARN, aerr := in.required("SourceArn")
	if aerr != nil {
		return nil, aerr
	}
	dstARN, _, aerr := in.str("DestinationArn")
	if aerr != nil {
		return nil, aerr
	}
	rate, aerr := in.bounded("MaxNumberOfMessagesPerSecond", 1, maxMoveRate, 0, "must be between 1 and 500")
	if aerr != nil {
		return nil, aerr
	}
	prefix := "arn:aws:sqs:" + s.cfg.Region + ":" + s.cfg.Account + ":"
	notFound := func(param string) *apiError {
		return errf(errResourceNotFound, "The resource that you specified for the %s parameter doesn't exist.", param)
	}
	srcName, ok := strings.CutPrefix(srcARN, prefix)
	if !ok {
		return nil, notFound("SourceArn")
	}
	src, aerr := s.queueNamed(srcName)
	if aerr != nil {
		return nil, notFound("SourceArn")
	}
	if dstARN != "" {
		dstName, ok := strings.CutPrefix(dstARN, prefix)
		if !ok {
			return nil, notFound("DestinationArn")
		}
		if _, aerr := s.queueNamed(dstName); aerr != nil {
			return nil, notFound("DestinationArn")
		}
	}
	if !s.isDeadLetterQueue(srcARN) {
		return nil, invalidParam("Source queue must be configured as a Dead Letter Queue.")
	}
	s.moves.mu.Lock()
	defer s.moves.mu.Unlock()
	for _, t := range s.moves.bySrc[srcName] {
		t.mu.Lock()
		busy := t.status == "RUNNING" || t.status == "CANCELLING"
		t.mu.Unlock()
		if busy {
			return nil, errf(errUnsupportedOperation, "There is already a task running. Only one active task is allowed for a source queue arn at a given time.")
		}
	}
	visible, _, _ := s.be.Counts(src.Group, src.Topic, true)
	var h [12]byte
	_, _ = rand.Read(h[:])
	ctx, cancel := context.WithCancel(s.ctx)
	t := &moveTask{handle: base64.RawURLEncoding.EncodeToString(h[:]), source: src, destination: dstARN,
		rate: int(rate), started: time.Now().UnixMilli(), toMove: visible, cancel: cancel, status: "RUNNING",
		principal: principalOf(r), host: hostOf(r)}
	if aerr := s.saveTask(t); aerr != nil {
		cancel()
		return nil, aerr
	}
	s.addTaskLocked(srcName, t)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.runMove(ctx, t)
	}()
	return map[string]any{"TaskHandle": t.handle}, nil
}

// addTaskLocked lists t under its source, keeping the 10 most recent
// (older ones are deleted from the store). s.moves.mu held.
func (s *Server) addTaskLocked(src string, t *moveTask) {
	if s.moves.bySrc == nil {
		s.moves.bySrc = map[string][]*moveTask{}
	}
	s.moves.bySrc[src] = append(s.moves.bySrc[src], t)
	if n := len(s.moves.bySrc[src]); n > 10 {
		for _, old := range s.moves.bySrc[src][:n-10] {
			_ = s.be.SaveTask(old.handle, nil)
		}
		s.moves.bySrc[src] = s.moves.bySrc[src][n-10:]
	}
}

// taskRecord is a task as stored.
type taskRecord struct {
	Handle      string `json:"handle"`
	Source      string `json:"source"` // queue name
	Destination string `json:"destination,omitempty"`
	Rate        int    `json:"rate,omitempty"`
	Started     int64  `json:"started"`
	ToMove      int64  `json:"to_move"`
	Moved       int64  `json:"moved"`
	Status      string `json:"status"`
	Failure     string `json:"failure,omitempty"`
	Principal   string `json:"principal,omitempty"`
	Host        string `json:"host,omitempty"`
}

func (s *Server) saveTask(t *moveTask) *apiError {
	t.mu.Lock()
	rec := taskRecord{Handle: t.handle, Source: t.source.Name, Destination: t.destination, Rate: t.rate, Started: t.started,
		ToMove: t.toMove, Moved: t.moved, Status: t.status, Failure: t.failure, Principal: t.principal, Host: t.host}
	t.mu.Unlock()
	b, err := json.Marshal(rec)
	if err == nil {
		err = s.be.SaveTask(t.handle, b)
	}
	if err != nil {
		s.lg.Warn("saving a message move task failed", zap.String("task", t.handle), zap.Error(err))
		return internal(err)
	}
	return nil
}

// loadTasks lists the stored tasks and resumes the running ones (New).
func (s *Server) loadTasks() error {
	raw, err := s.be.LoadTasks()
	if err != nil {
		return err
	}
	var recs []taskRecord
	for _, b := range raw {
		var r taskRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("sqs: move task record: %w", err)
		}
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Started < recs[j].Started })
	s.moves.mu.Lock()
	defer s.moves.mu.Unlock()
	for _, r := range recs {
		ctx, cancel := context.WithCancel(s.ctx)
		t := &moveTask{handle: r.Handle, destination: r.Destination, rate: r.Rate, started: r.Started, toMove: r.ToMove,
			cancel: cancel, principal: r.Principal, host: r.Host, status: r.Status, moved: r.Moved, failure: r.Failure}
		src := s.mu.queues[r.Source]
		if src == nil {
			src = &queue{Name: r.Source}
			if t.status == "RUNNING" || t.status == "CANCELLING" {
				t.status, t.failure = "FAILED", "the source queue does not exist"
			}
		}
		t.source = src
		s.addTaskLocked(r.Source, t)
		switch t.status {
		case "CANCELLING":
			t.status = "CANCELLED"
			_ = s.saveTask(t)
		case "RUNNING":
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.runMove(ctx, t)
			}()
			continue
		}
		cancel()
	}
	return nil
}

// isDeadLetterQueue reports whether some queue's RedrivePolicy targets arn.
func (s *Server) isDeadLetterQueue(arn string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.mu.queues {
		if v := q.Attrs["RedrivePolicy"]; v != "" {
			if p, _ := s.parseRedrive(v); p != nil && p.arn == arn {
				return true
			}
		}
	}
	return false
}

// end records t's outcome durably. A shutdown (the context ended
// without a cancellation) leaves it RUNNING, to resume.
func (s *Server) end(t *moveTask, status, failure string) {
	t.mu.Lock()
	if status == "CANCELLED" && !t.cancelled {
		t.mu.Unlock()
		_ = s.saveTask(t) // its progress
		return
	}
	t.status, t.failure = status, failure
	t.mu.Unlock()
	_ = s.saveTask(t)
}

// runMove moves messages until the source has none left or the task is
// cancelled.
func (s *Server) runMove(ctx context.Context, t *moveTask) {
	rate := t.rate
	if rate == 0 {
		rate = maxMoveRate
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for {
		if ctx.Err() != nil {
			s.end(t, "CANCELLED", "")
			return
		}
		recs, err := s.be.Receive(ctx, share.DirectReceive{Group: t.source.Group, Topic: t.source.Topic, Max: min(10, rate),
			Lock: 5 * time.Minute, Wait: time.Second})
		if ctx.Err() != nil {
			s.end(t, "CANCELLED", "")
			return
		}
		if err != nil {
			s.end(t, "FAILED", err.Error())
			return
		}
		if len(recs) == 0 {
			s.end(t, "COMPLETED", "")
			return
		}
		for i, rec := range recs {
			if ctx.Err() != nil { // cancelled: what it holds is visible again at once
				var back []share.DirectSettle
				for _, r := range recs[i:] {
					back = append(back, share.DirectSettle{Partition: r.Partition, Offset: r.Offset, DeliveryCount: r.DeliveryCount, Type: sharegroup.AckRelease})
				}
				_ = s.be.Settle(t.source.Group, t.source.TopicID, back)
				s.end(t, "CANCELLED", "")
				return
			}
			dst := t.destination
			if dst == "" {
				dst = s.sourceARN(headerValue(rec, share.DLQHeaderTopic))
			}
			q, aerr := s.queueByARN(dst)
			if aerr != nil {
				s.end(t, "FAILED", "the destination of a message does not exist: "+dst)
				return
			}
			if s.authz != nil && !s.authz(t.principal, t.host, acl.Write, acl.Topic, q.Topic) {
				s.end(t, "FAILED", "Access to the resource "+dst+" is denied.")
				return
			}
			part := int32(-1)
			if q.fifo() { // the message group's partition
				part = int32(fnv32(headerValue(rec, hdrGroup)) % uint32(max(s.be.Partitions(q.Topic), 1)))
			}
			if _, err := s.be.Append(q.Topic, part, []Record{moved(rec, s.derivedID(t.source, rec))}); err != nil {
				s.end(t, "FAILED", err.Error())
				return
			}
			errs := s.be.Settle(t.source.Group, t.source.TopicID, []share.DirectSettle{{Partition: rec.Partition, Offset: rec.Offset,
				DeliveryCount: rec.DeliveryCount, Type: sharegroup.AckAccept}})
			if errs[0] != nil {
				s.end(t, "FAILED", errs[0].Error())
				return
			}
			t.mu.Lock()
			t.moved++
			checkpoint := t.moved%50 == 0
			t.mu.Unlock()
			if checkpoint {
				_ = s.saveTask(t)
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
	}
}

// moved is a dead-lettered record as it goes back: its own headers
// (attributes) without the KIP-1191 ones and without its deduplication id
// (a FIFO destination's window would take it for its first copy and drop
// it), and its MessageId as a header, so that it keeps it (a FIFO
// message's derives from where it is otherwise).
func moved(rec share.DirectRecord, id string) Record {
	r := Record{Key: rec.Key, Value: rec.Value, Timestamp: time.Now()}
	hasID := false
	for _, h := range rec.Headers {
		if !strings.HasPrefix(h.Key, "__dlq.") && h.Key != hdrDedup {
			r.Headers = append(r.Headers, h)
			hasID = hasID || h.Key == hdrMessageID
		}
	}
	if !hasID {
		r.Headers = append(r.Headers, kmsg.Header{Key: hdrMessageID, Value: []byte(id)})
	}
	return r
}

func headerValue(rec share.DirectRecord, key string) string {
	for _, h := range rec.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func (s *Server) queueByARN(arn string) (*queue, *apiError) {
	name, ok := strings.CutPrefix(arn, "arn:aws:sqs:"+s.cfg.Region+":"+s.cfg.Account+":")
	if !ok {
		return nil, errf(errQueueDoesNotExist, "The specified queue does not exist.")
	}
	return s.queueNamed(name)
}

func (s *Server) listMessageMoveTasks(_ *http.Request, in input) (any, *apiError) {
	srcARN, aerr := in.required("SourceArn")
	if aerr != nil {
		return nil, aerr
	}
	max, aerr := in.bounded("MaxResults", 1, 10, 1, "must be between 1 and 10")
	if aerr != nil {
		return nil, aerr
	}
	src, aerr := s.queueByARN(srcARN)
	if aerr != nil {
		return nil, errf(errResourceNotFound, "The resource that you specified for the SourceArn parameter doesn't exist.")
	}
	s.moves.mu.Lock()
	tasks := append([]*moveTask(nil), s.moves.bySrc[src.Name]...)
	s.moves.mu.Unlock()
	out := []map[string]any{}
	for i := len(tasks) - 1; i >= 0 && int64(len(out)) < max; i-- {
		t := tasks[i]
		t.mu.Lock()
		e := map[string]any{"Status": t.status, "SourceArn": srcARN, "ApproximateNumberOfMessagesMoved": t.moved,
			"ApproximateNumberOfMessagesToMove": t.toMove, "StartedTimestamp": t.started}
		if t.status == "RUNNING" {
			e["TaskHandle"] = t.handle
		}
		if t.destination != "" {
			e["DestinationArn"] = t.destination
		}
		if t.rate > 0 {
			e["MaxNumberOfMessagesPerSecond"] = t.rate
		}
		if t.failure != "" {
			e["FailureReason"] = t.failure
		}
		t.mu.Unlock()
		out = append(out, e)
	}
	return map[string]any{"Results": out}, nil
}

func (s *Server) cancelMessageMoveTask(_ *http.Request, in input) (any, *apiError) {
	handle, aerr := in.required("TaskHandle")
	if aerr != nil {
		return nil, aerr
	}
	s.moves.mu.Lock()
	defer s.moves.mu.Unlock()
	for _, ts := range s.moves.bySrc {
		for _, t := range ts {
			if t.handle != handle {
				continue
			}
			t.mu.Lock()
			running := t.status == "RUNNING"
			if running {
				t.status, t.cancelled = "CANCELLING", true
			}
			moved := t.moved
			t.mu.Unlock()
			if !running {
				return nil, errf(errResourceNotFound, "Task does not exist.")
			}
			t.cancel()
			return map[string]any{"ApproximateNumberOfMessagesMoved": moved}, nil
		}
	}
	return nil, errf(errResourceNotFound, "Task does not exist.")
}
