package broker

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
)

// Regression tests from a review of the SQS change.

// A delayed message polled with VisibilityTimeout=0 was acquired with a
// lock already due; Defer first expired it, which counted a delivery
// (and at maxReceiveCount dead-lettered it), and then found nothing to
// defer. Receives that may defer now lock for share's deferGuard first.
func TestSQSReviewDelayedMessageZeroVisibility(t *testing.T) {
	t.Parallel()
	_, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("rv-dlq")})
	require.NoError(t, err)
	q, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("rv"), Attributes: map[string]string{"VisibilityTimeout": "0",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:rv-dlq","maxReceiveCount":1}`}})
	require.NoError(t, err)
	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("later"), DelaySeconds: 2})
	require.NoError(t, err)
	for i := 0; i < 3; i++ { // polls during the delay
		r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, VisibilityTimeout: 0})
		require.NoError(t, err)
		require.Empty(t, r.Messages)
	}
	time.Sleep(2500 * time.Millisecond)
	r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 2,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount"}})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1, "the delayed message was never delivered, yet it is gone (dead-lettered)")
	require.Equal(t, "1", r.Messages[0].Attributes["ApproximateReceiveCount"])
}

// Same without a redrive policy: each zero-visibility poll during the
// delay counted a receive.
func TestSQSReviewDelayedMessageZeroVisibilityCount(t *testing.T) {
	t.Parallel()
	_, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("rv2"), Attributes: map[string]string{"VisibilityTimeout": "0"}})
	require.NoError(t, err)
	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("later"), DelaySeconds: 2})
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, VisibilityTimeout: 0})
		require.NoError(t, err)
		require.Empty(t, r.Messages)
	}
	time.Sleep(2500 * time.Millisecond)
	r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 2,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount"}})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	require.Equal(t, "1", r.Messages[0].Attributes["ApproximateReceiveCount"], "waiting out a delay is no receive")
}

// Visible messages behind more than 2*MaxNumberOfMessages delayed ones
// were not returned by a long poll: each try acquired (and deferred) one
// batch per partition, then waited for a wake-up that never came.
func TestSQSReviewLongPollBehindDelayed(t *testing.T) {
	t.Parallel()
	_, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("rv3")})
	require.NoError(t, err)
	var entries []types.SendMessageBatchRequestEntry
	for i := 0; i < 10; i++ {
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(string(rune('a' + i))), MessageBody: aws.String("d"), DelaySeconds: 60})
	}
	for i := 0; i < 3; i++ {
		_, err = cl.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: entries})
		require.NoError(t, err)
	}
	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("visible")})
	require.NoError(t, err)
	start := time.Now()
	r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 3})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1, "after %v", time.Since(start))
	require.Less(t, time.Since(start), time.Second)
}

// From a second review: a FIFO message's MessageId derives from where it
// is, so its dead-letter copy (elsewhere) had another one.
func TestSQSReviewFIFODeadLetterMessageID(t *testing.T) {
	t.Parallel()
	_, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dlq, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("d.fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
	require.NoError(t, err)
	src, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("s.fifo"), Attributes: map[string]string{
		"FifoQueue": "true", "ContentBasedDeduplication": "true", "VisibilityTimeout": "1",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:d.fifo","maxReceiveCount":1}`}})
	require.NoError(t, err)
	sent, err := cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: src.QueueUrl, MessageBody: aws.String("poison"), MessageGroupId: aws.String("g")})
	require.NoError(t, err)
	r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: src.QueueUrl, WaitTimeSeconds: 5})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	moved := receiveEventually(t, ctx, cl, awssqs.ReceiveMessageInput{QueueUrl: dlq.QueueUrl, VisibilityTimeout: 1})
	require.Equal(t, aws.ToString(sent.MessageId), aws.ToString(moved.MessageId))
	// And back to the source with a move task: still the same.
	_, err = cl.StartMessageMoveTask(ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:d.fifo")})
	require.NoError(t, err)
	back := receiveEventually(t, ctx, cl, awssqs.ReceiveMessageInput{QueueUrl: src.QueueUrl})
	require.Equal(t, aws.ToString(sent.MessageId), aws.ToString(back.MessageId))
}

// From a second review: with batches of one group, a due record was
// returned while an earlier one of its group waited out its delay.
func TestSQSReviewFIFOOrderedBatchDeferral(t *testing.T) {
	t.Parallel()
	_, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("o.fifo"), Attributes: map[string]string{
		"FifoQueue": "true", "ContentBasedDeduplication": "true", "DelaySeconds": "2"}})
	require.NoError(t, err)
	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("first"), MessageGroupId: aws.String("g")})
	require.NoError(t, err)
	_, err = cl.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: q.QueueUrl, Attributes: map[string]string{"DelaySeconds": "0"}})
	require.NoError(t, err)
	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("second"), MessageGroupId: aws.String("g")})
	require.NoError(t, err)
	r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Empty(t, r.Messages, "second waits for first, which waits out its delay")
	r, err = cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 10})
	require.NoError(t, err)
	var bodies []string
	for _, m := range r.Messages {
		bodies = append(bodies, aws.ToString(m.Body))
	}
	require.Equal(t, []string{"first", "second"}, bodies)
}
