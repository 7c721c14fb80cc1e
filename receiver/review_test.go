package receiver_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/receiver"
)

func TestADuplicateGets200EvenWhenItCanNoLongerBePlanned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.post(e.request("stripe", orderBody("evt_replan", "ord_replan"), nil, "")); !strings.Contains(r.Body, `"duplicate":false`) {
		t.Fatalf("first delivery: %d %s", r.StatusCode, r.Body)
	}
	// The provider reuses the id with a body today's planner refuses: still the same event.
	r := e.post(e.request("stripe", `{"id":"evt_replan","type":"order.paid","data":{}}`, nil, ""))
	if r.StatusCode != 200 || r.Body != `{"received":true,"duplicate":true}` {
		t.Fatalf("got %d %s, want 200 duplicate", r.StatusCode, r.Body)
	}
	// A new event with that body is refused, naming the field.
	r = e.post(e.request("stripe", `{"id":"evt_new","type":"order.paid","data":{}}`, nil, ""))
	if r.StatusCode != 400 || decode(t, r)["field"] != "data.order_id" {
		t.Fatalf("got %d %s, want 400 naming data.order_id", r.StatusCode, r.Body)
	}
}

func TestAnUnusableDeliveryIDIsDroppedNotFatal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	req := e.request("partner", `{"meta":{"id":"p_long","type":"order.paid"},"data":{"order_id":"ord_long"}}`,
		map[string][]string{"X-Partner-Delivery": {strings.Repeat("d", 300)}}, "")
	if r := e.post(req); r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, r.Body)
	}
	if logs := e.logLines(); logs[0]["delivery_id_dropped"] != true {
		t.Fatalf("log %v: the dropped delivery id should be noted", logs[0])
	}
}

func TestLookAlikeEventIDsAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.post(e.request("stripe", `{"id":"evt_\u202egnp.exe","type":"order.paid","data":{"order_id":"o"}}`, nil, ""))
	if r.StatusCode != 400 || decode(t, r)["field"] != "event_id" {
		t.Fatalf("%d %s, want 400 naming event_id", r.StatusCode, r.Body)
	}
	if logs := e.logLines(); strings.Contains(mustJSON(logs), "gnp.exe") {
		t.Fatal("an invalid event id must not be logged")
	}
}

func TestPlansTheStoreRefusesAndPlannerFailuresAre500(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.handler = e.handlerWith(func(p *receiver.Planners) {
		p.Handle("stripe", "too.big", func(context.Context, dedup.Event) (dedup.Plan, error) {
			big := strings.Repeat("x", 500*1024)
			return dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "BIG#1"}, "sk": &types.AttributeValueMemberS{Value: "X"},
				"blob": &types.AttributeValueMemberS{Value: big}})}}, nil
		})
		p.Handle("stripe", "planner.down", func(context.Context, dedup.Event) (dedup.Plan, error) {
			return dedup.Plan{}, errors.New("inventory service unreachable")
		})
	})
	for _, typ := range []string{"too.big", "planner.down"} {
		r := e.post(e.request("stripe", `{"id":"evt_`+typ+`","type":"`+typ+`"}`, nil, ""))
		if r.StatusCode != 500 || strings.Contains(r.Body, "inventory") {
			t.Fatalf("%s: %d %s, want a bare 500", typ, r.StatusCode, r.Body)
		}
	}
	if n := len(e.items()); n != 0 {
		t.Fatalf("%d items written, want none", n)
	}
}

func TestAPersistentTransactionConflictIsA503(t *testing.T) {
	t.Parallel()
	inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "TransactWriteItems", N: -1, Status: 400,
		Body: `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled","CancellationReasons":[{"Code":"TransactionConflict"},{"Code":"None"}]}`}
	e := newEnv(t, withClient(awstest.WithTransport(inject)))
	r := e.post(e.request("stripe", orderBody("evt_conflict", "ord_conflict"), nil, ""))
	if r.StatusCode != 503 || r.Headers["Retry-After"] == "" || inject.Injected() != 4 {
		t.Fatalf("%d %v after %d attempts; want 503 with Retry-After after the first try and 3 retries", r.StatusCode, r.Headers, inject.Injected())
	}
}

func TestNewRefusesASourceTheStoreDoesNotKnow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	store, err := dedup.New(awstest.Client(t), dedup.Config{Table: e.table, Sources: map[string]dedup.Retention{"stripe": e.file.Sources["stripe"].Retention()}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = receiver.New(receiver.Config{Sources: e.file, Secrets: e.secretsStore(), Store: store})
	if err == nil || !strings.Contains(err.Error(), "no retention in the store") {
		t.Fatalf("got %v", err)
	}
}
