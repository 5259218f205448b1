package integration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn is one TCP connection speaking hand-built Kafka frames, for tests
// that need control over bytes, versions and pipelining.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	fmtr *kmsg.RequestFormatter
	corr int32
	// maxVersions holds the broker's max version per API key, filled by
	// negotiate. Empty means requests keep the version they were given.
	maxVersions map[int16]int16
}

// dialRaw connects to addr and negotiates versions with ApiVersions.
func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c := dialRawNoNegotiate(t, addr)
	c.negotiate()
	return c
}

func dialRawNoNegotiate(t *testing.T, addr string) *rawConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err, "dial %s", addr)
	t.Cleanup(func() { _ = conn.Close() })
	return &rawConn{
		t:    t,
		conn: conn,
		fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID("shoal-raw")),
	}
}

// negotiate asks for ApiVersions (v3, the first flexible version every
// current client sends) and records the broker's ranges.
func (c *rawConn) negotiate() {
	c.t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName = "shoal-integration"
	req.ClientSoftwareVersion = "0.0.1"
	resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
	require.Zero(c.t, resp.ErrorCode, "ApiVersions error")
	c.maxVersions = make(map[int16]int16, len(resp.ApiKeys))
	for _, k := range resp.ApiKeys {
		c.maxVersions[k.ApiKey] = k.MaxVersion
	}
}

// pick sets req's version to the highest version both kmsg and the broker
// know, unless the broker did not list the key (then the test's version
// stays and the broker's answer is what the test checks).
func (c *rawConn) pick(req kmsg.Request) {
	if max, ok := c.maxVersions[req.Key()]; ok {
		v := req.MaxVersion()
		if max < v {
			v = max
		}
		req.SetVersion(v)
	}
}

// send writes one request frame with the given correlation id.
func (c *rawConn) send(req kmsg.Request, corr int32) {
	c.t.Helper()
	c.writeRaw(c.fmtr.AppendRequest(nil, req, corr))
}

func (c *rawConn) writeRaw(b []byte) {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetWriteDeadline(time.Now().Add(10*time.Second)))
	_, err := c.conn.Write(b)
	require.NoError(c.t, err, "write %d bytes", len(b))
}

// readFrame reads one response frame and returns its correlation id and
// the bytes after it (header tags, if any, and body).
func (c *rawConn) readFrame(timeout time.Duration) (int32, []byte, error) {
	if err := c.conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return 0, nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return 0, nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 256<<20 {
		return 0, nil, fmt.Errorf("response frame size %d", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c.conn, buf); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:], nil
}

// readResponse reads one response and decodes it as the response to req.
func (c *rawConn) readResponse(req kmsg.Request, timeout time.Duration) (int32, kmsg.Response, error) {
	corr, body, err := c.readFrame(timeout)
	if err != nil {
		return 0, nil, err
	}
	resp := req.ResponseKind()
	// Flexible responses have a tagged-field section in the header, except
	// ApiVersions, whose response header is always v0.
	if resp.IsFlexible() && req.Key() != 18 {
		body, err = skipTags(body)
		if err != nil {
			return corr, nil, fmt.Errorf("response header tags: %w", err)
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return corr, nil, fmt.Errorf("decode %s v%d response: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return corr, resp, nil
}

// roundTripAt is roundTrip at a fixed version (lowered to the broker's max).
func (c *rawConn) roundTripAt(req kmsg.Request, version int16) kmsg.Response {
	c.t.Helper()
	c.pick(req)
	if req.GetVersion() > version {
		req.SetVersion(version)
	}
	c.corr++
	corr := c.corr
	c.send(req, corr)
	got, resp, err := c.readResponse(req, 20*time.Second)
	require.NoError(c.t, err, "%s v%d", kmsg.NameForKey(req.Key()), req.GetVersion())
	require.Equal(c.t, corr, got, "correlation id of %s response", kmsg.NameForKey(req.Key()))
	return resp
}

// roundTrip picks a version, sends req and returns its response, checking
// the correlation id.
func (c *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	c.pick(req)
	c.corr++
	corr := c.corr
	c.send(req, corr)
	got, resp, err := c.readResponse(req, 20*time.Second)
	require.NoError(c.t, err, "%s v%d", kmsg.NameForKey(req.Key()), req.GetVersion())
	require.Equal(c.t, corr, got, "correlation id of %s response", kmsg.NameForKey(req.Key()))
	return resp
}

// exchange sends req and reads its response without touching t, so it can
// run on another goroutine; roundTrip is the usual form.
func (c *rawConn) exchange(req kmsg.Request, corr int32, frame []byte, timeout time.Duration) (kmsg.Response, error) {
	if err := c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := c.conn.Write(frame); err != nil {
		return nil, err
	}
	got, resp, err := c.readResponse(req, timeout)
	if err != nil {
		return nil, err
	}
	if got != corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	return resp, nil
}

// prepare picks req's version and encodes it with the next correlation id.
func (c *rawConn) prepare(req kmsg.Request) (int32, []byte) {
	c.pick(req)
	c.corr++
	return c.corr, c.fmtr.AppendRequest(nil, req, c.corr)
}

// expectClosed waits for the broker to close the connection. Bytes the
// broker sends before closing are logged, not failed on.
func (c *rawConn) expectClosed(within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	require.NoError(c.t, c.conn.SetReadDeadline(deadline))
	buf := make([]byte, 4096)
	got := 0
	for {
		n, err := c.conn.Read(buf)
		got += n
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatalf("connection still open %v after the bad frame (read %d bytes meanwhile)", within, got)
		}
		if got > 0 {
			c.t.Logf("broker sent %d bytes before closing", got)
		}
		return // EOF or reset: closed
	}
}

func skipTags(b []byte) ([]byte, error) {
	n, used := binary.Uvarint(b)
	if used <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[used:]
	for i := uint64(0); i < n; i++ {
		_, used = binary.Uvarint(b)
		if used <= 0 {
			return nil, errors.New("bad tag id")
		}
		b = b[used:]
		size, used := binary.Uvarint(b)
		if used <= 0 || uint64(len(b)-used) < size {
			return nil, errors.New("bad tag size")
		}
		b = b[used+int(size):]
	}
	return b, nil
}

// ---- record batches ----

// testRecord is one record to put in a hand-built batch.
type testRecord struct {
	Key, Value []byte
	Headers    []kmsg.Header
}

// batchSpec describes a hand-built record batch.
type batchSpec struct {
	ProducerID    int64 // -1 for a non-idempotent batch
	ProducerEpoch int16
	FirstSequence int32
	Timestamp     int64 // first and max timestamp, ms
	Records       []testRecord
}

func plainBatch(ts int64, recs ...testRecord) batchSpec {
	return batchSpec{ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, Timestamp: ts, Records: recs}
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// encode builds a magic-2 uncompressed batch with a correct length and CRC.
func (s batchSpec) encode() []byte {
	var body []byte
	for i, r := range s.Records {
		rec := kmsg.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value, Headers: r.Headers}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1) // minus the 1-byte varint of Length 0
		body = rec.AppendTo(body)
	}
	b := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      int32(len(s.Records) - 1),
		FirstTimestamp:       s.Timestamp,
		MaxTimestamp:         s.Timestamp,
		ProducerID:           s.ProducerID,
		ProducerEpoch:        s.ProducerEpoch,
		FirstSequence:        s.FirstSequence,
		NumRecords:           int32(len(s.Records)),
		Records:              body,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	fixCRC(raw)
	return raw
}

// fixCRC recomputes the CRC-32C of a batch (attributes to end).
func fixCRC(batch []byte) {
	binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], crc32c))
}

// fetchedRecord is a record decoded from a raw fetch response.
type fetchedRecord struct {
	Offset    int64
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []kmsg.Header
}

// decodeBatches decodes uncompressed batches from a fetch response; it
// fails the test on a compressed or malformed batch.
func decodeBatches(t *testing.T, data []byte) []fetchedRecord {
	t.Helper()
	var out []fetchedRecord
	for len(data) > 0 {
		if len(data) < 12 {
			break // a partial batch at the end of a fetch is allowed
		}
		length := int(int32(binary.BigEndian.Uint32(data[8:])))
		if len(data) < 12+length {
			break
		}
		raw := data[:12+length]
		data = data[12+length:]
		var b kmsg.RecordBatch
		require.NoError(t, b.ReadFrom(raw), "decode batch")
		require.Equal(t, int8(2), b.Magic, "batch magic")
		require.Equal(t, uint32(b.CRC), crc32.Checksum(raw[21:], crc32c), "batch CRC at offset %d", b.FirstOffset)
		require.Zero(t, b.Attributes&0x07, "raw decoder handles uncompressed batches only")
		if b.Attributes&0x20 != 0 {
			continue // control batch
		}
		recs := b.Records
		for i := int32(0); i < b.NumRecords; i++ {
			l, n := binary.Varint(recs)
			require.Greater(t, n, 0, "batch at offset %d: record %d of %d: no length varint (the batch holds fewer records than it declares)", b.FirstOffset, i, b.NumRecords)
			end := n + int(l)
			require.LessOrEqual(t, end, len(recs), "batch at offset %d: record %d of %d runs past the batch", b.FirstOffset, i, b.NumRecords)
			var r kmsg.Record
			require.NoError(t, r.ReadFrom(recs[:end]), "batch at offset %d: decode record %d", b.FirstOffset, i)
			recs = recs[end:]
			out = append(out, fetchedRecord{
				Offset:    b.FirstOffset + int64(r.OffsetDelta),
				Timestamp: b.FirstTimestamp + r.TimestampDelta64,
				Key:       r.Key,
				Value:     r.Value,
				Headers:   r.Headers,
			})
		}
	}
	return out
}

// ---- request builders ----

// metadata asks for one topic's metadata, uncached.
func (c *rawConn) metadata(topic string) kmsg.MetadataResponseTopic {
	c.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	require.Len(c.t, resp.Topics, 1)
	return resp.Topics[0]
}

// topicID asks for topic's metadata and returns its id (zero if the broker
// does not report ids).
func (c *rawConn) topicID(topic string) [16]byte {
	c.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	require.Len(c.t, resp.Topics, 1)
	require.Zero(c.t, resp.Topics[0].ErrorCode, "metadata for %s", topic)
	return resp.Topics[0].TopicID
}

func produceRequest(topic string, id [16]byte, partition int32, acks int16, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = acks
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rt.TopicID = id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produce sends one batch with acks=-1 and returns the partition's result.
func (c *rawConn) produce(topic string, id [16]byte, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	resp := c.roundTrip(produceRequest(topic, id, partition, -1, batch)).(*kmsg.ProduceResponse)
	require.Len(c.t, resp.Topics, 1, "produce response topics")
	require.Len(c.t, resp.Topics[0].Partitions, 1, "produce response partitions")
	return resp.Topics[0].Partitions[0]
}

func fetchRequest(topic string, id [16]byte, partition int32, offset int64, maxWait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(maxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = 50 << 20
	req.SessionID = 0
	req.SessionEpoch = -1 // no session: a full, sessionless fetch
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.CurrentLeaderEpoch = -1
	rp.LastFetchedEpoch = -1
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = 10 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// fetchAll reads a partition from offset until the high watermark.
func (c *rawConn) fetchAll(topic string, id [16]byte, partition int32, from int64) ([]fetchedRecord, int64) {
	c.t.Helper()
	var out []fetchedRecord
	offset := from
	for i := 0; ; i++ {
		require.Less(c.t, i, 1000, "fetch loop makes no progress")
		resp := c.roundTrip(fetchRequest(topic, id, partition, offset, 100*time.Millisecond)).(*kmsg.FetchResponse)
		require.Zero(c.t, resp.ErrorCode, "fetch top-level error")
		require.Len(c.t, resp.Topics, 1)
		require.Len(c.t, resp.Topics[0].Partitions, 1)
		p := resp.Topics[0].Partitions[0]
		require.Zero(c.t, p.ErrorCode, "fetch %s/%d@%d error", topic, partition, offset)
		for _, r := range decodeBatches(c.t, p.RecordBatches) {
			if r.Offset >= offset { // a fetch may start inside a batch
				out = append(out, r)
				offset = r.Offset + 1
			}
		}
		if offset >= p.HighWatermark {
			return out, p.HighWatermark
		}
	}
}
