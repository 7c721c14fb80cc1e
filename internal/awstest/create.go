package awstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Create makes a resource under a name the test has just drawn (Name). The SDK sends a create
// again when its first answer was lost (a reset connection on a loaded emulator), and the retry
// meets the service's already-exists error, E, for the very resource the first try made. The
// name being random, a resource under it is this test's: Create takes it as made once find
// reads it back. Any other error, or find's, fails the test.
//
// Creates the service itself answers twice the same way (SQS CreateQueue and Step Functions
// CreateStateMachine with the same attributes, SNS CreateTopic) need no Create.
func Create[E error](t testing.TB, create, find func(context.Context) (any, error)) {
	t.Helper()
	ctx := context.Background()
	_, err := create(ctx)
	if _, exists := errors.AsType[E](err); exists {
		_, err = find(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// CreateTable creates the table in (its TableName set to prefix and a random suffix), waits until
// it is active and deletes it when the test ends. It is for tables of other schemas than the
// project's (an application's table, a table that is not oncehook's); Table makes the project's.
func CreateTable(t testing.TB, client *dynamodb.Client, prefix string, in *dynamodb.CreateTableInput) string {
	t.Helper()
	name := Name(prefix)
	in.TableName = aws.String(name)
	describe := &dynamodb.DescribeTableInput{TableName: aws.String(name)}
	Create[*types.ResourceInUseException](t,
		func(ctx context.Context) (any, error) { return client.CreateTable(ctx, in) },
		func(ctx context.Context) (any, error) { return client.DescribeTable(ctx, describe) })
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 100 * time.Millisecond
		o.MaxDelay = time.Second
	})
	if err := waiter.Wait(context.Background(), describe, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return name
}
