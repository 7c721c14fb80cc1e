package dedup_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
)

type address struct {
	City string `dynamodbav:"city"`
}

type orderRow struct {
	OrderID string            `dynamodbav:"order_id"`
	Total   int64             `dynamodbav:"total"`
	Note    string            `dynamodbav:"note,omitempty"`
	Ship    address           `dynamodbav:"ship"`
	Tags    map[string]string `dynamodbav:"tags"`
	secret  string            //lint:ignore U1000 unexported: never written
}

// PutEffectOf writes what the SDK's marshaller makes of the struct: nested structs as maps,
// omitempty honoured, unexported fields left out.
func TestPutEffectOfMarshalsLikeTheSDK(t *testing.T) {
	row := orderRow{OrderID: "ord_1", Total: 1200, Ship: address{City: "Oslo"}, Tags: map[string]string{"a": "b"}, secret: "x"}
	e, err := dedup.PutEffectOf(row)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := attributevalue.MarshalMap(row)
	item := e.Item()
	if len(item) != len(want) || len(item) != 4 {
		t.Fatalf("item %v, want %v", item, want)
	}
	if _, ok := item["note"]; ok {
		t.Fatal("omitempty ignored")
	}
	if _, ok := item["secret"]; ok {
		t.Fatal("unexported field written")
	}
	if m, ok := item["ship"].(*types.AttributeValueMemberM); !ok || m.Value["city"].(*types.AttributeValueMemberS).Value != "Oslo" {
		t.Fatalf("nested struct: %#v", item["ship"])
	}
	if pe, err := dedup.PutEffectOf(&row); err != nil || len(pe.Item()) != 4 {
		t.Fatalf("pointer: %v %v", pe.Item(), err)
	}
	if pe, err := dedup.PutEffectOf(map[string]any{"pk": "a", "sk": "b"}); err != nil || len(pe.Item()) != 2 {
		t.Fatalf("map: %v %v", pe.Item(), err)
	}
}

// What cannot be an item is an *InvalidError, not an empty put.
func TestPutEffectOfRefusesWhatIsNotAnItem(t *testing.T) {
	var nilRow *orderRow
	for name, v := range map[string]any{"int": 5, "string": "x", "slice": []string{"a"}, "nil": nil, "nil pointer": nilRow,
		"a func field": struct{ F func() }{F: func() {}}, "a channel": struct{ C chan int }{C: make(chan int)},
		"no exported field": struct{ a string }{a: "x"}} {
		_, err := dedup.PutEffectOf(v)
		var ie *dedup.InvalidError
		if !errors.As(err, &ie) || !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("%s: got %v, want an *InvalidError", name, err)
		}
	}
	if _, err := dedup.KeyOf(42); !errors.Is(err, dedup.ErrInvalid) {
		t.Errorf("KeyOf(42): %v", err)
	}
}

// KeyOf marshals a key struct for UpdateEffect, DeleteEffect and CheckEffect.
func TestKeyOf(t *testing.T) {
	k, err := dedup.KeyOf(struct {
		PK string `dynamodbav:"pk"`
		SK string `dynamodbav:"sk"`
	}{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if pk, sk := dedup.DeleteEffect(k).Key(); pk != "a" || sk != "b" {
		t.Fatalf("key %q %q", pk, sk)
	}
}

// A struct put through PutEffectOf is the item DynamoDB holds: committed into the application's
// own table, it reads back (UnmarshalMap) as the same struct, with the claim's claimed_by, and a
// KeyOf update and delete reach the same item. A struct without the table's key is refused by
// Commit, writing nothing.
func TestPutEffectOfRoundTripsThroughDynamoDB(t *testing.T) {
	t.Parallel()
	e := newTablesEnv(t)
	row := orderRow{OrderID: "ord_1", Total: 1200, Ship: address{City: "Oslo"}, Tags: map[string]string{"a": "b"}}
	put, err := dedup.PutEffectOf(row)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := e.store.Commit(context.Background(), orderEvent(1), dedup.Plan{Effects: []dedup.Effect{put.In(e.orders).IfAbsent()}}); err != nil || res.Outcome != dedup.OutcomeAccepted {
		t.Fatal(res, err)
	}
	items := e.itemsIn(t, e.orders)
	if len(items) != 1 {
		t.Fatalf("%d items", len(items))
	}
	var got orderRow
	if err := attributevalue.UnmarshalMap(items[0], &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, row) || items[0][dedup.ClaimedByAttribute] == nil {
		t.Fatalf("read back %+v (claimed_by %v), want %+v", got, items[0][dedup.ClaimedByAttribute], row)
	}

	key, err := dedup.KeyOf(struct {
		OrderID string `dynamodbav:"order_id"`
	}{"ord_1"})
	if err != nil {
		t.Fatal(err)
	}
	upd := dedup.UpdateEffect(key, expression.Set(expression.Name("total"), expression.Value(1500))).In(e.orders)
	if res, err := e.store.Commit(context.Background(), orderEvent(2), dedup.Plan{Effects: []dedup.Effect{upd}}); err != nil || res.Outcome != dedup.OutcomeAccepted {
		t.Fatal(res, err)
	}
	if items := e.itemsIn(t, e.orders); len(items) != 1 || items[0]["total"].(*types.AttributeValueMemberN).Value != "1500" {
		t.Fatalf("after the update: %v", items)
	}

	// The claims' own table needs pk and sk; orderRow has neither.
	_, err = e.store.Commit(context.Background(), orderEvent(3), dedup.Plan{Effects: []dedup.Effect{put}})
	var ie *dedup.InvalidError
	if !errors.As(err, &ie) || ie.Field != "effects[0].pk" {
		t.Fatalf("a put without pk: %v", err)
	}
	if res, err := e.store.Claimed(context.Background(), orderEvent(3)); err != nil || res.Outcome == dedup.OutcomeDuplicate {
		t.Fatalf("a refused plan was claimed: %v %v", res.Outcome, err)
	}
}

type orderStatus struct {
	Status  string            `dynamodbav:"status"`
	Total   int64             `dynamodbav:"total"`
	Note    string            `dynamodbav:"note,omitempty"`
	Dotted  string            `dynamodbav:"a.b"`
	Tags    map[string]string `dynamodbav:"tags"`
	Shipped []string          `dynamodbav:"shipped,stringset"`
}

// UpdateEffectOf sets each attribute of the struct on the item DynamoDB holds, the others left
// as they were: committed twice over the emulator, with omitempty keeping a field, a dotted
// name kept as one attribute (not a path), and a key attribute in the struct refused.
func TestUpdateEffectOfThroughDynamoDB(t *testing.T) {
	t.Parallel()
	e := newTablesEnv(t)
	ctx := context.Background()
	key := struct {
		OrderID string `dynamodbav:"order_id"`
	}{"ord_1"}
	put, _ := dedup.PutEffectOf(orderRow{OrderID: "ord_1", Total: 1, Note: "keep", Ship: address{City: "Oslo"}})
	if _, err := e.store.Commit(ctx, orderEvent(1), dedup.Plan{Effects: []dedup.Effect{put.In(e.orders)}}); err != nil {
		t.Fatal(err)
	}
	set := orderStatus{Status: "paid", Total: 1200, Dotted: "d", Tags: map[string]string{"k": "v"}, Shipped: []string{"x", "y"}}
	upd, err := dedup.UpdateEffectOf(key, set)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := dedup.UpdateEffectOf(key, set)
	x1, _, _, _ := upd.Update()
	x2, _, _, _ := again.Update()
	if x1 != x2 {
		t.Fatalf("two builds of one update differ: %q, %q", x1, x2)
	}
	if res, err := e.store.Commit(ctx, orderEvent(2), dedup.Plan{Effects: []dedup.Effect{upd.In(e.orders)}}); err != nil || res.Outcome != dedup.OutcomeAccepted {
		t.Fatal(res, err)
	}
	items := e.itemsIn(t, e.orders)
	if len(items) != 1 {
		t.Fatalf("%d items", len(items))
	}
	var got struct {
		orderStatus
		Ship address `dynamodbav:"ship"`
	}
	if err := attributevalue.UnmarshalMap(items[0], &got); err != nil {
		t.Fatal(err)
	}
	want := set
	want.Note = "keep"
	if !reflect.DeepEqual(got.orderStatus, want) || got.Ship.City != "Oslo" {
		t.Fatalf("after the update: %+v, want %+v and the ship kept", got, want)
	}
	if _, nested := items[0]["a"]; nested {
		t.Fatal("a dotted name was written as a path")
	}

	var ie *dedup.InvalidError
	if _, err := dedup.UpdateEffectOf(key, map[string]any{"order_id": "ord_2", "status": "x"}); !errors.As(err, &ie) || ie.Field != "set.order_id" {
		t.Fatalf("a key in set: %v", err)
	}
	if _, err := dedup.UpdateEffectOf(key, 7); !errors.As(err, &ie) || ie.Field != "set" {
		t.Fatalf("set 7: %v", err)
	}
	if _, err := dedup.UpdateEffectOf("ord_1", set); !errors.As(err, &ie) || ie.Field != "key" {
		t.Fatalf("key a string: %v", err)
	}
}
