package share

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/protocol"
	"github.com/shoal-mq/shoal/sharegroup"
)

// groupIDOfDecoded is what groupID must find: the record decoded whole by
// kmsg (as a client decodes it), then its key or its last header of the
// source's name (groupOf, which direct receives use on decoded records);
// nothing if it does not decode.
func groupIDOfDecoded(src messageGroupSource, rec []byte) []byte {
	var r kmsg.Record
	if r.UnsafeReadFrom(rec) != nil {
		return nil
	}
	return src.groupOf(r.Key, r.Headers)
}

// TestGroupIDMatchesDecodedRecord: groupID, which only walks a record's
// fields, finds what decoding the whole record gives (null and empty are
// no group) for random keys, values, timestamps and headers, and for the
// same records cut short anywhere or with a byte changed.
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
	check := func(src messageGroupSource, rec []byte, what string) {
		want, got := groupIDOfDecoded(src, rec), src.groupID(rec)
		if len(want) == 0 {
			require.Empty(t, got, "%s, source %+v, record %x", what, src, rec)
		} else {
			require.Equal(t, want, got, "%s, source %+v, record %x", what, src, rec)
		}
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
		rec := records.AppendRecord(nil, &r)
		for _, src := range sources {
			check(src, rec, "whole")
			for cut := range len(rec) {
				check(src, rec[:cut], "cut")
			}
			for range 20 {
				bad := slices.Clone(rec)
				bad[rng.IntN(len(bad))] = byte(rng.IntN(256))
				check(src, bad, "changed")
			}
		}
	}
}

// TestGroupIDMalformed: lengths below -1, a varint longer than 32 bits
// allow and records whose tail does not decode give what kmsg gives.
func TestGroupIDMalformed(t *testing.T) {
	t.Parallel()
	v := func(x int64) []byte { return binary.AppendVarint(nil, x) }
	rec := func(parts ...[]byte) []byte {
		b := slices.Concat(parts...)
		return append(v(int64(len(b))), b...)
	}
	pre := []byte{0, 0, 0}
	k, val := append(v(1), 'k'), append(v(1), 'v')
	mg := slices.Concat(v(2), []byte("mg"), v(1), []byte("x"))
	mgSrc, keySrc := messageGroupSource{header: "mg"}, messageGroupSource{key: true}
	for name, c := range map[string]struct {
		src messageGroupSource
		rec []byte
	}{
		"key length -2, header source":     {mgSrc, rec(pre, v(-2), val, v(1), mg)},
		"value length -2, header source":   {mgSrc, rec(pre, k, v(-2), v(1), mg)},
		"another header's value -5":        {mgSrc, rec(pre, k, val, v(2), v(1), []byte("o"), v(-5), mg)},
		"header key length -2":             {mgSrc, rec(pre, k, val, v(2), v(-2), v(1), []byte("y"), mg)},
		"negative header count":            {mgSrc, rec(pre, k, val, v(-3))},
		"key source, value truncated":      {keySrc, rec(pre, k, v(50), []byte("v"))},
		"key source, no header count":      {keySrc, rec(pre, k, val)},
		"key source, header count too big": {keySrc, rec(pre, k, val, v(5), mg)},
		"key source, 6-byte key length":    {keySrc, rec(pre, []byte{0x82, 0x80, 0x80, 0x80, 0x80, 0}, []byte("k"), val, v(0))},
		"key source, key fine":             {keySrc, rec(pre, k, val, v(1), mg)},
		"header source, header fine":       {mgSrc, rec(pre, k, val, v(1), mg)},
	} {
		require.Equal(t, string(groupIDOfDecoded(c.src, c.rec)), string(c.src.groupID(c.rec)), name)
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
		recs = records.AppendRecord(recs, &r)
	}
	raw := records.EncodeBatch(recs, int32(len(keys)), 1000, 1000)
	protocol.SetBaseOffset(raw, 40)
	got := classifyBatches(raw, messageGroupSource{key: true}, nil, nil)
	require.Equal(t, []sharegroup.LogBatch{{First: 40, Last: 47, Groups: []sharegroup.GroupSpan{
		{First: 40, Last: 41, ID: "a"}, {First: 43, Last: 43, ID: "b"}, {First: 44, Last: 45, ID: "a"}, {First: 46, Last: 47, ID: "c"},
	}}}, got)
}

// FuzzGroupID: for any bytes, groupID finds what kmsg's decoding of them
// gives, under a key and a header source, and never panics.
func FuzzGroupID(f *testing.F) {
	for _, r := range []kmsg.Record{
		{Key: []byte("k"), Value: []byte("v")},
		{Value: []byte("v"), Headers: []kmsg.Header{{Key: "mg", Value: []byte("g")}, {Key: "mg", Value: []byte("h")}}},
		{Key: []byte{}, Headers: []kmsg.Header{{Key: "mg"}}},
	} {
		f.Add(records.AppendRecord(nil, &r))
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		for _, src := range []messageGroupSource{{key: true}, {header: "mg"}} {
			want, got := groupIDOfDecoded(src, rec), src.groupID(rec)
			if len(want) == 0 {
				require.Empty(t, got)
			} else {
				require.Equal(t, want, got)
			}
		}
	})
}
