package planners_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"example.com/storefront/executors"
	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
)

// The mistakes a team makes in a planner are refused by the test kit, as the launched receiver
// refuses them, never answered 200: an effect in a table the sources file does not declare, a
// put without the table's key, an own-table put without pk/sk, an intent name with a space, an
// intent for a target nobody serves. Only public packages, as a team's module has.
func TestTheKitRefusesAPlannersMistakes(t *testing.T) {
	raw, err := os.ReadFile("../sources.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := sources.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	for name, plan := range map[string]dedup.Plan{
		"a table not declared":      {Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"email": str("a@example.com")}).In("customerz")}},
		"a put without the key":     {Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"name": str("Ada")}).In("customers")}},
		"an own put without pk/sk":  {Effects: []dedup.Effect{dedup.PutEffect(map[string]types.AttributeValue{"id": str("o1")})}},
		"an intent name with space": {Intents: []dedup.Intent{{Name: "ship it!", Target: "fulfilment"}}},
		"an unknown target":         {Intents: []dedup.Intent{{Name: "ship", Target: "fulfilmnet"}}},
	} {
		t.Run(name, func(t *testing.T) {
			register := func(ps *receiver.Planners) {
				ps.Handle("stripe", "checkout.session.completed", func(context.Context, dedup.Event) (dedup.Plan, error) { return plan, nil })
			}
			h, rec, err := receivertest.NewHandler(f, secrets, register, receivertest.WithExecutors(executors.All()))
			if err != nil {
				t.Fatal(err)
			}
			body := fmt.Appendf(nil, `{"id":"evt_k1","object":"event","type":"checkout.session.completed","created":%d,"data":{"object":{"id":"cs_1"}}}`, time.Now().Unix())
			req, err := receivertest.Request(f, "stripe", secrets["stripe"], body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := receivertest.Deliver(context.Background(), h, req)
			if err != nil || resp.Outcome != receivertest.Refused || len(rec.All()) != 0 {
				t.Fatalf("answered %+v (%v), %d recorded: want refused, nothing recorded", resp, err, len(rec.All()))
			}
		})
	}
}
