package integration

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// frame returns a request frame: size, api key, version, correlation id,
// null client id, [empty tag section], body.
func frame(key, version int16, corr int32, flexibleHeader bool, body []byte) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	if flexibleHeader {
		b = append(b, 0)
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// TestBadInput sends hostile frames and invalid batches. Frame-level
// garbage closes that connection only; batch-level problems get their
// Kafka error code on an open connection; and afterwards every record
// acknowledged before is still there, unchanged, with nothing appended.
func TestBadInput(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := b.createTopic(t, 2, map[string]*string{"max.message.bytes": strp("10000")})
	good := dialRaw(t, b.Addr)
	id := good.topicID(topic)

	// Acknowledged records to protect.
	type ackedRec struct {
		partition int32
		rec       fetchedRecord
	}
	var acked []ackedRec
	ts := time.Now().Add(-time.Minute).UnixMilli()
	for i := range 6 {
		p := int32(i % 2)
		recs := []testRecord{
			{Key: fmt.Appendf(nil, "k%d-a", i), Value: fmt.Appendf(nil, "acknowledged %d a", i), Headers: []kmsg.Header{{Key: "h", Value: []byte("v")}}},
			{Key: fmt.Appendf(nil, "k%d-b", i), Value: fmt.Appendf(nil, "acknowledged %d b", i)},
		}
		r := good.produce(topic, id, p, plainBatch(ts+int64(i), recs...).encode())
		require.Zero(t, r.ErrorCode, "setup produce: %s", kerr.ErrorForCode(r.ErrorCode))
		for j, tr := range recs {
			acked = append(acked, ackedRec{p, fetchedRecord{Offset: r.BaseOffset + int64(j), Timestamp: ts + int64(i), Key: tr.Key, Value: tr.Value, Headers: tr.Headers}})
		}
	}
	stillServes := func(t *testing.T) {
		t.Helper()
		md := good.metadata(topic)
		require.Zero(t, md.ErrorCode, "the well-behaved connection stopped working")
	}

	t.Run("frame size", func(t *testing.T) {
		for _, size := range []int32{-1, 0, 100<<20 + 1, 1<<31 - 1} {
			c := dialRawNoNegotiate(t, b.Addr)
			c.writeRaw(binary.BigEndian.AppendUint32(nil, uint32(size)))
			t.Logf("size %d", size)
			c.expectClosed(5 * time.Second)
			stillServes(t)
		}
	})

	t.Run("undecodable frames", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			raw  []byte
		}{
			{"header shorter than key+version+correlation", []byte{0, 0, 0, 3, 0, 3, 0}},
			{"metadata v12 array length past the frame", frame(3, 12, 1, true, []byte{0xff, 0xff, 0xff, 0xff, 0x0f})},
			{"produce v9 body cut short", frame(0, 9, 1, true, []byte{0x00})},
			{"fetch v12 garbage body", frame(1, 12, 1, true, bytes.Repeat([]byte{0xfe}, 64))},
			{"client id longer than the frame", func() []byte {
				f := frame(18, 3, 1, true, nil)
				binary.BigEndian.PutUint16(f[12:], 500)
				return f
			}()},
		} {
			t.Log(tc.name)
			c := dialRawNoNegotiate(t, b.Addr)
			c.writeRaw(tc.raw)
			c.expectClosed(5 * time.Second)
			stillServes(t)
		}
	})

	t.Run("unknown api key or version", func(t *testing.T) {
		for _, tc := range []struct {
			name         string
			key, version int16
			flexible     bool
		}{
			{"key 999", 999, 0, false},
			{"key -1", -1, 0, false},
			{"metadata v99", 3, 99, true},
			{"produce v-1", 0, -1, false},
		} {
			t.Log(tc.name)
			c := dialRawNoNegotiate(t, b.Addr)
			c.writeRaw(frame(tc.key, tc.version, 1, tc.flexible, []byte{0, 0, 0, 0}))
			c.expectClosed(5 * time.Second)
			stillServes(t)
		}
	})

	t.Run("ApiVersions with an unknown version gets a v0 answer", func(t *testing.T) {
		c := dialRawNoNegotiate(t, b.Addr)
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		body := req.AppendTo(nil)
		c.writeRaw(frame(18, 127, 77, true, body))
		corr, raw, err := c.readFrame(5 * time.Second)
		require.NoError(t, err, "ApiVersions v127 must be answered, not dropped")
		assert.Equal(t, int32(77), corr)
		resp := kmsg.ApiVersionsResponse{Version: 0}
		require.NoError(t, resp.ReadFrom(raw), "the answer must be a v0 ApiVersions response")
		assert.Equal(t, kerr.UnsupportedVersion.Code, resp.ErrorCode)
		var sawAV bool
		for _, k := range resp.ApiKeys {
			if k.ApiKey == 18 {
				sawAV = true
				assert.GreaterOrEqual(t, k.MaxVersion, int16(3), "ApiVersions max version")
			}
		}
		assert.True(t, sawAV, "the v0 answer lists the supported ApiVersions range")
		c.negotiate() // and the connection stays usable
	})

	batch := func(value string) []byte {
		return plainBatch(time.Now().UnixMilli(), testRecord{Value: []byte(value)}).encode()
	}

	t.Run("batch errors", func(t *testing.T) {
		corrupt := batch("this batch has a bad crc")
		corrupt[len(corrupt)-3] ^= 0x40 // inside the value; CRC now wrong

		countMismatch := plainBatch(time.Now().UnixMilli(), testRecord{Value: []byte("one record, count says three")})
		cm := countMismatch.encode()
		binary.BigEndian.PutUint32(cm[57:], 3) // NumRecords
		binary.BigEndian.PutUint32(cm[23:], 2) // LastOffsetDelta
		fixCRC(cm)

		longLength := batch("declared length runs past the data")
		binary.BigEndian.PutUint32(longLength[8:], uint32(len(longLength)-12+100))

		control := batch("a client may not write control batches")
		binary.BigEndian.PutUint16(control[21:], 0x20) // attributes: control
		fixCRC(control)

		tooBig := plainBatch(time.Now().UnixMilli(), testRecord{Value: make([]byte, 20000)}).encode()

		for _, tc := range []struct {
			name      string
			partition int32
			batch     []byte
			want      []int16
		}{
			{"bad CRC", 0, corrupt, []int16{kerr.CorruptMessage.Code}},
			{"record count mismatch", 0, cm, []int16{kerr.CorruptMessage.Code, kerr.InvalidRecord.Code}},
			{"batch length past the data", 1, longLength, []int16{kerr.CorruptMessage.Code, kerr.InvalidRecord.Code}},
			{"control batch from a client", 1, control, []int16{kerr.InvalidRecord.Code, kerr.CorruptMessage.Code}},
			{"over max.message.bytes", 0, tooBig, []int16{kerr.MessageTooLarge.Code}},
			{"unknown partition", 99, batch("no such partition"), []int16{kerr.UnknownTopicOrPartition.Code}},
		} {
			r := good.produce(topic, id, tc.partition, tc.batch)
			assert.Contains(t, tc.want, r.ErrorCode, "%s: got %v", tc.name, kerr.ErrorForCode(r.ErrorCode))
			stillServes(t)
		}

		// acks must be -1, 0 or 1.
		req := produceRequest(topic, id, 0, 2, batch("acks=2"))
		resp := good.roundTrip(req).(*kmsg.ProduceResponse)
		require.Len(t, resp.Topics, 1)
		require.Len(t, resp.Topics[0].Partitions, 1)
		assert.Equal(t, kerr.InvalidRequiredAcks.Code, resp.Topics[0].Partitions[0].ErrorCode, "acks=2: got %v",
			kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
		stillServes(t)
	})

	t.Run("acknowledged records unchanged", func(t *testing.T) {
		c := dialRaw(t, b.Addr)
		for p := range int32(2) {
			got, hwm := c.fetchAll(topic, id, p, 0)
			var want []fetchedRecord
			for _, a := range acked {
				if a.partition == p {
					want = append(want, a.rec)
				}
			}
			assert.Equal(t, int64(len(want)), hwm, "partition %d: rejected input must not be appended", p)
			require.Len(t, got, len(want), "partition %d", p)
			for i := range want {
				assert.Equal(t, want[i].Offset, got[i].Offset, "p%d record %d offset", p, i)
				assert.Equal(t, want[i].Timestamp, got[i].Timestamp, "p%d record %d timestamp", p, i)
				assert.Equal(t, want[i].Key, got[i].Key, "p%d record %d key", p, i)
				assert.Equal(t, want[i].Value, got[i].Value, "p%d record %d value", p, i)
				assert.Equal(t, len(want[i].Headers), len(got[i].Headers), "p%d record %d headers", p, i)
			}
		}
	})
}

// TestRequestSizeLimit: a configured socket.request.max.bytes closes a
// connection whose (otherwise valid) request is larger, and serves one that
// fits.
func TestRequestSizeLimit(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	b := startBroker(t, withMaxRequestBytes(limit))
	topic := b.createTopic(t, 1, nil)
	good := dialRaw(t, b.Addr)
	id := good.topicID(topic)

	small := plainBatch(time.Now().UnixMilli(), testRecord{Value: make([]byte, limit/2)}).encode()
	r := good.produce(topic, id, 0, small)
	require.Zero(t, r.ErrorCode, "a request under the limit: %s", kerr.ErrorForCode(r.ErrorCode))

	big := dialRaw(t, b.Addr)
	req := produceRequest(topic, id, 0, -1, plainBatch(time.Now().UnixMilli(), testRecord{Value: make([]byte, limit)}).encode())
	corr, raw := big.prepare(req)
	require.Greater(t, len(raw)-4, limit)
	// Send the size first: the broker should refuse before reading the body.
	big.writeRaw(raw[:4])
	_ = corr
	big.expectClosed(5 * time.Second)

	md := good.metadata(topic)
	assert.Zero(t, md.ErrorCode, "the other connection keeps working")
	got, hwm := good.fetchAll(topic, id, 0, 0)
	assert.Equal(t, int64(1), hwm)
	assert.Len(t, got, 1)
}
