package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/sharegroup/store"
)

// TestSQSDelayedCount: ApproximateNumberOfMessagesDelayed counts delayed
// messages no receive has reached yet (read from the log past the share
// group's end offset), not only those a receive acquired and deferred,
// and ApproximateNumberOfMessages leaves them out; both on a queue never
// received from and on one whose share group has state.
func TestSQSDelayedCount(t *testing.T) {
	t.Parallel()
	_, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	counts := func(url *string) (visible, notVisible, delayed string) {
		t.Helper()
		ga, err := cl.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: []types.QueueAttributeName{
			"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"}})
		require.NoError(t, err)
		return ga.Attributes["ApproximateNumberOfMessages"], ga.Attributes["ApproximateNumberOfMessagesNotVisible"], ga.Attributes["ApproximateNumberOfMessagesDelayed"]
	}
	send := func(url *string, delays ...int32) {
		t.Helper()
		var entries []types.SendMessageBatchRequestEntry
		for i, d := range delays {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(fmt.Sprint("m", i)), DelaySeconds: d})
		}
		out, err := cl.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: url, Entries: entries})
		require.NoError(t, err)
		require.Empty(t, out.Failed)
	}

	q, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("delayed-count")})
	require.NoError(t, err)
	send(q.QueueUrl, 3, 0, 3, 0, 3) // never received from: no share state yet
	v, nv, d := counts(q.QueueUrl)
	require.Equal(t, []string{"2", "0", "3"}, []string{v, nv, d}, "visible, not visible, delayed")

	r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Len(t, r.Messages, 2)
	v, nv, d = counts(q.QueueUrl) // the receive deferred the delayed ones: still delayed
	require.Equal(t, []string{"0", "2", "3"}, []string{v, nv, d})

	send(q.QueueUrl, 3, 0) // past the share group's end offset now
	v, nv, d = counts(q.QueueUrl)
	require.Equal(t, []string{"1", "2", "4"}, []string{v, nv, d})

	require.Eventually(t, func() bool { v, _, d = counts(q.QueueUrl); return d == "0" }, 15*time.Second, 100*time.Millisecond)
	require.Equal(t, "5", v, "the delays ran out: visible")

	// A delay queue: every message is delayed by the queue's DelaySeconds.
	dq, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("delay-queue-count"), Attributes: map[string]string{"DelaySeconds": "2"}})
	require.NoError(t, err)
	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: dq.QueueUrl, MessageBody: aws.String("x")})
	require.NoError(t, err)
	v, nv, d = counts(dq.QueueUrl)
	require.Equal(t, []string{"0", "0", "1"}, []string{v, nv, d})
	require.Eventually(t, func() bool { v, _, d = counts(dq.QueueUrl); return d == "0" && v == "1" }, 15*time.Second, 100*time.Millisecond)
}

// TestSQSFirstReceiveTimestamp: ApproximateFirstReceiveTimestamp is the
// first receive's time on every later receive too.
func TestSQSFirstReceiveTimestamp(t *testing.T) {
	t.Parallel()
	_, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("first-receive"), Attributes: map[string]string{"VisibilityTimeout": "1"}})
	require.NoError(t, err)
	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("again")})
	require.NoError(t, err)
	var first string
	for n := 1; n <= 3; n++ {
		r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 5,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}})
		require.NoError(t, err)
		require.Len(t, r.Messages, 1, "receive %d", n)
		got := r.Messages[0].Attributes["ApproximateFirstReceiveTimestamp"]
		require.NotEmpty(t, got, "receive %d", n)
		require.Equal(t, fmt.Sprint(n), r.Messages[0].Attributes["ApproximateReceiveCount"])
		if n == 1 {
			first = got
		}
		require.Equal(t, first, got, "receive %d", n)
	}
}

// TestSQSDelayedCountAfterResetEarlier: the delay scan remembers how far
// it read and drops what fell below the share-partition's end offset; a
// reset to an earlier offset (AlterShareGroupOffsets) brings records
// below that back past it, and a delayed one among them, no longer
// deferred by the window, is read again and still counts as delayed
// (found by review: it counted as visible).
func TestSQSDelayedCountAfterResetEarlier(t *testing.T) {
	b, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	counts := func(url *string) []string {
		t.Helper()
		ga, err := cl.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: []types.QueueAttributeName{
			"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"}})
		require.NoError(t, err)
		return []string{ga.Attributes["ApproximateNumberOfMessages"], ga.Attributes["ApproximateNumberOfMessagesNotVisible"], ga.Attributes["ApproximateNumberOfMessagesDelayed"]}
	}
	q, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("reset-earlier")})
	require.NoError(t, err)
	var entries []types.SendMessageBatchRequestEntry
	for i, d := range []int32{0, 60} {
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(fmt.Sprint("m", i)), DelaySeconds: d})
	}
	out, err := cl.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: entries})
	require.NoError(t, err)
	require.Empty(t, out.Failed)
	require.Equal(t, []string{"1", "0", "1"}, counts(q.QueueUrl))
	r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 30})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	require.Equal(t, []string{"0", "1", "1"}, counts(q.QueueUrl))
	top := b.topics.Get("reset-earlier")
	require.NotNil(t, top)
	require.Equal(t, int16(0), b.shares.ResetOffset(store.Key{Group: "sqs.reset-earlier", TopicID: top.ID, Partition: 0}, -2))
	// Both records are Available again; m1's delay has ~60 s to go.
	require.Equal(t, []string{"1", "0", "1"}, counts(q.QueueUrl), "visible, not visible, delayed after a reset to the earliest offset")
}
