package records

import (
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/shoal-mq/shoal/protocol"
)

// Compress deflates a batch's records (wire form) with codec, in the
// framing Kafka's clients write: gzip, plain snappy (which every reader,
// DecompressAppend included, accepts beside xerial framing), lz4 frames,
// zstd. It is the inverse of Decompress, for whatever must write a
// compressed batch the way a client would (tests today).
func Compress(raw []byte, codec protocol.Compression) ([]byte, error) {
	var buf bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case protocol.CompressionNone:
		return append([]byte(nil), raw...), nil
	case protocol.CompressionGzip:
		w = gzip.NewWriter(&buf)
	case protocol.CompressionSnappy:
		return s2.EncodeSnappy(nil, raw), nil
	case protocol.CompressionLZ4:
		w = lz4.NewWriter(&buf)
	case protocol.CompressionZstd:
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			return nil, err
		}
		defer enc.Close()
		return enc.EncodeAll(raw, nil), nil
	default:
		return nil, fmt.Errorf("records: unknown compression codec %d", codec)
	}
	if _, err := w.Write(raw); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
