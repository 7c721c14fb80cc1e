package dedup_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

// EnsureTable turns TTL on over expires_at, again without harm; a table whose TTL is on another
// attribute is refused, naming both: its claims would never expire, and DynamoDB changes a
// table's TTL attribute only an hour after turning it off.
func TestEnsureTableRefusesATableWhoseTTLIsOnAnotherAttribute(t *testing.T) {
	t.Parallel()
	client := awstest.Client(t)
	ctx := context.Background()
	table := awstest.Table(t, client) // through EnsureTable
	if err := dedup.EnsureTable(ctx, client, table); err != nil {
		t.Fatalf("again: %v", err)
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != dedup.TTLAttribute {
		t.Fatalf("TTL %+v, %v; want it on %s", ttl.TimeToLiveDescription, err, dedup.TTLAttribute)
	}

	other := awstest.Name("oncehook-test-")
	if _, err := client.CreateTable(ctx, dedup.CreateTableInput(other)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(other)})
	})
	if err := dynamodb.NewTableExistsWaiter(client).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(other)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(other),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	err = dedup.EnsureTable(ctx, client, other)
	if err == nil || !strings.Contains(err.Error(), `"ttl"`) || !strings.Contains(err.Error(), dedup.TTLAttribute) {
		t.Fatalf("TTL on ttl: %v, want a refusal naming ttl and %s", err, dedup.TTLAttribute)
	}
}
