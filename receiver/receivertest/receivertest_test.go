package receivertest_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/oncehook/oncehook/examples/orders"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
)

const file = `{"sources": {
  "shop":    {"scheme": "standard-webhooks", "secrets": [{"env": "X"}], "retry_horizon": "72h", "redrive_window": "30d"},
  "stripe":  {"scheme": "stripe",  "secrets": [{"env": "X"}], "retry_horizon": "3d",  "redrive_window": "30d"},
  "github":  {"scheme": "github",  "secrets": [{"env": "X"}], "retry_horizon": "1h",  "redrive_window": "3d"},
  "shopify": {"scheme": "shopify", "secrets": [{"env": "X"}], "retry_horizon": "48h", "redrive_window": "7d"},
  "partner": {"scheme": "hmac-sha256", "hmac": {"header": "X-Partner-Signature"}, "secrets": [{"env": "X"}],
              "event_id": {"header": "X-Partner-Id"}, "event_type": {"json": "type"}, "retry_horizon": "24h", "redrive_window": "7d"}
}}`

var secrets = map[string]string{"shop": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "stripe": "whsec_test_stripe", "github": "gh-secret",
	"shopify": "shpss_test", "partner": "partner-secret"}

func TestEveryProvidersRequestIsAcceptedOnceByTheRealReceiver(t *testing.T) {
	f, err := sources.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	h, rec, err := receivertest.NewHandler(f, secrets, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		source string
		body   string
		opts   []receivertest.Option
	}{
		{"shop", `{"type":"order.paid","data":{}}`, nil},
		{"stripe", `{"id":"evt_1","type":"checkout.session.completed","data":{"object":{}}}`, nil},
		{"github", `{"ref":"refs/heads/main"}`, []receivertest.Option{receivertest.WithEventType("push")}},
		{"shopify", `{"id":820982911946154508}`, []receivertest.Option{receivertest.WithEventType("orders/paid")}},
		{"partner", `{"type":"invoice.paid"}`, nil},
		{"shop", `{"type":"order.paid","data":{"n":2}}`, []receivertest.Option{receivertest.Base64()}},
	} {
		req, err := receivertest.Request(f, c.source, secrets[c.source], []byte(c.body), c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []string{`{"received":true,"duplicate":false}`, `{"received":true,"duplicate":true}`} {
			resp, _ := h.Handle(context.Background(), req)
			if resp.StatusCode != 200 || resp.Body != want {
				t.Fatalf("%s delivery %d: %d %s", c.source, i+1, resp.StatusCode, resp.Body)
			}
		}
		if got := rec.Last().Event.Source; got != c.source {
			t.Fatalf("recorded %q, want %q", got, c.source)
		}
	}
	if len(rec.All()) != 6 {
		t.Fatalf("%d commits, want 6", len(rec.All()))
	}
	// A request for a source the file does not have, or a header-typed source without a type.
	if _, err := receivertest.Request(f, "nobody", "s", nil); err == nil {
		t.Fatal("an unknown source must be refused")
	}
	if _, err := receivertest.Request(f, "github", "s", []byte(`{}`)); err == nil {
		t.Fatal("github without WithEventType must be refused")
	}
}

func TestAnHTTPRequestForServeHTTP(t *testing.T) {
	f, _ := sources.Parse([]byte(file))
	h, rec, _ := receivertest.NewHandler(f, secrets, nil)
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := receivertest.HTTPRequest(f, "github", secrets["github"], srv.URL+"/hooks/github", []byte(`{"ref":"x"}`), receivertest.WithEventType("push"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil || resp.StatusCode != 200 || len(rec.All()) != 1 {
		t.Fatalf("%v %v %d", resp, err, len(rec.All()))
	}
}

// ExampleNewHandler tests a planner through the real receiver: a signed request in, the plan it
// would commit out.
func ExampleNewHandler() {
	f, _ := sources.Parse([]byte(`{"sources":{"shop":{"scheme":"standard-webhooks","secrets":[{"env":"S"}],"retry_horizon":"72h","redrive_window":"30d"}}}`))
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	h, rec, _ := receivertest.NewHandler(f, map[string]string{"shop": secret}, func(p *receiver.Planners) { orders.Register(p, "shop") })

	body := []byte(`{"type":"order.paid","data":{"order_id":"ord_1","customer_email":"ada@example.com"}}`)
	req, _ := receivertest.Request(f, "shop", secret, body, receivertest.WithEventID("msg_1"))
	resp, _ := h.Handle(context.Background(), req)
	fmt.Println(resp.StatusCode, resp.Body)

	plan := rec.Last().Plan
	pk, sk := plan.Effects[0].Key()
	cond, _, _, _ := plan.Effects[0].Condition()
	fmt.Println(pk, sk, cond)
	fmt.Println(plan.Intents[0].Name, plan.Intents[0].Target, string(plan.Intents[0].Payload))
	// Output:
	// 200 {"received":true,"duplicate":false}
	// ORDER#ord_1 SHIPMENT attribute_not_exists(pk)
	// email.send email {"template":"order-paid","order_id":"ord_1","to":"ada@example.com"}
}
