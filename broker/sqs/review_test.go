package sqs

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/shoal-mq/shoal/broker/acl"
	"github.com/shoal-mq/shoal/broker/share"
)

type fakeBackend struct {
	inFlight int64 // what Counts answers
	mu       sync.Mutex
	topics   map[string][16]byte
	pending  map[string][]share.DirectRecord // topic → records a Receive hands out once
	appended map[string]int
}

func newFake() *fakeBackend {
	return &fakeBackend{topics: map[string][16]byte{}, pending: map[string][]share.DirectRecord{}, appended: map[string]int{}}
}

func (f *fakeBackend) CreateTopic(name string, _ int32, _ map[string]string) ([16]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := [16]byte{byte(len(f.topics) + 1)}
	f.topics[name] = id
	return id, nil
}
func (f *fakeBackend) DeleteTopic(string, string, bool) error     { return nil }
func (f *fakeBackend) AlterTopic(string, map[string]string) error { return nil }
func (f *fakeBackend) TopicID(n string) ([16]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.topics[n]
	return id, ok
}
func (f *fakeBackend) Counts(string, string, bool) (int64, int64, int64) { return 0, f.inFlight, 0 }
func (f *fakeBackend) Purge(string, string) error                        { return nil }
func (f *fakeBackend) SaveQueue(string, []byte) error                    { return nil }
func (f *fakeBackend) LoadQueues() (map[string][]byte, error)            { return nil, nil }
func (f *fakeBackend) SaveTask(string, []byte) error                     { return nil }
func (f *fakeBackend) LoadTasks() (map[string][]byte, error)             { return nil, nil }
func (f *fakeBackend) Secret() ([]byte, error)                           { return []byte("k"), nil }
func (f *fakeBackend) Append(topic string, _ int32, recs []Record) ([]Position, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.appended[topic] += len(recs)
	return make([]Position, len(recs)), nil
}
func (f *fakeBackend) Partitions(string) int32 { return 1 }
func (f *fakeBackend) Receive(_ context.Context, r share.DirectReceive) ([]share.DirectRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.pending[r.Topic]
	delete(f.pending, r.Topic)
	return out, nil
}
func (f *fakeBackend) Settle(_ string, _ [16]byte, e []share.DirectSettle) []error {
	return make([]error, len(e))
}

func call(t *testing.T, s *Server, action string, body map[string]any) (int, map[string]any) {
	b, _ := json.Marshal(body)
	req := httptest.NewRequest("POST", "http://sqs.local/", bytes.NewReader(b))
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	var out map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &out)
	return w.Code, out
}

// Regression tests from a review. StartMessageMoveTask was authorized on
// the queue a QueueUrl named when the request carried one, but moved the
// queue SourceArn names; the destination's WRITE was never checked.
func TestReviewMoveTaskAuthorization(t *testing.T) {
	fb := newFake()
	s, err := New(Config{}, fb, zap.NewNop())
	require.NoError(t, err)
	defer s.Close()
	for _, n := range []string{"dlq", "mine", "target"} {
		code, out := call(t, s, "CreateQueue", map[string]any{"QueueName": n})
		require.Equal(t, 200, code, out)
	}
	code, out := call(t, s, "CreateQueue", map[string]any{"QueueName": "src", "Attributes": map[string]any{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":2}`}})
	require.Equal(t, 200, code, out)
	// Mallory may READ only topic "mine" and group "sqs.mine"; nothing on dlq or target.
	s.authz = func(_, _ string, op acl.Operation, typ acl.ResourceType, name string) bool {
		return op == acl.Read && (typ == acl.Topic && name == "mine" || typ == acl.Group && name == "sqs.mine")
	}
	code, _ = call(t, s, "StartMessageMoveTask", map[string]any{"SourceArn": "arn:aws:sqs:us-east-1:000000000000:dlq"})
	require.Equal(t, 403, code, "denied without a QueueUrl")
	fb.mu.Lock()
	fb.pending["dlq"] = []share.DirectRecord{{Offset: 0, DeliveryCount: 1, Value: []byte("secret")}}
	fb.mu.Unlock()
	code, out = call(t, s, "StartMessageMoveTask", map[string]any{"SourceArn": "arn:aws:sqs:us-east-1:000000000000:dlq",
		"DestinationArn": "arn:aws:sqs:us-east-1:000000000000:target", "QueueUrl": "http://sqs.local/000000000000/mine"})
	require.Equal(t, 403, code, "authorized on the queue SourceArn names, not on a QueueUrl also sent: %v", out)
	time.Sleep(100 * time.Millisecond)
	fb.mu.Lock()
	require.Zero(t, fb.appended["target"])
	fb.mu.Unlock()
}

// SetQueueAttributes overwrote *q under s.mu while the message actions
// read q's fields without it (go test -race).
func TestReviewQueueRace(t *testing.T) {
	s, err := New(Config{}, newFake(), zap.NewNop())
	require.NoError(t, err)
	defer s.Close()
	call(t, s, "CreateQueue", map[string]any{"QueueName": "q"})
	url := "http://sqs.local/000000000000/q"
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 50; i++ {
			call(t, s, "SetQueueAttributes", map[string]any{"QueueUrl": url, "Attributes": map[string]any{"VisibilityTimeout": "40"}})
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 50; i++ {
			call(t, s, "SendMessage", map[string]any{"QueueUrl": url, "MessageBody": "x"})
		}
	}()
	wg.Wait()
	_ = http.StatusOK
}

// READ on the dead-letter queue alone was enough to append into any queue.
func TestReviewMoveTaskDestinationUnchecked(t *testing.T) {
	fb := newFake()
	s, err := New(Config{}, fb, zap.NewNop())
	require.NoError(t, err)
	defer s.Close()
	for _, n := range []string{"dlq", "target"} {
		call(t, s, "CreateQueue", map[string]any{"QueueName": n})
	}
	call(t, s, "CreateQueue", map[string]any{"QueueName": "src", "Attributes": map[string]any{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":2}`}})
	s.authz = func(_, _ string, op acl.Operation, typ acl.ResourceType, name string) bool {
		return op == acl.Read && (typ == acl.Topic && name == "dlq" || typ == acl.Group && name == "sqs.dlq")
	}
	fb.mu.Lock()
	fb.pending["dlq"] = []share.DirectRecord{{Offset: 0, DeliveryCount: 1, Value: []byte("x")}}
	fb.mu.Unlock()
	code, _ := call(t, s, "StartMessageMoveTask", map[string]any{"SourceArn": "arn:aws:sqs:us-east-1:000000000000:dlq",
		"DestinationArn": "arn:aws:sqs:us-east-1:000000000000:target"})
	require.Equal(t, 403, code, "WRITE on the destination is needed")
	// Without DestinationArn each message's source is checked as it
	// moves: the task fails, nothing appended.
	code, _ = call(t, s, "StartMessageMoveTask", map[string]any{"SourceArn": "arn:aws:sqs:us-east-1:000000000000:dlq"})
	require.Equal(t, 200, code)
	time.Sleep(100 * time.Millisecond)
	fb.mu.Lock()
	require.Zero(t, fb.appended["target"])
	require.Zero(t, fb.appended["src"])
	fb.mu.Unlock()
}

// A standard queue whose in-flight window is full answers OverLimit, as
// AWS does at 120,000 in flight; a FIFO queue just returns nothing.
func TestOverLimit(t *testing.T) {
	fb := newFake()
	fb.inFlight = maxInFlight
	s, err := New(Config{}, fb, zap.NewNop())
	require.NoError(t, err)
	defer s.Close()
	call(t, s, "CreateQueue", map[string]any{"QueueName": "full"})
	code, out := call(t, s, "ReceiveMessage", map[string]any{"QueueUrl": "http://sqs.local/000000000000/full"})
	require.Equal(t, 403, code)
	require.Equal(t, "com.amazonaws.sqs#OverLimit", out["__type"])
	call(t, s, "CreateQueue", map[string]any{"QueueName": "full.fifo", "Attributes": map[string]any{"FifoQueue": "true"}})
	code, _ = call(t, s, "ReceiveMessage", map[string]any{"QueueUrl": "http://sqs.local/000000000000/full.fifo"})
	require.Equal(t, 200, code)
}
