package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/internal/awstest"
)

// powertools is the claim/complete pattern of Powertools' idempotency utility, as the
// baseline: an INPROGRESS record put conditionally, the handler's effects, then an update to
// COMPLETED. Its effects are not in the claim's write, so a crash between the steps leaves
// either a stuck INPROGRESS record or effects without a completed record.
type powertools struct {
	api   *callCounter
	table string
}

func (p powertools) handle(ctx context.Context, key string, effect func() error) (duplicate bool, err error) {
	now := time.Now().Unix()
	_, err = p.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(p.table),
		Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "IDEMPOTENCY#" + key}, "sk": &types.AttributeValueMemberS{Value: "RECORD"},
			"status":     &types.AttributeValueMemberS{Value: "INPROGRESS"},
			"expiration": &types.AttributeValueMemberN{Value: strconv.FormatInt(now+3600, 10)},
		},
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR expiration < :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": &types.AttributeValueMemberN{Value: strconv.FormatInt(now, 10)}},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if err := effect(); err != nil {
		return false, err
	}
	_, err = p.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(p.table),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "IDEMPOTENCY#" + key}, "sk": &types.AttributeValueMemberS{Value: "RECORD"}},
		UpdateExpression:          aws.String("SET #s = :done"),
		ExpressionAttributeNames:  map[string]string{"#s": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":done": &types.AttributeValueMemberS{Value: "COMPLETED"}},
	})
	return false, err
}

// TestCallsPerEventAgainstTheClaimCompleteBaseline measures, in one run on the same table,
// the DynamoDB requests per new event and per duplicate of oncehook's single write and of the
// Powertools-style claim/complete baseline (whose effect write is a separate call too).
// Run with -v to print the comparison the README cites.
func TestCallsPerEventAgainstTheClaimCompleteBaseline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	const events = 50
	var calls int
	// The baseline has no way to recognise its own write after a lost response (the emulator
	// closes idle keep-alive connections, and the SDK then retries a write that landed), so it
	// gets fresh connections: the comparison is about calls, not about that weakness.
	fresh := awstest.BaseTransport()
	fresh.DisableKeepAlives = true
	counted := &callCounter{client: awstest.Client(t, awstest.WithTransport(fresh)), n: &calls}
	base := powertools{api: counted, table: e.table}
	for round, want := range []bool{false, true} { // first deliveries, then their duplicates
		calls = 0
		for i := range events {
			dup, err := base.handle(ctx, fmt.Sprintf("evt_%d", i), func() error {
				_, err := counted.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("ORDER#base_%d", i)}, "sk": &types.AttributeValueMemberS{Value: "SHIPMENT"}}})
				return err
			})
			if err != nil || dup != want {
				t.Fatalf("baseline event %d: duplicate %v, %v", i, dup, err)
			}
		}
		e.counter.Reset()
		for i := range events {
			if _, err := e.store.Commit(ctx, orderEvent(i), orderPlan(i)); err != nil {
				t.Fatal(err)
			}
		}
		ours := e.counter.Total()
		kind := []string{"new event", "duplicate"}[round]
		t.Logf("%-10s claim/complete baseline: %.0f calls/event; oncehook: %.0f call/event", kind, float64(calls)/events, float64(ours)/events)
		if wantBase, wantOurs := []int{3, 1}[round], 1; calls != wantBase*events || ours != wantOurs*events {
			t.Fatalf("%s: baseline %d calls, oncehook %d, for %d events", kind, calls, ours, events)
		}
	}
}

// callCounter is a dedup.API plus UpdateItem over the real client, counting every request.
type callCounter struct {
	client *dynamodb.Client
	n      *int
}

func (c *callCounter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	*c.n++
	return c.client.PutItem(ctx, in, o...)
}
func (c *callCounter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	*c.n++
	return c.client.UpdateItem(ctx, in, o...)
}
func (c *callCounter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	*c.n++
	return c.client.TransactWriteItems(ctx, in, o...)
}
func (c *callCounter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	*c.n++
	return c.client.GetItem(ctx, in, o...)
}
func (c *callCounter) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	*c.n++
	return c.client.BatchGetItem(ctx, in, o...)
}
