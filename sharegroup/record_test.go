package sharegroup

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

func sampleRecords() []Record {
	return []Record{
		{Kind: KindSnapshot, StateEpoch: 0, StartOffset: 0},
		{Kind: KindDelta, StateEpoch: 7, StartOffset: 5, DeliveryCompleteCount: 2, Batches: []StateBatch{
			{First: 5, Last: 9, State: StateAvailable, DeliveryCount: 1},
			{First: 10, Last: 10, State: StateAcknowledged, DeliveryCount: 2},
			{First: 20, Last: 120_000, State: StateArchived, DeliveryCount: 5},
			{First: 120_001, Last: 120_001, State: StateArchiving, DeliveryCount: math.MaxInt16},
		}},
		{Kind: KindSnapshot, StateEpoch: math.MinInt32, StartOffset: math.MaxInt64 - 10, Batches: []StateBatch{
			{First: math.MaxInt64 - 3, Last: math.MaxInt64, State: StateArchived},
		}},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	for _, r := range sampleRecords() {
		b, err := r.MarshalBinary()
		require.NoError(t, err)
		var d Record
		require.NoError(t, d.UnmarshalBinary(b))
		require.Equal(t, normalize(r), normalize(d))
		// Every single-bit flip is caught by the CRC.
		for i := range b {
			c := append([]byte(nil), b...)
			c[i] ^= 0x10
			_, err := DecodeRecord(c)
			require.ErrorIs(t, err, ErrCorruptRecord, "flip at %d", i)
		}
		// Every truncation is rejected.
		for n := range len(b) {
			_, err := DecodeRecord(b[:n])
			require.ErrorIs(t, err, ErrCorruptRecord, "truncated to %d", n)
		}
	}
	// A typical ack delta stays small.
	b, err := (&Record{Kind: KindDelta, StartOffset: 1_000_000, Batches: []StateBatch{{First: 1_000_010, Last: 1_000_509, State: StateAcknowledged, DeliveryCount: 1}}}).MarshalBinary()
	require.NoError(t, err)
	require.LessOrEqual(t, len(b), 20)
}

func TestRecordEncodeRejectsInvalid(t *testing.T) {
	t.Parallel()
	for _, r := range []Record{
		{Kind: 0},
		{Kind: KindDelta, StartOffset: -1},
		{Kind: KindDelta, Batches: []StateBatch{{First: 5, Last: 4}}},
		{Kind: KindDelta, Batches: []StateBatch{{First: 5, Last: 6}, {First: 6, Last: 7}}},
		{Kind: KindDelta, Batches: []StateBatch{{First: 5, Last: 6, State: StateAcquired}}},
		{Kind: KindDelta, Batches: []StateBatch{{First: 5, Last: 6, State: 9}}},
		{Kind: KindDelta, Batches: []StateBatch{{First: 5, Last: 6, DeliveryCount: -1}}},
	} {
		_, err := r.AppendBinary(nil)
		require.ErrorIs(t, err, ErrCorruptRecord, "%+v", r)
	}
}

// FuzzDecodeRecord: the decoder must never panic, and whatever it accepts
// must re-encode to the same bytes. Seeds run in every go test.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		b, err := r.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{1, 2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			return
		}
		again, err := r.AppendBinary(nil)
		if err != nil {
			t.Fatalf("decoded record does not re-encode: %v", err)
		}
		r2, err := DecodeRecord(again)
		if err != nil || !reflect.DeepEqual(normalize(r), normalize(r2)) {
			t.Fatalf("round trip: %v", err)
		}
		// Applying it must not panic either.
		p := &Partition{cfg: DefaultConfig()}
		_ = p.Apply(r)
		if err := checkInternal(p); p.initialized && err != nil {
			t.Fatal(err)
		}
	})
}

func TestApplyRejectsContradictions(t *testing.T) {
	t.Parallel()
	p, _, err := New(DefaultConfig(), 1, 0)
	require.NoError(t, err)
	require.NoError(t, p.Apply(Record{Kind: KindDelta, StateEpoch: 1, StartOffset: 0, Batches: []StateBatch{{First: 3, Last: 4, State: StateAcknowledged, DeliveryCount: 1}}}))
	before := p.Snapshot()
	for name, r := range map[string]Record{
		"terminal changes":      {Kind: KindDelta, StateEpoch: 1, Batches: []StateBatch{{First: 4, Last: 4, State: StateAvailable, DeliveryCount: 1}}},
		"other state epoch":     {Kind: KindDelta, StateEpoch: 2},
		"range too far":         {Kind: KindDelta, StateEpoch: 1, Batches: []StateBatch{{First: 1 << 40, Last: 1 << 40, State: StateArchived}}},
		"acquired is transient": {Kind: KindDelta, StateEpoch: 1, Batches: []StateBatch{{First: 0, Last: 0, State: StateAcquired}}},
	} {
		require.ErrorIs(t, p.Apply(r), ErrCorruptRecord, name)
		require.Equal(t, before, p.Snapshot(), name)
	}
	q := &Partition{cfg: DefaultConfig()}
	require.ErrorIs(t, q.Apply(Record{Kind: KindDelta}), ErrCorruptRecord, "delta before snapshot")
	_, err = Recover(DefaultConfig(), nil)
	require.ErrorIs(t, err, ErrCorruptRecord)
}

// FuzzDecodeRecordBody appends a valid CRC to arbitrary bytes so the fuzzer
// exercises the parser behind the checksum.
func FuzzDecodeRecordBody(f *testing.F) {
	for _, r := range sampleRecords() {
		b, err := r.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:len(b)-4])
	}
	f.Add([]byte{1, 2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{1, 1, 0, 0, 0, 2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0, 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		b := binary.LittleEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, castagnoli))
		r, err := DecodeRecord(b)
		if err != nil {
			return
		}
		// Non-minimal varints decode fine, so compare values, not bytes.
		again, err := r.AppendBinary(nil)
		if err != nil {
			t.Fatalf("decoded record does not re-encode: %v", err)
		}
		r2, err := DecodeRecord(again)
		if err != nil || !reflect.DeepEqual(normalize(r), normalize(r2)) {
			t.Fatalf("round trip: %v", err)
		}
		p := &Partition{cfg: DefaultConfig()}
		if p.Apply(r) == nil {
			if err := checkInternal(p); err != nil {
				t.Fatal(err)
			}
		}
	})
}
