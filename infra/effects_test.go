package infra

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
)

// recorder is a dedup.API that records the DynamoDB actions a commit issues and succeeds.
type recorder struct{ actions []string }

func (r *recorder) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	r.actions = append(r.actions, "dynamodb:PutItem")
	return &dynamodb.PutItemOutput{}, nil
}

func (r *recorder) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for _, it := range in.TransactItems {
		switch {
		case it.Put != nil:
			r.actions = append(r.actions, "dynamodb:PutItem")
		case it.Update != nil:
			r.actions = append(r.actions, "dynamodb:UpdateItem")
		case it.Delete != nil:
			r.actions = append(r.actions, "dynamodb:DeleteItem")
		case it.ConditionCheck != nil:
			r.actions = append(r.actions, "dynamodb:ConditionCheckItem")
		}
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

func (r *recorder) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.actions = append(r.actions, "dynamodb:GetItem")
	return &dynamodb.GetItemOutput{}, nil
}

func (r *recorder) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	r.actions = append(r.actions, "dynamodb:BatchGetItem")
	return &dynamodb.BatchGetItemOutput{}, nil
}

// TestEveryEffectTheDedupAPIBuildsOnTheTableIsGranted commits one event with an effect of each
// kind dedup builds (PutEffect, UpdateEffect, DeleteEffect, CheckEffect) on oncehook's own
// table, records the actions the transaction holds, and holds the receiver's synthesized policy
// to each: a kind added to the API without its grant fails here, not with AccessDenied (500) on
// every delivery that uses it.
func TestEveryEffectTheDedupAPIBuildsOnTheTableIsGranted(t *testing.T) {
	rec := &recorder{}
	st, err := dedup.New(rec, dedup.Config{Table: "t", Sources: map[string]dedup.Retention{"shop": {RetryHorizon: 24 * time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	key := func(sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "ORDER#1"}, "sk": &types.AttributeValueMemberS{Value: sk}}
	}
	effects := []dedup.Effect{
		dedup.PutEffect(key("A")),
		dedup.UpdateEffect(key("B"), expression.Set(expression.Name("n"), expression.Value(1))),
		dedup.DeleteEffect(key("C")),
		dedup.CheckEffect(key("D"), expression.AttributeExists(expression.Name("pk"))),
	}
	if _, err := st.Commit(context.Background(), dedup.Event{Source: "shop", ID: "evt_1", Type: "order.paid", Payload: []byte(`{}`)}, dedup.Plan{Effects: effects}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(rec.actions)
	rec.actions = slices.Compact(rec.actions)
	if len(rec.actions) < 4 {
		t.Fatalf("the commit issued only %v", rec.actions)
	}
	pairs, _ := policyPairs(synth.tpl, "OncehookReceiverRole")
	for _, action := range rec.actions {
		if !slices.Contains(pairs, action+" OncehookTable.Arn") {
			t.Errorf("a commit's %s on oncehook's table is not granted to the receiver: %v", action, pairs)
		}
	}
}
