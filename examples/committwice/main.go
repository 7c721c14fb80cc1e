// Command committwice shows the dedup core on a real DynamoDB API: it creates the table, then
// delivers one order.paid event twice (a retry after a timed-out success: same event id, new
// delivery id) and four concurrent copies of another, and prints what each delivery got.
//
//	make demo       # against the local emulator
//
// It reads the endpoint from AWS_ENDPOINT_URL like every AWS SDK, so it runs unchanged against
// LocalStack or a real account (where it creates a table named oncehook-demo).
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
)

func main() {
	log.SetFlags(0)
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg)
	table := "oncehook-demo"
	fmt.Printf("endpoint %s, table %s\n", os.Getenv("AWS_ENDPOINT_URL"), table)
	if err := dedup.EnsureTable(ctx, client, table); err != nil {
		log.Fatal(err)
	}
	store, err := dedup.New(client, dedup.Config{
		Table: table,
		Sources: map[string]dedup.Retention{
			// The provider retries for 72 hours and can redrive 30 days back.
			"shop": {RetryHorizon: 72 * time.Hour, RedriveWindow: 30 * 24 * time.Hour},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	r, _ := store.Retention("shop")
	fmt.Printf("retention for shop: %s\n\n", r)

	run := fmt.Sprint(time.Now().Unix()) // fresh ids on every run
	first := event("evt_"+run+"_a", "dlv_1", "ord_"+run+"_a")
	show("first delivery", first, store, ctx)
	retry := first
	retry.DeliveryID = "dlv_2" // the provider timed out on our 200 and retried
	show("provider retry", retry, store, ctx)

	fmt.Println("\nfour concurrent copies of another event:")
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			show(fmt.Sprintf("  copy %d", i+1), event("evt_"+run+"_b", fmt.Sprintf("dlv_c%d", i+1), "ord_"+run+"_b"), store, ctx)
		})
	}
	wg.Wait()
}

func event(id, delivery, order string) dedup.Event {
	return dedup.Event{
		Source:     "shop",
		ID:         id,
		Type:       "order.paid",
		DeliveryID: delivery,
		Payload:    []byte(`{"event_id":"` + id + `","type":"order.paid","data":{"order_id":"` + order + `"}}`),
	}
}

// plan is the reference application: one shipment record per order, guarded by its own
// condition, and a confirmation email run by the outbox worker.
func plan(ev dedup.Event) dedup.Plan {
	order := "ord" + ev.ID[3:]
	return dedup.Plan{
		Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{
			"pk":       &types.AttributeValueMemberS{Value: "ORDER#" + order},
			"sk":       &types.AttributeValueMemberS{Value: "SHIPMENT"},
			"order_id": &types.AttributeValueMemberS{Value: order},
		}).If(expression.AttributeNotExists(expression.Name("pk")))},
		Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{"template":"order-shipped"}`)}},
	}
}

func show(label string, ev dedup.Event, store *dedup.Store, ctx context.Context) {
	res, err := store.Commit(ctx, ev, plan(ev))
	if err != nil {
		log.Fatalf("%s: %v", label, err)
	}
	line := fmt.Sprintf("%-18s event %s delivery %-7s -> %-9s (%d DynamoDB call)", label, ev.ID, ev.DeliveryID, res.Outcome, res.Calls)
	if res.Outcome == dedup.OutcomeDuplicate {
		line += fmt.Sprintf(", first delivered as %s", res.FirstDeliveryID)
	}
	fmt.Println(line)
}
