package broker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
	moved := receiveEventually(t, ctx, cl, awssqs.ReceiveMessageInput{QueueUrl: dlq.QueueUrl,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	require.Equal(t, aws.ToString(sent.MessageId), aws.ToString(moved.MessageId), "the same MessageId in the dead-letter queue")
	require.Equal(t, "poison", aws.ToString(moved.Body))
	require.Equal(t, "arn:aws:sqs:us-east-1:000000000000:work", moved.Attributes["DeadLetterQueueSourceArn"])
	require.Equal(t, "3", moved.Attributes["ApproximateReceiveCount"], "2 receives in the source, then this one")
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

// TestSQSDelays: a message sent with DelaySeconds (or to a queue with
// one) is not received before then, and its receive count starts at 1.
func TestSQSDelays(t *testing.T) {
	t.Parallel()
	_, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("later")})
	require.NoError(t, err)
	sent := time.Now()
	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("in 2 s"), DelaySeconds: 2})
	require.NoError(t, err)
	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("now")})
	require.NoError(t, err)
	r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	require.Equal(t, "now", aws.ToString(r.Messages[0].Body))
	ga, err := cl.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []types.QueueAttributeName{"All"}})
	require.NoError(t, err)
	require.Equal(t, "1", ga.Attributes["ApproximateNumberOfMessagesDelayed"])
	require.Equal(t, "0", ga.Attributes["ApproximateNumberOfMessages"])
	r, err = cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount"}})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	require.Equal(t, "in 2 s", aws.ToString(r.Messages[0].Body))
	require.GreaterOrEqual(t, time.Since(sent), 2*time.Second)
	require.Equal(t, "1", r.Messages[0].Attributes["ApproximateReceiveCount"], "waiting out the delay is no receive")

	dq, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("delay-queue"), Attributes: map[string]string{"DelaySeconds": "1"}})
	require.NoError(t, err)
	sent = time.Now()
	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: dq.QueueUrl, MessageBody: aws.String("queue delay")})
	require.NoError(t, err)
	r, err = cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: dq.QueueUrl, WaitTimeSeconds: 10})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	require.GreaterOrEqual(t, time.Since(sent), time.Second)
	_, err = cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: dq.QueueUrl, MessageBody: aws.String("x"), DelaySeconds: 901})
	require.Equal(t, "InvalidParameterValue", sqsCode(err))
}

// TestSQSExposesKafkaTopic: CreateQueue of an existing Kafka topic makes
// it a queue: its records (from the earliest) are messages, and
// DeleteQueue leaves the topic.
func TestSQSExposesKafkaTopic(t *testing.T) {
	t.Parallel()
	b, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kc := newClient(t, b, kgo.AllowAutoTopicCreation())
	for _, v := range []string{"one", "two"} {
		require.NoError(t, kc.ProduceSync(ctx, &kgo.Record{Topic: "events", Value: []byte(v)}).FirstErr())
	}
	q, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("events")})
	require.NoError(t, err)
	r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Len(t, r.Messages, 2)
	require.Equal(t, "one", aws.ToString(r.Messages[0].Body))
	_, err = cl.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: q.QueueUrl})
	require.NoError(t, err)
	md, err := kadm.NewClient(kc).ListEndOffsets(ctx, "events")
	require.NoError(t, err)
	end, _ := md.Lookup("events", 0)
	require.NoError(t, end.Err, "the topic stays")
	require.Equal(t, int64(2), end.Offset)
}

func TestSQSPermissions(t *testing.T) {
	t.Parallel()
	_, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("shared")})
	require.NoError(t, err)
	_, err = cl.AddPermission(ctx, &awssqs.AddPermissionInput{QueueUrl: q.QueueUrl, Label: aws.String("p1"),
		AWSAccountIds: []string{"111122223333"}, Actions: []string{"SendMessage"}})
	require.NoError(t, err)
	_, err = cl.AddPermission(ctx, &awssqs.AddPermissionInput{QueueUrl: q.QueueUrl, Label: aws.String("p1"),
		AWSAccountIds: []string{"111122223333"}, Actions: []string{"SendMessage"}})
	require.Equal(t, "InvalidParameterValue", sqsCode(err), "a label twice")
	ga, err := cl.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []types.QueueAttributeName{"Policy"}})
	require.NoError(t, err)
	require.Contains(t, ga.Attributes["Policy"], `"Sid":"p1"`)
	require.Contains(t, ga.Attributes["Policy"], `"SQS:SendMessage"`)
	_, err = cl.RemovePermission(ctx, &awssqs.RemovePermissionInput{QueueUrl: q.QueueUrl, Label: aws.String("p1")})
	require.NoError(t, err)
	_, err = cl.RemovePermission(ctx, &awssqs.RemovePermissionInput{QueueUrl: q.QueueUrl, Label: aws.String("p1")})
	require.Equal(t, "InvalidParameterValue", sqsCode(err))
	ga, err = cl.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []types.QueueAttributeName{"All"}})
	require.NoError(t, err)
	require.NotContains(t, ga.Attributes, "Policy")
}

// TestSQSMessageMoveTask: a move task takes a dead-letter queue's
// messages back to the queue they came from, MessageId and all.
func TestSQSMessageMoveTask(t *testing.T) {
	t.Parallel()
	_, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, dlq, dlqARN := redrivePair(t, ctx, cl, "m")
	_, err := cl.StartMessageMoveTask(ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:m-src")})
	require.Equal(t, "InvalidParameterValue", sqsCode(err), "the source must be a dead-letter queue")
	_, err = cl.StartMessageMoveTask(ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:none")})
	var nf *types.ResourceNotFoundException
	require.ErrorAs(t, err, &nf)

	sent, err := cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: src, MessageBody: aws.String("back again")})
	require.NoError(t, err)
	r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: src, WaitTimeSeconds: 5})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1) // and its visibility runs out: to the dead-letter queue
	require.Eventually(t, func() bool {
		ga, err := cl.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: dlq, AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages"}})
		return err == nil && ga.Attributes["ApproximateNumberOfMessages"] == "1"
	}, 20*time.Second, 20*time.Millisecond)

	st, err := cl.StartMessageMoveTask(ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqARN), MaxNumberOfMessagesPerSecond: aws.Int32(50)})
	require.NoError(t, err)
	require.NotEmpty(t, aws.ToString(st.TaskHandle))
	r, err = cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: src, WaitTimeSeconds: 10})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	require.Equal(t, aws.ToString(sent.MessageId), aws.ToString(r.Messages[0].MessageId))
	require.Equal(t, "back again", aws.ToString(r.Messages[0].Body))
	_, err = cl.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: src, ReceiptHandle: r.Messages[0].ReceiptHandle})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		lt, err := cl.ListMessageMoveTasks(ctx, &awssqs.ListMessageMoveTasksInput{SourceArn: aws.String(dlqARN)})
		return err == nil && len(lt.Results) == 1 && aws.ToString(lt.Results[0].Status) == "COMPLETED" && lt.Results[0].ApproximateNumberOfMessagesMoved == 1
	}, 20*time.Second, 20*time.Millisecond)
	_, err = cl.CancelMessageMoveTask(ctx, &awssqs.CancelMessageMoveTaskInput{TaskHandle: st.TaskHandle})
	require.ErrorAs(t, err, &nf, "a finished task cannot be cancelled")
}

// TestSQSMoveTaskSurvivesRestart: a running move task resumes after a
// restart and finishes.
func TestSQSMoveTaskSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, cl := startSQSTest(t, func(c *Config) { c.DataDir = dir })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, _, dlqARN := redrivePair(t, ctx, cl, "r")
	for i := range 3 {
		_, err := cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: src, MessageBody: aws.String(strconv.Itoa(i))})
		require.NoError(t, err)
	}
	r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: src, MaxNumberOfMessages: 10, WaitTimeSeconds: 5})
	require.NoError(t, err)
	require.Len(t, r.Messages, 3) // their visibility runs out: all three to the dead-letter queue
	dlqURL := "http://" + b.SQSAddr() + "/000000000000/r-dlq"
	require.Eventually(t, func() bool {
		ga, err := cl.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &dlqURL, AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages"}})
		return err == nil && ga.Attributes["ApproximateNumberOfMessages"] == "3"
	}, 20*time.Second, 20*time.Millisecond)
	st, err := cl.StartMessageMoveTask(ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqARN), MaxNumberOfMessagesPerSecond: aws.Int32(1)})
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond) // one or two moved at 1 a second
	require.NoError(t, b.Close())

	b2 := startTest(t, func(c *Config) { c.DataDir = dir; c.SQSAddr = "127.0.0.1:0" })
	cl2 := sqsClient(b2)
	require.Eventually(t, func() bool {
		lt, err := cl2.ListMessageMoveTasks(ctx, &awssqs.ListMessageMoveTasksInput{SourceArn: aws.String(dlqARN)})
		return err == nil && len(lt.Results) == 1 && aws.ToString(lt.Results[0].Status) == "COMPLETED"
	}, 30*time.Second, 50*time.Millisecond, "the task resumed and finished")
	src2 := "http://" + b2.SQSAddr() + "/000000000000/r-src"
	got := map[string]bool{}
	for len(got) < 3 {
		m := receiveEventually(t, ctx, cl2, awssqs.ReceiveMessageInput{QueueUrl: &src2, VisibilityTimeout: 60})
		got[aws.ToString(m.Body)] = true
	}
	_ = st
}

// redrivePair creates <prefix>-dlq and <prefix>-src, whose messages go
// to it after one receive (visibility 1 s), and returns the source's and
// the dead-letter queue's URL and the latter's ARN.
func redrivePair(t *testing.T, ctx context.Context, cl *awssqs.Client, prefix string) (src, dlq *string, dlqARN string) {
	t.Helper()
	d, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(prefix + "-dlq")})
	require.NoError(t, err)
	dlqARN = "arn:aws:sqs:us-east-1:000000000000:" + prefix + "-dlq"
	q, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(prefix + "-src"), Attributes: map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqARN + `","maxReceiveCount":1}`, "VisibilityTimeout": "1"}})
	require.NoError(t, err)
	return q.QueueUrl, d.QueueUrl, dlqARN
}

// TestSQSMaxReceiveCountToAThousand: every maxReceiveCount AWS takes
// (1 to 1,000) is served, counts included past what a 6-bit delivery
// count held (63): a message received 70 times under a maxReceiveCount
// of 70 reports each receive's count and then moves to the dead-letter
// queue, not sooner.
func TestSQSMaxReceiveCountToAThousand(t *testing.T) {
	t.Parallel()
	_, cl := startSQSTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("many-dlq")})
	require.NoError(t, err)
	dlqARN := "arn:aws:sqs:us-east-1:000000000000:many-dlq"
	policy := func(n int) map[string]string {
		return map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, dlqARN, n)}
	}
	_, err = cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("thousand"), Attributes: policy(1000)})
	require.NoError(t, err)
	_, err = cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("too-many"), Attributes: policy(1001)})
	require.Equal(t, "InvalidParameterValue", sqsCode(err))

	attrs := policy(70)
	attrs["VisibilityTimeout"] = "0" // visible again at once
	src, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("seventy"), Attributes: attrs})
	require.NoError(t, err)
	sent, err := cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: src.QueueUrl, MessageBody: aws.String("again")})
	require.NoError(t, err)
	for n := 1; n <= 70; n++ {
		r, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: src.QueueUrl, WaitTimeSeconds: 5,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount"}})
		require.NoError(t, err)
		require.Len(t, r.Messages, 1, "receive %d", n)
		require.Equal(t, fmt.Sprint(n), r.Messages[0].Attributes["ApproximateReceiveCount"])
	}
	moved := receiveEventually(t, ctx, cl, awssqs.ReceiveMessageInput{QueueUrl: aws.String(strings.Replace(aws.ToString(src.QueueUrl), "seventy", "many-dlq", 1)),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	require.Equal(t, aws.ToString(sent.MessageId), aws.ToString(moved.MessageId))
	require.Equal(t, "71", moved.Attributes["ApproximateReceiveCount"], "70 receives in the source, then this one")
}
