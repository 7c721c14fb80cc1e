package dedup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CreateTableInput is the table's schema: pk/sk strings, on-demand billing, a NEW_IMAGE stream
// (the claim is self-contained, so the worker needs no old image) and the sparse GSI over
// pending intents. The CDK stack declares the same; tests and the local demo create it here.
func CreateTableInput(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(PartitionKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(SortKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(IndexPartitionKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(IndexSortKey), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(PartitionKey), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(SortKey), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(PendingIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(IndexPartitionKey), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(IndexSortKey), KeyType: types.KeyTypeRange},
			},
			// The sweeper reads the claim itself before re-driving, so keys are enough.
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
		StreamSpecification: &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: types.StreamViewTypeNewImage,
		},
	}
}

// EnsureTable creates the table when it does not exist, waits until it is active and turns on
// TTL over expires_at; a table whose TTL is on another attribute is refused. It is for tests
// and local runs; deployments own the table in the CDK.
func EnsureTable(ctx context.Context, client *dynamodb.Client, name string) error {
	_, err := client.CreateTable(ctx, CreateTableInput(name))
	if _, inUse := errors.AsType[*types.ResourceInUseException](err); err != nil && !inUse {
		return fmt.Errorf("dedup: create table %s: %w", name, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 100 * time.Millisecond
		o.MaxDelay = time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 2*time.Minute); err != nil {
		return fmt.Errorf("dedup: wait for table %s: %w", name, err)
	}
	var on *types.TimeToLiveDescription
	if ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)}); err == nil {
		on = ttl.TimeToLiveDescription
	}
	if on != nil && (on.TimeToLiveStatus == types.TimeToLiveStatusEnabled || on.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		if attr := aws.ToString(on.AttributeName); attr != TTLAttribute {
			// Claims would never expire; DynamoDB moves TTL only an hour after turning it off.
			return fmt.Errorf("dedup: table %s has TTL on %q, not %s", name, attr, TTLAttribute)
		}
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(TTLAttribute),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("dedup: enable TTL on %s: %w", name, err)
	}
	return nil
}
