package targets_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/outbox/targets"
)

// TestTheWorkerSendsOneMessageForDuplicatedRecordsAndRecordsItsID: the claim's stream records,
// delivered twice in one batch and replayed, through the real worker to a FIFO queue: one
// message, and the intent done with the message's id.
func TestTheWorkerSendsOneMessageForDuplicatedRecordsAndRecordsItsID(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	db := awstest.Client(t)
	table := awstest.Table(t, db)
	store, err := dedup.New(db, dedup.Config{Table: table, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit(context.Background(), dedup.Event{Source: "shop", ID: "evt_q1", Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Intents: []dedup.Intent{{Name: "fulfil", Target: "orders", Payload: []byte(`{"order_id":"ord_q1"}`)}}}); err != nil {
		t.Fatal(err)
	}
	sq := sqs.NewFromConfig(cfg)
	url, _ := queue(t, sq, unique("oncehook-worker-")+".fifo")
	w, err := outbox.New(db, outbox.Config{Table: table, Executors: map[string]outbox.Executor{"orders": &targets.SQS{Client: sq, QueueURL: url}}})
	if err != nil {
		t.Fatal(err)
	}
	recs := awstest.StreamRecords(t, db, table)
	for range 2 {
		if resp, err := w.HandleStream(context.Background(), events.DynamoDBEvent{Records: append(recs, recs...)}); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%+v, %v", resp, err)
		}
	}
	if msgs := drain(t, sq, url); len(msgs) != 1 || keyOf(msgs[0]) != "shop:evt_q1:fulfil" {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	claim := readClaim(t, db, table, "shop", "evt_q1")
	in := claim.Intents["fulfil"]
	if in.Status != dedup.IntentDone || !strings.HasPrefix(in.Sent, "message ") {
		t.Fatalf("intent %+v: want done, with the message's id", in)
	}
}

func readClaim(t *testing.T, db *dynamodb.Client, table, source, id string) *dedup.Claim {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: dedup.ClaimKey(source, id)}, "sk": &types.AttributeValueMemberS{Value: dedup.ClaimSK}}})
	if err != nil || out.Item == nil {
		t.Fatalf("claim: %v", err)
	}
	c, err := dedup.UnmarshalClaim(out.Item)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
