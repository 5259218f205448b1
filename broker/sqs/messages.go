package sqs

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/share"
	"github.com/shoal-mq/shoal/sharegroup"
)

func init() {
	register("SendMessage", (*Server).sendMessage)
	register("SendMessageBatch", (*Server).sendMessageBatch)
	register("ReceiveMessage", (*Server).receiveMessage)
	register("DeleteMessage", (*Server).deleteMessage)
	register("DeleteMessageBatch", (*Server).deleteMessageBatch)
	register("ChangeMessageVisibility", (*Server).changeMessageVisibility)
	register("ChangeMessageVisibilityBatch", (*Server).changeMessageVisibilityBatch)
}

// Record headers of an SQS message: the message id, each message
// attribute (its data type, a NUL, its value) and the system attributes.
// A Kafka consumer sees them; a Kafka producer's record without them is
// a message too (messageID).
const (
	hdrMessageID = "sqs.message-id"
	hdrAttr      = "sqs.attr."
	hdrSenderID  = "sqs.sender-id"
	hdrDelay     = "sqs.deliver-at" // Unix milliseconds, for a delayed message
	hdrGroup     = "sqs.group-id"   // MessageGroupId (FIFO queues: the ordered message group)
	hdrDedup     = "sqs.dedup-id"   // MessageDeduplicationId, or the body's SHA-256
	hdrTrace     = "AWSTraceHeader"
)

const (
	// maxInFlight is AWS's in-flight limit of a standard queue, and the
	// share-partition window's default (share.partition.max.record.locks).
	maxInFlight     = 120_000
	maxBatchEntries = 10
	maxBatchBytes   = 1 << 20
	maxMessageAttrs = 10
)

// outgoing is one message to send, validated.
type outgoing struct {
	id    string // batch entry id
	body  string
	attrs map[string]msgAttr
	trace string
	delay int64
	group string // MessageGroupId
	dedup string // FIFO: the deduplication id
}

func (s *Server) parseOutgoing(q *queue, in input) (outgoing, *apiError) {
	var o outgoing
	body, ok, err := in.str("MessageBody")
	if err != nil {
		return o, err
	}
	if !ok || body == "" {
		return o, missingParam("MessageBody")
	}
	if bad := invalidChar(body); bad {
		return o, errf(errInvalidMessageContents, "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF")
	}
	o.body = body
	if o.attrs, err = in.attrs("MessageAttributes"); err != nil {
		return o, err
	}
	if err := checkMsgAttrs(o.attrs); err != nil {
		return o, err
	}
	sys, err := in.attrs("MessageSystemAttributes")
	if err != nil {
		return o, err
	}
	for name, a := range sys {
		if name != hdrTrace || baseType(a.DataType) != "String" || a.String == "" {
			return o, invalidParam("Message system attribute name '%s' is invalid.", name)
		}
		o.trace = a.String
	}
	if o.delay, err = in.bounded("DelaySeconds", 0, 900, q.intAttr("DelaySeconds"), "DelaySeconds must be >= 0 and <= 900."); err != nil {
		return o, err
	}
	if n := int64(messageSize(o)); n > q.intAttr("MaximumMessageSize") {
		return o, invalidParam("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", q.intAttr("MaximumMessageSize"))
	}
	group, hasGroup, err := in.str("MessageGroupId")
	if err != nil {
		return o, err
	}
	dedup, hasDedup, err := in.str("MessageDeduplicationId")
	if err != nil {
		return o, err
	}
	if hasGroup && !fifoIDRE.MatchString(group) {
		return o, invalidParam("Value %s for parameter MessageGroupId is invalid. Reason: MessageGroupId can only include alphanumeric and punctuation characters. 1 to 128 in length.", group)
	}
	o.group = group
	if !q.fifo() {
		if hasDedup {
			return o, invalidParam("Value %s for parameter MessageDeduplicationId is invalid. Reason: The request includes a parameter that is not valid for this queue type.", dedup)
		}
		return o, nil // a MessageGroupId on a standard queue is kept (fair queues), not ordered
	}
	switch {
	case !hasGroup:
		return o, missingParam("MessageGroupId")
	case in["DelaySeconds"] != nil && o.delay != q.intAttr("DelaySeconds"):
		return o, invalidParam("Value %d for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.", o.delay)
	case hasDedup && !fifoIDRE.MatchString(dedup):
		return o, invalidParam("Value %s for parameter MessageDeduplicationId is invalid. Reason: MessageDeduplicationId can only include alphanumeric and punctuation characters. 1 to 128 in length.", dedup)
	case hasDedup:
		o.dedup = dedup
	case q.attr("ContentBasedDeduplication") == "true":
		sum := sha256.Sum256([]byte(body))
		o.dedup = hex.EncodeToString(sum[:])
	default:
		return o, invalidParam("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
	}
	return o, nil
}

// fifoIDRE is a MessageGroupId's or MessageDeduplicationId's alphabet:
// alphanumerics and punctuation, 1 to 128.
var fifoIDRE = regexp.MustCompile("^[A-Za-z0-9!\"#$%&'()*+,\\-./:;<=>?@\\[\\]^_`{|}~]{1,128}$")

// messageSize is what counts against MaximumMessageSize: the body and
// every attribute's name, type and value.
func messageSize(o outgoing) int {
	n := len(o.body)
	for name, a := range o.attrs {
		n += len(name) + len(a.DataType) + len(a.String) + len(a.Binary)
	}
	return n
}

func invalidChar(s string) bool {
	for _, r := range s {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD && r != utf8.RuneError:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return true
		}
	}
	return !utf8.ValidString(s)
}

var attrNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,256}$`)

func checkMsgAttrs(attrs map[string]msgAttr) *apiError {
	if len(attrs) > maxMessageAttrs {
		return invalidParam("Number of message attributes [%d] exceeds the allowed maximum [%d].", len(attrs), maxMessageAttrs)
	}
	for name, a := range attrs {
		lower := strings.ToLower(name)
		if !attrNameRE.MatchString(name) || strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon.") ||
			strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
			return invalidParam("Message (user) attribute name '%s' is invalid.", name)
		}
		switch baseType(a.DataType) {
		case "String", "Number":
			if a.String == "" {
				return invalidParam("Message (user) attribute '%s' must contain a non-empty value of type '%s'.", name, baseType(a.DataType))
			}
			if baseType(a.DataType) == "Number" {
				if _, err := strconv.ParseFloat(a.String, 64); err != nil {
					return invalidParam("Can't cast the value of message (user) attribute '%s' to a number.", name)
				}
			}
			if invalidChar(a.String) {
				return invalidParam("Message (user) attribute '%s' contains invalid characters.", name)
			}
		case "Binary":
			if len(a.Binary) == 0 {
				return invalidParam("Message (user) attribute '%s' must contain a non-empty value of type 'Binary'.", name)
			}
		case "":
			return invalidParam("The message (user) attribute '%s' must contain a non-empty message attribute type.", name)
		default:
			return invalidParam("The type of message (user) attribute '%s' is invalid. You must use only the following supported type prefixes: Binary, Number, String.", name)
		}
	}
	return nil
}

// record builds the log record of a message.
func (o outgoing) record(messageID string, now time.Time) Record {
	r := Record{Value: []byte(o.body), Timestamp: now}
	if messageID != "" { // a FIFO message's derives from its position
		r.Headers = append(r.Headers, kmsg.Header{Key: hdrMessageID, Value: []byte(messageID)})
	}
	if o.group != "" {
		r.Headers = append(r.Headers, kmsg.Header{Key: hdrGroup, Value: []byte(o.group)})
	}
	if o.dedup != "" {
		r.Headers = append(r.Headers, kmsg.Header{Key: hdrDedup, Value: []byte(o.dedup)})
	}
	for _, name := range sortedNames(o.attrs) {
		a := o.attrs[name]
		v := append([]byte(a.DataType), 0)
		if a.binaryType() {
			v = append(v, a.Binary...)
		} else {
			v = append(v, a.String...)
		}
		r.Headers = append(r.Headers, kmsg.Header{Key: hdrAttr + name, Value: v})
	}
	if o.trace != "" {
		r.Headers = append(r.Headers, kmsg.Header{Key: hdrTrace, Value: []byte(o.trace)})
	}
	if o.delay > 0 {
		at := now.Add(time.Duration(o.delay) * time.Second).UnixMilli()
		r.Headers = append(r.Headers, kmsg.Header{Key: hdrDelay, Value: []byte(strconv.FormatInt(at, 10))})
	}
	return r
}

// appendError is the answer to a failed append.
func appendError(err error) *apiError {
	if errors.Is(err, ErrTooLarge) {
		return invalidParam("One or more parameters are invalid. Reason: Message must be shorter than the topic's max.message.bytes (%v).", err)
	}
	return internal(err)
}

func newMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return uuidString(b)
}

func uuidString(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// sendResult is one sent message's answer.
func sendResult(o outgoing, id string) map[string]any {
	out := map[string]any{"MessageId": id, "MD5OfMessageBody": md5Hex([]byte(o.body))}
	if len(o.attrs) > 0 {
		out["MD5OfMessageAttributes"] = md5OfAttrs(o.attrs)
	}
	if o.trace != "" {
		out["MD5OfMessageSystemAttributes"] = md5OfAttrs(map[string]msgAttr{hdrTrace: {DataType: "String", String: o.trace}})
	}
	return out
}

func (s *Server) sendMessage(_ *http.Request, in input) (any, *apiError) {
	q, aerr := s.queueFrom(in)
	if aerr != nil {
		return nil, aerr
	}
	o, aerr := s.parseOutgoing(q, in)
	if aerr != nil {
		return nil, aerr
	}
	res, aerr := s.send(q, []outgoing{o})
	if aerr != nil {
		return nil, aerr
	}
	return res[0], nil
}

// send appends messages, answered once durable: a standard queue's in
// one batch, each with a fresh MessageId; a FIFO queue's by partition
// (hash of the message group), each MessageId and SequenceNumber derived
// from where it is, so that a duplicate the dedup window dropped is
// answered with its original's.
func (s *Server) send(q *queue, os []outgoing) ([]map[string]any, *apiError) {
	now := time.Now()
	out := make([]map[string]any, len(os))
	if !q.fifo() {
		recs := make([]Record, len(os))
		for i, o := range os {
			id := newMessageID()
			recs[i] = o.record(id, now)
			out[i] = sendResult(o, id)
		}
		if _, err := s.be.Append(q.Topic, -1, recs); err != nil {
			return nil, appendError(err)
		}
		return out, nil
	}
	n := max(s.be.Partitions(q.Topic), 1)
	byPart := map[int32][]int{}
	var order []int32
	for i, o := range os {
		p := int32(fnv32(o.group) % uint32(n))
		if _, ok := byPart[p]; !ok {
			order = append(order, p)
		}
		byPart[p] = append(byPart[p], i)
	}
	for _, p := range order {
		recs := make([]Record, 0, len(byPart[p]))
		for _, i := range byPart[p] {
			recs = append(recs, os[i].record("", now))
		}
		pos, err := s.be.Append(q.Topic, p, recs)
		if err != nil {
			return nil, appendError(err)
		}
		for k, i := range byPart[p] {
			r := sendResult(os[i], recordMessageID(q.TopicID, pos[k].Partition, pos[k].Offset))
			r["SequenceNumber"] = sequenceNumber(pos[k])
			out[i] = r
		}
	}
	return out, nil
}

// sequenceNumber is a FIFO message's SequenceNumber: its partition and
// offset as one decimal, increasing within a message group.
func sequenceNumber(p Position) string {
	return strconv.FormatInt(int64(p.Partition)+1, 10) + fmt.Sprintf("%019d", p.Offset)
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

var batchIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

// batchEntries checks a batch's entries: 1 to 10, ids valid and
// distinct.
func batchEntries(in input, member string) ([]input, []string, *apiError) {
	entries, aerr := in.list(member)
	if aerr != nil {
		return nil, nil, aerr
	}
	switch {
	case len(entries) == 0:
		return nil, nil, errf(errEmptyBatch, "There should be at least one %s in the request.", strings.TrimSuffix(member, "s")+"RequestEntry")
	case len(entries) > maxBatchEntries:
		return nil, nil, errf(errTooManyEntries, "Maximum number of entries per request are %d. You have sent %d.", maxBatchEntries, len(entries))
	}
	ids := make([]string, len(entries))
	seen := map[string]bool{}
	for i, e := range entries {
		id, _, aerr := e.str("Id")
		if aerr != nil {
			return nil, nil, aerr
		}
		if !batchIDRE.MatchString(id) {
			return nil, nil, errf(errInvalidBatchEntryID, "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")
		}
		if seen[id] {
			return nil, nil, errf(errBatchIDsNotDistinct, "Id %s repeated.", id)
		}
		seen[id] = true
		ids[i] = id
	}
	return entries, ids, nil
}

// batch is a batch action's queue and entries.
func (s *Server) batch(in input) (*queue, []input, []string, *apiError) {
	q, aerr := s.queueFrom(in)
	if aerr != nil {
		return nil, nil, nil, aerr
	}
	entries, ids, aerr := batchEntries(in, "Entries")
	return q, entries, ids, aerr
}

func failedEntry(id string, e *apiError) map[string]any {
	return map[string]any{"Id": id, "Code": e.legacy, "Message": e.msg, "SenderFault": !e.receiver}
}

func (s *Server) sendMessageBatch(_ *http.Request, in input) (any, *apiError) {
	q, entries, ids, aerr := s.batch(in)
	if aerr != nil {
		return nil, aerr
	}
	var (
		ok     []outgoing
		failed = []map[string]any{}
		total  int
	)
	for i, e := range entries {
		o, aerr := s.parseOutgoing(q, e)
		if aerr != nil {
			failed = append(failed, failedEntry(ids[i], aerr))
			continue
		}
		o.id = ids[i]
		total += messageSize(o)
		ok = append(ok, o)
	}
	if total > maxBatchBytes {
		return nil, errf(errBatchTooLong, "Batch requests cannot be longer than %d bytes. You have sent %d bytes.", maxBatchBytes, total)
	}
	success := []map[string]any{}
	if len(ok) > 0 {
		res, aerr := s.send(q, ok)
		if aerr != nil {
			return nil, aerr
		}
		for i, o := range ok {
			res[i]["Id"] = o.id
			success = append(success, res[i])
		}
	}
	return map[string]any{"Successful": success, "Failed": failed}, nil
}

// Receipt handles: version, topic id, partition, offset, delivery count,
// issue time and the issuing process's boot id, then an HMAC-SHA256
// (first 16 bytes) over them with the broker's secret, base64url. A
// forged or damaged handle fails the HMAC (ReceiptHandleIsInvalid); a
// genuine one of an earlier delivery names another delivery count, which
// the share-partition refuses (stale). Acquisitions do not survive a
// restart, and a record's delivery count goes back to its durable value
// with them, so a delivery after a restart may have the count of one
// before it: a handle of an earlier process (another boot id) is stale
// whatever its count.
const handleVersion = 1

type handle struct {
	topicID   [16]byte
	partition int32
	offset    int64
	count     int16
	issued    int64
	boot      uint64
	stale     bool // decodeHandle: of an earlier process
}

func (s *Server) encodeHandle(h handle, created int64) string {
	b := make([]byte, 0, handleLen)
	b = append(b, handleVersion)
	b = append(b, h.topicID[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(h.partition))
	b = binary.BigEndian.AppendUint64(b, uint64(h.offset))
	b = binary.BigEndian.AppendUint16(b, uint16(h.count))
	b = binary.BigEndian.AppendUint64(b, uint64(h.issued))
	b = binary.BigEndian.AppendUint64(b, s.boot)
	b = append(b, s.handleMAC(b, created)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// handleMAC is a handle's HMAC over its fields and the queue's creation
// time: a handle of an earlier queue of the name (an adopted topic keeps
// its id) does not validate.
func (s *Server) handleMAC(fields []byte, created int64) []byte {
	m := hmac.New(sha256.New, s.secret)
	m.Write(fields)
	var c [8]byte
	binary.BigEndian.PutUint64(c[:], uint64(created))
	m.Write(c[:])
	return m.Sum(nil)[:16]
}

const handleLen = 1 + 16 + 4 + 8 + 2 + 8 + 8 + 16

func (s *Server) decodeHandle(q *queue, text string) (handle, *apiError) {
	var h handle
	invalid := errf(errReceiptHandleIsInvalid, "The input receipt handle \"%s\" is not a valid receipt handle.", text)
	b, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil || len(b) != handleLen || b[0] != handleVersion {
		return h, invalid
	}
	if !hmac.Equal(s.handleMAC(b[:handleLen-16], q.Created), b[handleLen-16:]) {
		return h, invalid
	}
	copy(h.topicID[:], b[1:17])
	h.partition = int32(binary.BigEndian.Uint32(b[17:]))
	h.offset = int64(binary.BigEndian.Uint64(b[21:]))
	h.count = int16(binary.BigEndian.Uint16(b[29:]))
	h.issued = int64(binary.BigEndian.Uint64(b[31:]))
	h.boot = binary.BigEndian.Uint64(b[39:])
	h.stale = h.boot != s.boot
	if h.topicID != q.TopicID {
		return h, invalid // another queue's (or an earlier queue's of this name)
	}
	return h, nil
}

func (s *Server) receiveMessage(r *http.Request, in input) (any, *apiError) {
	q, aerr := s.queueFrom(in)
	if aerr != nil {
		return nil, aerr
	}
	max, aerr := in.bounded("MaxNumberOfMessages", 1, 10, 1, "Must be between 1 and 10, if provided.")
	if aerr != nil {
		return nil, aerr
	}
	vis, aerr := in.bounded("VisibilityTimeout", 0, 43200, q.intAttr("VisibilityTimeout"), "Must be between 0 and 43200, if provided.")
	if aerr != nil {
		return nil, aerr
	}
	wait, aerr := in.bounded("WaitTimeSeconds", 0, 20, q.intAttr("ReceiveMessageWaitTimeSeconds"), "Must be >= 0 and <= 20, if provided.")
	if aerr != nil {
		return nil, aerr
	}
	sysNames, aerr := in.strings("MessageSystemAttributeNames")
	if aerr != nil {
		return nil, aerr
	}
	old, aerr := in.strings("AttributeNames")
	if aerr != nil {
		return nil, aerr
	}
	sysNames = append(sysNames, old...)
	attrNames, aerr := in.strings("MessageAttributeNames")
	if aerr != nil {
		return nil, aerr
	}
	attempt, hasAttempt, aerr := in.str("ReceiveRequestAttemptId")
	if aerr != nil {
		return nil, aerr
	}
	if hasAttempt && !fifoIDRE.MatchString(attempt) {
		return nil, invalidParam("Value %s for parameter ReceiveRequestAttemptId is invalid. Reason: ReceiveRequestAttemptId can only include alphanumeric and punctuation characters. 1 to 128 in length.", attempt)
	}
	attemptKey := ""
	if hasAttempt && q.fifo() {
		// A retry within 5 minutes (and the visibility timeout) gets the
		// same messages and receipt handles.
		attemptKey = q.Name + "\x00" + strconv.FormatInt(q.Created, 10) + "\x00" + attempt
		if out, ok := s.attempts.get(attemptKey); ok {
			return out, nil
		}
	}
	recs, err := s.be.Receive(r.Context(), share.DirectReceive{
		Group: q.Group, Topic: q.Topic, Max: int(max),
		Lock: time.Duration(vis) * time.Second, Wait: time.Duration(wait) * time.Second,
		NotBefore: DeliverAt,
	})
	if err != nil {
		return nil, internal(err)
	}
	if len(recs) == 0 && !q.fifo() {
		// Nothing because the in-flight window is full: AWS's OverLimit
		// on a standard queue (a FIFO queue just returns nothing).
		if _, inFlight, _ := s.be.Counts(q.Group, q.Topic, false); inFlight >= maxInFlight {
			return nil, errf(errOverLimit, "The maximum number of in flight messages is reached")
		}
	}
	now := time.Now()
	msgs := make([]map[string]any, 0, len(recs))
	for _, rec := range recs {
		msgs = append(msgs, s.message(q, rec, now, sysNames, attrNames))
	}
	out := map[string]any{}
	if len(msgs) > 0 {
		out["Messages"] = msgs
	}
	if attemptKey != "" && len(msgs) > 0 { // an empty answer is not kept: a retry looks again
		s.attempts.put(attemptKey, out, time.Now().Add(min(5*time.Minute, time.Duration(vis)*time.Second)))
	}
	return out, nil
}

// attemptCache keeps FIFO receives by ReceiveRequestAttemptId.
type attemptCache struct {
	mu sync.Mutex
	m  map[string]attempt
}

type attempt struct {
	out map[string]any
	exp time.Time
}

func (c *attemptCache) get(key string) (map[string]any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.m[key]
	if !ok || time.Now().After(a.exp) {
		return nil, false
	}
	return a.out, true
}

func (c *attemptCache) put(key string, out map[string]any, exp time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]attempt{}
	}
	now := time.Now()
	if len(c.m) > 10000 { // bound it: drop what expired
		for k, a := range c.m {
			if now.After(a.exp) {
				delete(c.m, k)
			}
		}
	}
	c.m[key] = attempt{out, exp}
}

// MaxDelay is the longest DelaySeconds, 15 minutes: a message sent
// longer ago is not delayed (share.DelayScan.Horizon).
const MaxDelay = 900 * time.Second

// DeliverAt is when a record may be received: a delayed message's
// sqs.deliver-at, else now (share.DirectReceive.NotBefore and
// share.DelayScan.NotBefore).
func DeliverAt(rec share.DirectRecord) time.Time {
	for _, h := range rec.Headers {
		if h.Key == hdrDelay {
			if ms, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
				return time.UnixMilli(ms)
			}
		}
	}
	return time.Time{}
}

// message renders a received record as an SQS message.
func (s *Server) message(q *queue, rec share.DirectRecord, now time.Time, sysNames, attrNames []string) map[string]any {
	id := ""
	attrs := map[string]msgAttr{}
	var trace, sender, dlqSource, group, dedup string
	before := 0 // receives in the source queue, for a dead-lettered record
	for _, h := range rec.Headers {
		switch {
		case h.Key == share.DLQHeaderTopic:
			dlqSource = string(h.Value)
		case h.Key == share.DLQHeaderDeliveryCount:
			// The receives in the source count on in the dead-letter
			// queue, as AWS counts them.
			before, _ = strconv.Atoi(string(h.Value))
		case h.Key == hdrMessageID:
			id = string(h.Value)
		case strings.HasPrefix(h.Key, hdrAttr):
			typ, val, ok := bytes.Cut(h.Value, []byte{0})
			if !ok {
				continue
			}
			a := msgAttr{DataType: string(typ)}
			if a.binaryType() {
				a.Binary = val
			} else {
				a.String = string(val)
			}
			attrs[strings.TrimPrefix(h.Key, hdrAttr)] = a
		case h.Key == hdrTrace:
			trace = string(h.Value)
		case h.Key == hdrSenderID:
			sender = string(h.Value)
		case h.Key == hdrGroup:
			group = string(h.Value)
		case h.Key == hdrDedup:
			dedup = string(h.Value)
		}
	}
	if id == "" {
		id = s.derivedID(q, rec) // a FIFO message's, or a Kafka producer's record
	}
	if sender == "" {
		sender = s.cfg.Account
	}
	body := string(rec.Value)
	m := map[string]any{
		"MessageId":     id,
		"ReceiptHandle": s.encodeHandle(handle{topicID: q.TopicID, partition: rec.Partition, offset: rec.Offset, count: rec.DeliveryCount, issued: now.UnixMilli()}, q.Created),
		"Body":          body,
		"MD5OfBody":     md5Hex(rec.Value),
	}
	sys := map[string]string{
		"SenderId":                sender,
		"SentTimestamp":           strconv.FormatInt(rec.Timestamp, 10),
		"ApproximateReceiveCount": strconv.Itoa(before + int(rec.DeliveryCount)),
	}
	if before == 0 { // a dead-lettered record's first receive was in its source queue
		k := msgKey{q.TopicID, rec.Partition, rec.Offset}
		if at, ok := s.firsts.first(k, now.UnixMilli(), rec.DeliveryCount == 1); ok {
			sys["ApproximateFirstReceiveTimestamp"] = strconv.FormatInt(at, 10)
		}
	}
	if trace != "" {
		sys[hdrTrace] = trace
	}
	if dlqSource != "" {
		if arn := s.sourceARN(dlqSource); arn != "" {
			sys["DeadLetterQueueSourceArn"] = arn
		}
	}
	if group != "" {
		sys["MessageGroupId"] = group
	}
	if q.fifo() {
		sys["SequenceNumber"] = sequenceNumber(Position{rec.Partition, rec.Offset})
		if dedup != "" {
			sys["MessageDeduplicationId"] = dedup
		}
	}
	chosen := map[string]string{}
	for _, n := range sysNames {
		if n == "All" {
			chosen = sys
			break
		}
		if v, ok := sys[n]; ok {
			chosen[n] = v
		}
	}
	if len(chosen) > 0 {
		m["Attributes"] = chosen
	}
	picked := map[string]msgAttr{}
	for name, a := range attrs {
		for _, want := range attrNames {
			if want == "All" || want == ".*" || want == name ||
				strings.HasSuffix(want, ".*") && strings.HasPrefix(name, strings.TrimSuffix(want, "*")) {
				picked[name] = a
				break
			}
		}
	}
	if len(picked) > 0 {
		out := map[string]any{}
		for name, a := range picked {
			v := map[string]any{"DataType": a.DataType}
			if a.binaryType() {
				v["BinaryValue"] = base64.StdEncoding.EncodeToString(a.Binary)
			} else {
				v["StringValue"] = a.String
			}
			out[name] = v
		}
		m["MessageAttributes"] = out
		m["MD5OfMessageAttributes"] = md5OfAttrs(picked)
	}
	return m
}

// derivedID is the MessageId of a record without an sqs.message-id
// header: from where it is, or, for a dead-letter copy, from where its
// original is (the KIP-1191 headers), so that it keeps its MessageId.
func (s *Server) derivedID(q *queue, rec share.DirectRecord) string {
	if topic := headerValue(rec, share.DLQHeaderTopic); topic != "" {
		if id, ok := s.be.TopicID(topic); ok {
			p, perr := strconv.ParseInt(headerValue(rec, share.DLQHeaderPartition), 10, 32)
			off, oerr := strconv.ParseInt(headerValue(rec, share.DLQHeaderOffset), 10, 64)
			if perr == nil && oerr == nil {
				return recordMessageID(id, int32(p), off)
			}
		}
	}
	return recordMessageID(q.TopicID, rec.Partition, rec.Offset)
}

// recordMessageID is the MessageId of a record that carries none (a
// Kafka producer's): a UUID derived from its topic, partition and offset,
// the same at every delivery.
func recordMessageID(topicID [16]byte, partition int32, offset int64) string {
	h := sha256.New()
	h.Write(topicID[:])
	_ = binary.Write(h, binary.BigEndian, partition)
	_ = binary.Write(h, binary.BigEndian, offset)
	var b [16]byte
	copy(b[:], h.Sum(nil))
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	return uuidString(b)
}

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// md5OfAttrs is MD5OfMessageAttributes as AWS computes it: the
// attributes by name, each its name, data type (4-byte big-endian
// lengths first), a transport byte (1 string, 2 binary) and its value.
func md5OfAttrs(attrs map[string]msgAttr) string {
	h := md5.New()
	put := func(b []byte) {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(b)))
		h.Write(l[:])
		h.Write(b)
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a := attrs[n]
		put([]byte(n))
		put([]byte(a.DataType))
		if a.binaryType() {
			h.Write([]byte{2})
			put(a.Binary)
		} else {
			h.Write([]byte{1})
			put([]byte(a.String))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// settle applies settlements of handles; results[i] is nil, or the
// entry's error (stale: errStale).
func (s *Server) settle(q *queue, hs []handle, typ sharegroup.AckType, lock time.Duration) []error {
	errs := make([]error, len(hs))
	var entries []share.DirectSettle
	var at []int
	for i, h := range hs {
		if h.stale {
			errs[i] = share.ErrStale
			continue
		}
		entries = append(entries, share.DirectSettle{Partition: h.partition, Offset: h.offset, DeliveryCount: h.count, Type: typ, Lock: lock})
		at = append(at, i)
	}
	if len(entries) > 0 {
		var gone []msgKey
		for k, err := range s.be.Settle(q.Group, q.TopicID, entries) {
			errs[at[k]] = err
			if err == nil && typ == sharegroup.AckAccept {
				gone = append(gone, msgKey{q.TopicID, entries[k].Partition, entries[k].Offset})
			}
		}
		s.firsts.forget(gone)
	}
	return errs
}

// entryHandle is the checked ReceiptHandle of a request or batch entry.
func (s *Server) entryHandle(q *queue, in input) (handle, *apiError) {
	text, aerr := in.required("ReceiptHandle")
	if aerr != nil {
		return handle{}, aerr
	}
	return s.decodeHandle(q, text)
}

// deleted is the answer to a deletion's settlement. A stale handle (the
// message was received again since, or is visible again) succeeds
// without deleting it, as AWS documents.
func deleted(err error) *apiError {
	if err != nil && !errors.Is(err, share.ErrStale) {
		return internal(err)
	}
	return nil
}

func (s *Server) deleteMessage(_ *http.Request, in input) (any, *apiError) {
	q, aerr := s.queueFrom(in)
	if aerr != nil {
		return nil, aerr
	}
	h, aerr := s.entryHandle(q, in)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := deleted(s.settle(q, []handle{h}, sharegroup.AckAccept, 0)[0]); aerr != nil {
		return nil, aerr
	}
	return map[string]any{}, nil
}

func (s *Server) deleteMessageBatch(_ *http.Request, in input) (any, *apiError) {
	q, entries, ids, aerr := s.batch(in)
	if aerr != nil {
		return nil, aerr
	}
	failed := []map[string]any{}
	var hs []handle
	var hIDs []string
	for i, e := range entries {
		h, aerr := s.entryHandle(q, e)
		if aerr != nil {
			failed = append(failed, failedEntry(ids[i], aerr))
			continue
		}
		hs, hIDs = append(hs, h), append(hIDs, ids[i])
	}
	success := []map[string]any{}
	for i, err := range s.settle(q, hs, sharegroup.AckAccept, 0) { // one write for all
		if aerr := deleted(err); aerr != nil {
			failed = append(failed, failedEntry(hIDs[i], aerr))
			continue
		}
		success = append(success, map[string]any{"Id": hIDs[i]})
	}
	return map[string]any{"Successful": success, "Failed": failed}, nil
}

// visibility parses a ChangeMessageVisibility timeout into the
// settlement it is: RELEASE for 0 (visible at once), else RENEW.
func visibility(in input) (sharegroup.AckType, time.Duration, *apiError) {
	if _, ok := in["VisibilityTimeout"]; !ok {
		return 0, 0, missingParam("VisibilityTimeout")
	}
	v, aerr := in.bounded("VisibilityTimeout", 0, 43200, 0, "VisibilityTimeout must be between 0 and 43200 seconds.")
	if aerr != nil {
		return 0, 0, aerr
	}
	if v == 0 {
		return sharegroup.AckRelease, 0, nil
	}
	return sharegroup.AckRenew, time.Duration(v) * time.Second, nil
}

// changeVisibility applies one ChangeMessageVisibility (a request or a
// batch entry, each with its own timeout).
func (s *Server) changeVisibility(q *queue, in input) *apiError {
	text, aerr := in.required("ReceiptHandle")
	if aerr != nil {
		return aerr
	}
	typ, lock, aerr := visibility(in)
	if aerr != nil {
		return aerr
	}
	h, aerr := s.decodeHandle(q, text)
	if aerr != nil {
		return aerr
	}
	if err := s.settle(q, []handle{h}, typ, lock)[0]; errors.Is(err, share.ErrStale) {
		return errf(errMessageNotInflight, "Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", text)
	} else if err != nil {
		return internal(err)
	}
	return nil
}

func (s *Server) changeMessageVisibility(_ *http.Request, in input) (any, *apiError) {
	q, aerr := s.queueFrom(in)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := s.changeVisibility(q, in); aerr != nil {
		return nil, aerr
	}
	return map[string]any{}, nil
}

func (s *Server) changeMessageVisibilityBatch(_ *http.Request, in input) (any, *apiError) {
	q, entries, ids, aerr := s.batch(in)
	if aerr != nil {
		return nil, aerr
	}
	failed := []map[string]any{}
	success := []map[string]any{}
	for i, e := range entries {
		if aerr := s.changeVisibility(q, e); aerr != nil {
			failed = append(failed, failedEntry(ids[i], aerr))
			continue
		}
		success = append(success, map[string]any{"Id": ids[i]})
	}
	return map[string]any{"Successful": success, "Failed": failed}, nil
}
