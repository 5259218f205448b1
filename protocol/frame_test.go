package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodeRequest builds a request frame body (no size prefix) the way a
// client does: header v1, or v2 for flexible versions.
func encodeRequest(req kmsg.Request, corrID int32, clientID string) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corrID))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

func seedRequests() [][]byte {
	var out [][]byte
	meta := kmsg.NewPtrMetadataRequest()
	topic := "orders"
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	for _, v := range []int16{0, 4, 9, 12} {
		meta.SetVersion(v)
		out = append(out, encodeRequest(meta, 7, "client"))
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "shoal-test", "1.0"
	for _, v := range []int16{0, 3, 4} {
		av.SetVersion(v)
		out = append(out, encodeRequest(av, 1, ""))
	}
	prod := kmsg.NewPtrProduceRequest()
	prod.Acks = -1
	prod.TimeoutMillis = 1000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "orders"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = bytes.Repeat([]byte{1}, 70)
	pt.Partitions = append(pt.Partitions, pp)
	prod.Topics = append(prod.Topics, pt)
	for _, v := range []int16{3, 9, 11} {
		prod.SetVersion(v)
		out = append(out, encodeRequest(prod, 3, "p"))
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxWaitMillis = 500
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "orders"
	ft.Partitions = append(ft.Partitions, kmsg.NewFetchRequestTopicPartition())
	fetch.Topics = append(fetch.Topics, ft)
	for _, v := range []int16{4, 12, 13} {
		fetch.SetVersion(v)
		out = append(out, encodeRequest(fetch, 9, "c"))
	}
	return out
}

func TestParseRequestRoundTrip(t *testing.T) {
	for _, frame := range seedRequests() {
		h, req, err := ParseRequest(frame)
		require.NoError(t, err)
		require.Equal(t, req.Key(), h.Key)
		require.Equal(t, req.GetVersion(), h.Version)
		// Re-encoding what we decoded gives the same bytes.
		require.Equal(t, frame, encodeRequest(req, h.CorrelationID, h.ClientID))
	}
}

func TestParseRequestRejects(t *testing.T) {
	good := seedRequests()[0]
	cases := map[string][]byte{
		"short header":     good[:5],
		"unknown key":      append([]byte{0x7f, 0x00}, good[2:]...),
		"version too new":  append(append([]byte{}, good[:2]...), append([]byte{0x7f, 0x00}, good[4:]...)...),
		"client id beyond": append(append([]byte{}, good[:8]...), 0x7f, 0x00),
		"truncated body":   good[:len(good)-3],
	}
	for name, frame := range cases {
		_, _, err := ParseRequest(frame)
		require.Error(t, err, name)
		require.True(t, errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnknownAPI), "%s: %v", name, err)
	}
}

func TestReadFrameLimit(t *testing.T) {
	var b bytes.Buffer
	b.Write([]byte{0, 0, 1, 0}) // 256 bytes declared
	_, err := ReadFrame(&b, nil, 100)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	b.Reset()
	b.Write([]byte{0xff, 0xff, 0xff, 0xff}) // negative
	_, err = ReadFrame(&b, nil, 100)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	b.Reset()
	b.Write([]byte{0, 0, 0, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f, err := ReadFrame(&b, nil, 100)
	require.NoError(t, err)
	require.Len(t, f, 9)

	// A large frame arrives whole across the growth steps.
	body := bytes.Repeat([]byte("0123456789"), 50_000)
	b.Reset()
	b.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body))))
	b.Write(body)
	f, err = ReadFrame(&b, make([]byte, 0, 16), 1<<20)
	require.NoError(t, err)
	require.Equal(t, body, f)

	// Declared large but cut short: an error, not a huge allocation.
	b.Reset()
	b.Write([]byte{0, 0x10, 0, 0})
	b.Write(body[:1000])
	_, err = ReadFrame(&b, nil, 100<<20)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func TestAppendResponseHeaders(t *testing.T) {
	av := kmsg.NewPtrApiVersionsResponse()
	av.SetVersion(3) // flexible, but header stays v0
	out := AppendResponse(nil, 42, av)
	require.Equal(t, uint32(len(out)-4), binary.BigEndian.Uint32(out))
	require.Equal(t, uint32(42), binary.BigEndian.Uint32(out[4:]))
	require.Equal(t, av.AppendTo(nil), out[8:])

	md := kmsg.NewPtrMetadataResponse()
	md.SetVersion(9) // flexible: header v1 with an empty tag section
	out = AppendResponse(nil, 43, md)
	require.Equal(t, byte(0), out[8])
	require.Equal(t, md.AppendTo(nil), out[9:])
}

// FuzzParseRequest checks that no input panics the request decoder.
func FuzzParseRequest(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, req, err := ParseRequest(frame)
		if err == nil && (req == nil || req.Key() != h.Key) {
			t.Fatalf("decoded %v without a matching request", h)
		}
	})
}
