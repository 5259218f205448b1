package records

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shoal-mq/shoal/protocol"
)

// compressedRecords returns about 1 MiB of record-like bytes (1 KiB
// values: zeros, as sharebench produces, or text-like, which compresses
// about 3x) compressed with codec as a Kafka producer would.
func compressedRecords(tb testing.TB, codec protocol.Compression, text bool) []byte {
	tb.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"order", "id", "customer", "amount", "status", "shipped", "pending", "\"", ":", ",", "{", "}"}
	var raw bytes.Buffer
	for raw.Len() < 1<<20 {
		fmt.Fprintf(&raw, "key-%d", rng.IntN(1000))
		if text {
			for n := 0; n < 1024; {
				w := words[rng.IntN(len(words))]
				raw.WriteString(w)
				n += len(w)
			}
		} else {
			raw.Write(make([]byte, 1024))
		}
	}
	return compressRecords(tb, raw.Bytes(), codec)
}

// BenchmarkDecompress: one 1 MiB batch's records, per codec and data,
// into a new buffer (Decompress) and into one used again
// (DecompressAppend, as the message-group paths do).
//
//	go test -run X -bench Decompress ./broker/
func BenchmarkDecompress(b *testing.B) {
	for _, codec := range []protocol.Compression{protocol.CompressionGzip, protocol.CompressionSnappy, protocol.CompressionLZ4, protocol.CompressionZstd} {
		for _, text := range []bool{false, true} {
			src := compressedRecords(b, codec, text)
			name := fmt.Sprintf("%v/zeros", codecName(codec))
			if text {
				name = fmt.Sprintf("%v/text", codecName(codec))
			}
			b.Run(name+"/new", func(b *testing.B) {
				b.SetBytes(1 << 20)
				b.ReportAllocs()
				for range b.N {
					if _, err := Decompress(src, codec); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/reused", func(b *testing.B) {
				b.SetBytes(1 << 20)
				b.ReportAllocs()
				var buf []byte
				for range b.N {
					out, err := DecompressAppend(buf[:0], src, codec, MaxDecompressed)
					if err != nil {
						b.Fatal(err)
					}
					buf = out
				}
			})
		}
	}
}

func codecName(c protocol.Compression) string {
	return map[protocol.Compression]string{protocol.CompressionGzip: "gzip", protocol.CompressionSnappy: "snappy",
		protocol.CompressionLZ4: "lz4", protocol.CompressionZstd: "zstd"}[c]
}
