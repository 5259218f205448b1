package broker

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The Query protocol as Debian's python3-boto3 1.26 and awscli 2.9 speak
// it: form posts, XML answers, flattened lists and maps.

type queryMessage struct {
	MessageID     string `xml:"MessageId"`
	ReceiptHandle string
	MD5OfBody     string
	Body          string
	Attribute     []struct{ Name, Value string }
	MessageAttr   []struct {
		Name  string
		Value struct{ DataType, StringValue string }
	} `xml:"MessageAttribute"`
}

type queryResponse struct {
	XMLName xml.Name
	Result  struct {
		QueueURL  string `xml:"QueueUrl"`
		MessageID string `xml:"MessageId"`
		MD5       string `xml:"MD5OfMessageBody"`
		MD5Attrs  string `xml:"MD5OfMessageAttributes"`
		Message   []queryMessage
		Attribute []struct{ Name, Value string }
		Entries   []struct {
			ID string `xml:"Id"`
		} `xml:"SendMessageBatchResultEntry"`
		Failed []struct {
			ID   string `xml:"Id"`
			Code string
		} `xml:"BatchResultErrorEntry"`
	} `xml:",any"`
	Error     struct{ Type, Code, Message string }
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

func queryPost(t *testing.T, endpoint string, form url.Values) (int, queryResponse) {
	t.Helper()
	form.Set("Version", "2012-11-05")
	resp, err := http.Post(endpoint, "application/x-www-form-urlencoded; charset=utf-8", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "text/xml", resp.Header.Get("Content-Type"))
	var out queryResponse
	require.NoError(t, xml.Unmarshal(body, &out), "%s", body)
	return resp.StatusCode, out
}

func TestSQSQueryProtocol(t *testing.T) {
	t.Parallel()
	b, _ := startSQSTest(t)
	ep := "http://" + b.SQSAddr() + "/"
	status, r := queryPost(t, ep, url.Values{"Action": {"CreateQueue"}, "QueueName": {"q"},
		"Attribute.1.Name": {"VisibilityTimeout"}, "Attribute.1.Value": {"45"}, "Tag.1.Key": {"k"}, "Tag.1.Value": {"v"}})
	require.Equal(t, 200, status)
	require.Equal(t, "CreateQueueResponse", r.XMLName.Local)
	qurl := r.Result.QueueURL
	require.Equal(t, "http://"+b.SQSAddr()+"/000000000000/q", qurl)
	require.NotEmpty(t, r.RequestID)

	_, r = queryPost(t, ep, url.Values{"Action": {"SendMessage"}, "QueueUrl": {qurl}, "MessageBody": {"héllo <xml>"},
		"MessageAttribute.1.Name": {"a"}, "MessageAttribute.1.Value.DataType": {"String"}, "MessageAttribute.1.Value.StringValue": {"b"}})
	require.Equal(t, md5Hex("héllo <xml>"), r.Result.MD5)
	require.NotEmpty(t, r.Result.MD5Attrs)
	sentID := r.Result.MessageID

	_, r = queryPost(t, ep, url.Values{"Action": {"SendMessageBatch"}, "QueueUrl": {qurl},
		"SendMessageBatchRequestEntry.1.Id": {"one"}, "SendMessageBatchRequestEntry.1.MessageBody": {"1"},
		"SendMessageBatchRequestEntry.2.Id": {"two"}, "SendMessageBatchRequestEntry.2.MessageBody": {""}})
	require.Len(t, r.Result.Entries, 1)
	require.Equal(t, "one", r.Result.Entries[0].ID)
	require.Len(t, r.Result.Failed, 1)

	_, r = queryPost(t, ep, url.Values{"Action": {"ReceiveMessage"}, "QueueUrl": {qurl}, "MaxNumberOfMessages": {"1"},
		"AttributeName.1": {"All"}, "MessageAttributeName.1": {"All"}})
	require.Len(t, r.Result.Message, 1)
	m := r.Result.Message[0]
	require.Equal(t, sentID, m.MessageID)
	require.Equal(t, "héllo <xml>", m.Body)
	require.Len(t, m.MessageAttr, 1)
	require.Equal(t, "b", m.MessageAttr[0].Value.StringValue)
	attrs := map[string]string{}
	for _, a := range m.Attribute {
		attrs[a.Name] = a.Value
	}
	require.Equal(t, "1", attrs["ApproximateReceiveCount"])

	// Path-style addressing, no QueueUrl.
	status, _ = queryPost(t, "http://"+b.SQSAddr()+"/000000000000/q", url.Values{"Action": {"DeleteMessage"}, "ReceiptHandle": {m.ReceiptHandle}})
	require.Equal(t, 200, status)

	_, r = queryPost(t, ep, url.Values{"Action": {"GetQueueAttributes"}, "QueueUrl": {qurl}, "AttributeName.1": {"VisibilityTimeout"}})
	require.Len(t, r.Result.Attribute, 1)
	require.Equal(t, "45", r.Result.Attribute[0].Value)

	status, r = queryPost(t, ep, url.Values{"Action": {"GetQueueUrl"}, "QueueName": {"nope"}})
	require.Equal(t, 400, status)
	require.Equal(t, "ErrorResponse", r.XMLName.Local)
	require.Equal(t, "AWS.SimpleQueueService.NonExistentQueue", r.Error.Code)
	require.Equal(t, "Sender", r.Error.Type)
	status, r = queryPost(t, ep, url.Values{"Action": {"Frobnicate"}})
	require.Equal(t, 400, status)
	require.Equal(t, "InvalidAction", r.Error.Code)
}

// TestSQSJSONErrorSpellings: every JSON error carries the model's shape in
// __type and the legacy code in x-amzn-query-error.
func TestSQSJSONErrorSpellings(t *testing.T) {
	t.Parallel()
	b, _ := startSQSTest(t)
	req, err := http.NewRequest("POST", "http://"+b.SQSAddr()+"/", strings.NewReader(`{"QueueName":"missing"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS.GetQueueUrl")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, 400, resp.StatusCode)
	require.Equal(t, "AWS.SimpleQueueService.NonExistentQueue;Sender", resp.Header.Get("x-amzn-query-error"))
	require.JSONEq(t, `{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}`, string(body))
	require.NotEmpty(t, resp.Header.Get("x-amzn-RequestId"))
}

func md5Hex(s string) string {
	return md5HexBytes([]byte(s))
}

func md5HexBytes(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}
