package dedup_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
)

type noCalls struct{ dedup.API }

func conditionStore(t *testing.T, tables map[string]dedup.TableKeys) *dedup.Store {
	t.Helper()
	store, err := dedup.New(noCalls{}, dedup.Config{Table: "claims", Sources: map[string]dedup.Retention{"shop": testRetention}, Tables: tables})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// The condition of an effect in another table is the one Commit sends: IfAbsent tests that
// table's partition key, never pk. Effect.Condition, which does not know the table's key, says
// so with an *InvalidError instead of naming pk; in the claims' own table the two agree.
func TestConditionOfAnEffectInAnotherTable(t *testing.T) {
	store := conditionStore(t, map[string]dedup.TableKeys{"orders": {PartitionKey: "order_id"}})
	e, _ := dedup.PutEffectOf(orderRow{OrderID: "ord_1"})
	in := e.In("orders").IfAbsent()
	expr, names, values, err := store.Condition(in)
	if err != nil || expr != "attribute_not_exists (#0)" || len(names) != 1 || names["#0"] != "order_id" || len(values) != 0 {
		t.Fatalf("Store.Condition: %q %v %v %v", expr, names, values, err)
	}
	var ie *dedup.InvalidError
	if expr, _, _, err := in.Condition(); !errors.As(err, &ie) || ie.Field != "condition" {
		t.Fatalf("Effect.Condition of an In effect gave %q, %v; want an *InvalidError", expr, err)
	}
	own := dedup.PutEffect(map[string]types.AttributeValue{"pk": s("a"), "sk": s("b")}).IfAbsent()
	a, _, _, errA := own.Condition()
	b, _, _, errB := store.Condition(own)
	if a != "attribute_not_exists(pk)" || a != b || errA != nil || errB != nil {
		t.Fatalf("own table: %q %v vs %q %v", a, errA, b, errB)
	}
	if _, _, _, err := store.Condition(e.In("orderz").IfAbsent()); !errors.As(err, &ie) || ie.Field != "table" {
		t.Fatalf("unknown table: %v", err)
	}
	// An If condition names its own attributes: both give it, In or not.
	cond := expression.Name("status").NotEqual(expression.Value("shipped"))
	for _, eff := range []dedup.Effect{e.In("orders").If(cond), dedup.DeleteEffect(map[string]types.AttributeValue{"order_id": s("o")}).In("orders").If(cond)} {
		a, an, _, errA := eff.Condition()
		b, bn, _, errB := store.Condition(eff)
		if errA != nil || errB != nil || a != b || a == "" || an["#0"] != "status" || bn["#0"] != "status" {
			t.Fatalf("If: %q %v %v vs %q %v %v", a, an, errA, b, bn, errB)
		}
	}
	if a, _, _, err := e.Condition(); a != "" || err != nil {
		t.Fatalf("no condition: %q %v", a, err)
	}
}

// Store.Condition is the condition DynamoDB evaluates: sent with a write to the application's
// table, it fails where an item with the effect's key is there, and holds where it is not. The
// name Effect.Condition once gave for it (pk) would have held over the existing order.
func TestStoreConditionIsWhatDynamoDBEvaluates(t *testing.T) {
	t.Parallel()
	e := newTablesEnv(t)
	ctx := context.Background()
	row := orderRow{OrderID: "ord_1", Total: 1}
	put, _ := dedup.PutEffectOf(row)
	if res, err := e.store.Commit(ctx, orderEvent(1), dedup.Plan{Effects: []dedup.Effect{put.In(e.orders).IfAbsent()}}); err != nil || res.Outcome != dedup.OutcomeAccepted {
		t.Fatal(res, err)
	}
	write := func(orderID, expr string, names map[string]string) error {
		in := &dynamodb.PutItemInput{TableName: aws.String(e.orders), ConditionExpression: aws.String(expr),
			Item: map[string]types.AttributeValue{"order_id": s(orderID)}}
		if len(names) > 0 {
			in.ExpressionAttributeNames = names
		}
		_, err := e.client.PutItem(ctx, in)
		return err
	}
	expr, names, _, err := e.store.Condition(put.In(e.orders).IfAbsent())
	if err != nil {
		t.Fatal(err)
	}
	var ccf *types.ConditionalCheckFailedException
	if err := write("ord_1", expr, names); !errors.As(err, &ccf) {
		t.Fatalf("Store.Condition %q over the existing order: %v, want a failed condition", expr, err)
	}
	if err := write("ord_2", expr, names); err != nil {
		t.Fatalf("Store.Condition %q over a new order: %v", expr, err)
	}
	if err := write("ord_1", "attribute_not_exists(pk)", nil); err != nil {
		t.Fatalf("the pk condition no longer holds over the existing order (%v): this test no longer shows the difference", err)
	}
	// Commit agrees: the same effect for ord_1 absorbs a second event.
	if res, err := e.store.Commit(ctx, orderEvent(2), dedup.Plan{Effects: []dedup.Effect{put.In(e.orders).IfAbsent()}}); err != nil || res.Outcome != dedup.OutcomeAbsorbed {
		t.Fatal(res, err)
	}
}
