package sqs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Config is the SQS API's configuration.
type Config struct {
	// AdvertisedURL is the scheme://host:port queue URLs carry
	// (shoal.sqs.advertised.url); empty: http:// and the request's Host.
	AdvertisedURL string
	// Account and Region go into queue ARNs and URLs.
	Account, Region string
	// Partitions is a new queue's topic's partition count.
	Partitions int32
	// Authorize, when set, authorizes each action with the broker's ACLs
	// (authz.go).
	Authorize Authorizer
	// Credentials, when set, are the access keys requests must be
	// SigV4-signed with (shoal.sqs.auth=sigv4); nil accepts every
	// request, signed or not (open mode).
	Credentials map[string]Credential
}

// Server serves the SQS API over HTTP.
type Server struct {
	cfg    Config
	be     Backend
	lg     *zap.Logger
	secret []byte
	boot   uint64 // this process's, in every receipt handle
	creds  map[string]Credential
	authz  Authorizer
	moves  moveTasks
	// groups is what QueueGroup answers, by share group
	// (publishLocked).
	groups atomic.Pointer[map[string]GroupSettings]
	// attempts are FIFO receives by ReceiveRequestAttemptId.
	attempts attemptCache
	// firsts are messages' first receive times
	// (ApproximateFirstReceiveTimestamp).
	firsts firstReceives
	// ctx ends at Close, which waits for wg (move tasks).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// Observe, if set, is told of every request: its action, the legacy
	// error code ("" on success) and how long it took (/metrics).
	Observe func(action, code string, took time.Duration)

	mu struct {
		sync.Mutex
		queues  map[string]*queue
		deleted map[string]time.Time // name → when deleted (QueueDeletedRecently)
		purged  map[string]time.Time // name → last PurgeQueue
	}
}

// New loads the queues and returns the server.
func New(cfg Config, be Backend, lg *zap.Logger) (*Server, error) {
	if cfg.Account == "" {
		cfg.Account = "000000000000"
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 1
	}
	s := &Server{cfg: cfg, be: be, lg: lg, creds: cfg.Credentials, authz: cfg.Authorize}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	var boot [8]byte
	_, _ = rand.Read(boot[:])
	s.boot = binary.BigEndian.Uint64(boot[:])
	var err error
	if s.secret, err = be.Secret(); err != nil {
		return nil, err
	}
	recs, err := be.LoadQueues()
	if err != nil {
		return nil, err
	}
	s.mu.queues = map[string]*queue{}
	s.mu.deleted = map[string]time.Time{}
	s.mu.purged = map[string]time.Time{}
	for name, rec := range recs {
		var q queue
		if err := json.Unmarshal(rec, &q); err != nil {
			return nil, fmt.Errorf("sqs: queue record %q: %w", name, err)
		}
		s.mu.queues[name] = &q
	}
	s.publishLocked()
	if err := s.loadTasks(); err != nil {
		return nil, err
	}
	return s, nil
}

// Close stops the move tasks and waits for them.
func (s *Server) Close() {
	s.cancel()
	s.wg.Wait()
}

// groupPrefix names a queue's share group: sqs.<queue>.
const groupPrefix = "sqs."

// maxRequestBytes bounds a request body: a 1 MiB batch and its framing.
const maxRequestBytes = 2 << 20

type action func(s *Server, r *http.Request, in input) (any, *apiError)

var actions = map[string]action{}

func register(name string, a action) { actions[name] = a }

// ServeHTTP answers one SQS request, in the protocol it came in.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	reqID := newRequestID()
	w.Header().Set("x-amzn-RequestId", reqID)
	query := r.Header.Get("X-Amz-Target") == ""
	body, aerr := readBody(r)
	if aerr == nil && s.creds != nil {
		var principal string
		if principal, aerr = s.verify(r, body, time.Now()); aerr == nil {
			r = withPrincipal(r, principal)
		}
	}
	var name string
	var in input
	if aerr == nil {
		name, in, aerr = s.decode(r, body, query)
	}
	if aerr == nil {
		a, ok := actions[name]
		if !ok {
			aerr = errf(errInvalidAction, "The action %s is not valid for this endpoint.", name)
		} else if aerr = s.authorize(r, name, in); aerr == nil {
			var out any
			if out, aerr = a(s, r, in); aerr == nil {
				if query {
					writeQuery(w, name, out, reqID)
				} else {
					writeJSON(w, http.StatusOK, out)
				}
				s.observe(name, "", start)
				return
			}
		}
	}
	if aerr.receiver {
		s.lg.Error("sqs request failed", zap.String("action", name), zap.String("error", aerr.msg))
	}
	if query {
		writeQueryError(w, aerr, reqID)
	} else {
		sender := "Sender"
		if aerr.receiver {
			sender = "Receiver"
		}
		w.Header().Set("x-amzn-query-error", aerr.legacy+";"+sender)
		writeJSON(w, aerr.status, map[string]string{"__type": aerr.shape, "message": aerr.msg})
	}
	s.observe(name, aerr.legacy, start)
}

func (s *Server) observe(name, code string, start time.Time) {
	if s.Observe != nil {
		if _, ok := actions[name]; !ok {
			name = "unknown"
		}
		s.Observe(name, code, time.Since(start))
	}
}

// readBody reads a request's body, at most maxRequestBytes.
func readBody(r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
	if err != nil {
		return nil, invalidParam("The request body could not be read: %v", err)
	}
	if len(body) > maxRequestBytes {
		return nil, errf(errBatchTooLong, "Batch requests cannot be longer than 1048576 bytes. You have sent %d bytes.", len(body))
	}
	return body, nil
}

// decode reads the action and its parameters: AWS JSON 1.0 (X-Amz-Target
// AmazonSQS.<Action>) or the Query protocol (Action=…, form or URL).
func (s *Server) decode(r *http.Request, body []byte, query bool) (name string, in input, _ *apiError) {
	if !query {
		target := r.Header.Get("X-Amz-Target")
		name, ok := strings.CutPrefix(target, "AmazonSQS.")
		if !ok {
			return target, nil, errf(errInvalidAction, "The action %s is not valid for this endpoint.", target)
		}
		in := input{}
		if len(bytes.TrimSpace(body)) > 0 {
			d := json.NewDecoder(bytes.NewReader(body))
			d.UseNumber()
			if err := d.Decode(&in); err != nil {
				return name, nil, serialization("the request body")
			}
		}
		return name, in, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return "", nil, invalidParam("The request body is not a form: %v", err)
	}
	for k, v := range r.URL.Query() {
		if _, ok := form[k]; !ok {
			form[k] = v
		}
	}
	name = form.Get("Action")
	if name == "" {
		return "", nil, errf(errMissingParameter, "The request must contain the parameter Action.")
	}
	in, aerr := queryInput(name, form)
	if aerr == nil && in["QueueUrl"] == nil && name != "CreateQueue" && name != "GetQueueUrl" && name != "ListQueues" {
		// Path-style addressing: POST /<account>/<queue>.
		if parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/"); len(parts) == 2 {
			in["QueueUrl"] = s.baseURL(r) + "/" + parts[0] + "/" + parts[1]
		}
	}
	return name, in, aerr
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = 500, []byte(`{"__type":"com.amazon.coral.service#InternalFailure","message":"encoding the response failed"}`)
	}
	writeBody(w, status, "application/x-amz-json-1.0", b)
}

// writeBody answers with body, its length given: net/http then writes
// it as it is, where without a length a body over 2 KiB went out
// chunked, in more writes and with chunk framing for the client to
// parse.
func writeBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// baseURL is the scheme://host[:port] of queue URLs.
func (s *Server) baseURL(r *http.Request) string {
	if s.cfg.AdvertisedURL != "" {
		return strings.TrimSuffix(s.cfg.AdvertisedURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func (s *Server) queueURL(r *http.Request, name string) string {
	return s.baseURL(r) + "/" + s.cfg.Account + "/" + name
}

func (s *Server) arn(name string) string {
	return "arn:aws:sqs:" + s.cfg.Region + ":" + s.cfg.Account + ":" + name
}

// queueFrom finds the queue a request's QueueUrl names: its last path
// segment is the name, the one before the account.
func (s *Server) queueFrom(in input) (*queue, *apiError) {
	u, err := in.required("QueueUrl")
	if err != nil {
		return nil, err
	}
	account, name, hasAccount := splitQueueURL(u)
	if hasAccount && account != s.cfg.Account {
		return nil, errf(errQueueDoesNotExist, "The specified queue does not exist.")
	}
	return s.queueNamed(name)
}

// splitQueueURL returns the queue name of a queue URL (or of a bare path
// or name), its last path segment, and the account before it if there is
// one.
func splitQueueURL(u string) (account, name string, hasAccount bool) {
	path := u
	if pu, err := url.Parse(u); err == nil && pu.Path != "" {
		path = pu.Path
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) >= 2 {
		account, hasAccount = parts[len(parts)-2], true
	}
	return account, parts[len(parts)-1], hasAccount
}

// arnName is the resource name an ARN ends with.
func arnName(arn string) string { return arn[strings.LastIndexByte(arn, ':')+1:] }

func (s *Server) queueNamed(name string) (*queue, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.mu.queues[name]
	if q == nil {
		return nil, errf(errQueueDoesNotExist, "The specified queue does not exist.")
	}
	return q, nil
}

// sortedNames returns the names of m, sorted.
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var errTopicExists = errors.New("sqs: topic exists")

// ErrTopicExists is what Backend.CreateTopic returns for an existing topic.
var ErrTopicExists = errTopicExists

// ErrTooLarge is what Backend.Append returns for records the topic's
// max.message.bytes refuses (an adopted topic's may be small).
var ErrTooLarge = errors.New("sqs: records larger than the topic's max.message.bytes")
