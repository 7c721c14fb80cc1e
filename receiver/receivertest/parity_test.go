package receivertest_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/deployment"
	"github.com/oncehook/oncehook/launch"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
)

const parityFile = `{"sources": {
  "stripe": {"scheme": "stripe", "secrets": [{"env": "X"}], "retry_horizon": "3d", "redrive_window": "30d"}
 },
 "tables": {"orders": {"partition_key": "order_id", "sort_key": "line", "actions": ["put", "update", "delete", "check"]}},
 "targets": {"fulfilment": {"url": "https://fulfilment.example.com/ship"}}
}`

// countingAPI is a DynamoDB API that only counts calls: a refusal must make none.
type countingAPI struct {
	dedup.API
	calls atomic.Int32
}

func (c *countingAPI) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.calls.Add(1)
	return &dynamodb.PutItemOutput{}, nil
}

func (c *countingAPI) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.calls.Add(1)
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

func (c *countingAPI) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil // no claim: the refused event is new
}

func (c *countingAPI) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return &dynamodb.BatchGetItemOutput{}, nil // no claims: a batch's refused events are new
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// refusal is one plan (or event) and the store refusal it meets: site names it as
// refusalSites does (the function building it and its reason's first literal); "" for a plan
// the store accepts.
type refusal struct {
	name  string
	site  string
	plan  dedup.Plan
	event func(*dedup.Event) // changes the event, for the event's own refusals
}

func parityCases() []refusal {
	key := func(pk, sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{dedup.PartitionKey: s(pk), dedup.SortKey: s(sk)}
	}
	order := map[string]types.AttributeValue{"order_id": s("o1"), "line": s("1"), "total": s("10")}
	big := strings.Repeat("x", dedup.MaxPartitionKeyBytes+1)
	bigSK := strings.Repeat("y", dedup.MaxSortKeyBytes+1)
	puts := func(n, size int) []dedup.Effect {
		var es []dedup.Effect
		for i := range n {
			es = append(es, dedup.PutEffect(map[string]types.AttributeValue{dedup.PartitionKey: s("order#" + strconv.Itoa(i)), dedup.SortKey: s("v"),
				"blob": s(strings.Repeat("x", size))}))
		}
		return es
	}
	intents := func(n int) []dedup.Intent {
		var ins []dedup.Intent
		for i := range n {
			ins = append(ins, dedup.Intent{Name: "email.send" + strconv.Itoa(i), Target: "email"})
		}
		return ins
	}
	email := dedup.Intent{Name: "email.send", Target: "email", Payload: []byte(`{}`)}
	withID := func(id string) func(*dedup.Event) { return func(e *dedup.Event) { e.ID = id } }
	withSource := func(src string) func(*dedup.Event) { return func(e *dedup.Event) { e.Source = src } }
	return []refusal{
		{name: "accepted: own-table put and a known target", plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(key("order#1", "v"))}, Intents: []dedup.Intent{email}}},
		{name: "accepted: a put in another table", plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(order).In("orders")}}},
		{name: "effect in no such table", site: `effectTable/%q is not one of the store's tables (Config.Tables)`, plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(order).In("orderz")}}},
		{name: "put without the table's partition key", site: "effectKey/must be a non-empty string, number or binary (the table's ",
			plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"line": s("1")}).In("orders")}}},
		{name: "put without the table's sort key", site: "effectKey/must be a non-empty string, number or binary (the table's ",
			plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"order_id": s("o1")}).In("orders")}}},
		{name: "another table's partition key too large", site: "effectKey/ key size",
			plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"order_id": s(big), "line": s("1")}).In("orders")}}},
		{name: "another table's sort key too large", site: "effectKey/ key size",
			plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"order_id": s("o1"), "line": s(bigSK)}).In("orders")}}},
		{name: "own-table put without pk/sk", site: "effectKey/must be a non-empty string", plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"id": s("o1")})}}},
		{name: "own-table put without sk", site: "effectKey/must be a non-empty string", plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{dedup.PartitionKey: s("o1")})}}},
		{name: "pk in the claims' prefix", site: "effectKey/starts with ", plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(key(dedup.ClaimPrefix+"x", "v"))}}},
		{name: "partition key too large", site: "effectKey/ key size", plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(key(big, "v"))}}},
		{name: "sort key too large", site: "effectKey/ key size", plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(key("a", bigSK))}}},
		{name: "zero effect", site: "effectItems/must be built with PutEffect, UpdateEffect, DeleteEffect or CheckEffect", plan: dedup.Plan{Effects: []dedup.Effect{{}}}},
		{name: "IfAbsent with If", site: "effectItems/IfAbsent and If cannot be combined; put both in one If",
			plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(key("a", "b")).IfAbsent().If(expression.AttributeExists(expression.Name("pk")))}}},
		{name: "a condition that does not build", site: "effectItems/.condition", plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(key("a", "b")).If(expression.ConditionBuilder{})}}},
		{name: "an update that does not build", site: "effectItems/.update", plan: dedup.Plan{Effects: []dedup.Effect{dedup.UpdateEffect(key("a", "b"), expression.UpdateBuilder{})}}},
		{name: "the same item twice", site: "effectItems/writes the same item as effects[%d]; a transaction may touch an item once",
			plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(key("a", "b")), dedup.DeleteEffect(key("a", "b"))}}},
		{name: "a check whose condition does not build", site: "effectItems/.condition", plan: dedup.Plan{Effects: []dedup.Effect{dedup.CheckEffect(key("a", "b"), expression.ConditionBuilder{})}}},
		{name: "effect item too large", site: "effectItems/item size", plan: dedup.Plan{Effects: puts(1, dedup.MaxItemBytes)}},
		{name: "a value DynamoDB refuses", site: "effectItems/", plan: dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{
			dedup.PartitionKey: s("a"), dedup.SortKey: s("b"), "n": &types.AttributeValueMemberN{Value: "not-a-number"}})}}},
		{name: "an update of a value DynamoDB refuses", site: "effectItems/.update", plan: dedup.Plan{Effects: []dedup.Effect{dedup.UpdateEffect(key("a", "b"),
			expression.Set(expression.Name("tags"), expression.Value(&types.AttributeValueMemberSS{Value: []string{}})))}}},
		{name: "a condition on a value DynamoDB refuses", site: "effectItems/.condition", plan: dedup.Plan{Effects: []dedup.Effect{dedup.CheckEffect(key("a", "b"),
			expression.Name("n").Equal(expression.Value(&types.AttributeValueMemberN{Value: "1e200"})))}}},
		{name: "too many effects", site: "buildRequest/transaction actions", plan: dedup.Plan{Effects: puts(dedup.MaxTransactionActions, 1)}},
		{name: "transaction too large", site: "buildRequest/transaction size", plan: dedup.Plan{Effects: puts(dedup.MaxTransactionBytes/(dedup.MaxItemBytes-1024)+1, dedup.MaxItemBytes-1024)}},
		{name: "too many intents", site: "buildRequest/intents per event", plan: dedup.Plan{Intents: intents(dedup.MaxIntents + 1)}},
		{name: "claim too large for the outbox", site: "buildRequest/item size", plan: dedup.Plan{Intents: []dedup.Intent{{Name: "big", Target: "email", Payload: []byte(strings.Repeat("p", dedup.MaxItemBytes))}}}},
		{name: "intent name with a space", site: "validIntentName/has %q; use letters, digits, '.', '-' and '_'", plan: dedup.Plan{Intents: []dedup.Intent{{Name: "email send!", Target: "email"}}}},
		{name: "empty intent name", site: "validIntentName/is empty", plan: dedup.Plan{Intents: []dedup.Intent{{Target: "email"}}}},
		{name: "intent name too long", site: "validIntentName/is %d bytes, limit is %d", plan: dedup.Plan{Intents: []dedup.Intent{{Name: strings.Repeat("n", dedup.MaxIntentNameLen+1), Target: "email"}}}},
		{name: "intent name twice", site: "intentsValue/%q is used by an earlier intent", plan: dedup.Plan{Intents: []dedup.Intent{email, email}}},
		{name: "unknown intent target", plan: dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "emial"}}}}, // the receiver's refusal
		{name: "empty source", site: "validName/is empty", event: withSource("")},
		{name: "source too long", site: "validName/is %d bytes, limit is %d", event: withSource(strings.Repeat("s", dedup.MaxSourceLen+1))},
		{name: "source with a capital", site: "validName/has %q; use a-z, 0-9, '-' and '_'", event: withSource("Stripe")},
		{name: "source not configured", site: "admit/%q is not configured", event: withSource("paypal")},
		{name: "empty event id", site: "validText/is empty", event: withID("")},
		{name: "event id too long", site: "validText/is %d bytes, limit is %d", event: withID(strings.Repeat("i", dedup.MaxEventIDBytes+1))},
		{name: "event id not UTF-8", site: "validText/is not valid UTF-8", event: withID("evt_\xff")},
		{name: "event id with an unprintable character", site: "validText/contains the unprintable character %U", event: withID("evt_\u202e1")},
	}
}

// storeCases runs every refusing case through the real store (configured as launch.Load
// configures it, over an API that counts calls) and the kit's Recorder, requires the same
// typed error from both and no call from the store, and returns each case's error.
func storeCases(t *testing.T) []struct {
	name, site string
	err        error
} {
	t.Helper()
	f, err := sources.Parse([]byte(parityFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []struct {
		name, site string
		err        error
	}
	for _, c := range parityCases() {
		if c.site == "" {
			continue
		}
		api := &countingAPI{}
		store, err := dedup.New(api, dedup.Config{Table: "claims", Sources: f.Retentions(), Tables: f.DedupTables()})
		if err != nil {
			t.Fatal(err)
		}
		rec := receivertest.NewRecorder(f)
		ev := dedup.Event{Source: "stripe", ID: "evt_p2", Type: "order.paid", Payload: []byte(`{}`)}
		if c.event != nil {
			c.event(&ev)
		}
		_, serr := store.Commit(context.Background(), ev, c.plan)
		_, kerr := rec.Commit(context.Background(), ev, c.plan)
		switch {
		case serr == nil:
			t.Errorf("%s: the store accepted it", c.name)
		case api.calls.Load() != 0:
			t.Errorf("%s: the store made %d calls before refusing", c.name, api.calls.Load())
		case !sameRefusal(serr, kerr):
			t.Errorf("%s: the store refused with %T %v, the kit with %T %v", c.name, serr, serr, kerr, kerr)
		case len(rec.All()) != 0:
			t.Errorf("%s: the kit recorded a refused plan", c.name)
		}
		out = append(out, struct {
			name, site string
			err        error
		}{c.name, c.site, serr})
	}
	return out
}

// sameRefusal reports whether the kit's error is the store's: the same type and text, but
// for the size a LimitError reports, which varies by a byte with the claim's timestamp.
func sameRefusal(store, kit error) bool {
	if kit == nil || reflect.TypeOf(kit) != reflect.TypeOf(store) {
		return false
	}
	var sl, kl *dedup.LimitError
	if errors.As(store, &sl) && errors.As(kit, &kl) {
		return sl.Limit == kl.Limit && sl.What == kl.What && sl.Max == kl.Max && kl.Got > kl.Max
	}
	return kit.Error() == store.Error()
}

// TestTheKitGivesTheStoresOwnRefusal: for every refusal case, the kit's Recorder refuses with
// the store's own typed error, and the store refuses before any call.
func TestTheKitGivesTheStoresOwnRefusal(t *testing.T) { storeCases(t) }

// TestTheKitRefusesWhatProductionRefuses holds the kit's handler to the production receiver
// (the real receiver over the real store, with the launched receiver's targets) for every plan
// case: both give the same answer, a refusal makes no write, and the kit records nothing.
func TestTheKitRefusesWhatProductionRefuses(t *testing.T) {
	f, err := sources.Parse([]byte(parityFile))
	if err != nil {
		t.Fatal(err)
	}
	targets := launch.KnownTargets(f, []string{"email"}) // the launched receiver's Config.Targets
	for _, c := range parityCases() {
		if c.event != nil {
			continue // the receiver builds the event from the request
		}
		t.Run(c.name, func(t *testing.T) {
			plan := c.plan
			register := func(ps *receiver.Planners) {
				ps.Handle("stripe", "order.paid", func(context.Context, dedup.Event) (dedup.Plan, error) { return plan, nil })
			}
			api := &countingAPI{}
			store, err := dedup.New(api, dedup.Config{Table: "claims", Sources: f.Retentions(), Tables: f.DedupTables()})
			if err != nil {
				t.Fatal(err)
			}
			prod, err := receiver.New(receiver.Config{Sources: f, Secrets: staticSecrets{"stripe": {secrets["stripe"]}}, Store: store,
				Planners: plannersOf(register), Targets: targets})
			if err != nil {
				t.Fatal(err)
			}
			kit, rec, err := receivertest.NewHandler(f, map[string]string{"stripe": secrets["stripe"]}, register, receivertest.WithTargets("email"))
			if err != nil {
				t.Fatal(err)
			}
			req, err := receivertest.Request(f, "stripe", secrets["stripe"], []byte(`{"id":"evt_p1","type":"order.paid"}`))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := receivertest.Deliver(context.Background(), prod, req)
			got, _ := receivertest.Deliver(context.Background(), kit, req)
			if got != want {
				t.Fatalf("kit answered %+v, production %+v", got, want)
			}
			if c.site == "" && !strings.HasPrefix(c.name, "accepted") { // the receiver's target refusal
				if got.Outcome != receivertest.Refused || got.Status != 500 {
					t.Fatalf("want the unknown target refused, got %+v", got)
				}
				// Named, as the receiver's docs promise: the intent's target, and which it is.
				if got.Field != "intents[email.send].target" || !strings.Contains(got.Reason, `"emial"`) {
					t.Fatalf("want the refusal to name the intent's target field and the target, got %+v", got)
				}
			} else if c.site == "" {
				if got.Outcome != receivertest.Accepted || api.calls.Load() == 0 || len(rec.All()) != 1 {
					t.Fatalf("want accepted by both, got %+v (%d calls)", got, api.calls.Load())
				}
				return
			} else if got.Outcome != receivertest.Refused || got.Reason == "" {
				t.Fatalf("want refused by both, got %+v", got)
			}
			if n := api.calls.Load(); n != 0 {
				t.Fatalf("production made %d writes for a refused plan", n)
			}
			if len(rec.All()) != 0 {
				t.Fatal("the kit recorded a refused plan")
			}
		})
	}
}

type staticSecrets map[string][]string

func (s staticSecrets) Get(source string) []string                    { return s[source] }
func (s staticSecrets) Refresh(context.Context, string) (bool, error) { return false, nil }

func plannersOf(register func(*receiver.Planners)) *receiver.Planners {
	ps := receiver.NewPlanners()
	register(ps)
	return ps
}

// TestTheKitRefusesAnExecutorTheOutboxRefuses: the executors a planner's test gives the kit
// are held to what the launched outbox and the synth hold them to (outbox.Bounds): one without
// a bound is refused, naming its target and its type, before any delivery.
func TestTheKitRefusesAnExecutorTheOutboxRefuses(t *testing.T) {
	f, err := sources.Parse([]byte(parityFile))
	if err != nil {
		t.Fatal(err)
	}
	unbounded := map[string]outbox.Executor{"crm": outbox.ExecutorFunc(func(context.Context, outbox.Task) error { return nil })}
	_, _, err = receivertest.NewHandler(f, map[string]string{"stripe": secrets["stripe"]}, nil, receivertest.WithExecutors(unbounded))
	if err == nil || !strings.Contains(err.Error(), `Executors["crm"] (outbox.ExecutorFunc) declares no bound`) {
		t.Fatalf("got %v, want the executor without a bound refused, named", err)
	}
}

// TestTheKitRefusesSettingsTheStartRefuses: a deployment's settings given to the kit are held
// to what the functions' start holds them to (deployment.Settings.Check), named; settings that
// work give the kit the launched receiver's targets.
func TestTheKitRefusesSettingsTheStartRefuses(t *testing.T) {
	f, err := sources.Parse([]byte(parityFile))
	if err != nil {
		t.Fatal(err)
	}
	secret := map[string]string{"stripe": secrets["stripe"]}
	bad := deployment.Settings{Targets: []string{"crm,billing"}}
	var named *deployment.Error
	if _, _, err := receivertest.NewHandler(f, secret, nil, receivertest.WithSettings(bad)); !errors.As(err, &named) || named.Var != "ONCEHOOK_TARGETS" {
		t.Fatalf("got %v, want the setting named", err)
	}
	for target, want := range map[string]receivertest.Outcome{"crm": receivertest.Accepted, "email": receivertest.Accepted, "billing": receivertest.Refused} {
		register := func(ps *receiver.Planners) {
			ps.Handle("stripe", "order.paid", func(context.Context, dedup.Event) (dedup.Plan, error) {
				return dedup.Plan{Intents: []dedup.Intent{{Name: "call", Target: target, Payload: []byte(`{}`)}}}, nil
			})
		}
		h, _, err := receivertest.NewHandler(f, secret, register, receivertest.WithSettings(deployment.Settings{Targets: []string{"crm"}}), receivertest.WithTargets("email"))
		if err != nil {
			t.Fatal(err)
		}
		req, err := receivertest.Request(f, "stripe", secrets["stripe"], []byte(`{"id":"evt_s1","type":"order.paid"}`))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := receivertest.Deliver(context.Background(), h, req); got.Outcome != want {
			t.Errorf("an intent for %s: %+v, want %v", target, got, want)
		}
	}
}

// TestTheKitRefusesTrustedHostsAsTheStartDoes: trusted hosts that are not host names (a port,
// a scheme) are refused by the kit as the functions' start refuses them, with the same
// *deployment.Error naming ONCEHOOK_TRUSTED_HOSTS, never with an error of the receiver's
// Config that the launched receiver, reading the same settings, does not give.
func TestTheKitRefusesTrustedHostsAsTheStartDoes(t *testing.T) {
	f, err := sources.Parse([]byte(parityFile))
	if err != nil {
		t.Fatal(err)
	}
	secret := map[string]string{"stripe": secrets["stripe"]}
	for _, host := range []string{"hooks.example.com:443", "https://hooks.example.com"} {
		s := deployment.Settings{Table: "t", TrustedHosts: []string{host}}
		env := s.Environment()
		_, startErr := deployment.FromEnv(func(k string) string { return env[k] })
		_, _, kitErr := receivertest.NewHandler(f, secret, nil, receivertest.WithSettings(s))
		var named *deployment.Error
		if !errors.As(kitErr, &named) || named.Var != "ONCEHOOK_TRUSTED_HOSTS" || startErr == nil || startErr.Error() != kitErr.Error() {
			t.Errorf("trusted host %q: the kit answers %v, the start %v; want both the same refusal naming ONCEHOOK_TRUSTED_HOSTS", host, kitErr, startErr)
		}
	}
}
