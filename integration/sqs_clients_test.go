package integration

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The SQS API through the SDKs users run: boto3 (botocore 1.43, JSON
// protocol) and AWS CLI v1, both on the image's pyenv python3.

const boto3Script = `
import sys, json, boto3
from botocore import UNSIGNED
from botocore.config import Config
sqs = boto3.client("sqs", endpoint_url=sys.argv[1], region_name="us-east-1", config=Config(signature_version=UNSIGNED))
url = sqs.create_queue(QueueName="boto", Attributes={"VisibilityTimeout": "40"})["QueueUrl"]
ids = [sqs.send_message(QueueUrl=url, MessageBody="m%d" % i,
       MessageAttributes={"i": {"DataType": "Number", "StringValue": str(i)}})["MessageId"] for i in range(3)]
got = []
while len(got) < 3:
    r = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2,
                            MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"])
    for m in r.get("Messages", []):
        got.append({"id": m["MessageId"], "body": m["Body"], "i": m["MessageAttributes"]["i"]["StringValue"],
                    "count": m["Attributes"]["ApproximateReceiveCount"]})
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
# FIFO: groups in order, deduplication answering with the original.
f = sqs.create_queue(QueueName="boto.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
s1 = sqs.send_message(QueueUrl=f, MessageBody="one", MessageGroupId="g")
s2 = sqs.send_message(QueueUrl=f, MessageBody="one", MessageGroupId="g")
sqs.send_message_batch(QueueUrl=f, Entries=[{"Id": "a", "MessageBody": "two", "MessageGroupId": "g"},
                                            {"Id": "b", "MessageBody": "three", "MessageGroupId": "g"}])
fifo = [m["Body"] for m in sqs.receive_message(QueueUrl=f, MaxNumberOfMessages=10)["Messages"]]
# Dead-letter queue, tags, visibility, purge, deletion.
dlq = sqs.create_queue(QueueName="boto-dlq")["QueueUrl"]
dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
src = sqs.create_queue(QueueName="boto-src", Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})},
                       tags={"team": "t"})["QueueUrl"]
sources = sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"]
sqs.send_message(QueueUrl=src, MessageBody="poison")
m = sqs.receive_message(QueueUrl=src, WaitTimeSeconds=2)["Messages"][0]
sqs.change_message_visibility(QueueUrl=src, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
dead = sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=5, MessageSystemAttributeNames=["All"]).get("Messages", [])
tags = sqs.list_queue_tags(QueueUrl=src)["Tags"]
sqs.purge_queue(QueueUrl=url)
sqs.delete_queue(QueueUrl=src)
names = sorted(u.rsplit("/", 1)[1] for u in sqs.list_queues()["QueueUrls"])
err = {}
try:
    sqs.get_queue_url(QueueName="missing")
except sqs.exceptions.QueueDoesNotExist as e:
    err = {"class": type(e).__name__, "code": e.response["Error"]["Code"]}
print(json.dumps({"ids": ids, "got": got, "attrs": attrs, "err": err, "dup": s1["MessageId"] == s2["MessageId"],
                  "fifo": fifo, "sources": sources, "dead": [d["Body"] for d in dead],
                  "dead_src": dead[0]["Attributes"].get("DeadLetterQueueSourceArn") if dead else "", "tags": tags, "names": names}))
`

func pyenvPython(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		missingTool(t, "python3 not on PATH")
	}
	if err := exec.Command(py, "-c", "import boto3").Run(); err != nil {
		missingTool(t, py+" cannot import boto3 (the image's pyenv python3 has it)")
	}
	return py
}

func TestSQSBoto3(t *testing.T) {
	t.Parallel()
	py := pyenvPython(t)
	b := startBroker(t, withSQS())
	ctx := testContext(t)
	out := run(t, ctx, "", py, "-c", boto3Script, "http://"+b.SQSAddr)
	var res struct {
		IDs []string `json:"ids"`
		Got []struct {
			ID, Body, I, Count string
		} `json:"got"`
		Attrs   map[string]string `json:"attrs"`
		Err     map[string]string `json:"err"`
		Dup     bool              `json:"dup"`
		FIFO    []string          `json:"fifo"`
		Sources []string          `json:"sources"`
		Dead    []string          `json:"dead"`
		DeadSrc string            `json:"dead_src"`
		Tags    map[string]string `json:"tags"`
		Names   []string          `json:"names"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Len(t, res.Got, 3)
	for i, g := range res.Got {
		require.Equal(t, res.IDs[i], g.ID)
		require.Equal(t, "m"+g.I, g.Body)
		require.Equal(t, "1", g.Count)
	}
	require.Equal(t, "40", res.Attrs["VisibilityTimeout"])
	require.Equal(t, "0", res.Attrs["ApproximateNumberOfMessages"])
	require.Equal(t, map[string]string{"class": "QueueDoesNotExist", "code": "AWS.SimpleQueueService.NonExistentQueue"}, res.Err)
	require.True(t, res.Dup, "content-based deduplication answers with the original MessageId")
	require.Equal(t, []string{"one", "two", "three"}, res.FIFO, "one group, in order, in one receive")
	require.Len(t, res.Sources, 1)
	require.Equal(t, []string{"poison"}, res.Dead)
	require.Equal(t, "arn:aws:sqs:us-east-1:000000000000:boto-src", res.DeadSrc)
	require.Equal(t, map[string]string{"team": "t"}, res.Tags)
	require.Equal(t, []string{"boto", "boto-dlq", "boto.fifo"}, res.Names)
}

func TestSQSAWSCLIv1(t *testing.T) {
	t.Parallel()
	aws, err := exec.LookPath("aws")
	if err != nil {
		missingTool(t, "aws (AWS CLI v1, on the image's pyenv) not on PATH")
	}
	b := startBroker(t, withSQS())
	ctx := testContext(t)
	cli := func(args ...string) string {
		return run(t, ctx, "", aws, append([]string{"--endpoint-url", "http://" + b.SQSAddr, "--no-sign-request",
			"--region", "us-east-1", "--output", "json", "sqs"}, args...)...)
	}
	var cq struct{ QueueUrl string }
	require.NoError(t, json.Unmarshal([]byte(cli("create-queue", "--queue-name", "cli")), &cq))
	require.True(t, strings.HasSuffix(cq.QueueUrl, "/000000000000/cli"), cq.QueueUrl)
	cli("send-message", "--queue-url", cq.QueueUrl, "--message-body", "from the cli")
	var rm struct {
		Messages []struct{ Body, ReceiptHandle string }
	}
	require.NoError(t, json.Unmarshal([]byte(cli("receive-message", "--queue-url", cq.QueueUrl, "--wait-time-seconds", "2")), &rm))
	require.Len(t, rm.Messages, 1)
	require.Equal(t, "from the cli", rm.Messages[0].Body)
	cli("delete-message", "--queue-url", cq.QueueUrl, "--receipt-handle", rm.Messages[0].ReceiptHandle)
	var lq struct{ QueueUrls []string }
	require.NoError(t, json.Unmarshal([]byte(cli("list-queues")), &lq))
	require.Equal(t, []string{cq.QueueUrl}, lq.QueueUrls)
}
