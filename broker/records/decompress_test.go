package records

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shoal-mq/shoal/protocol"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// bomb streams n zero bytes through a compressing writer.
func bomb(t *testing.T, n int64, wrap func(io.Writer) io.WriteCloser) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := wrap(&buf)
	_, err := io.Copy(w, io.LimitReader(zeros{}, n))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// Decompress inflates what franz-go's compressors produce, and refuses a
// small batch that would inflate past MaxDecompressed.
func TestDecompressBounded(t *testing.T) {
	t.Parallel()
	data := bytes.Repeat([]byte("shoal record bytes "), 10_000)
	for _, c := range []struct {
		codec protocol.Compression
		kgo   kgo.CompressionCodec
	}{
		{protocol.CompressionGzip, kgo.GzipCompression()},
		{protocol.CompressionSnappy, kgo.SnappyCompression()},
		{protocol.CompressionLZ4, kgo.Lz4Compression()},
		{protocol.CompressionZstd, kgo.ZstdCompression()},
	} {
		comp, err := kgo.DefaultCompressor(c.kgo)
		require.NoError(t, err)
		out, _ := comp.Compress(&bytes.Buffer{}, data)
		got, err := Decompress(out, c.codec)
		require.NoError(t, err, "codec %d", c.codec)
		require.Equal(t, data, got, "codec %d", c.codec)
		// Appended after what a buffer holds, in its spare room or
		// beyond; twice, with the decompressor used again.
		for _, room := range []int{0, 100, len(data) + 100, 4 << 20} {
			for range 2 {
				buf := append(make([]byte, 0, 3+room), "abc"...)
				got, err := DecompressAppend(buf, out, c.codec, MaxDecompressed)
				require.NoError(t, err, "codec %d", c.codec)
				require.Equal(t, append([]byte("abc"), data...), got, "codec %d, room %d", c.codec, room)
			}
		}
	}

	const limit = 8 << 20 // MaxDecompressed in production; small here to stay quick
	const huge = limit + 1<<20
	bombs := map[protocol.Compression][]byte{
		protocol.CompressionGzip: bomb(t, huge, func(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) }),
		protocol.CompressionLZ4:  bomb(t, huge, func(w io.Writer) io.WriteCloser { return lz4.NewWriter(w) }),
		protocol.CompressionZstd: bomb(t, huge, func(w io.Writer) io.WriteCloser {
			zw, err := zstd.NewWriter(w)
			require.NoError(t, err)
			return zw
		}),
	}
	// Snappy, xerial-framed: the same 64 KiB block of zeros, repeated.
	block := s2.EncodeSnappy(nil, make([]byte, 64<<10))
	x := append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
	for range huge / (64 << 10) {
		x = binary.BigEndian.AppendUint32(x, uint32(len(block)))
		x = append(x, block...)
	}
	bombs[protocol.CompressionSnappy] = x
	for codec, b := range bombs {
		require.Less(t, len(b), 1<<20, "codec %d: the bomb is small", codec)
		_, err := DecompressAppend(nil, b, codec, limit)
		require.ErrorIs(t, err, ErrTooLarge, "codec %d", codec)
		// Into a buffer with room: refused as soon as the limit is
		// passed, without filling more than the limit and a byte.
		for _, room := range []int{1 << 20, 2 * huge} {
			buf := append(make([]byte, 0, 5+room), "abcde"...)
			_, err := DecompressAppend(buf, b, codec, limit)
			require.ErrorIs(t, err, ErrTooLarge, "codec %d, room %d", codec, room)
		}
	}
	// Plain snappy declaring a huge length is refused before decoding.
	claim := binary.AppendUvarint(nil, huge)
	_, err := Decompress(append(binary.AppendUvarint(nil, MaxDecompressed+1), 0), protocol.CompressionSnappy)
	require.ErrorIs(t, err, ErrTooLarge)
	_, err = DecompressAppend(nil, append(claim, 0), protocol.CompressionSnappy, limit)
	require.ErrorIs(t, err, ErrTooLarge)
}

// compressRecords compresses records (wire form) with codec.
func compressRecords(t testing.TB, raw []byte, codec protocol.Compression) []byte {
	t.Helper()
	out, err := Compress(raw, codec)
	require.NoError(t, err)
	return out
}
