// Package orders is the reference application: what a shop does when a payment provider says
// an order was paid. It ships the order once (a shipment record, guarded by its own
// one-shipment-per-order condition as a second line of defence under the claim) and sends a
// confirmation email through the outbox, under the event's idempotency key.
//
// It shows the shape every application takes: a pure function from the event to a plan,
// registered per source and event type.
package orders

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/receiver"
)

// EventType is the event this application plans for.
const EventType = "order.paid"

// EmailTarget is the outbox executor that sends the confirmation email.
const EmailTarget = "email"

// Register adds the order.paid planner for source.
func Register(p *receiver.Planners, source string) {
	p.HandleFields(source, EventType, Fields, PlanOrderPaid)
}

// Fields are what PlanOrderPaid reads of the payload, in this order. The receiver reads them
// in the pass that checks the body: a payload with a thousand order lines is read once.
var Fields = receiver.NewFields("data.order_id", "data.customer_email")

// Email is the email intent's payload: what the email executor needs, no more.
type Email struct {
	Template string `json:"template"`
	OrderID  string `json:"order_id"`
	To       string `json:"to,omitempty"`
}

// PlanOrderPaid plans one shipment record per order (ORDER#<id> / SHIPMENT, written only if
// none exists) and one email.send intent. f holds the values of Fields.
func PlanOrderPaid(_ context.Context, ev dedup.Event, f []string) (dedup.Plan, error) {
	orderID, customer := f[0], f[1]
	if orderID == "" {
		return dedup.Plan{}, &receiver.PayloadError{Field: "data.order_id", Reason: "is missing"}
	}
	if len(orderID) > 256 {
		return dedup.Plan{}, &receiver.PayloadError{Field: "data.order_id", Reason: "is longer than 256 bytes"}
	}
	email, err := json.Marshal(Email{Template: "order-paid", OrderID: orderID, To: customer})
	if err != nil {
		return dedup.Plan{}, err
	}
	item := map[string]types.AttributeValue{
		"pk":       &types.AttributeValueMemberS{Value: "ORDER#" + orderID},
		"sk":       &types.AttributeValueMemberS{Value: "SHIPMENT"},
		"order_id": &types.AttributeValueMemberS{Value: orderID},
		"status":   &types.AttributeValueMemberS{Value: "to-ship"},
		"source":   &types.AttributeValueMemberS{Value: ev.Source},
		"event_id": &types.AttributeValueMemberS{Value: ev.ID},
	}
	if customer != "" {
		item["recipient"] = &types.AttributeValueMemberS{Value: customer}
	}
	shipment := dedup.PutEffect(item).IfAbsent()
	return dedup.Plan{
		Effects: []dedup.Effect{shipment},
		Intents: []dedup.Intent{{Name: "email.send", Target: EmailTarget, Payload: email}},
	}, nil
}
