package targets_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
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
	url, _ := queue(t, sq, awstest.Name("oncehook-worker-")+".fifo")
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

// Invariant (outbox.Limit): max_in_flight is the calls under way at once at the downstream. A
// standard workflow's StartExecution that timed out after it was written may still be under
// way at Step Functions, as any timed-out call may: the retry is safe (the execution name
// deduplicates it), but the call keeps its slot until its lease ends, so that another intent's
// start does not run beside it.
func TestATimedOutStandardStartKeepsItsMaxInFlightSlot(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	inFlight, peak, starts := 0, 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ StateMachineArn, Name string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		switch r.Header.Get("X-Amz-Target") {
		case "AWSStepFunctions.DescribeStateMachine":
			fmt.Fprintf(w, `{"stateMachineArn":%q,"name":"std","type":"STANDARD","status":"ACTIVE","definition":"{}","roleArn":"arn:aws:iam::000000000000:role/r","creationDate":1}`, in.StateMachineArn)
		case "AWSStepFunctions.StartExecution":
			mu.Lock()
			starts++
			inFlight++
			peak = max(peak, inFlight)
			mu.Unlock()
			time.Sleep(1500 * time.Millisecond) // still starting it when the caller gives up
			mu.Lock()
			inFlight--
			mu.Unlock()
			arn := strings.Replace(in.StateMachineArn, ":stateMachine:", ":execution:", 1) + ":" + in.Name
			fmt.Fprintf(w, `{"executionArn":%q,"startDate":1}`, arn)
		default:
			w.WriteHeader(400)
		}
	}))
	t.Cleanup(srv.Close)
	cfg := awstest.Config(t)
	db := awstest.Client(t)
	table := awstest.Table(t, db)
	store, err := dedup.New(db, dedup.Config{Table: table, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"evt_sfn_a", "evt_sfn_b", "evt_sfn_c"}
	for _, id := range ids {
		if _, err := store.Commit(context.Background(), dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)},
			dedup.Plan{Intents: []dedup.Intent{{Name: "fulfil", Target: "flows", Payload: []byte(`{}`)}}}); err != nil {
			t.Fatal(err)
		}
	}
	x := &targets.StepFunctions{StateMachineARN: "arn:aws:states:us-east-1:000000000000:stateMachine:std", Timeout: 500 * time.Millisecond,
		Client: sfn.NewFromConfig(cfg, func(o *sfn.Options) { o.BaseEndpoint, o.Retryer = aws.String(srv.URL), quickRetries() })}
	w, err := outbox.New(db, outbox.Config{Table: table, Lease: 3 * time.Second, Margin: time.Second,
		Executors: map[string]outbox.Executor{"flows": x}, Limits: map[string]outbox.Limit{"flows": {MaxInFlight: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		claim := readClaim(t, db, table, "shop", id)
		wg.Go(func() { _, _ = w.Process(context.Background(), claim) })
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if starts == 0 {
		t.Fatal("no start reached Step Functions")
	}
	if peak > 1 {
		t.Errorf("Step Functions had %d starts under way at once, over max_in_flight 1", peak)
	}
}
