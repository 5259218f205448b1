package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/shoal-mq/shoal/broker/acl"
)

// TestSQSSigV4: with shoal.sqs.auth=sigv4 only requests signed with a
// configured key pass; the SDK's own signing is the reference.
func TestSQSSigV4(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(file, []byte("# test keys\nAKIDALICE secret-alice User:alice\nAKIDBOB secret-bob\n"), 0o600))
	b := startTest(t, func(c *Config) { c.SQSAddr, c.SQSAuth, c.SQSCredentialsFile = "127.0.0.1:0", "sigv4", file })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := func(creds aws.CredentialsProvider) *awssqs.Client {
		return awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + b.SQSAddr()),
			Credentials: creds, Retryer: aws.NopRetryer{}})
	}
	alice := client(credentials.NewStaticCredentialsProvider("AKIDALICE", "secret-alice", ""))
	q, err := alice.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("signed")})
	require.NoError(t, err)
	_, err = alice.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("a body with spaces & symbols=?/")})
	require.NoError(t, err)
	_, err = client(credentials.NewStaticCredentialsProvider("AKIDBOB", "secret-bob", "")).
		GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("signed")})
	require.NoError(t, err)

	for _, c := range []struct {
		creds aws.CredentialsProvider
		code  string
	}{
		{credentials.NewStaticCredentialsProvider("AKIDALICE", "wrong", ""), "SignatureDoesNotMatch"},
		{credentials.NewStaticCredentialsProvider("AKIDNOBODY", "x", ""), "InvalidClientTokenId"},
		{aws.AnonymousCredentials{}, "MissingAuthenticationToken"},
	} {
		_, err := client(c.creds).ListQueues(ctx, &awssqs.ListQueuesInput{})
		require.Equal(t, c.code, sqsCode(err))
	}
	// Signed by hand: a date 10 minutes off, a body changed after
	// signing, a Query-protocol form signed correctly.
	raw := func(body string, at time.Time, tamper string) string {
		req, err := http.NewRequest("POST", "http://"+b.SQSAddr()+"/", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		sum := sha256.Sum256([]byte(body))
		require.NoError(t, v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: "AKIDALICE", SecretAccessKey: "secret-alice"},
			req, hex.EncodeToString(sum[:]), "sqs", "us-east-1", at))
		if tamper != "" {
			req.Body = io.NopCloser(strings.NewReader(tamper))
			req.ContentLength = int64(len(tamper))
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return fmt.Sprint(resp.StatusCode, " ", string(out))
	}
	form := "Action=ListQueues&Version=2012-11-05"
	require.True(t, strings.HasPrefix(raw(form, time.Now(), ""), "200 "), raw(form, time.Now(), ""))
	require.Contains(t, raw(form, time.Now().Add(-10*time.Minute), ""), "<Code>RequestExpired</Code>")
	require.Contains(t, raw(form, time.Now(), "Action=ListQueues&Version=2012-11-06"), "<Code>SignatureDoesNotMatch</Code>")
}

// TestSQSAuthorizedByACLs: with the authorizer on, SQS actions need the
// ACLs the Kafka requests doing the same would.
func TestSQSAuthorizedByACLs(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(file, []byte("AKIDADMIN s-admin User:admin\nAKIDALICE s-alice User:alice\n"), 0o600))
	b := startTest(t, func(c *Config) {
		c.SQSAddr, c.SQSAuth, c.SQSCredentialsFile = "127.0.0.1:0", "sigv4", file
		c.Security = map[string]string{"authorizer.class.name": "acl", "super.users": "User:admin"}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := func(id, secret string) *awssqs.Client {
		return awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + b.SQSAddr()),
			Credentials: credentials.NewStaticCredentialsProvider(id, secret, ""), Retryer: aws.NopRetryer{}})
	}
	admin, alice := client("AKIDADMIN", "s-admin"), client("AKIDALICE", "s-alice")
	for _, n := range []string{"open", "closed"} {
		_, err := admin.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(n)})
		require.NoError(t, err)
	}
	_, err := alice.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("mine")})
	require.Equal(t, "AccessDenied", sqsCode(err))
	require.NoError(t, b.authz.Create([]acl.Binding{{ResourceType: acl.Topic, ResourceName: "open", PatternType: acl.Literal,
		Principal: "User:alice", Host: "*", Operation: acl.Write, Permission: acl.Allow}}))
	url := "http://" + b.SQSAddr() + "/000000000000/open"
	_, err = alice.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("hi")})
	require.NoError(t, err)
	_, err = alice.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url})
	require.Equal(t, "AccessDenied", sqsCode(err), "READ on the topic and the group are needed")
	closed := "http://" + b.SQSAddr() + "/000000000000/closed"
	_, err = alice.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &closed, MessageBody: aws.String("hi")})
	require.Equal(t, "AccessDenied", sqsCode(err))
	lq, err := alice.ListQueues(ctx, &awssqs.ListQueuesInput{})
	require.NoError(t, err)
	require.Equal(t, []string{url}, lq.QueueUrls, "only the queues alice may describe")
	require.NoError(t, b.authz.Create([]acl.Binding{
		{ResourceType: acl.Topic, ResourceName: "open", PatternType: acl.Literal, Principal: "User:alice", Host: "*", Operation: acl.Read, Permission: acl.Allow},
		{ResourceType: acl.Group, ResourceName: "sqs.open", PatternType: acl.Literal, Principal: "User:alice", Host: "*", Operation: acl.Read, Permission: acl.Allow}}))
	r, err := alice.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	_, err = alice.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: r.Messages[0].ReceiptHandle})
	require.NoError(t, err)
}
