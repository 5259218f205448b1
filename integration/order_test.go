package integration

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func listOffsetsRequest(topic string, partition int32, timestamp int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.CurrentLeaderEpoch = -1
	rp.Timestamp = timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func describeTopicConfigsRequest(topic string) *kmsg.DescribeConfigsRequest {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeTopic
	rr.ResourceName = topic
	req.Resources = append(req.Resources, rr)
	return req
}

// TestPipelinedResponsesInOrder writes several different requests in one
// write on one connection, a slow one first, and reads the responses: they
// come back in request order with their own correlation ids.
func TestPipelinedResponsesInOrder(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := b.createTopic(t, 1, nil)
	c := dialRaw(t, b.Addr)
	id := c.topicID(topic)

	apiv := kmsg.NewPtrApiVersionsRequest()
	apiv.ClientSoftwareName, apiv.ClientSoftwareVersion = "shoal-integration", "1"
	md := kmsg.NewPtrMetadataRequest()
	mdt := kmsg.NewMetadataRequestTopic()
	mdt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mdt)

	steps := []struct {
		corr int32
		req  kmsg.Request
	}{
		{100, fetchRequest(topic, id, 0, 0, 400*time.Millisecond)}, // parks: the partition is empty
		{7, md},
		{55, apiv},
		{3, produceRequest(topic, id, 0, 1, plainBatch(time.Now().UnixMilli(), testRecord{Value: []byte("pipelined")}).encode())},
		{9999, listOffsetsRequest(topic, 0, -1)},
		{-5, describeTopicConfigsRequest(topic)},
		{42, fetchRequest(topic, id, 0, 0, 0)},
		{0, md},
	}
	var wire []byte
	for _, s := range steps {
		c.pick(s.req)
		wire = append(wire, c.fmtr.AppendRequest(nil, s.req, s.corr)...) // AppendRequest assumes an empty dst
	}
	start := time.Now()
	c.writeRaw(wire)

	for i, s := range steps {
		corr, resp, err := c.readResponse(s.req, 15*time.Second)
		require.NoError(t, err, "response %d (%s)", i, kmsg.NameForKey(s.req.Key()))
		require.Equal(t, s.corr, corr, "response %d: correlation id out of order", i)
		switch r := resp.(type) {
		case *kmsg.FetchResponse:
			require.Zero(t, r.ErrorCode)
			require.Len(t, r.Topics, 1)
			recs := decodeBatches(t, r.Topics[0].Partitions[0].RecordBatches)
			// Kafka runs one request per connection at a time, so the
			// last fetch would see the produce; Shoal may run a request
			// while an earlier produce waits for its fsync (responses
			// still in order), so either is accepted here.
			t.Logf("fetch corr %d returned %d record(s) after %v", s.corr, len(recs), time.Since(start).Round(time.Millisecond))
		case *kmsg.ProduceResponse:
			assert.Zero(t, r.Topics[0].Partitions[0].ErrorCode)
			assert.Equal(t, int64(0), r.Topics[0].Partitions[0].BaseOffset)
		case *kmsg.ListOffsetsResponse:
			assert.Zero(t, r.Topics[0].Partitions[0].ErrorCode)
			assert.LessOrEqual(t, r.Topics[0].Partitions[0].Offset, int64(1), "latest offset")
			t.Logf("list offsets after the pipelined produce: %d", r.Topics[0].Partitions[0].Offset)
		case *kmsg.MetadataResponse:
			assert.Zero(t, r.Topics[0].ErrorCode)
		case *kmsg.ApiVersionsResponse:
			assert.Zero(t, r.ErrorCode)
		case *kmsg.DescribeConfigsResponse:
			assert.Zero(t, r.Resources[0].ErrorCode)
		}
	}

	// Once the responses are in, the produced record is there.
	got, hwm := c.fetchAll(topic, id, 0, 0)
	assert.Equal(t, int64(1), hwm)
	require.Len(t, got, 1)
	assert.Equal(t, "pipelined", string(got[0].Value))
}

// TestAcksZeroNoResponse: a produce with acks=0 gets no response; the next
// response on the connection belongs to the next request.
func TestAcksZeroNoResponse(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := b.createTopic(t, 1, nil)
	c := dialRaw(t, b.Addr)
	id := c.topicID(topic)

	p1 := produceRequest(topic, id, 0, 0, plainBatch(time.Now().UnixMilli(), testRecord{Value: []byte("zero-1")}).encode())
	md := kmsg.NewPtrMetadataRequest()
	p2 := produceRequest(topic, id, 0, 0, plainBatch(time.Now().UnixMilli(), testRecord{Value: []byte("zero-2")}).encode())
	lo := listOffsetsRequest(topic, 0, -1)
	var wire []byte
	for i, r := range []kmsg.Request{p1, md, p2, lo} {
		c.pick(r)
		wire = append(wire, c.fmtr.AppendRequest(nil, r, int32(i+1))...)
	}
	c.writeRaw(wire)

	corr, _, err := c.readResponse(md, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, int32(2), corr, "first response must be the Metadata (acks=0 produce has none)")
	corr, resp, err := c.readResponse(lo, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, int32(4), corr, "second response must be the ListOffsets")
	lr := resp.(*kmsg.ListOffsetsResponse)
	assert.Zero(t, lr.Topics[0].Partitions[0].ErrorCode, "%s", kerr.ErrorForCode(lr.Topics[0].Partitions[0].ErrorCode))
	// Nothing else arrives.
	_, _, err = c.readFrame(500 * time.Millisecond)
	var ne net.Error
	require.ErrorAs(t, err, &ne, "unexpected extra response (for an acks=0 produce?)")
	assert.True(t, ne.Timeout())

	// Both produces were applied before the ListOffsets ran; with fsync
	// before visibility the high watermark may trail by a sync, so allow
	// it a moment to reach 2.
	end := lr.Topics[0].Partitions[0].Offset
	for deadline := time.Now().Add(5 * time.Second); end < 2 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		end = c.roundTrip(listOffsetsRequest(topic, 0, -1)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset
	}
	assert.Equal(t, int64(2), end, "both acks=0 produces are applied")

	got, hwm := dialRaw(t, b.Addr).fetchAll(topic, id, 0, 0)
	assert.Equal(t, int64(2), hwm)
	require.Len(t, got, 2)
	assert.Equal(t, "zero-1", string(got[0].Value))
	assert.Equal(t, "zero-2", string(got[1].Value))
}
