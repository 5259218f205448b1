package sqs

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMD5OfMessageAttributes: vectors computed by moto 5.2.1's
// Message.attribute_md5 (an independent implementation of AWS's rule).
func TestMD5OfMessageAttributes(t *testing.T) {
	require.Equal(t, "da1b33cc3cbfe8b1630921e78e6b9880", md5OfAttrs(map[string]msgAttr{"color": {DataType: "String", String: "blue"}}))
	require.Equal(t, "b02ae83819e6394724cd85e855a4449e", md5OfAttrs(map[string]msgAttr{
		"n":   {DataType: "Number", String: "42"},
		"raw": {DataType: "Binary", Binary: []byte{0, 1, 2}},
		"a.b": {DataType: "String.custom", String: "héllo"},
	}))
	require.Equal(t, "8d777f385d3dfec8815d20f7496026dc", md5Hex([]byte("data")))
}

func TestQueryUnflatten(t *testing.T) {
	form, err := url.ParseQuery("QueueUrl=u&Attribute.2.Name=B&Attribute.2.Value=2&Attribute.1.Name=A&Attribute.1.Value=1" +
		"&AttributeName.1=All&SendMessageBatchRequestEntry.1.Id=x&SendMessageBatchRequestEntry.1.MessageBody=hi" +
		"&SendMessageBatchRequestEntry.1.MessageAttribute.1.Name=k&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType=String" +
		"&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue=v&Tag.1.Key=t&Tag.1.Value=w")
	require.NoError(t, err)
	in, aerr := queryInput("SendMessageBatch", form)
	require.Nil(t, aerr)
	require.Equal(t, "u", in["QueueUrl"])
	require.Equal(t, map[string]any{"A": "1", "B": "2"}, in["Attributes"])
	require.Equal(t, []any{"All"}, in["AttributeNames"])
	require.Equal(t, map[string]any{"t": "w"}, in["tags"])
	entries, aerr := in.list("Entries")
	require.Nil(t, aerr)
	require.Len(t, entries, 1)
	attrs, aerr := entries[0].attrs("MessageAttributes")
	require.Nil(t, aerr)
	require.Equal(t, map[string]msgAttr{"k": {DataType: "String", String: "v"}}, attrs)
}

func TestReceiptHandles(t *testing.T) {
	s := &Server{secret: []byte("k"), boot: 7}
	q := &queue{TopicID: [16]byte{1}}
	h := handle{topicID: q.TopicID, partition: 2, offset: 99, count: 3, issued: 5}
	text := s.encodeHandle(h, q.Created)
	got, aerr := s.decodeHandle(q, text)
	require.Nil(t, aerr)
	require.Equal(t, handle{topicID: q.TopicID, partition: 2, offset: 99, count: 3, issued: 5, boot: 7}, got)
	// Any changed byte fails the HMAC; another queue's is invalid; another
	// process's is stale.
	b := []byte(text)
	b[10] ^= 1
	_, aerr = s.decodeHandle(q, string(b))
	require.NotNil(t, aerr)
	require.Equal(t, "ReceiptHandleIsInvalid", aerr.legacy)
	_, aerr = s.decodeHandle(&queue{TopicID: [16]byte{2}}, text)
	require.NotNil(t, aerr)
	later := &Server{secret: []byte("k"), boot: 8}
	got, aerr = later.decodeHandle(q, text)
	require.Nil(t, aerr)
	require.True(t, got.stale)
	_, aerr = (&Server{secret: []byte("other"), boot: 7}).decodeHandle(q, text)
	require.NotNil(t, aerr, "another broker's secret")
	_, aerr = s.decodeHandle(&queue{TopicID: q.TopicID, Created: q.Created + 61}, text)
	require.NotNil(t, aerr, "an earlier queue's of the name")
}

func TestURIEscape(t *testing.T) {
	require.Equal(t, "a-b_c.d~e%20f%2Fg%C3%A9", uriEscape("a-b_c.d~e f/gé"))
	u, _ := url.Parse("http://h/000000000000/q%20x")
	require.Equal(t, "/000000000000/q%2520x", canonicalURI(u), "segments escaped twice, as SigV4 has it outside S3")
}
