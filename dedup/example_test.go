package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/dedup"
)

// The leak audit, run by hand or on a schedule: each Run reads the next 100 items of the table
// and reports order and shipment records (written only by put effects) that no claim wrote.
// The sweeper runs it after each sweep when AUDIT_PREFIXES is set.
func ExampleAuditor() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	a := &dedup.Auditor{Client: dynamodb.NewFromConfig(cfg), Table: "webhooks", Prefixes: []string{"ORDER#", "SHIPMENT#"}}
	rep, err := a.Run(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range rep.WithoutClaim {
		log.Printf("written outside a claim: %s %s", k.PK, k.SK)
	}
}

// A batch (SendGrid posts an array of events, each with its own id): each event is claimed as
// its own, in as few transactions as DynamoDB's limits allow, and a redelivered batch runs only
// the events not seen.
func ExampleStore_CommitBatch() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store, err := dedup.New(dynamodb.NewFromConfig(cfg), dedup.Config{
		Table:   "webhooks",
		Sources: map[string]dedup.Retention{"sendgrid": {RetryHorizon: 24 * time.Hour, RedriveWindow: 7 * 24 * time.Hour}},
	})
	if err != nil {
		log.Fatal(err)
	}
	evs := []dedup.Event{
		{Source: "sendgrid", ID: "sg_1", Type: "delivered", Payload: []byte(`{"sg_event_id":"sg_1","event":"delivered"}`)},
		{Source: "sendgrid", ID: "sg_2", Type: "open", Payload: []byte(`{"sg_event_id":"sg_2","event":"open"}`)},
	}
	plans := make([]dedup.Plan, len(evs)) // claims only
	results, calls, err := store.CommitBatch(context.Background(), evs, plans)
	if err != nil {
		log.Fatal(err) // a 503 for the provider: its redelivery is safe
	}
	for i, r := range results {
		log.Printf("%s: %s", evs[i].ID, r.Outcome)
	}
	log.Printf("%d DynamoDB calls", calls)
}

// A batch refused before any write names the event at fault: a receiver of its own answers
// the rest of the batch (an event claimed earlier is a duplicate, whatever its plan now).
func ExampleEventError() {
	store, err := dedup.New(dynamodb.New(dynamodb.Options{Region: "us-east-1"}), dedup.Config{
		Table:   "webhooks",
		Sources: map[string]dedup.Retention{"sendgrid": {RetryHorizon: 24 * time.Hour}},
	})
	if err != nil {
		log.Fatal(err)
	}
	evs := []dedup.Event{
		{Source: "sendgrid", ID: "sg_1", Type: "delivered", Payload: []byte(`{"sg_event_id":"sg_1"}`)},
		{Source: "sendgrid", ID: "", Type: "open", Payload: []byte(`{"event":"open"}`)},
	}
	_, calls, err := store.CommitBatch(context.Background(), evs, make([]dedup.Plan, len(evs)))
	if ee, ok := errors.AsType[*dedup.EventError](err); ok {
		fmt.Println(ee.Index, calls, errors.Is(err, dedup.ErrInvalid), err)
	}
	// Output: 1 0 true dedup: events[1].event_id is empty
}

// A test double of one's own refuses a batch as the store would, without a call: the same
// error, naming the event.
func ExampleStore_CheckBatch() {
	store, err := dedup.New(dynamodb.New(dynamodb.Options{Region: "us-east-1"}), dedup.Config{
		Table:   "webhooks",
		Sources: map[string]dedup.Retention{"sendgrid": {RetryHorizon: 24 * time.Hour}},
	})
	if err != nil {
		log.Fatal(err)
	}
	evs := []dedup.Event{
		{Source: "sendgrid", ID: "sg_1", Type: "delivered", Payload: []byte(`{"sg_event_id":"sg_1"}`)},
		{Source: "sendgrid", ID: "sg_2", Type: "open", Payload: []byte(`{"sg_event_id":"sg_2"}`)},
	}
	fmt.Println(store.CheckBatch(evs, make([]dedup.Plan, len(evs))))
	fmt.Println(store.CheckBatch(evs, make([]dedup.Plan, 1)))
	// Output:
	// <nil>
	// dedup: plans has 1 plans for 2 events
}

// A consumer of its own, in a redrive, answers a redelivery from one eventually consistent read
// of its claim before planning it; whatever the probe does not answer goes to Commit, whose
// claim condition decides (a claim too new for the read, an expired one, a new event).
func ExampleStore_Probe() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store, err := dedup.New(dynamodb.NewFromConfig(cfg), dedup.Config{
		Table:   "webhooks",
		Sources: map[string]dedup.Retention{"shop": {RetryHorizon: 72 * time.Hour, RedriveWindow: 30 * 24 * time.Hour}},
	})
	if err != nil {
		log.Fatal(err)
	}
	ev := dedup.Event{Source: "shop", ID: "evt_1", Type: "order.paid", Payload: []byte(`{"order_id":"ord_42"}`)}
	res, err := store.Probe(context.Background(), ev)
	if err != nil || res.Outcome != dedup.OutcomeDuplicate { // a failed read too
		res, err = store.Commit(context.Background(), ev, dedup.Plan{}) // planned only now
	}
	if err != nil {
		log.Fatal(err) // a 503 for the provider: its redelivery is safe
	}
	log.Printf("%s in %d calls", res.Outcome, res.Calls)
}

// A consumer of its own answers a redelivered batch whose events it can no longer plan (its
// planner changed since) from their claims, read together: every one claimed before is a
// duplicate, acknowledged; one that is not is refused until the planner is fixed.
func ExampleStore_ClaimedBatch() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store, err := dedup.New(dynamodb.NewFromConfig(cfg), dedup.Config{
		Table:   "webhooks",
		Sources: map[string]dedup.Retention{"sendgrid": {RetryHorizon: 72 * time.Hour, RedriveWindow: 7 * 24 * time.Hour}},
	})
	if err != nil {
		log.Fatal(err)
	}
	unplanned := []dedup.Event{
		{Source: "sendgrid", ID: "sg_1", Type: "open", Payload: []byte(`{"sg_event_id":"sg_1"}`)},
		{Source: "sendgrid", ID: "sg_2", Type: "open", Payload: []byte(`{"sg_event_id":"sg_2"}`)},
	}
	results, calls, err := store.ClaimedBatch(context.Background(), unplanned)
	if err != nil {
		log.Fatal(err) // a 503 for the provider: its redelivery is safe
	}
	for i, res := range results {
		if res.Outcome != dedup.OutcomeDuplicate {
			log.Fatalf("%s is new and cannot be planned: refuse the batch", unplanned[i].ID)
		}
	}
	log.Printf("%d duplicates in %d calls", len(results), calls)
}

// An operator's tool reads many claims at once, by their keys: one BatchGetItem per 100, a
// table throttling its reads given up on after 5 rounds of unprocessed keys.
func ExampleGetClaims() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	pks := []string{dedup.ClaimKey("shop", "evt_1"), dedup.ClaimKey("shop", "evt_2")}
	items, err := dedup.GetClaims(context.Background(), dynamodb.NewFromConfig(cfg), "webhooks", pks, 5)
	if errors.Is(err, dedup.ErrUnprocessed) {
		log.Fatal("the table is throttling reads: try again later")
	}
	if err != nil {
		log.Fatal(err)
	}
	for _, pk := range pks {
		if item, ok := items[pk]; ok {
			c, err := dedup.UnmarshalClaim(item)
			if err != nil {
				log.Fatal(err)
			}
			log.Printf("%s: received %s", c.EventID, c.ReceivedAt)
		}
	}
}

// Effects in the application's own tables join the claim's transaction: here an order record
// in "orders" (written once per order), a ledger line, and a check that the account is open.
// The tables are declared with their keys in Config.Tables.
func ExampleEffect_In() {
	orderID := &types.AttributeValueMemberS{Value: "ord_42"}
	plan := dedup.Plan{Effects: []dedup.Effect{
		dedup.PutEffect(map[string]types.AttributeValue{"order_id": orderID, "status": &types.AttributeValueMemberS{Value: "paid"}}).In("orders").IfAbsent(),
		dedup.UpdateEffect(map[string]types.AttributeValue{"account": &types.AttributeValueMemberS{Value: "acct_7"}},
			expression.Add(expression.Name("balance"), expression.Value(100))).In("ledger"),
		dedup.CheckEffect(map[string]types.AttributeValue{"account": &types.AttributeValueMemberS{Value: "acct_7"}},
			expression.Name("status").Equal(expression.Value("open"))).In("ledger"),
	}}
	for _, e := range plan.Effects {
		fmt.Println(e.Table(), e.IsUpdate(), e.IsCheck())
	}
	// Output:
	// orders false false
	// ledger true false
	// ledger false true
}

// Check gives the refusal Commit would give, without a call: here an effect in a table the
// store was not configured with. (A test kit's store never needs a DynamoDB client: this API
// is never called.)
func ExampleStore_Check() {
	type noCalls struct{ dedup.API }
	store, err := dedup.New(noCalls{}, dedup.Config{Table: "claims",
		Sources: map[string]dedup.Retention{"stripe": {RetryHorizon: 72 * time.Hour, RedriveWindow: 30 * 24 * time.Hour}},
		Tables:  map[string]dedup.TableKeys{"orders": {PartitionKey: "order_id"}}})
	if err != nil {
		log.Fatal(err)
	}
	ev := dedup.Event{Source: "stripe", ID: "evt_1", Type: "checkout.session.completed"}
	order := map[string]types.AttributeValue{"order_id": &types.AttributeValueMemberS{Value: "ord_42"}}
	fmt.Println(store.Check(ev, dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(order).In("orders")}}))
	fmt.Println(store.Check(ev, dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(order).In("orderz")}}))
	// Output:
	// <nil>
	// dedup: effects[0].table "orderz" is not one of the store's tables (Config.Tables)
}

// Effects from the application's own structs: PutEffectOf marshals the row with the SDK's
// attributevalue (its dynamodbav tags), KeyOf a key for an update, a delete or a check.
func ExamplePutEffectOf() {
	type order struct {
		OrderID string `dynamodbav:"order_id"`
		Status  string `dynamodbav:"status"`
		Total   int64  `dynamodbav:"total"`
		Note    string `dynamodbav:"note,omitempty"`
	}
	put, err := dedup.PutEffectOf(order{OrderID: "ord_42", Status: "paid", Total: 1200})
	if err != nil {
		log.Fatal(err)
	}
	key, err := dedup.KeyOf(struct {
		Account string `dynamodbav:"account"`
	}{"acct_7"})
	if err != nil {
		log.Fatal(err)
	}
	plan := dedup.Plan{Effects: []dedup.Effect{
		put.In("orders").IfAbsent(),
		dedup.UpdateEffect(key, expression.Add(expression.Name("balance"), expression.Value(1200))).In("ledger"),
	}}
	item := plan.Effects[0].Item()
	fmt.Println(len(item), item["order_id"].(*types.AttributeValueMemberS).Value, item["total"].(*types.AttributeValueMemberN).Value)
	fmt.Println(plan.Effects[1].KeyItem()["account"].(*types.AttributeValueMemberS).Value)

	_, err = dedup.PutEffectOf([]string{"not", "an", "item"})
	fmt.Println(err)
	// Output:
	// 3 ord_42 1200
	// acct_7
	// dedup: item is []string; want a struct or a map
}

// The record an event changes, from the team's struct: each attribute it marshals to is SET,
// the item's others are left as they are.
func ExampleUpdateEffectOf() {
	type orderKey struct {
		OrderID string `dynamodbav:"order_id"`
	}
	type paid struct {
		Status string `dynamodbav:"status"`
		PaidAt string `dynamodbav:"paid_at"`
		Note   string `dynamodbav:"note,omitempty"` // empty: left as it is
	}
	upd, err := dedup.UpdateEffectOf(orderKey{"ord_42"}, paid{Status: "paid", PaidAt: "2026-12-04T21:00:00Z"})
	if err != nil {
		log.Fatal(err)
	}
	expr, names, _, _ := upd.In("orders").Update()
	fmt.Println(strings.TrimSpace(expr), names)
	// Output:
	// SET #0 = :0, #1 = :1 map[#0:paid_at #1:status]
}

// The claim of an event with intents keeps the span context it was committed under, for the
// outbox to continue the trace from (the receiver commits under its commit span).
func ExampleClaim_TraceContext() {
	var written map[string]types.AttributeValue
	api := putRecorder{put: func(in *dynamodb.PutItemInput) { written = in.Item }}
	store, err := dedup.New(api, dedup.Config{Table: "claims",
		Sources: map[string]dedup.Retention{"stripe": {RetryHorizon: 72 * time.Hour, RedriveWindow: 30 * 24 * time.Hour}}})
	if err != nil {
		log.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	_, err = store.Commit(ctx, dedup.Event{Source: "stripe", ID: "evt_1", Type: "checkout.session.completed"},
		dedup.Plan{Intents: []dedup.Intent{{Name: "fulfil", Target: "fulfilment", Payload: []byte(`{}`)}}})
	if err != nil {
		log.Fatal(err)
	}
	claim, _ := dedup.UnmarshalClaim(written)
	sc := claim.TraceContext()
	fmt.Println(len(claim.Trace), sc.TraceID(), sc.SpanID(), sc.IsSampled(), sc.IsRemote())
	// Output: 26 4bf92f3577b34da6a3ce929d0e0e4736 00f067aa0ba902b7 true true
}

// putRecorder is a DynamoDB client that accepts every PutItem and shows it to put.
type putRecorder struct {
	dedup.API
	put func(*dynamodb.PutItemInput)
}

func (p putRecorder) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	p.put(in)
	return &dynamodb.PutItemOutput{}, nil
}

// An operator's tool checks the event it was given before building a key from it: GetClaim
// does, and so can a form that takes an id.
func ExampleValidateEventID() {
	fmt.Println(dedup.ValidateEventID("evt_1"))
	fmt.Println(dedup.ValidateEventID(""))
	// Output:
	// <nil>
	// dedup: event_id is empty
}

// A deployment's target names are checked where they are configured: a name no intent can
// carry (over MaxIntentTargetLen bytes, or not printable) names a target no plan can reach.
func ExampleValidateTargetName() {
	fmt.Println(dedup.ValidateTargetName("email"))
	fmt.Println(dedup.ValidateTargetName("email\n"))
	// Output:
	// <nil>
	// dedup: target contains the unprintable character U+000A
}

// A report of one's own over the pending index: the claims with a parked intent, counted shard
// by shard (outbox.ParkedClaims reads the claims themselves).
func ExampleIndexQuery() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	db, n := dynamodb.NewFromConfig(cfg), int32(0)
	for _, shard := range dedup.ParkedViewShards(dedup.PendingShards) {
		in := dedup.IndexQuery("webhooks", shard)
		in.Select = types.SelectCount
		for p := dynamodb.NewQueryPaginator(db, in); p.HasMorePages(); {
			page, err := p.NextPage(context.Background())
			if err != nil {
				log.Fatal(err)
			}
			n += page.Count
		}
	}
	log.Printf("%d claims with a parked intent", n)
}
