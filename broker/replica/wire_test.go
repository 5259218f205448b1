package replica

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func testMessage(rng *rand.Rand) *raftpb.Message {
	m := &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: proto.Uint64(2), From: proto.Uint64(1), Term: proto.Uint64(7),
		LogTerm: proto.Uint64(6), Index: proto.Uint64(41), Commit: proto.Uint64(40)}
	for i := range rng.IntN(6) {
		e := &raftpb.Entry{Term: proto.Uint64(7), Index: proto.Uint64(uint64(42 + i)), Type: raftpb.EntryNormal.Enum()}
		switch rng.IntN(4) {
		case 0: // a leader's empty entry: no Data
		case 1:
			e.Data = []byte{}
		default:
			e.Data = make([]byte, rng.IntN(3*inlineData))
			for j := range e.Data {
				e.Data[j] = byte(rng.Uint32())
			}
		}
		m.Entries = append(m.Entries, e)
	}
	if rng.IntN(3) == 0 {
		m.Reject, m.RejectHint = proto.Bool(true), proto.Uint64(3)
	}
	return m
}

// TestWireRoundTrip: encode's parts make a valid protobuf encoding of
// the message, which decode reads back (as proto would), with entry
// data pointing into the received bytes.
func TestWireRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		m := testMessage(rng)
		parts, err := encode(m)
		require.NoError(t, err)
		data := Message{Parts: parts}.Bytes()

		var viaProto raftpb.Message
		require.NoError(t, proto.Unmarshal(data, &viaProto))
		require.True(t, proto.Equal(m, &viaProto), "proto reads what encode wrote")

		var got raftpb.Message
		require.NoError(t, decode(data, &got))
		require.True(t, proto.Equal(m, &got), "decode reads what encode wrote")

		std, err := proto.Marshal(m)
		require.NoError(t, err)
		var fromStd raftpb.Message
		require.NoError(t, decode(std, &fromStd))
		require.True(t, proto.Equal(m, &fromStd), "decode reads proto's encoding")

		for _, e := range got.Entries {
			if len(e.Data) > 0 {
				i := bytes.Index(data, e.Data)
				require.GreaterOrEqual(t, i, 0)
				require.Equal(t, &data[i], &e.Data[0], "entry data aliases the frame")
			}
		}
		for _, e := range m.Entries {
			if len(e.Data) >= inlineData {
				found := false
				for _, p := range parts {
					found = found || len(p) > 0 && &p[0] == &e.Data[0]
				}
				require.True(t, found, "a large entry's data is sent as it is")
			}
		}
	}
}

// TestWireMalformed: truncated or corrupted encodings are errors, never
// panics.
func TestWireMalformed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		parts, err := encode(testMessage(rng))
		require.NoError(t, err)
		data := Message{Parts: parts}.Bytes()
		bad := bytes.Clone(data)
		switch rng.IntN(2) {
		case 0:
			bad = bad[:rng.IntN(len(bad))]
		default:
			bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
		}
		var m raftpb.Message
		_ = decode(bad, &m)
		var viaProto raftpb.Message
		if proto.Unmarshal(bad, &viaProto) != nil {
			require.Error(t, decode(bad, &m), "proto refuses it, so must decode")
		}
	}
}
