// Command stack prepares and describes the stack deployed to the local emulator, for
// localstack/deploy:
//
//	go run ./localstack/stack secrets   put the local sources' demo secrets in Secrets Manager
//	go run ./localstack/stack ready     after the deploy: turn on TTL (the emulator's CloudFormation
//	                                    ignores it), print the webhook URL and a signed example
//
// It uses AWS_ENDPOINT_URL like everything else, and refuses to run without it: it writes a
// demo secret, which must never reach a real account.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/oncehook/oncehook/dedup"
)

// DemoSecret signs the local demo's deliveries (Standard Webhooks format). It is public.
const DemoSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// StackName is the CDK app's stack.
const StackName = "Oncehook"

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "localstack/stack:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	endpoint := os.Getenv("AWS_ENDPOINT_URL")
	if endpoint == "" {
		return errors.New("AWS_ENDPOINT_URL is not set: this is for the local emulator only")
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return errors.New("usage: stack secrets|ready")
	}
	switch args[0] {
	case "secrets":
		return putSecret(ctx, secretsmanager.NewFromConfig(cfg), "oncehook-local/shop", DemoSecret)
	case "ready":
		return ready(ctx, cfg, endpoint)
	}
	return fmt.Errorf("unknown command %q", args[0])
}

func putSecret(ctx context.Context, sm *secretsmanager.Client, name, value string) error {
	_, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value)})
	var exists *smtypes.ResourceExistsException
	if errors.As(err, &exists) {
		_, err = sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(name), SecretString: aws.String(value)})
	}
	return err
}

func ready(ctx context.Context, cfg aws.Config, endpoint string) error {
	out, err := cloudformation.NewFromConfig(cfg).DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(StackName)})
	if err != nil {
		return err
	}
	outputs := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	table, api := outputs["TableName"], outputs["ApiId"]
	if table == "" || api == "" {
		return fmt.Errorf("stack outputs %v lack TableName or ApiId", outputs)
	}
	_, err = dynamodb.NewFromConfig(cfg).UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(dedup.AttrExpiresAt), Enabled: aws.Bool(true)},
	})
	if err != nil && !strings.Contains(err.Error(), "already enabled") {
		return fmt.Errorf("enable TTL: %w", err)
	}
	url := strings.TrimSuffix(endpoint, "/") + "/_aws/execute-api/" + api + "/hooks/shop"
	if err := os.WriteFile(".cache/stack.env", []byte("ONCEHOOK_URL="+url+"\nTABLE_NAME="+table+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Printf(`
Stack %s is up on %s
  webhook URL   %s
  table         %s
  downstream    http://127.0.0.1:8025/send (the email intents; make run shows them below)

Send a signed delivery (the demo secret is in Secrets Manager as oncehook-local/shop):

  echo '{"type":"order.paid","data":{"order_id":"ord_1","customer_email":"ada@example.com"}}' | \
    go run ./cmd/hookctl send -sources localstack/sources.local.json -id msg_1 shop %s

Send it again: the answer says "duplicate":true, and the email is sent once. Then:

  TABLE_NAME=%s go run ./cmd/hookctl inspect -sources localstack/sources.local.json shop msg_1
`, StackName, endpoint, url, table, url, table)
	return nil
}
