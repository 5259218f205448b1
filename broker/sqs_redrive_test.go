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

// TestSQSRedrive: a message received maxReceiveCount times and not
// deleted moves to the dead-letter queue with its MessageId, and
// DeadLetterQueueSourceArn names the source.
func TestSQSRedrive(t *testing.T) {
	t.Parallel()
	_, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dlq, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("work-dlq")})
	require.NoError(t, err)
	dlqARN := "arn:aws:sqs:us-east-1:000000000000:work-dlq"
	for _, bad := range []struct{ policy, code string }{
		{`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:nope","maxReceiveCount":2}`, "InvalidParameterValue"},
		{`{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":0}`, "InvalidParameterValue"},
		{`{"deadLetterTargetArn":"` + dlqARN + `"}`, "InvalidParameterValue"},
		{`not json`, "InvalidAttributeValue"},
	} {
		_, err = cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("bad"), Attributes: map[string]string{"RedrivePolicy": bad.policy}})
		require.Equal(t, bad.code, sqsCode(err), bad.policy)
	}
	src, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("work"), Attributes: map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":"2"}`, "VisibilityTimeout": "1"}})
	require.NoError(t, err)
	ga, err := cl.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: src.QueueUrl, AttributeNames: []types.QueueAttributeName{"RedrivePolicy"}})
	require.NoError(t, err)
	require.JSONEq(t, `{"deadLetterTargetArn":"`+dlqARN+`","maxReceiveCount":2}`, ga.Attributes["RedrivePolicy"])
	ls, err := cl.ListDeadLetterSourceQueues(ctx, &awssqs.ListDeadLetterSourceQueuesInput{QueueUrl: dlq.QueueUrl})
	require.NoError(t, err)
	require.Equal(t, []string{aws.ToString(src.QueueUrl)}, ls.QueueUrls)

	sent, err := cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: src.QueueUrl, MessageBody: aws.String("poison")})
	require.NoError(t, err)
	for n := 1; n <= 2; n++ {
		r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: src.QueueUrl, WaitTimeSeconds: 5,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount"}})
		require.NoError(t, err)
		require.Len(t, r.Messages, 1, "receive %d", n)
		// Not deleted: its visibility (1 s) runs out.
	}
	var moved *types.Message
	require.Eventually(t, func() bool {
		r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: dlq.QueueUrl, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil || len(r.Messages) == 0 {
			return false
		}
		moved = &r.Messages[0]
		return true
	}, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, aws.ToString(sent.MessageId), aws.ToString(moved.MessageId), "the same MessageId in the dead-letter queue")
	require.Equal(t, "poison", aws.ToString(moved.Body))
	require.Equal(t, "arn:aws:sqs:us-east-1:000000000000:work", moved.Attributes["DeadLetterQueueSourceArn"])
	r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: src.QueueUrl, WaitTimeSeconds: 2})
	require.NoError(t, err)
	require.Empty(t, r.Messages, "gone from the source")

	// A RedriveAllowPolicy that denies the source refuses the policy.
	_, err = cl.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: dlq.QueueUrl, Attributes: map[string]string{
		"RedriveAllowPolicy": `{"redrivePermission":"denyAll"}`}})
	require.NoError(t, err)
	_, err = cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("other"), Attributes: map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":3}`}})
	require.Equal(t, "InvalidParameterValue", sqsCode(err))
	_, err = cl.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: dlq.QueueUrl, Attributes: map[string]string{
		"RedriveAllowPolicy": `{"redrivePermission":"byQueue"}`}})
	require.Equal(t, "InvalidAttributeValue", sqsCode(err))
	// "" removes the policy: no limit again.
	_, err = cl.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: src.QueueUrl, Attributes: map[string]string{"RedrivePolicy": ""}})
	require.NoError(t, err)
	ga, err = cl.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: src.QueueUrl, AttributeNames: []types.QueueAttributeName{"All"}})
	require.NoError(t, err)
	require.NotContains(t, ga.Attributes, "RedrivePolicy")
}
