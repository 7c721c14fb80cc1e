package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

// appTable creates an application's own table with its own key schema (a string partition key
// and, when sk is set, a number sort key) and deletes it when the test ends.
func appTable(t *testing.T, client *dynamodb.Client, pk, sk string) string {
	t.Helper()
	in := &dynamodb.CreateTableInput{
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(pk), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash}},
	}
	if sk != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(sk), AttributeType: types.ScalarAttributeTypeN})
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange})
	}
	return awstest.CreateTable(t, client, "app-"+pk+"-", in)
}

// tablesEnv is an env whose Store also writes two application tables: orders (order_id) and
// ledger (account, seq: a number sort key).
type tablesEnv struct {
	*env
	orders, ledger string
}

func newTablesEnv(t *testing.T) *tablesEnv {
	admin := awstest.Client(t)
	orders, ledger := appTable(t, admin, "order_id", ""), appTable(t, admin, "account", "seq")
	e := newEnv(t, func(c *dedup.Config) {
		c.Tables = map[string]dedup.TableKeys{orders: {PartitionKey: "order_id"}, ledger: {PartitionKey: "account", SortKey: "seq"}}
	})
	return &tablesEnv{env: e, orders: orders, ledger: ledger}
}

// crossPlan ships the order in the orders table (once per order) and books a ledger line,
// beside a record in oncehook's own table: three tables, one transaction.
func (e *tablesEnv) crossPlan(order string, seq int) dedup.Plan {
	return dedup.Plan{Effects: []dedup.Effect{
		dedup.PutEffect(map[string]types.AttributeValue{"order_id": s(order), "status": s("shipped")}).In(e.orders).IfAbsent(),
		dedup.PutEffect(map[string]types.AttributeValue{"account": s("acct_1"), "seq": &types.AttributeValueMemberN{Value: fmt.Sprint(seq)}, "amount": &types.AttributeValueMemberN{Value: "100"}}).In(e.ledger),
		dedup.PutEffect(map[string]types.AttributeValue{"pk": s("AUDIT#" + order), "sk": s("SHIPPED")}),
	}}
}

func (e *tablesEnv) itemsIn(t *testing.T, table string) []map[string]types.AttributeValue {
	return awstest.Items(t, e.client, table)
}

// TestConcurrentDoublesAcrossTablesWriteEachEffectOnce: four copies of each event race; one
// claims it, and the effects in all three tables are written once, each tied to its claim.
func TestConcurrentDoublesAcrossTablesWriteEachEffectOnce(t *testing.T) {
	t.Parallel()
	e := newTablesEnv(t)
	const events, copies = 10, 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for i := range events {
		for range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := e.store.Commit(context.Background(), orderEvent(i), e.crossPlan(fmt.Sprintf("ord_%d", i), i))
				if err != nil && !errors.Is(err, dedup.ErrUnavailable) {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if res.Outcome == dedup.OutcomeAccepted {
					accepted++
				}
			}()
		}
	}
	wg.Wait()
	if accepted != events {
		t.Fatalf("%d accepted, want %d", accepted, events)
	}
	orders, ledger := e.itemsIn(t, e.orders), e.itemsIn(t, e.ledger)
	if len(orders) != events || len(ledger) != events || e.count(t, "AUDIT#") != events {
		t.Fatalf("%d orders, %d ledger lines, %d audit records; want %d of each", len(orders), len(ledger), e.count(t, "AUDIT#"), events)
	}
	for _, it := range orders {
		by := it[dedup.ClaimedByAttribute].(*types.AttributeValueMemberS).Value
		if !strings.HasPrefix(by, dedup.ClaimPrefix) {
			t.Fatalf("order %v: claimed_by %q, want its claim's key", it, by)
		}
	}
	// The claim lists each effect's table and key.
	c := e.claim(t, "shop", orderEvent(3).ID)
	want := fmt.Sprint([]dedup.EffectKey{{Table: e.orders, PK: "ord_3"}, {Table: e.ledger, PK: "acct_1", SK: "3"}, {PK: "AUDIT#ord_3", SK: "SHIPPED"}})
	if got := fmt.Sprint(c.Effects); got != want {
		t.Fatalf("claim effects %s, want %s", got, want)
	}
}

// TestAFailingConditionInAnotherTableAbsorbsTheEvent: the order was shipped by an earlier
// event; the next event for it is absorbed: claimed, nothing else written anywhere.
func TestAFailingConditionInAnotherTableAbsorbsTheEvent(t *testing.T) {
	t.Parallel()
	e := newTablesEnv(t)
	if res, err := e.store.Commit(context.Background(), orderEvent(1), e.crossPlan("ord_1", 1)); err != nil || res.Outcome != dedup.OutcomeAccepted {
		t.Fatal(res, err)
	}
	res, err := e.store.Commit(context.Background(), orderEvent(2), e.crossPlan("ord_1", 2))
	if err != nil || res.Outcome != dedup.OutcomeAbsorbed || fmt.Sprint(res.Absorbed) != "[0]" {
		t.Fatalf("%+v, %v; want absorbed by effects[0]", res, err)
	}
	if n := len(e.itemsIn(t, e.ledger)); n != 1 {
		t.Fatalf("%d ledger lines, want 1: the absorbed event booked nothing", n)
	}
}

// TestDeleteAndCheckEffectsInAnotherTable: a check on a record of another table lets the event
// through only while it holds; a delete removes its item in the same write.
func TestDeleteAndCheckEffectsInAnotherTable(t *testing.T) {
	t.Parallel()
	e := newTablesEnv(t)
	ctx := context.Background()
	open := expression.Name("status").Equal(expression.Value("open"))
	for _, it := range []map[string]types.AttributeValue{
		{"order_id": s("acct_open"), "status": s("open")}, {"order_id": s("acct_closed"), "status": s("closed")}, {"order_id": s("hold_9"), "status": s("held")},
	} {
		if _, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.orders), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	plan := func(account string) dedup.Plan {
		return dedup.Plan{Effects: []dedup.Effect{
			dedup.CheckEffect(map[string]types.AttributeValue{"order_id": s(account)}, open).In(e.orders),
			dedup.DeleteEffect(map[string]types.AttributeValue{"order_id": s("hold_9")}).In(e.orders),
		}}
	}
	if res, err := e.store.Commit(ctx, orderEvent(1), plan("acct_closed")); err != nil || res.Outcome != dedup.OutcomeAbsorbed {
		t.Fatalf("closed account: %+v, %v; want absorbed", res, err)
	}
	if len(e.itemsIn(t, e.orders)) != 3 {
		t.Fatal("the absorbed event deleted the hold")
	}
	if res, err := e.store.Commit(ctx, orderEvent(2), plan("acct_open")); err != nil || res.Outcome != dedup.OutcomeAccepted {
		t.Fatalf("open account: %+v, %v", res, err)
	}
	if n := len(e.itemsIn(t, e.orders)); n != 2 {
		t.Fatalf("%d items, want 2: the hold deleted", n)
	}
}

// TestAnEffectOnATableThatIsNotThereWritesNothing: a configured table that does not exist
// fails the whole write with DynamoDB's error; a table not configured is refused before any
// call.
func TestAnEffectOnATableThatIsNotThereWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *dedup.Config) {
		c.Tables = map[string]dedup.TableKeys{"no-such-table-oncehook": {PartitionKey: "id"}}
	})
	plan := dedup.Plan{Effects: []dedup.Effect{
		dedup.PutEffect(map[string]types.AttributeValue{"pk": s("AUDIT#1"), "sk": s("X")}),
		dedup.PutEffect(map[string]types.AttributeValue{"id": s("1")}).In("no-such-table-oncehook"),
	}}
	_, err := e.store.Commit(context.Background(), orderEvent(1), plan)
	if err == nil || errors.Is(err, dedup.ErrUnavailable) || !strings.Contains(err.Error(), "ResourceNotFound") && !strings.Contains(err.Error(), "not found") && !strings.Contains(err.Error(), "non-existent") {
		t.Fatalf("got %v, want DynamoDB's not-found error, not a retryable one", err)
	}
	if n := len(e.items(t)); n != 0 {
		t.Fatalf("%d items written", n)
	}
	e.counter.Reset()
	plan.Effects[1] = plan.Effects[1].In("Orders")
	_, err = e.store.Commit(context.Background(), orderEvent(1), plan)
	var ie *dedup.InvalidError
	if !errors.As(err, &ie) || ie.Field != "effects[1].table" || e.counter.Total() != 0 {
		t.Fatalf("got %v after %d calls, want effects[1].table refused before any call", err, e.counter.Total())
	}
}

// TestTablesThatCannotWorkAreRefusedAtNew: a table without its partition key, or oncehook's
// own table listed as another, stops the Store (and the function) at start.
func TestTablesThatCannotWorkAreRefusedAtNew(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tables map[string]dedup.TableKeys
		field  string
	}{
		{map[string]dedup.TableKeys{"orders": {}}, "tables.orders.partition_key"},
		{map[string]dedup.TableKeys{"orders": {Name: "oncehook", PartitionKey: "id"}}, "tables.orders"},
		{map[string]dedup.TableKeys{"orders": {PartitionKey: "id", SortKey: "id"}}, "tables.orders.sort_key"},
	} {
		_, err := dedup.New(awstest.Client(t), dedup.Config{Table: "oncehook", Sources: map[string]dedup.Retention{"shop": testRetention}, Tables: c.tables})
		var ie *dedup.InvalidError
		if !errors.As(err, &ie) || ie.Field != c.field {
			t.Errorf("%v: got %v, want an InvalidError naming %s", c.tables, err, c.field)
		}
	}
}

// TestTheAuditSamplesAnApplicationsOwnTable: orders written by effects In the application's
// table carry claimed_by; two written behind the Store's back do not. Runs of 4 items each,
// their cursor kept in oncehook's table (the application's holds nothing of ours), cover the
// whole table and find exactly the two.
func TestTheAuditSamplesAnApplicationsOwnTable(t *testing.T) {
	t.Parallel()
	e := newTablesEnv(t)
	ctx := context.Background()
	for i := range 10 {
		plan := dedup.Plan{Effects: []dedup.Effect{
			dedup.PutEffect(map[string]types.AttributeValue{"order_id": s(fmt.Sprintf("ord_%d", i))}).In(e.orders),
		}}
		if _, err := e.store.Commit(ctx, orderEvent(i), plan); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"ord_leak_1", "ord_leak_2"} {
		if _, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.orders), Item: map[string]types.AttributeValue{"order_id": s(id)}}); err != nil {
			t.Fatal(err)
		}
	}
	a := &dedup.Auditor{Client: e.client, Table: e.table, Audited: e.orders, PartitionKey: "order_id", Sample: 4}
	found := map[string]bool{}
	effects := 0
	for run := 0; ; run++ {
		if run == 10 {
			t.Fatal("the audit never wrapped")
		}
		rep, err := a.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Read > 4 {
			t.Fatalf("run %d read %d items, want at most 4", run, rep.Read)
		}
		effects += rep.Effects
		for _, k := range rep.WithoutClaim {
			if k.Table != e.orders {
				t.Fatalf("%+v: want the key named with its table", k)
			}
			found[k.PK] = true
		}
		if rep.Wrapped {
			break
		}
	}
	if effects != 12 || len(found) != 2 || !found["ord_leak_1"] || !found["ord_leak_2"] {
		t.Fatalf("judged %d, found %v; want 12 judged and the two leaks", effects, found)
	}
	if n := e.count(t, dedup.AuditCursorPK+"#"+e.orders); n != 1 {
		t.Fatalf("%d cursor items for the table in oncehook's, want its own one", n)
	}
	if _, err := (&dedup.Auditor{Client: e.client, Table: e.table, Audited: e.orders}).Run(ctx); err == nil {
		t.Fatal("an audited table without its partition key was accepted")
	}
}
