package sqs

import (
	"bytes"
	"encoding/xml"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestXMLElemEscapesAsEncodingXML: elem's copy of plain text and its
// fallback write what xml.EscapeText writes, for every byte value and
// for random strings of them.
func TestXMLElemEscapesAsEncodingXML(t *testing.T) {
	want := func(v string) string {
		var b bytes.Buffer
		require.NoError(t, xml.EscapeText(&b, []byte(v)))
		return "<E>" + b.String() + "</E>"
	}
	check := func(v string) {
		var x xmlWriter
		x.elem("E", v)
		require.Equal(t, want(v), x.b.String(), "%q", v)
	}
	for c := range 256 {
		check(string([]byte{byte(c)}))
		check("a" + string([]byte{byte(c)}) + "b")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", "0", " ", "<", ">", "&", "'", "\"", "\t", "\n", "\r", "\x00", "\x7f", "é", "😀", "\xff", "\ufffd"}
	for range 2000 {
		var b bytes.Buffer
		for range rng.IntN(20) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		check(b.String())
	}
	check("")
}

// BenchmarkWriteQueryReceive writes a ReceiveMessage answer of ten
// messages with 256-byte bodies, as scripts/sqsbench's receives.
func BenchmarkWriteQueryReceive(b *testing.B) {
	body := string(bytes.Repeat([]byte("abcdefgh"), 32))
	var msgs []map[string]any
	for i := range 10 {
		msgs = append(msgs, map[string]any{
			"MessageId": "0b8f6d6e-3f7c-4c8e-9a7e-1c2d3e4f5a6b", "ReceiptHandle": "AQEB" + body[:120] + string(rune('a'+i)),
			"MD5OfBody": "0123456789abcdef0123456789abcdef", "Body": body,
		})
	}
	out := map[string]any{"Messages": msgs}
	b.ReportAllocs()
	for b.Loop() {
		writeQuery(discardWriter{}, "ReceiveMessage", out, "req-1")
	}
}

type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (discardWriter) WriteHeader(int)             {}
