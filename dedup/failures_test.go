package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

const (
	throughputExceeded = `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded."}`
	throttling         = `{"__type":"com.amazon.coral.availability#ThrottlingException","message":"Throughput exceeds the current capacity of your table or index."}`
	internalError      = `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}`
	conflictCancel     = `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict, None]","CancellationReasons":[{"Code":"TransactionConflict","Message":"Transaction is ongoing for the item."},{"Code":"None"}]}`
	throttleCancel     = `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [ThrottlingError, None]","CancellationReasons":[{"Code":"ThrottlingError","Message":"Throughput exceeds the current capacity of your table or index."},{"Code":"None"}]}`
)

// TestThrottlingAndServerErrorsAskTheProviderToRetry injects DynamoDB's own error responses
// below the SDK, so the SDK parses and retries them as it would in production; what remains
// after its retries must be an *UnavailableError (the receiver's 503) with nothing written.
func TestThrottlingAndServerErrorsAskTheProviderToRetry(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		plan   func(int) dedup.Plan
		op     string
		status int
		body   string
	}{
		{"PutItem throttled by provisioned throughput", claimOnly, "PutItem", 400, throughputExceeded},
		{"PutItem throttled by the on-demand rate", claimOnly, "PutItem", 400, throttling},
		{"PutItem failing with a server error", claimOnly, "PutItem", 500, internalError},
		{"a transaction throttled as a whole", orderPlan, "TransactWriteItems", 400, throttling},
		{"a transaction cancelled for throttling", orderPlan, "TransactWriteItems", 400, throttleCancel},
		{"a transaction failing with a server error", orderPlan, "TransactWriteItems", 500, internalError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: c.op, N: -1, Status: c.status, Body: c.body}
			e := newEnv(t, nil, awstest.WithTransport(inject))
			_, err := e.store.Commit(context.Background(), orderEvent(1), c.plan(1))
			var ue *dedup.UnavailableError
			if !errors.As(err, &ue) || !errors.Is(err, dedup.ErrUnavailable) {
				t.Fatalf("got %v, want an *UnavailableError", err)
			}
			if ue.RetryAfter <= 0 {
				t.Fatal("an unavailable error must carry a Retry-After hint")
			}
			if inject.Injected() == 0 {
				t.Fatal("no error was injected")
			}
			if n := len(e.items(t)); n != 0 {
				t.Fatalf("%d items written, want none", n)
			}
		})
	}
}

func TestAPassingThrottleIsAbsorbedBySDKRetries(t *testing.T) {
	t.Parallel()
	inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "PutItem", N: 1, Status: 400, Body: throttling}
	e := newEnv(t, nil, awstest.WithTransport(inject))
	res, err := e.store.Commit(context.Background(), orderEvent(1), claimOnly(1))
	if err != nil || res.Outcome != dedup.OutcomeAccepted || inject.Injected() != 1 {
		t.Fatalf("got %+v, %v after %d injected throttles; want accepted after the SDK's retry of 1", res, err, inject.Injected())
	}
}

func TestTransactionConflictsAreRetriedBriefly(t *testing.T) {
	t.Parallel()
	t.Run("a conflict that clears is retried and the event accepted", func(t *testing.T) {
		t.Parallel()
		inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "TransactWriteItems", N: 2, Status: 400, Body: conflictCancel}
		e := newEnvWithClient(t, newEnv(t, nil), inject, func(c *dedup.Config) { c.ConflictBackoff = time.Millisecond })
		res, err := e.store.Commit(context.Background(), orderEvent(1), orderPlan(1))
		if err != nil || res.Outcome != dedup.OutcomeAccepted {
			t.Fatalf("got %+v, %v; want accepted", res, err)
		}
		if res.Calls != 3 {
			t.Fatalf("%d calls, want 3 (two conflicts, then the commit)", res.Calls)
		}
	})
	t.Run("a conflict that persists becomes unavailable after the bounded retries", func(t *testing.T) {
		t.Parallel()
		inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "TransactWriteItems", N: -1, Status: 400, Body: conflictCancel}
		e := newEnvWithClient(t, newEnv(t, nil), inject, func(c *dedup.Config) { c.ConflictBackoff = time.Millisecond; c.ConflictRetries = 2 })
		res, err := e.store.Commit(context.Background(), orderEvent(1), orderPlan(1))
		if !errors.Is(err, dedup.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
		if res.Calls != 3 {
			t.Fatalf("%d calls, want 3 (the first and two retries)", res.Calls)
		}
		if n := len(e.items(t)); n != 0 {
			t.Fatalf("%d items written, want none", n)
		}
	})
}

// newEnvWithClient rebuilds e's Store over a client that sends through rt, keeping the table
// and the clock; configure tunes the rest.
func newEnvWithClient(t *testing.T, e *env, rt http.RoundTripper, configure func(*dedup.Config)) *env {
	t.Helper()
	e.counter = awstest.NewCounter(awstest.Client(t, awstest.WithTransport(rt)))
	cfg := dedup.Config{Table: e.table, Sources: map[string]dedup.Retention{"shop": testRetention}, Now: e.clock.Now}
	if configure != nil {
		configure(&cfg)
	}
	store, err := dedup.New(e.counter, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	return e
}

func TestAFailedBusinessConditionAbsorbsTheEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	// The provider sent one fact under two event ids: both say order ord_000001 was paid.
	if res, err := e.store.Commit(ctx, orderEvent(1), orderPlan(1)); err != nil || res.Outcome != dedup.OutcomeAccepted {
		t.Fatalf("first event: %+v, %v", res, err)
	}
	second := orderEvent(2)
	plan := orderPlan(1) // same order, so the shipment's own condition fails
	plan.Effects = append(plan.Effects, dedup.PutEffect(map[string]types.AttributeValue{
		"pk": s("LEDGER#ord_000001"), "sk": s("EVT#evt_000002"),
	}))
	res, err := e.store.Commit(ctx, second, plan)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != dedup.OutcomeAbsorbed || len(res.Absorbed) != 1 || res.Absorbed[0] != 0 {
		t.Fatalf("got %+v, want absorbed with effects[0] refused", res)
	}
	if res.Calls != 2 {
		t.Fatalf("%d calls, want 2 (the cancelled transaction, then the claim alone)", res.Calls)
	}
	c := e.claim(t, "shop", second.ID)
	if c == nil || c.Outcome != "absorbed" || len(c.Intents) != 0 || c.PendingShard != "" || len(c.Absorbed) != 1 {
		t.Fatalf("claim %+v: want an absorbed claim with no intents and the refused effect listed", c)
	}
	if e.count(t, "LEDGER#") != 0 {
		t.Fatal("the plan is applied whole or not at all: the ledger entry must not be written")
	}
	if e.count(t, "ORDER#") != 1 {
		t.Fatal("want exactly the first event's shipment")
	}
	// A retry of the absorbed event is an ordinary duplicate.
	again := second
	again.DeliveryID = "dlv_again"
	if res, err := e.store.Commit(ctx, again, plan); err != nil || res.Outcome != dedup.OutcomeDuplicate {
		t.Fatalf("retry of an absorbed event: %+v, %v; want duplicate", res, err)
	}
}

func TestAnIfAbsentEffectOnAnExistingItemIsAbsorbed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	item := func() dedup.Effect {
		return dedup.PutEffect(map[string]types.AttributeValue{"pk": s("ORDER#ord_ifabsent"), "sk": s("SHIPMENT")}).IfAbsent()
	}
	if res, err := e.store.Commit(context.Background(), orderEvent(701), dedup.Plan{Effects: []dedup.Effect{item()}}); err != nil || res.Outcome != dedup.OutcomeAccepted {
		t.Fatal(res, err)
	}
	// Another event id for the same order: the claim is free, the shipment exists.
	res, err := e.store.Commit(context.Background(), orderEvent(702), dedup.Plan{Effects: []dedup.Effect{item()}})
	if err != nil || res.Outcome != dedup.OutcomeAbsorbed || len(res.Absorbed) != 1 {
		t.Fatalf("%+v, %v: want absorbed by the IfAbsent condition", res, err)
	}
}

func TestAnEffectTheEngineRefusesLeavesNoClaimBehind(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	// An account whose balance is, wrongly, a string: ADD on it fails inside the transaction.
	_, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &e.table, Item: map[string]types.AttributeValue{
		"pk": s("ACCOUNT#acc_1"), "sk": s("BALANCE"), "balance": s("not a number"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	credit := dedup.UpdateEffect(
		map[string]types.AttributeValue{"pk": s("ACCOUNT#acc_1"), "sk": s("BALANCE")},
		expression.Add(expression.Name("balance"), expression.Value(100)),
	)
	plan := dedup.Plan{Effects: []dedup.Effect{shipment("ord_1"), credit}, Intents: orderPlan(1).Intents}
	res, err := e.store.Commit(ctx, orderEvent(1), plan)
	if err == nil {
		t.Fatalf("got %+v, want an error", res)
	}
	t.Logf("refused as: %v", err)
	if errors.Is(err, dedup.ErrUnavailable) {
		t.Fatalf("a refused effect is not a reason to retry later: %v", err)
	}
	if e.claim(t, "shop", "evt_000001") != nil || e.count(t, "ORDER#") != 0 {
		t.Fatal("a failed transaction left a claim or a shipment behind")
	}
}

func TestUpdateEffectsApplyWithTheClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	credit := func() dedup.Effect {
		return dedup.UpdateEffect(
			map[string]types.AttributeValue{"pk": s("ACCOUNT#acc_1"), "sk": s("BALANCE")},
			expression.Add(expression.Name("balance"), expression.Value(100)),
		)
	}
	for _, delivery := range []string{"dlv_1", "dlv_2", "dlv_3"} {
		ev := orderEvent(1)
		ev.DeliveryID = delivery
		if _, err := e.store.Commit(ctx, ev, dedup.Plan{Effects: []dedup.Effect{credit()}}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.table, ConsistentRead: ptr(true),
		Key: map[string]types.AttributeValue{"pk": s("ACCOUNT#acc_1"), "sk": s("BALANCE")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Item["balance"].(*types.AttributeValueMemberN).Value; got != "100" {
		t.Fatalf("balance %s after three deliveries of one credit, want 100", got)
	}
}

func TestEveryLimitIsRefusedBeforeAnyCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	big := strings.Repeat("x", 200*1024)
	manyEffects := make([]dedup.Effect, 100)
	for i := range manyEffects {
		manyEffects[i] = dedup.PutEffect(map[string]types.AttributeValue{"pk": s("N#" + strings.Repeat("n", i+1)), "sk": s("X")})
	}
	bulky := make([]dedup.Effect, 12)
	for i := range bulky {
		bulky[i] = dedup.PutEffect(map[string]types.AttributeValue{"pk": s("B#" + strings.Repeat("b", i+1)), "sk": s("X"), "blob": s(strings.Repeat("y", 390*1024))})
	}
	tooMany := make([]dedup.Intent, dedup.MaxIntents+1)
	for i := range tooMany {
		tooMany[i] = dedup.Intent{Name: fmt.Sprintf("i%d", i), Target: "t"}
	}
	// 50 intents of 7.6 KB: 380 KB of claim, under 400 KB, but not with the IntentBookkeepingBytes per
	// intent the worker's lease, retry and finish add later (DynamoDB would refuse those
	// writes forever, and the intents would never run).
	crowded := make([]dedup.Intent, dedup.MaxIntents)
	for i := range crowded {
		crowded[i] = dedup.Intent{Name: fmt.Sprintf("i%d", i), Target: "t", Payload: []byte(strings.Repeat("p", 7600))}
	}
	cases := []struct {
		name  string
		event func(*dedup.Event)
		plan  dedup.Plan
		limit string // for *LimitError
		field string // for *InvalidError
	}{
		{name: "101 actions in one transaction", plan: dedup.Plan{Effects: manyEffects}, limit: "transaction actions"},
		{name: "a transaction over 4 MB", plan: dedup.Plan{Effects: bulky}, limit: "transaction size"},
		{name: "a claim over 400 KB of intents", plan: dedup.Plan{Intents: []dedup.Intent{{Name: "a", Target: "t", Payload: []byte(big)}, {Name: "b", Target: "t", Payload: []byte(big)}}}, limit: "item size"},
		{name: "more intents than MaxIntents", plan: dedup.Plan{Intents: tooMany}, limit: "intents per event"},
		{name: "a claim under 400 KB without room for the outbox's bookkeeping", plan: dedup.Plan{Intents: crowded}, limit: "item size"},
		{name: "an effect over 400 KB", plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"pk": s("P#1"), "sk": s("X"), "blob": s(big + big)})}}, limit: "item size"},
		{name: "an effect partition key over 2048 bytes", plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"pk": s(strings.Repeat("k", 2049)), "sk": s("X")})}}, limit: "partition key size"},
		{name: "an effect sort key over 1024 bytes", plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"pk": s("P#1"), "sk": s(strings.Repeat("k", 1025))})}}, limit: "sort key size"},
		{name: "an empty event id", event: func(ev *dedup.Event) { ev.ID = "" }, field: "event_id"},
		{name: "an oversized event id", event: func(ev *dedup.Event) { ev.ID = strings.Repeat("e", dedup.MaxEventIDBytes+1) }, field: "event_id"},
		{name: "an event id with a newline", event: func(ev *dedup.Event) { ev.ID = "evt_1\nforged log line" }, field: "event_id"},
		{name: "an event id that is not UTF-8", event: func(ev *dedup.Event) { ev.ID = "evt_\xff" }, field: "event_id"},
		{name: "an empty event type", event: func(ev *dedup.Event) { ev.Type = "" }, field: "event_type"},
		{name: "an unconfigured source", event: func(ev *dedup.Event) { ev.Source = "nobody" }, field: "source"},
		{name: "a source with a '#'", event: func(ev *dedup.Event) { ev.Source = "shop#evt" }, field: "source"},
		{name: "an effect without a sort key", plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"pk": s("P#1")})}}, field: "effects[0].sk"},
		{name: "an effect forging a claim", plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"pk": s("EVT#shop#evt_other"), "sk": s("CLAIM")})}}, field: "effects[0].pk"},
		{name: "two effects on one item", plan: dedup.Plan{Effects: []dedup.Effect{shipment("o1"), shipment("o1")}}, field: "effects[1]"},
		{name: "an effect built without a constructor", plan: dedup.Plan{Effects: []dedup.Effect{{}}}, field: "effects[0]"},
		{name: "two intents with one name", plan: dedup.Plan{Intents: []dedup.Intent{{Name: "a", Target: "t"}, {Name: "a", Target: "t"}}}, field: "intents[1].name"},
		{name: "an intent name with a colon", plan: dedup.Plan{Intents: []dedup.Intent{{Name: "a:b", Target: "t"}}}, field: "intents[0].name"},
		{name: "an intent without a target", plan: dedup.Plan{Intents: []dedup.Intent{{Name: "a"}}}, field: "intents[0].target"},
		// Values DynamoDB refuses, with the whole request (a claimed event's redelivery could not
		// be told a duplicate): refused first, naming the attribute.
		{name: "a number that is not one", plan: withValue(&types.AttributeValueMemberN{Value: "not-a-number"}), field: "effects[0].v"},
		{name: "an empty number", plan: withValue(&types.AttributeValueMemberN{Value: ""}), field: "effects[0].v"},
		{name: "a number of 39 significant digits", plan: withValue(&types.AttributeValueMemberN{Value: "123456789012345678901234567890123456789"}), field: "effects[0].v"},
		{name: "a number past DynamoDB's range", plan: withValue(&types.AttributeValueMemberN{Value: "1e126"}), field: "effects[0].v"},
		{name: "a number under DynamoDB's range", plan: withValue(&types.AttributeValueMemberN{Value: "1e-131"}), field: "effects[0].v"},
		{name: "an empty string set", plan: withValue(&types.AttributeValueMemberSS{Value: []string{}}), field: "effects[0].v"},
		{name: "a string set with a member twice", plan: withValue(&types.AttributeValueMemberSS{Value: []string{"a", "b", "a"}}), field: "effects[0].v"},
		{name: "a number set with one number twice", plan: withValue(&types.AttributeValueMemberNS{Value: []string{"1", "1.0"}}), field: "effects[0].v"},
		{name: "an empty binary set", plan: withValue(&types.AttributeValueMemberBS{Value: [][]byte{}}), field: "effects[0].v"},
		{name: "a bad number in a map in a list", plan: withValue(&types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"x": &types.AttributeValueMemberN{Value: "1..2"}}}}}), field: "effects[0].v"},
		{name: "a condition on a number that is not one", plan: dedup.Plan{Effects: []dedup.Effect{dedup.CheckEffect(map[string]types.AttributeValue{"pk": s("ACCOUNT#1"), "sk": s("STATUS")},
			expression.Name("open").Equal(expression.Value(&types.AttributeValueMemberN{Value: "yes"})))}}, field: "effects[0].condition"},
		{name: "an update adding an empty set", plan: dedup.Plan{Effects: []dedup.Effect{dedup.UpdateEffect(map[string]types.AttributeValue{"pk": s("ACCOUNT#1"), "sk": s("TAGS")},
			expression.Add(expression.Name("tags"), expression.Value(&types.AttributeValueMemberSS{Value: []string{}})))}}, field: "effects[0].update"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := orderEvent(1)
			if c.event != nil {
				c.event(&ev)
			}
			e.counter.Reset()
			_, err := e.store.Commit(context.Background(), ev, c.plan)
			if c.limit != "" {
				var le *dedup.LimitError
				if !errors.As(err, &le) || le.Limit != c.limit || !errors.Is(err, dedup.ErrLimit) {
					t.Fatalf("got %v, want a *LimitError for %q", err, c.limit)
				}
			} else {
				var ie *dedup.InvalidError
				if !errors.As(err, &ie) || ie.Field != c.field || !errors.Is(err, dedup.ErrInvalid) {
					t.Fatalf("got %v, want an *InvalidError naming %q", err, c.field)
				}
				if !strings.Contains(err.Error(), c.field) {
					t.Fatalf("message %q does not name the field", err)
				}
			}
			if e.counter.Total() != 0 {
				t.Fatalf("%d DynamoDB calls made, want none", e.counter.Total())
			}
		})
	}
	if n := len(e.items(t)); n != 0 {
		t.Fatalf("%d items written by refused commits, want none", n)
	}
}

// withValue is a plan of one put effect holding v as its attribute "v".
func withValue(v types.AttributeValue) dedup.Plan {
	return dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"pk": s("V#1"), "sk": s("X"), "v": v})}}
}
