package share

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shoal-mq/shoal/broker/records"
	"github.com/shoal-mq/shoal/protocol"
	"github.com/shoal-mq/shoal/sharegroup"
)

// lz4LinkedFrame builds an LZ4 frame with dependent (linked) blocks, as
// python-lz4 (kafka-python) writes by default, holding the given blocks
// (raw: stored uncompressed). The header checksum is found by trying all
// 256 values against a fresh reader.
func lz4LinkedFrame(t *testing.T, blocks [][]byte, raw []bool) []byte {
	t.Helper()
	body := []byte{}
	for i, b := range blocks {
		size := uint32(len(b))
		if raw[i] {
			size |= 0x80000000
		}
		body = binary.LittleEndian.AppendUint32(body, size)
		body = append(body, b...)
	}
	body = append(body, 0, 0, 0, 0) // end mark
	for hc := 0; hc < 256; hc++ {
		// magic, FLG: version 01, B.Indep 0, no checksums; BD: 64 KiB blocks
		f := append([]byte{0x04, 0x22, 0x4d, 0x18, 0x40, 0x40, byte(hc)}, body...)
		_, err := io.ReadAll(lz4.NewReader(bytes.NewReader(f)))
		if err == nil || !errors.Is(err, errInvalidHeaderChecksumSentinel(err)) {
			return f
		}
	}
	t.Fatal("no header checksum")
	return nil
}

// errInvalidHeaderChecksumSentinel: any error mentioning the header
// checksum is one to retry.
func errInvalidHeaderChecksumSentinel(err error) error {
	if bytes.Contains([]byte(err.Error()), []byte("header checksum")) {
		return err
	}
	return errors.New("other")
}

// backRef is an LZ4 block copying n bytes from n bytes before its start
// (the stream's history: nothing, in a frame's first block), then one
// literal byte. A fresh decoder refuses it.
func backRef(n int) []byte {
	// token: no literals, match length 15+4+extension bytes; offset n
	b := []byte{0x0f, byte(n), byte(n >> 8)}
	ext := n - 19
	for ; ext >= 255; ext -= 255 {
		b = append(b, 255)
	}
	b = append(b, byte(ext))
	return append(b, 0x10, '!')
}

// TestDecompressLZ4KeepsNoHistory: a frame whose first block refers back
// before its start is refused however many batches were inflated before.
// (Found by a review of 27b6ae6, which pooled lz4 readers: Reader.Reset
// does not clear the reader's dict, and such a frame decoded to the
// bytes of whatever batch the pooled reader inflated before.)
func TestDecompressLZ4KeepsNoHistory(t *testing.T) {
	t.Parallel()
	secret := []byte("SECRET-of-another-topic:0123456789abcdef")
	victim := lz4LinkedFrame(t, [][]byte{secret}, []bool{true})
	attack := lz4LinkedFrame(t, [][]byte{backRef(len(secret))}, []bool{false})

	// A fresh reader refuses the attacker's frame (as the broker did
	// before the commit, with a new reader per batch).
	if out, err := io.ReadAll(lz4.NewReader(bytes.NewReader(attack))); err == nil {
		t.Fatalf("fresh reader accepted the frame: %q", out)
	}
	for range 50 { // a pool may drop what it keeps: try often
		got, err := records.Decompress(victim, protocol.CompressionLZ4)
		if err != nil || !bytes.Equal(got, secret) {
			t.Fatalf("victim: %q %v", got, err)
		}
		out, err := records.Decompress(attack, protocol.CompressionLZ4)
		if err == nil {
			t.Fatalf("frame referring before its start decoded (state of the previous batch leaked): %q", out)
		}
	}
}

// TestTrimLZ4KeepsNoHistory: the same through the batch cache: such a
// batch is sent whole (the client's decompressor refuses it), never
// trimmed into an uncompressed batch with a valid CRC holding records
// made of another batch's bytes, which a share consumer of the
// attacker's topic would get.
func TestTrimLZ4KeepsNoHistory(t *testing.T) {
	t.Parallel()
	var victimRecs []byte
	for i := range 2 {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte("victim-secret-payload-0123456789")}
		victimRecs = records.AppendRecord(victimRecs, &r)
	}
	victim := lz4LinkedFrame(t, [][]byte{victimRecs}, []bool{true})
	attack := lz4LinkedFrame(t, [][]byte{backRef(len(victimRecs))}, []bool{false})

	mk := func(payload []byte, base int64) ([]byte, protocol.BatchHeader) {
		rb := kmsg.RecordBatch{
			FirstOffset: base, PartitionLeaderEpoch: -1, Magic: 2,
			Attributes: int16(protocol.CompressionLZ4), LastOffsetDelta: 1,
			FirstTimestamp: 1000, MaxTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1,
			FirstSequence: -1, NumRecords: 2, Records: payload,
		}
		out := rb.AppendTo(nil)
		binary.BigEndian.PutUint32(out[8:], uint32(len(out)-protocol.BatchLengthPrefix))
		protocol.SetBatchCRC(out)
		h, err := protocol.ParseBatchHeader(out)
		if err != nil {
			t.Fatal(err)
		}
		return out, h
	}
	vb, vh := mk(victim, 0)
	ab, ah := mk(attack, 100)

	// Fresh reader: the attacker's batch is unparsable, sent whole.
	if _, err := io.ReadAll(lz4.NewReader(bytes.NewReader(attack))); err == nil {
		t.Fatal("fresh reader accepted the frame")
	}
	for range 50 { // a pool may drop what it keeps: try often
		_ = parseBatch(&vh, vb, nil) // a fetch of the victim's topic, same goroutine
		pb := parseBatch(&ah, ab, nil)
		if pb.whole {
			continue // refused: no leak
		}
		out := pb.appendTrim(nil, []sharegroup.Acquired{{First: 100, Last: 100}})
		if bytes.Contains(out, []byte("victim-secret")) {
			t.Fatalf("trimmed batch of the attacker's topic carries the victim's records: %q", out)
		}
		t.Fatalf("attacker's batch parsed (should be whole): %q", out)
	}
}
