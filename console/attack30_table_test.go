package console_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/console"
	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

// CheckTable reads a table as oncehook's when its keys are named pk and sk and it has a
// "pending" index over pending_shard, whatever their types. A table keyed by numbers under
// those names (another application's, or a copy made by hand) passes, so hookctl console
// starts on it, and every page then answers 502 "DynamoDB did not answer" (the key's type is
// refused by DynamoDB): not the clear "not oncehook's" page a table that is not oncehook's
// gets.
func TestATableWhoseKeysAreNotStringsIsNotTakenForOncehooks(t *testing.T) {
	t.Parallel()
	client := awstest.Client(t)
	ctx := context.Background()
	name := fmt.Sprintf("numeric-keys-%d", rand.Uint64())
	n := types.ScalarAttributeTypeN
	if _, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(dedup.PartitionKey), AttributeType: n}, {AttributeName: aws.String(dedup.SortKey), AttributeType: n},
			{AttributeName: aws.String(dedup.IndexPartitionKey), AttributeType: n}},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(dedup.PartitionKey), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(dedup.SortKey), KeyType: types.KeyTypeRange}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{IndexName: aws.String(dedup.PendingIndex),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String(dedup.IndexPartitionKey), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})

	if err := console.CheckTable(ctx, client, name); !errors.Is(err, console.ErrNotOncehookTable) {
		t.Errorf("CheckTable(%s) = %v, want it refused as not oncehook's", name, err)
	}
	h, err := console.New(console.Config{DynamoDB: client, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, serveHandler(t, h))
	for _, p := range []string{"/events/shop/evt_1", "/parked"} {
		r := b.get(p)
		if r.Status != http.StatusInternalServerError || !strings.Contains(r.Body, "not an oncehook table") {
			t.Errorf("%s: %d, want 500 saying the table is not an oncehook table:\n%s", p, r.Status, r.Body)
		}
	}
}
