package planners_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"example.com/storefront/executors"
	"example.com/storefront/planners"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
)

var secrets = map[string]string{"stripe": "whsec_test_storefront", "github": "gh-storefront"}

func TestACompletedCheckoutRecordsTheOrderAndAsksForFulfilmentAndTheCRM(t *testing.T) {
	raw, _ := os.ReadFile("../sources.json")
	f, _ := sources.Parse(raw)
	h, rec, err := receivertest.NewHandler(f, secrets, planners.Register, receivertest.WithExecutors(executors.All()))
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Appendf(nil, `{"id":"evt_1QabcX","object":"event","type":"checkout.session.completed","created":%d,
		"data":{"object":{"id":"cs_test_a1","amount_total":4200,"customer_details":{"email":"ada@example.com"}}}}`, time.Now().Unix())
	req, err := receivertest.Request(f, "stripe", secrets["stripe"], body)
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := h.Handle(context.Background(), req)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, resp.Body)
	}
	plan := rec.Last().Plan
	if len(plan.Effects) != 2 || len(plan.Intents) != 2 {
		t.Fatalf("plan %+v", plan)
	}
	if c := plan.Effects[1]; c.Table() != planners.Customers || !c.IsUpdate() || c.KeyItem()["email"] == nil {
		t.Fatalf("customer effect %+v: want an update of customers by email", c)
	}
	if pk, sk := plan.Effects[0].Key(); pk != "ORDER#cs_test_a1" || sk != "CHECKOUT" {
		t.Fatalf("effect key %s / %s", pk, sk)
	}
	if cond, _, _, _ := plan.Effects[0].Condition(); cond != "attribute_not_exists(pk)" {
		t.Fatalf("condition %q: one order per session", cond)
	}
	if plan.Intents[0].Target != "fulfilment" || plan.Intents[1].Target != "crm" || string(plan.Intents[1].Payload) != `{"email":"ada@example.com","order":"cs_test_a1"}` {
		t.Fatalf("intents %+v", plan.Intents)
	}
	// The same event again is a duplicate: nothing more is planned.
	resp, _ = h.Handle(context.Background(), req)
	if resp.Body != `{"received":true,"duplicate":true}` || len(rec.All()) != 1 {
		t.Fatalf("%s, %d commits", resp.Body, len(rec.All()))
	}
}

func TestAPushAsksCIToBuildTheCommit(t *testing.T) {
	raw, _ := os.ReadFile("../sources.json")
	f, _ := sources.Parse(raw)
	h, rec, _ := receivertest.NewHandler(f, secrets, planners.Register, receivertest.WithExecutors(executors.All()))
	req, _ := receivertest.Request(f, "github", secrets["github"],
		[]byte(`{"ref":"refs/heads/main","after":"59b20b8d5c6ff8d09518454d4dd8b7b30f095ab5","repository":{"full_name":"octo-org/octo-repo"}}`),
		receivertest.WithEventType("push"))
	if resp, _ := h.Handle(context.Background(), req); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, resp.Body)
	}
	plan := rec.Last().Plan
	if pk, _ := plan.Effects[0].Key(); pk != "PUSH#octo-org/octo-repo#59b20b8d5c6ff8d09518454d4dd8b7b30f095ab5" {
		t.Fatalf("effect %s", pk)
	}
	if plan.Intents[0].Name != "ci.build" || plan.Intents[0].Target != "ci" {
		t.Fatalf("intents %+v", plan.Intents)
	}
}

func TestAPushWithoutACommitIsRefusedNamingTheField(t *testing.T) {
	raw, _ := os.ReadFile("../sources.json")
	f, _ := sources.Parse(raw)
	h, rec, _ := receivertest.NewHandler(f, secrets, planners.Register, receivertest.WithExecutors(executors.All()))
	req, _ := receivertest.Request(f, "github", secrets["github"], []byte(`{"ref":"refs/heads/main"}`), receivertest.WithEventType("push"))
	if resp, _ := h.Handle(context.Background(), req); resp.StatusCode != 400 || len(rec.All()) != 0 {
		t.Fatalf("%d %s", resp.StatusCode, resp.Body)
	}
}
