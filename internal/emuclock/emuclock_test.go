package emuclock

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// TestTheEmulatorsClockMoves: a message sent after the clock moved an hour is stamped an hour
// later by the emulator.
func TestTheEmulatorsClockMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an emulator")
	}
	t.Parallel()
	e := Start(t, "sqs")
	c := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.URL), Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	ctx := context.Background()
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("clock")})
	if err != nil {
		t.Fatal(err)
	}
	sent := func() int64 {
		t.Helper()
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("m")}); err != nil {
			t.Fatal(err)
		}
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, VisibilityTimeout: 7200,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp}})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("%v, %v", out, err)
		}
		ms, _ := strconv.ParseInt(out.Messages[0].Attributes["SentTimestamp"], 10, 64)
		return ms
	}
	before := sent()
	e.Advance(time.Hour)
	if after := sent(); after-before < time.Hour.Milliseconds() || e.Moved() != time.Hour {
		t.Fatalf("sent at %d, then at %d after moving the clock an hour", before, after)
	}
}
