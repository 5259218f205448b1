package records

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/protocol"
)

// TestDecompressGzipKeepsNoHistory: a pooled gzip reader does not keep
// the previous stream's window (a member referring back before its start
// stays refused), a truncated member fails without spoiling the next
// use, and concatenated members still decode (multistream).
func TestDecompressGzipKeepsNoHistory(t *testing.T) {
	t.Parallel()
	secret := bytes.Repeat([]byte("SECRET-of-another-topic:0123456789abcdef"), 10)
	var zb bytes.Buffer
	w := gzip.NewWriter(&zb)
	_, _ = w.Write(secret)
	require.NoError(t, w.Close())

	var fb bytes.Buffer
	fw, err := flate.NewWriterDict(&fb, 9, secret)
	require.NoError(t, err)
	_, _ = fw.Write(secret) // all matches into the dictionary
	require.NoError(t, fw.Close())
	attack := []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}
	attack = append(attack, fb.Bytes()...)
	attack = binary.LittleEndian.AppendUint32(attack, crc32.ChecksumIEEE(secret))
	attack = binary.LittleEndian.AppendUint32(attack, uint32(len(secret)))

	for range 20 {
		got, err := Decompress(zb.Bytes(), protocol.CompressionGzip)
		require.NoError(t, err)
		require.Equal(t, secret, got)
		_, err = Decompress(attack, protocol.CompressionGzip)
		require.Error(t, err)
		buf := make([]byte, 0, 1<<20)
		_, err = DecompressAppend(buf, attack, protocol.CompressionGzip, MaxDecompressed)
		require.Error(t, err)
		// a truncated member, then a good one
		_, err = DecompressAppend(buf, zb.Bytes()[:len(zb.Bytes())/2], protocol.CompressionGzip, MaxDecompressed)
		require.Error(t, err)
		got, err = DecompressAppend(buf, append(bytes.Clone(zb.Bytes()), zb.Bytes()...), protocol.CompressionGzip, MaxDecompressed)
		require.NoError(t, err)
		require.Equal(t, append(bytes.Clone(secret), secret...), got) // multistream
	}
}
