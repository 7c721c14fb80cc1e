package dedup_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
)

// A guarded claim names its guard, whatever the guard hashes (the payload, or Event.Guard),
// so a reader finds the guard item from the claim alone; an unguarded one names none.
func TestAGuardedClaimNamesItsBodyGuard(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	for _, c := range []struct {
		id    string
		guard []byte
	}{{"evt_payload", nil}, {"evt_canonical", []byte("topic\x00{\"a\":1}")}} {
		ev := dedup.Event{Source: "shop", ID: c.id, Type: "order.paid", Payload: []byte(`{"a":1,"id":"` + c.id + `"}`), GuardBody: true, Guard: c.guard}
		if _, err := e.store.Commit(ctx, ev, dedup.Plan{}); err != nil {
			t.Fatal(err)
		}
		cl, err := dedup.GetClaim(ctx, e.client, e.table, "shop", c.id)
		if err != nil {
			t.Fatal(err)
		}
		hashed := c.guard
		if hashed == nil {
			hashed = ev.Payload
		}
		sum := sha256.Sum256(hashed)
		if cl.BodyGuard != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s: body_guard %q, want the sha256 of what the guard claims", c.id, cl.BodyGuard)
		}
		out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), Key: map[string]types.AttributeValue{
			dedup.PartitionKey: &types.AttributeValueMemberS{Value: dedup.ClaimKey("shop", cl.BodyGuard)}, dedup.SortKey: &types.AttributeValueMemberS{Value: dedup.BodySK}}})
		if err != nil || out.Item == nil || out.Item["event_id"].(*types.AttributeValueMemberS).Value != c.id {
			t.Fatalf("%s: the guard item under the claim's body_guard: %v, %v", c.id, out, err)
		}
	}
	if _, err := e.store.Commit(ctx, dedup.Event{Source: "shop", ID: "evt_open", Type: "order.paid", Payload: []byte(`{}`)}, dedup.Plan{}); err != nil {
		t.Fatal(err)
	}
	if cl, _ := dedup.GetClaim(ctx, e.client, e.table, "shop", "evt_open"); cl.BodyGuard != "" {
		t.Fatalf("an unguarded claim names a guard: %q", cl.BodyGuard)
	}
}
