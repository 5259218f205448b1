package broker

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/protocol"
	"github.com/shoal-mq/shoal/sharegroup"
)

// TestGroupIDMatchesDecodedRecord: groupID, which reads only a record's
// fields up to its id, finds what decoding the whole record gives (the
// key, or the last header of that name; null and empty are no group) for
// random keys, values, timestamps and headers, and a record cut short
// anywhere gives no group (or the id it got to) without panicking.
func TestGroupIDMatchesDecodedRecord(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	bytesOf := func(n int) []byte {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		b := make([]byte, rng.IntN(n)+1)
		for i := range b {
			b[i] = byte('a' + rng.IntN(3))
		}
		return b
	}
	sources := []messageGroupSource{{key: true}, {header: "mg"}, {header: "other"}}
	for range 2000 {
		r := kmsg.Record{
			Attributes:       int8(rng.IntN(2)),
			TimestampDelta64: rng.Int64N(1<<40) - 1<<39,
			OffsetDelta:      rng.Int32N(1 << 20),
			Key:              bytesOf(5),
			Value:            bytesOf(300),
		}
		for range rng.IntN(5) {
			name := []string{"mg", "other", "m", "mgx"}[rng.IntN(4)]
			r.Headers = append(r.Headers, kmsg.Header{Key: name, Value: bytesOf(4)})
		}
		rec := appendRecord(nil, &r)
		for _, src := range sources {
			var want []byte
			if src.key {
				want = r.Key
			}
			for _, h := range r.Headers {
				if !src.key && h.Key == src.header {
					want = h.Value
				}
			}
			got := src.groupID(rec)
			if len(want) == 0 {
				require.Empty(t, got, "record %+v, source %+v", r, src)
			} else {
				require.Equal(t, want, got, "record %+v, source %+v", r, src)
			}
			for cut := range len(rec) {
				_ = src.groupID(rec[:cut])
			}
		}
	}
}

// TestClassifyBatchesGroups: consecutive records of one group form one
// span, records without a key none, and the ids read what the records
// hold.
func TestClassifyBatchesGroups(t *testing.T) {
	t.Parallel()
	keys := []string{"a", "a", "", "b", "a", "a", "c", "c"}
	var recs []byte
	for i, k := range keys {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte("v")}
		if k != "" {
			r.Key = []byte(k)
		}
		recs = appendRecord(recs, &r)
	}
	raw := encodeBatch(recs, int32(len(keys)), 1000, 1000)
	protocol.SetBaseOffset(raw, 40)
	got := classifyBatches(raw, messageGroupSource{key: true}, nil)
	require.Equal(t, []sharegroup.LogBatch{{First: 40, Last: 47, Groups: []sharegroup.GroupSpan{
		{First: 40, Last: 41, ID: "a"}, {First: 43, Last: 43, ID: "b"}, {First: 44, Last: 45, ID: "a"}, {First: 46, Last: 47, ID: "c"},
	}}}, got)
}
