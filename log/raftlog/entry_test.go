package raftlog

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoal-mq/shoal/protocol"
)

func entry(typ raftpb.EntryType, term, index uint64, data []byte) *raftpb.Entry {
	return &raftpb.Entry{Type: typ.Enum(), Term: proto.Uint64(term), Index: proto.Uint64(index), Data: data}
}

// dataBatch is a one-record data batch at offset with epoch, as a
// leader's Prepare leaves it.
func dataBatch(offset int64, epoch int32) []byte {
	b := controlBatch(offset, epoch, 0, []byte("value"))
	b[22] &^= byte(protocol.AttrControl) // low byte of the attributes
	protocol.SetBatchCRC(b)
	return b
}

func TestEntryRoundTrip(t *testing.T) {
	cc := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(4)}}}
	ccb, err := proto.Marshal(cc)
	require.NoError(t, err)
	marker := controlBatch(9, 3, 1, []byte{0, 0, 0, 0, 0, 7}) // a COMMIT marker, as log writes them
	for _, e := range []*raftpb.Entry{
		entry(raftpb.EntryNormal, 3, 11, nil),
		entry(raftpb.EntryConfChangeV2, 3, 11, ccb),
		entry(raftpb.EntryNormal, 3, 11, dataBatch(9, 3)),
		entry(raftpb.EntryNormal, 3, 11, marker),
	} {
		b, err := EncodeEntry(e, 9)
		require.NoError(t, err)
		require.True(t, protocol.VerifyBatchCRC(b))
		h, err := protocol.ParseBatchHeader(b)
		require.NoError(t, err)
		require.Equal(t, int64(9), h.BaseOffset)
		require.Equal(t, int32(3), h.PartitionLeaderEpoch, "the term is the leader epoch")
		got, err := DecodeEntry(b, 11)
		require.NoError(t, err)
		if len(e.Data) == 0 {
			require.Empty(t, got.Data)
			got.Data = e.Data
		}
		require.True(t, proto.Equal(e, got), "%v: got %v", e, got)
		internal := e.GetType() == raftpb.EntryConfChangeV2 || len(e.Data) == 0
		require.Equal(t, internal, IsInternal(b), "only raft's own entries are internal")
	}
}

func TestEntryRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		e      *raftpb.Entry
		offset int64
	}{
		"a data batch at another offset":   {entry(raftpb.EntryNormal, 3, 1, dataBatch(8, 3)), 9},
		"a data batch of another term":     {entry(raftpb.EntryNormal, 3, 1, dataBatch(9, 2)), 9},
		"data posing as a private control": {entry(raftpb.EntryNormal, 3, 1, controlBatch(9, 3, TypeNoop, nil)), 9},
		"not a batch":                      {entry(raftpb.EntryNormal, 3, 1, []byte("junk")), 9},
		"a batch with bytes after it":      {entry(raftpb.EntryNormal, 3, 1, append(dataBatch(9, 3), 0)), 9},
		"a v1 configuration change":        {entry(raftpb.EntryConfChange, 3, 1, nil), 9},
		"a term beyond a leader epoch":     {entry(raftpb.EntryNormal, 1<<31, 1, nil), 9},
	} {
		_, err := EncodeEntry(tc.e, tc.offset)
		require.ErrorIs(t, err, ErrBadEntry, name)
	}
	_, err := DecodeEntry(controlBatch(9, 3, 0x7abc, nil), 1)
	require.ErrorIs(t, err, ErrBadEntry, "an unknown private type")
	_, err = DecodeEntry(dataBatch(9, -1), 1)
	require.ErrorIs(t, err, ErrBadEntry, "a batch without a term")
}

// FuzzDecodeEntry: any bytes decode or fail, never panic; what decodes
// encodes back to a batch that decodes to the same entry.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(controlBatch(5, 2, TypeNoop, nil))
	f.Add(controlBatch(5, 2, TypeConfChange, []byte{8, 1}))
	f.Add(dataBatch(5, 2))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEntry(b, 7)
		if err != nil {
			return
		}
		h, _ := protocol.ParseBatchHeader(b)
		out, err := EncodeEntry(e, h.BaseOffset)
		if err != nil {
			if e.GetType() == raftpb.EntryNormal && len(e.Data) > 0 {
				return // data EncodeEntry refuses (a private type only it may write is one); DecodeEntry is lenient there
			}
			t.Fatalf("decoded %v does not encode: %v", e, err)
		}
		back, err := DecodeEntry(out, 7)
		if err != nil || !proto.Equal(back, e) && !(len(back.Data) == 0 && len(e.Data) == 0) {
			t.Fatalf("re-encoded entry differs: %v, %v vs %v", err, back, e)
		}
	})
}

// TestInternalEntries: an internal proposal round-trips as a private
// control batch at whatever offset it lands, and no data batch is taken
// for one.
func TestInternalEntries(t *testing.T) {
	data := Internal([]byte(`{"create":"t"}`))
	b, err := EncodeEntry(entry(raftpb.EntryNormal, 5, 9, data), 1234)
	require.NoError(t, err)
	require.True(t, IsInternal(b))
	h, err := protocol.ParseBatchHeader(b)
	require.NoError(t, err)
	require.Equal(t, int64(1234), h.BaseOffset)
	require.Equal(t, int32(5), h.PartitionLeaderEpoch)
	e, err := DecodeEntry(b, 9)
	require.NoError(t, err)
	require.Equal(t, data, e.Data)
	body, ok := InternalBody(e.Data)
	require.True(t, ok)
	require.Equal(t, `{"create":"t"}`, string(body))
	_, ok = InternalBody(dataBatch(0, 0))
	require.False(t, ok)
}
