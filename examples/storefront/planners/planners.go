// Package planners is the storefront's application: what it does when Stripe says a checkout
// session completed and when GitHub says a branch was pushed. Each planner is a pure function
// from the event to a plan: records written with the claim, intents for the outbox.
package planners

import (
	"cmp"
	"context"
	"encoding/json"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/receiver"
)

// The sources this application plans for, as its sources file names them.
const (
	Stripe = "stripe"
	GitHub = "github"
)

// Customers is the storefront's own table of customers (by email), which checkouts update in
// the claim's transaction: the sources file's tables.customers.
const Customers = "customers"

// The outbox targets its intents use: "fulfilment" and "ci" are HTTP targets of the sources
// file; "crm" is served by the application's own executor (package executors).
const (
	TargetFulfilment = "fulfilment"
	TargetCI         = "ci"
	TargetCRM        = "crm"
)

// Register adds the storefront's planners.
func Register(p *receiver.Planners) {
	p.HandleFields(Stripe, "checkout.session.completed", checkoutFields, Checkout)
	p.HandleFields(GitHub, "push", pushFields, Push)
}

var checkoutFields = receiver.NewFields("data.object.id", "data.object.customer_details.email", "data.object.amount_total")

// Checkout records the order once per checkout session (ORDER#<session> / CHECKOUT, written
// only if absent), counts it on the customer in the storefront's own customers table, asks
// fulfilment to ship it and the CRM to record the customer.
func Checkout(_ context.Context, ev dedup.Event, f []string) (dedup.Plan, error) {
	session, email, amount := f[0], f[1], f[2]
	if session == "" {
		return dedup.Plan{}, &receiver.PayloadError{Field: "data.object.id", Reason: "is missing"}
	}
	order := dedup.PutEffect(map[string]types.AttributeValue{
		"pk":       &types.AttributeValueMemberS{Value: "ORDER#" + session},
		"sk":       &types.AttributeValueMemberS{Value: "CHECKOUT"},
		"email":    &types.AttributeValueMemberS{Value: email},
		"amount":   &types.AttributeValueMemberN{Value: cmp.Or(amount, "0")},
		"event_id": &types.AttributeValueMemberS{Value: ev.ID},
	}).IfAbsent()
	effects := []dedup.Effect{order}
	if email != "" {
		// The customer's order count: in the application's table, in the same write as the
		// claim, so a redelivery can never count an order twice.
		effects = append(effects, dedup.UpdateEffect(map[string]types.AttributeValue{"email": &types.AttributeValueMemberS{Value: email}},
			expression.Add(expression.Name("orders"), expression.Value(1)).Set(expression.Name("last_order"), expression.Value(session))).In(Customers))
	}
	ship, _ := json.Marshal(map[string]string{"order": session})
	crm, _ := json.Marshal(map[string]string{"email": email, "order": session})
	return dedup.Plan{
		Effects: effects,
		Intents: []dedup.Intent{
			{Name: "fulfilment.ship", Target: TargetFulfilment, Payload: ship},
			{Name: "crm.customer", Target: TargetCRM, Payload: crm},
		},
	}, nil
}

var pushFields = receiver.NewFields("ref", "after", "repository.full_name")

// Push records the pushed commit once (PUSH#<repo>#<sha> / PUSH) and asks CI to build it.
func Push(_ context.Context, ev dedup.Event, f []string) (dedup.Plan, error) {
	ref, sha, repo := f[0], f[1], f[2]
	if sha == "" || repo == "" {
		return dedup.Plan{}, &receiver.PayloadError{Field: "after", Reason: "and repository.full_name are required"}
	}
	push := dedup.PutEffect(map[string]types.AttributeValue{
		"pk":  &types.AttributeValueMemberS{Value: "PUSH#" + repo + "#" + sha},
		"sk":  &types.AttributeValueMemberS{Value: "PUSH"},
		"ref": &types.AttributeValueMemberS{Value: ref},
	}).IfAbsent()
	build, _ := json.Marshal(map[string]string{"repository": repo, "commit": sha, "ref": ref})
	return dedup.Plan{
		Effects: []dedup.Effect{push},
		Intents: []dedup.Intent{{Name: "ci.build", Target: TargetCI, Payload: build}},
	}, nil
}
