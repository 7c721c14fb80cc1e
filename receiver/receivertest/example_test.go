package receivertest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
)

// A planner test that reads the receiver's answer as a typed Response. The handler refuses
// what production refuses: here an intent for a target ("emial") that neither the sources file
// nor the application's executors serve, and an effect in a table the file does not declare.
func ExampleDeliver() {
	f, _ := sources.Parse([]byte(`{"sources": {"stripe": {"scheme": "stripe", "secrets": [{"env": "S"}], "retry_horizon": "3d", "redrive_window": "30d"}},
	  "tables": {"orders": {"partition_key": "order_id", "actions": ["put"]}}}`))
	target := "email"
	register := func(ps *receiver.Planners) {
		ps.Handle("stripe", "checkout.session.completed", func(_ context.Context, ev dedup.Event) (dedup.Plan, error) {
			return dedup.Plan{Intents: []dedup.Intent{{Name: "email.receipt", Target: target, Payload: ev.Payload}}}, nil
		})
	}
	executors := map[string]outbox.Executor{"email": &outbox.HTTPExecutor{URL: "https://mail.example/send"}} // the map the application hands launch.Outbox
	h, rec, _ := receivertest.NewHandler(f, map[string]string{"stripe": "whsec_test"}, register, receivertest.WithExecutors(executors))
	body := []byte(`{"id":"evt_1","type":"checkout.session.completed"}`)
	req, _ := receivertest.Request(f, "stripe", "whsec_test", body)
	for range 2 {
		resp, _ := receivertest.Deliver(context.Background(), h, req)
		fmt.Println(resp.Outcome, resp.Status)
	}
	target = "emial"
	req, _ = receivertest.Request(f, "stripe", "whsec_test", []byte(`{"id":"evt_2","type":"checkout.session.completed"}`))
	resp, _ := receivertest.Deliver(context.Background(), h, req)
	fmt.Println(resp.Outcome, resp.Status)

	// The Recorder gives the store's own typed error.
	_, err := rec.Commit(context.Background(), dedup.Event{Source: "stripe", ID: "evt_3", Type: "t"},
		dedup.Plan{Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"order_id": &types.AttributeValueMemberS{Value: "ord_1"}}).In("orderz")}})
	var ie *dedup.InvalidError
	fmt.Println(errors.As(err, &ie), ie.Field)
	// Output:
	// accepted 200
	// duplicate 200
	// refused 500
	// true effects[0].table
}

// A planner's test reads an effect's condition as the store sends it: in the team's "orders"
// table, IfAbsent tests order_id, the table's partition key (Effect.Condition, which does not
// know the table's keys, refuses to guess).
func ExampleRecorder_Condition() {
	f, _ := sources.Parse([]byte(`{"sources": {"stripe": {"scheme": "stripe", "secrets": [{"env": "S"}], "retry_horizon": "3d", "redrive_window": "30d"}},
	  "tables": {"orders": {"partition_key": "order_id", "actions": ["put"]}}}`))
	rec := receivertest.NewRecorder(f)
	put, _ := dedup.PutEffectOf(struct {
		OrderID string `dynamodbav:"order_id"`
	}{"ord_42"})
	expr, names, _, err := rec.Condition(put.In("orders").IfAbsent())
	fmt.Println(expr, names, err)
	_, _, _, err = put.In("orders").IfAbsent().Condition()
	fmt.Println(err != nil)
	// Output:
	// attribute_not_exists (#0) map[#0:order_id] <nil>
	// true
}
