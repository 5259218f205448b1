package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startSQSTest starts a broker serving the SQS API on a free port and
// returns an aws-sdk-go-v2 client of it (anonymous: open mode).
func startSQSTest(t *testing.T, mut ...func(*Config)) (*Broker, *awssqs.Client) {
	t.Helper()
	b := startTest(t, append([]func(*Config){func(c *Config) { c.SQSAddr = "127.0.0.1:0" }}, mut...)...)
	return b, sqsClient(b)
}

func sqsClient(b *Broker) *awssqs.Client {
	return awssqs.New(awssqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://" + b.SQSAddr()),
		Credentials:  aws.AnonymousCredentials{},
		Retryer:      aws.NopRetryer{},
	})
}

// receiveEventually receives from in.QueueUrl until a message comes
// (at most 20 s) and returns the first.
func receiveEventually(t *testing.T, ctx context.Context, cl *awssqs.Client, in awssqs.ReceiveMessageInput) types.Message {
	t.Helper()
	var got types.Message
	in.WaitTimeSeconds = 1
	require.Eventually(t, func() bool {
		r, err := cl.ReceiveMessage(ctx, &in)
		if err != nil || len(r.Messages) == 0 {
			return false
		}
		got = r.Messages[0]
		return true
	}, 20*time.Second, 10*time.Millisecond)
	return got
}

func sqsCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func TestSQSStandardQueueRoundTrip(t *testing.T) {
	t.Parallel()
	b, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cq, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("orders")})
	require.NoError(t, err)
	url := aws.ToString(cq.QueueUrl)
	require.Equal(t, "http://"+b.SQSAddr()+"/000000000000/orders", url)
	again, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("orders")})
	require.NoError(t, err, "CreateQueue is idempotent")
	require.Equal(t, url, aws.ToString(again.QueueUrl))
	_, err = cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("orders"),
		Attributes: map[string]string{"VisibilityTimeout": "5"}})
	var exists *types.QueueNameExists
	require.ErrorAs(t, err, &exists)
	require.Equal(t, "QueueAlreadyExists", sqsCode(err))

	sent, err := cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("hello"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"color": {DataType: aws.String("String"), StringValue: aws.String("blue")},
			"n":     {DataType: aws.String("Number"), StringValue: aws.String("42")},
			"raw":   {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2}},
		}})
	require.NoError(t, err) // the SDK checks MD5OfMessageBody
	require.Equal(t, "5d41402abc4b2a76b9719d911017c592", aws.ToString(sent.MD5OfMessageBody))

	recv, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		WaitTimeSeconds:             1})
	require.NoError(t, err)
	require.Len(t, recv.Messages, 1)
	m := recv.Messages[0]
	require.Equal(t, aws.ToString(sent.MessageId), aws.ToString(m.MessageId))
	require.Equal(t, "hello", aws.ToString(m.Body))
	require.Equal(t, aws.ToString(sent.MD5OfMessageAttributes), aws.ToString(m.MD5OfMessageAttributes))
	require.Equal(t, "blue", aws.ToString(m.MessageAttributes["color"].StringValue))
	require.Equal(t, []byte{0, 1, 2}, m.MessageAttributes["raw"].BinaryValue)
	require.Equal(t, "1", m.Attributes["ApproximateReceiveCount"])

	// Invisible while held; the handle deletes it.
	empty, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url})
	require.NoError(t, err)
	require.Empty(t, empty.Messages)
	attrs, err := cl.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	require.NoError(t, err)
	require.Equal(t, "0", attrs.Attributes["ApproximateNumberOfMessages"])
	require.Equal(t, "1", attrs.Attributes["ApproximateNumberOfMessagesNotVisible"])
	require.Equal(t, "30", attrs.Attributes["VisibilityTimeout"])
	require.Equal(t, "arn:aws:sqs:us-east-1:000000000000:orders", attrs.Attributes["QueueArn"])
	_, err = cl.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
	require.NoError(t, err)
	_, err = cl.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
	require.NoError(t, err, "a stale handle deletes nothing and succeeds")
	_, err = cl.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: aws.String("forged")})
	var bad *types.ReceiptHandleIsInvalid
	require.ErrorAs(t, err, &bad)

	// The same queue through Kafka: the record, its headers.
	kc := newClient(t, b, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := kc.PollFetches(ctx)
	require.NoError(t, fs.Err0())
	recs := fs.Records()
	require.Len(t, recs, 1)
	require.Equal(t, "hello", string(recs[0].Value))
	require.Equal(t, "sqs.message-id", recs[0].Headers[0].Key)
	require.Equal(t, aws.ToString(sent.MessageId), string(recs[0].Headers[0].Value))

	// A Kafka producer's record is a message too, with a stable id.
	require.NoError(t, kc.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("from kafka")}).FirstErr())
	recv, err = cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 2, VisibilityTimeout: 1})
	require.NoError(t, err)
	require.Len(t, recv.Messages, 1)
	require.Equal(t, "from kafka", aws.ToString(recv.Messages[0].Body))
	first := aws.ToString(recv.Messages[0].MessageId)
	// Its visibility (1 s) runs out: received again, same id, count 2.
	recv, err = cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 5,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
	require.NoError(t, err)
	require.Len(t, recv.Messages, 1)
	require.Equal(t, first, aws.ToString(recv.Messages[0].MessageId))
	require.Equal(t, "2", recv.Messages[0].Attributes["ApproximateReceiveCount"])
}

func TestSQSBatchesVisibilityAndRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, cl := startSQSTest(t, func(c *Config) { c.DataDir = dir })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cq, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("jobs"), Attributes: map[string]string{"VisibilityTimeout": "60"}})
	require.NoError(t, err)
	url := cq.QueueUrl

	var entries []types.SendMessageBatchRequestEntry
	for i := range 10 {
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("e", i)), MessageBody: aws.String(fmt.Sprint("job ", i))})
	}
	entries[3].MessageBody = aws.String("") // fails alone
	sb, err := cl.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: url, Entries: entries})
	require.NoError(t, err)
	require.Len(t, sb.Successful, 9)
	require.Len(t, sb.Failed, 1)
	require.Equal(t, "e3", aws.ToString(sb.Failed[0].Id))
	require.Equal(t, "MissingParameter", aws.ToString(sb.Failed[0].Code))
	require.True(t, sb.Failed[0].SenderFault)

	_, err = cl.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: url, Entries: append(entries, entries[0])})
	var tooMany *types.TooManyEntriesInBatchRequest
	require.ErrorAs(t, err, &tooMany)
	_, err = cl.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("x"), MessageBody: aws.String("extra")}}})
	require.NoError(t, err)
	_, err = cl.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: url, Entries: []types.SendMessageBatchRequestEntry{entries[0], entries[0]}})
	var dup *types.BatchEntryIdsNotDistinct
	require.ErrorAs(t, err, &dup)

	recv, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: url, MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Len(t, recv.Messages, 10)
	// Delete four, release two (visibility 0), keep four held for 60 s.
	var del []types.DeleteMessageBatchRequestEntry
	for i, m := range recv.Messages[:4] {
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String("bad"), ReceiptHandle: aws.String("nope")})
	db, err := cl.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: url, Entries: del})
	require.NoError(t, err)
	require.Len(t, db.Successful, 4)
	require.Len(t, db.Failed, 1)
	require.Equal(t, "ReceiptHandleIsInvalid", aws.ToString(db.Failed[0].Code))
	var cmv []types.ChangeMessageVisibilityBatchRequestEntry
	for i, m := range recv.Messages[4:6] {
		cmv = append(cmv, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
	}
	cb, err := cl.ChangeMessageVisibilityBatch(ctx, &awssqs.ChangeMessageVisibilityBatchInput{QueueUrl: url, Entries: cmv})
	require.NoError(t, err)
	require.Len(t, cb.Successful, 2)
	// A deleted message's visibility cannot change.
	_, err = cl.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: url, ReceiptHandle: recv.Messages[0].ReceiptHandle, VisibilityTimeout: 10})
	var notInflight *types.MessageNotInflight
	require.ErrorAs(t, err, &notInflight)

	again, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: url, MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Len(t, again.Messages, 2, "the two released")

	// A restart: the deletions hold; what was held is visible again.
	require.NoError(t, b.Close())
	b2 := startTest(t, func(c *Config) { c.DataDir = dir; c.SQSAddr = "127.0.0.1:0" })
	cl2 := sqsClient(b2)
	url2, err := cl2.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("jobs")})
	require.NoError(t, err)
	// A handle of the process before: stale, though the record's delivery
	// count went back to what the next receive gives it.
	_, err = cl2.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: url2.QueueUrl, ReceiptHandle: recv.Messages[6].ReceiptHandle})
	require.NoError(t, err, "a stale handle deletes nothing and succeeds")
	_, err = cl2.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: url2.QueueUrl, ReceiptHandle: recv.Messages[6].ReceiptHandle, VisibilityTimeout: 10})
	require.ErrorAs(t, err, &notInflight)
	got := map[string]bool{}
	for {
		r, err := cl2.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: url2.QueueUrl, MaxNumberOfMessages: 10})
		require.NoError(t, err)
		if len(r.Messages) == 0 {
			break
		}
		for _, m := range r.Messages {
			got[aws.ToString(m.Body)] = true
		}
	}
	require.Len(t, got, 6, "10 sent, 4 deleted")
	require.True(t, got[aws.ToString(recv.Messages[6].Body)], "the stale delete deleted nothing")
	for _, m := range recv.Messages[:4] {
		require.False(t, got[aws.ToString(m.Body)], "%s was deleted", aws.ToString(m.Body))
	}
}

func TestSQSQueueAdministration(t *testing.T) {
	t.Parallel()
	_, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range []string{"a-1", "a-2", "b-1"} {
		_, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(n), Tags: map[string]string{"team": "x"}})
		require.NoError(t, err)
	}
	lq, err := cl.ListQueues(ctx, &awssqs.ListQueuesInput{QueueNamePrefix: aws.String("a-")})
	require.NoError(t, err)
	require.Len(t, lq.QueueUrls, 2)
	page, err := cl.ListQueues(ctx, &awssqs.ListQueuesInput{MaxResults: aws.Int32(2)})
	require.NoError(t, err)
	require.Len(t, page.QueueUrls, 2)
	require.NotNil(t, page.NextToken)
	rest, err := cl.ListQueues(ctx, &awssqs.ListQueuesInput{MaxResults: aws.Int32(2), NextToken: page.NextToken})
	require.NoError(t, err)
	require.Len(t, rest.QueueUrls, 1)
	require.Nil(t, rest.NextToken)

	u, err := cl.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("a-1")})
	require.NoError(t, err)
	_, err = cl.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: u.QueueUrl, Attributes: map[string]string{"VisibilityTimeout": "43201"}})
	var badAttr *types.InvalidAttributeValue
	require.ErrorAs(t, err, &badAttr)
	_, err = cl.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: u.QueueUrl, Attributes: map[string]string{"Bogus": "1"}})
	var badName *types.InvalidAttributeName
	require.ErrorAs(t, err, &badName)
	_, err = cl.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: u.QueueUrl, Attributes: map[string]string{"MessageRetentionPeriod": "60"}})
	require.NoError(t, err)
	ga, err := cl.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl, AttributeNames: []types.QueueAttributeName{"MessageRetentionPeriod"}})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"MessageRetentionPeriod": "60"}, ga.Attributes)

	_, err = cl.TagQueue(ctx, &awssqs.TagQueueInput{QueueUrl: u.QueueUrl, Tags: map[string]string{"env": "test"}})
	require.NoError(t, err)
	_, err = cl.UntagQueue(ctx, &awssqs.UntagQueueInput{QueueUrl: u.QueueUrl, TagKeys: []string{"team"}})
	require.NoError(t, err)
	tags, err := cl.ListQueueTags(ctx, &awssqs.ListQueueTagsInput{QueueUrl: u.QueueUrl})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"env": "test"}, tags.Tags)

	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: u.QueueUrl, MessageBody: aws.String("x")})
	require.NoError(t, err)
	_, err = cl.PurgeQueue(ctx, &awssqs.PurgeQueueInput{QueueUrl: u.QueueUrl})
	require.NoError(t, err)
	_, err = cl.PurgeQueue(ctx, &awssqs.PurgeQueueInput{QueueUrl: u.QueueUrl})
	var purging *types.PurgeQueueInProgress
	require.ErrorAs(t, err, &purging)
	r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: u.QueueUrl})
	require.NoError(t, err)
	require.Empty(t, r.Messages, "purged")

	_, err = cl.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: u.QueueUrl})
	require.NoError(t, err)
	_, err = cl.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("a-1")})
	var gone *types.QueueDoesNotExist
	require.ErrorAs(t, err, &gone)
	require.Equal(t, "AWS.SimpleQueueService.NonExistentQueue", sqsCode(err))
	_, err = cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("a-1")})
	var recently *types.QueueDeletedRecently
	require.ErrorAs(t, err, &recently)

	_, err = cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("bad name")})
	require.Equal(t, "InvalidParameterValue", sqsCode(err))
	_, err = cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: u.QueueUrl})
	require.ErrorAs(t, err, &gone)
}

func TestSQSLongPoll(t *testing.T) {
	t.Parallel()
	_, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cq, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("poll")})
	require.NoError(t, err)
	done := make(chan *awssqs.ReceiveMessageOutput, 1)
	start := time.Now()
	go func() {
		r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: cq.QueueUrl, WaitTimeSeconds: 10})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	time.Sleep(300 * time.Millisecond)
	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: cq.QueueUrl, MessageBody: aws.String("wake")})
	require.NoError(t, err)
	r := <-done
	require.Len(t, r.Messages, 1, "the long poll returns at the first message")
	require.Less(t, time.Since(start), 9*time.Second)
	// Nothing there: it waits its time out and returns empty.
	start = time.Now()
	r, err = cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: cq.QueueUrl, WaitTimeSeconds: 1})
	require.NoError(t, err)
	require.Empty(t, r.Messages)
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond)
}
