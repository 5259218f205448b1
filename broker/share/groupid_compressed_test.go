package share

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/protocol"
	"github.com/shoal-mq/shoal/sharegroup"
)

// compressRecords compresses records (wire form) with codec.
func compressRecords(t testing.TB, raw []byte, codec protocol.Compression) []byte {
	t.Helper()
	out, err := records.Compress(raw, codec)
	require.NoError(t, err)
	return out
}

// encodeCompressedBatch is records.EncodeBatch with the records compressed.
func encodeCompressedBatch(t *testing.T, records []byte, count int32, codec protocol.Compression) []byte {
	t.Helper()
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           int16(codec),
		LastOffsetDelta:      count - 1,
		FirstTimestamp:       1000,
		MaxTimestamp:         1000,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           count,
		Records:              compressRecords(t, records, codec),
	}
	out := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-protocol.BatchLengthPrefix))
	protocol.SetBatchCRC(out)
	return out
}

// groupRecords encodes one record per entry of keys ("" = null key), each
// also carrying its key in header "mg" (and a decoy "mg" header first).
func groupRecords(keys []string) []byte {
	var recs []byte
	for i, k := range keys {
		r := kmsg.Record{OffsetDelta: int32(i), Value: bytes.Repeat([]byte("v"), 50)}
		if k != "" {
			r.Key = []byte(k)
			r.Headers = []kmsg.Header{{Key: "mg", Value: []byte("decoy")}, {Key: "other", Value: []byte("x")}, {Key: "mg", Value: []byte(k)}}
		}
		recs = records.AppendRecord(recs, &r)
	}
	return recs
}

// TestClassifyBatchesCompressedMatchesUncompressed: a compressed batch
// (every codec) classifies to the same spans as the same records
// uncompressed, by key and by header, next to an uncompressed batch in
// the same read, and so does a second compressed batch of other keys
// after it, decompressed into the same scratch buffer (which must not
// change the first one's ids), with or without a scratch buffer.
func TestClassifyBatchesCompressedMatchesUncompressed(t *testing.T) {
	t.Parallel()
	keys := []string{"a", "a", "", "b", "a", "a", "c", "c", "c", ""}
	recs := groupRecords(keys)
	n := int32(len(keys))
	plain := records.EncodeBatch(recs, n, 1000, 1000)
	protocol.SetBaseOffset(plain, 100)
	want := []sharegroup.GroupSpan{
		{First: 100, Last: 101, ID: "a"}, {First: 103, Last: 103, ID: "b"}, {First: 104, Last: 105, ID: "a"}, {First: 106, Last: 108, ID: "c"},
	}
	wantNext := make([]sharegroup.GroupSpan, len(want))
	for i, s := range want {
		wantNext[i] = sharegroup.GroupSpan{First: s.First + 10, Last: s.Last + 10, ID: s.ID}
	}
	for _, codec := range []protocol.Compression{protocol.CompressionGzip, protocol.CompressionSnappy, protocol.CompressionLZ4, protocol.CompressionZstd} {
		comp := encodeCompressedBatch(t, recs, n, codec)
		protocol.SetBaseOffset(comp, 110)
		h, err := protocol.ParseBatchHeader(comp)
		require.NoError(t, err)
		require.Equal(t, codec, h.Compression())
		other := make([]string, len(keys))
		wantOther := make([]sharegroup.GroupSpan, len(want))
		for i, k := range keys {
			if k != "" {
				other[i] = k + "-other"
			}
		}
		for i, s := range want {
			wantOther[i] = sharegroup.GroupSpan{First: s.First + 20, Last: s.Last + 20, ID: s.ID + "-other"}
		}
		comp2 := encodeCompressedBatch(t, groupRecords(other), n, codec)
		protocol.SetBaseOffset(comp2, 120)
		raw := slices.Concat(plain, comp, comp2)
		for _, src := range []messageGroupSource{{key: true}, {header: "mg"}} {
			for _, scratch := range []*[]byte{nil, new([]byte), new(make([]byte, 0, 1<<20))} {
				got := classifyBatches(raw, src, nil, scratch)
				require.Equal(t, []sharegroup.LogBatch{
					{First: 100, Last: 109, Groups: want},
					{First: 110, Last: 119, Groups: wantNext},
					{First: 120, Last: 129, Groups: wantOther},
				}, got, "codec %d, source %+v", codec, src)
			}
		}
	}
}

// TestClassifyKeepsCopiesOfGroupIDs: the span ids classifyBatches returns
// point into the read buffer; once Classify has returned, scribbling over
// that buffer (as the next read of the pooled buffer does) changes nothing
// the Partition knows: ordered mode still sees three groups, under their
// own names.
func TestClassifyKeepsCopiesOfGroupIDs(t *testing.T) {
	t.Parallel()
	for _, compressed := range []bool{false, true} {
		keys := []string{"a", "a", "b", "b", "c"}
		recs := groupRecords(keys)
		var raw []byte
		if compressed {
			raw = encodeCompressedBatch(t, recs, int32(len(keys)), protocol.CompressionZstd)
		} else {
			raw = records.EncodeBatch(recs, int32(len(keys)), 1000, 1000)
		}
		p, _, err := sharegroup.New(sharegroup.Config{
			RecordLockDuration: time.Minute, DeliveryCountLimit: 5, MaxInFlight: 1000, Groups: sharegroup.GroupsOrdered,
		}, 0, 0)
		require.NoError(t, err)
		batches := classifyBatches(raw, messageGroupSource{key: true}, nil, nil)
		p.Classify(batches)
		for i := range raw {
			raw[i] = 'z'
		}
		var asked []string
		limit := func(id string, want int64) int64 { asked = append(asked, id); return want }
		acq, _ := p.AcquireGroupsLimited(time.Now(), "m1", 100, limit)
		require.Equal(t, []sharegroup.Acquired{{First: 0, Last: 0, DeliveryCount: 1}, {First: 2, Last: 2, DeliveryCount: 1}, {First: 4, Last: 4, DeliveryCount: 1}}, acq, "compressed %v", compressed)
		slices.Sort(asked)
		require.Equal(t, []string{"a", "b", "c"}, slices.Compact(asked), "compressed %v", compressed)
	}
}
