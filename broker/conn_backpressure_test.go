package broker

import (
	"encoding/binary"
	"io"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSlowReaderHoldsAboutOneFetch: a client pipelines large fetches and
// reads none of the answers. The broker stops reading its requests once
// more than maxQueuedRecordBytes of record data waits to be written, so
// it holds about one answer for that connection instead of maxPipelined
// of them; once the client reads, every answer arrives, in order.
func TestSlowReaderHoldsAboutOneFetch(t *testing.T) {
	t.Parallel()
	b := startTest(t)
	cl := newClient(t, b, kgo.DefaultProduceTopic("slow"), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(2<<20), kgo.AllowAutoTopicCreation())
	value := make([]byte, 1000<<10) // under max.message.bytes (1 MiB + 12 bytes) with the batch overhead
	for i := range 48 {
		value[0] = byte(i)
		require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Value: value}).FirstErr())
	}
	// Each fetch asks for 16 MiB from offset 0: about 16 records.
	const fetches = 12
	var frames []byte
	for i := range fetches {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 16<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "slow"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.LogStartOffset, rp.CurrentLeaderEpoch = 0, 16<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		body := binary.BigEndian.AppendUint16(nil, 1)
		body = binary.BigEndian.AppendUint16(body, 12)
		body = binary.BigEndian.AppendUint32(body, uint32(i+1))
		body = binary.BigEndian.AppendUint16(body, 4)
		body = append(body, "test"...)
		body = append(body, 0) // flexible header: no tags
		body = req.AppendTo(body)
		frames = binary.BigEndian.AppendUint32(frames, uint32(len(body)))
		frames = append(frames, body...)
	}
	fetched := func() float64 {
		var m dto.Metric
		require.NoError(t, b.metrics.Request(1, 12).Count.Write(&m))
		return m.GetCounter().GetValue()
	}
	before := fetched()
	rc := dialRaw(t, b)
	_, err := rc.nc.Write(frames)
	require.NoError(t, err)

	time.Sleep(500 * time.Millisecond) // the reader would take them all by now
	handled := fetched() - before
	// One answer being written (part of it may sit in the socket
	// buffers), one queued behind it, and the reader has stopped.
	require.LessOrEqual(t, handled, 3.0, "fetches handled while the client reads nothing")

	rc.nc.SetDeadline(time.Now().Add(30 * time.Second))
	for i := range fetches {
		var hdr [8]byte
		_, err := io.ReadFull(rc.r, hdr[:])
		require.NoError(t, err)
		require.Equal(t, uint32(i+1), binary.BigEndian.Uint32(hdr[4:]), "answers in request order")
		_, err = io.CopyN(io.Discard, rc.r, int64(binary.BigEndian.Uint32(hdr[:4]))-4)
		require.NoError(t, err)
	}
	require.Equal(t, float64(fetches), fetched()-before)
}
