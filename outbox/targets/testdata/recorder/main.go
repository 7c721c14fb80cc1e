// Command recorder is a Lambda function the failure matrix deploys to the emulator: each
// invocation sends the envelope's idempotency key, as one message, to the SQS queue named in
// ONCEHOOK_RECORD_QUEUE (on the endpoint in ONCEHOOK_RECORD_ENDPOINT), so that a test counts
// how many times the function ran for an intent from the emulator's own queue.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/oncehook/oncehook/outbox/targets"
)

func main() {
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	client := sqs.New(sqs.Options{
		Region:       region,
		BaseEndpoint: aws.String(os.Getenv("ONCEHOOK_RECORD_ENDPOINT")),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	queue := os.Getenv("ONCEHOOK_RECORD_QUEUE")
	lambda.Start(func(ctx context.Context, e targets.Envelope) (map[string]string, error) {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: aws.String(e.IdempotencyKey)}); err != nil {
			return nil, err
		}
		return map[string]string{"key": e.IdempotencyKey}, nil
	})
}
