package broker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSQSFIFOQueue: message groups in order, deduplication answering
// with the original MessageId and SequenceNumber (also after a restart),
// ReceiveRequestAttemptId.
func TestSQSFIFOQueue(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, cl := startSQSTest(t, func(c *Config) { c.DataDir = dir })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fifo := map[string]string{"FifoQueue": "true"}
	_, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("nosuffix"), Attributes: fifo})
	require.Equal(t, "InvalidParameterValue", sqsCode(err))
	_, err = cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("x.fifo")})
	require.Equal(t, "InvalidParameterValue", sqsCode(err))
	_, err = cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("std"), Attributes: map[string]string{"ContentBasedDeduplication": "true"}})
	require.Equal(t, "InvalidAttributeName", sqsCode(err), "a FIFO-only attribute on a standard queue")
	q, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("jobs.fifo"), Attributes: fifo})
	require.NoError(t, err)

	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("d")})
	require.Equal(t, "MissingParameter", sqsCode(err))
	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("x"), MessageGroupId: aws.String("g")})
	require.Equal(t, "InvalidParameterValue", sqsCode(err), "no deduplication id and no content-based deduplication")
	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("x"), MessageGroupId: aws.String("g"),
		MessageDeduplicationId: aws.String("d"), DelaySeconds: 5})
	require.Equal(t, "InvalidParameterValue", sqsCode(err), "no per-message delay on a FIFO queue")

	send := func(group, dedup, body string) *awssqs.SendMessageOutput {
		out, err := cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(body),
			MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup)})
		require.NoError(t, err)
		require.NotEmpty(t, aws.ToString(out.SequenceNumber))
		return out
	}
	a := send("g1", "d1", "a")
	bb := send("g1", "d2", "b")
	c := send("g2", "d3", "c")
	dup := send("g1", "d1", "a again")
	require.Equal(t, aws.ToString(a.MessageId), aws.ToString(dup.MessageId), "a duplicate gets the original's MessageId")
	require.Equal(t, aws.ToString(a.SequenceNumber), aws.ToString(dup.SequenceNumber))
	require.Less(t, aws.ToString(a.SequenceNumber), aws.ToString(bb.SequenceNumber))

	// A batch whose first entry is a duplicate: the second's number is
	// where it is in the log.
	sb, err := cl.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("1"), MessageBody: aws.String("c again"), MessageGroupId: aws.String("g2"), MessageDeduplicationId: aws.String("d3")},
		{Id: aws.String("2"), MessageBody: aws.String("d"), MessageGroupId: aws.String("g2"), MessageDeduplicationId: aws.String("d4")},
	}})
	require.NoError(t, err)
	require.Len(t, sb.Successful, 2)
	require.Equal(t, aws.ToString(c.MessageId), aws.ToString(sb.Successful[0].MessageId))
	kc := newClient(t, b, kgo.ConsumeTopics("jobs.fifo"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var offsets = map[string]int64{}
	for len(offsets) < 4 {
		fs := kc.PollFetches(ctx)
		require.NoError(t, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) { offsets[string(r.Value)] = r.Offset })
	}
	require.NotContains(t, offsets, "a again", "the duplicate was not stored")
	require.Equal(t, "1"+padded(offsets["d"]), aws.ToString(sb.Successful[1].SequenceNumber))

	// In order within a group: up to 10 of one group per receive, locked
	// together; the group's next ones wait for all of them.
	r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, ReceiveRequestAttemptId: aws.String("try-1"),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	require.NoError(t, err)
	var order []string
	bodies := map[string]types.Message{}
	for _, m := range r.Messages {
		bodies[aws.ToString(m.Body)] = m
		order = append(order, aws.ToString(m.Body))
	}
	require.Equal(t, []string{"a", "b", "c", "d"}, order)
	require.Equal(t, "g1", bodies["a"].Attributes["MessageGroupId"])
	require.Equal(t, "d1", bodies["a"].Attributes["MessageDeduplicationId"])
	require.Equal(t, aws.ToString(a.SequenceNumber), bodies["a"].Attributes["SequenceNumber"])
	again, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, ReceiveRequestAttemptId: aws.String("try-1")})
	require.NoError(t, err)
	require.Len(t, again.Messages, len(r.Messages), "a retried attempt gets the same messages")
	require.Equal(t, aws.ToString(r.Messages[0].ReceiptHandle), aws.ToString(again.Messages[0].ReceiptHandle))
	send("g1", "d5", "e")
	_, err = cl.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: bodies["a"].ReceiptHandle})
	require.NoError(t, err)
	r, err = cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	require.NoError(t, err)
	require.Empty(t, r.Messages, "e waits for b too")
	_, err = cl.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: bodies["b"].ReceiptHandle})
	require.NoError(t, err)
	r, err = cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 2})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	require.Equal(t, "e", aws.ToString(r.Messages[0].Body), "g1's next once a and b are deleted")

	// Content-based deduplication: the body's SHA-256.
	cq, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("cbd.fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
	require.NoError(t, err)
	one, err := cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: cq.QueueUrl, MessageBody: aws.String("same"), MessageGroupId: aws.String("g")})
	require.NoError(t, err)
	two, err := cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: cq.QueueUrl, MessageBody: aws.String("same"), MessageGroupId: aws.String("g")})
	require.NoError(t, err)
	require.Equal(t, aws.ToString(one.MessageId), aws.ToString(two.MessageId))

	// After a restart the window is rebuilt from the log: still the
	// original's answer.
	kc.Close()
	require.NoError(t, b.Close())
	b2 := startTest(t, func(c *Config) { c.DataDir = dir; c.SQSAddr = "127.0.0.1:0" })
	cl2 := sqsClient(b2)
	u2, err := cl2.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("jobs.fifo")})
	require.NoError(t, err)
	after, err := cl2.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: u2.QueueUrl, MessageBody: aws.String("b again"),
		MessageGroupId: aws.String("g1"), MessageDeduplicationId: aws.String("d2")})
	require.NoError(t, err)
	require.Equal(t, aws.ToString(bb.MessageId), aws.ToString(after.MessageId))
	require.Equal(t, aws.ToString(bb.SequenceNumber), aws.ToString(after.SequenceNumber))
}

func padded(off int64) string {
	s := strconv.FormatInt(off, 10)
	for len(s) < 19 {
		s = "0" + s
	}
	return s
}
