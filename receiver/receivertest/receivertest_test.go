package receivertest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/examples/orders"
	"github.com/oncehook/oncehook/launch"
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

// TestTheKitRefusesABatchWholeAsTheStoreDoes: a batch (SendGrid posts an array of events)
// holding one event or plan the store refuses is refused whole by the kit's Recorder, as by
// dedup.Store.CommitBatch: the same *dedup.EventError naming the same index, wherever in the
// batch it is, and nothing recorded. Through the kit's handler, a delivery whose second event's
// plan is refused is answered as production answers it, with nothing recorded.
func TestTheKitRefusesABatchWholeAsTheStoreDoes(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	priv, _ := x509.MarshalPKCS8PrivateKey(k)
	public, private := base64.StdEncoding.EncodeToString(pub), base64.StdEncoding.EncodeToString(priv)
	// parityFile's tables and targets, and a batch source.
	f, err := sources.Parse([]byte(strings.Replace(parityFile, `"stripe": {`,
		fmt.Sprintf(`"sendgrid": {"scheme": "sendgrid", "public_keys": [%q]}, "stripe": {`, public), 1)))
	if err != nil {
		t.Fatal(err)
	}
	ok := dedup.Plan{}
	newEvent := func(id string) dedup.Event {
		return dedup.Event{Source: "sendgrid", ID: id, Type: "open", Payload: []byte(`{}`)}
	}

	t.Run("the store's refusal", func(t *testing.T) {
		for _, c := range parityCases() {
			if c.site == "" {
				continue
			}
			for at := range 3 {
				evs := []dedup.Event{newEvent("sg_1"), newEvent("sg_2"), newEvent("sg_3")}
				plans := []dedup.Plan{ok, ok, ok}
				plans[at] = c.plan
				if c.event != nil {
					c.event(&evs[at])
				}
				store, err := dedup.New(&countingAPI{}, dedup.Config{Table: "claims", Sources: f.Retentions(), Tables: f.DedupTables()})
				if err != nil {
					t.Fatal(err)
				}
				_, _, serr := store.CommitBatch(context.Background(), evs, plans)
				rec := receivertest.NewRecorder(f)
				bc, isBatch := any(rec).(receiver.BatchCommitter)
				if !isBatch {
					t.Fatal("the Recorder is no receiver.BatchCommitter: the receiver commits a batch to it one event at a time")
				}
				_, _, kerr := bc.CommitBatch(context.Background(), evs, plans)
				var se, ke *dedup.EventError
				switch {
				case !errors.As(serr, &se) || se.Index != at:
					t.Fatalf("%s at %d: the store refused with %v", c.name, at, serr)
				case !errors.As(kerr, &ke) || ke.Index != at || !sameRefusal(se.Err, ke.Err):
					t.Errorf("%s at %d: the store refused with %v, the kit with %T %v", c.name, at, serr, kerr, kerr)
				case len(rec.All()) != 0:
					t.Errorf("%s at %d: the kit recorded %d events of a refused batch", c.name, at, len(rec.All()))
				}
			}
		}
	})

	t.Run("the receiver's answer", func(t *testing.T) {
		targets := launch.KnownTargets(f, []string{"email"})
		for _, c := range parityCases() {
			if c.site == "" || c.event != nil {
				continue
			}
			register := func(ps *receiver.Planners) {
				ps.Handle("sendgrid", "open", func(context.Context, dedup.Event) (dedup.Plan, error) { return ok, nil })
				ps.Handle("sendgrid", "bounce", func(context.Context, dedup.Event) (dedup.Plan, error) { return c.plan, nil })
			}
			api := &countingAPI{}
			store, err := dedup.New(api, dedup.Config{Table: "claims", Sources: f.Retentions(), Tables: f.DedupTables()})
			if err != nil {
				t.Fatal(err)
			}
			keys := staticSecrets{"sendgrid": {public}, "stripe": {secrets["stripe"]}}
			prod, err := receiver.New(receiver.Config{Sources: f, Secrets: keys, Store: store, Planners: plannersOf(register), Targets: targets})
			if err != nil {
				t.Fatal(err)
			}
			kit, rec, err := receivertest.NewHandler(f, map[string]string{"sendgrid": private, "stripe": secrets["stripe"]}, register, receivertest.WithTargets("email"))
			if err != nil {
				t.Fatal(err)
			}
			ev := func(id, typ string) string {
				return fmt.Sprintf(`{"email":"a@b.c","timestamp":%d,"event":%q,"sg_event_id":%q,"sg_message_id":"m"}`, time.Now().Unix(), typ, id)
			}
			req, err := receivertest.Request(f, "sendgrid", private, []byte("["+ev("sg_a", "open")+","+ev("sg_b", "bounce")+"]"))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := receivertest.Deliver(context.Background(), prod, req)
			got, _ := receivertest.Deliver(context.Background(), kit, req)
			switch {
			case want.Outcome != receivertest.Refused || api.calls.Load() != 0:
				t.Fatalf("%s: production answered %+v after %d writes", c.name, want, api.calls.Load())
			case got != want:
				t.Errorf("%s: the kit answered %+v, production %+v", c.name, got, want)
			case len(rec.All()) != 0:
				t.Errorf("%s: the kit recorded %d events of a refused batch", c.name, len(rec.All()))
			}
		}
	})
}

// TestTheKitRecordsABatchAsCommitWould: a batch the store accepts is recorded event by event
// as Commit records each, in order: an event seen before, in an earlier batch or earlier in
// this one, is a duplicate and recorded once.
func TestTheKitRecordsABatchAsCommitWould(t *testing.T) {
	f, err := sources.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	rec := receivertest.NewRecorder(f)
	bc, isBatch := any(rec).(receiver.BatchCommitter)
	if !isBatch {
		t.Fatal("the Recorder is no receiver.BatchCommitter")
	}
	ev := func(id, delivery string) dedup.Event {
		return dedup.Event{Source: "shop", ID: id, DeliveryID: delivery, Type: "order.paid", Payload: []byte(`{}`)}
	}
	if _, err := rec.Commit(context.Background(), ev("e0", "d0"), dedup.Plan{}); err != nil {
		t.Fatal(err)
	}
	evs := []dedup.Event{ev("e1", "d1"), ev("e0", "d2"), ev("e2", "d3"), ev("e1", "d4")}
	results, _, err := bc.CommitBatch(context.Background(), evs, make([]dedup.Plan, len(evs)))
	if err != nil {
		t.Fatal(err)
	}
	want := []dedup.Outcome{dedup.OutcomeAccepted, dedup.OutcomeDuplicate, dedup.OutcomeAccepted, dedup.OutcomeDuplicate}
	for i, r := range results {
		if r.Outcome != want[i] {
			t.Errorf("event %d (%s): %v, want %v", i, evs[i].ID, r.Outcome, want[i])
		}
	}
	var ids []string
	for _, c := range rec.All() {
		ids = append(ids, c.Event.ID+"/"+c.Event.DeliveryID)
	}
	if got := strings.Join(ids, " "); got != "e0/d0 e1/d1 e2/d3" {
		t.Fatalf("recorded %s, want e0/d0 e1/d1 e2/d3", got)
	}
	if _, _, err := bc.CommitBatch(context.Background(), evs, nil); !errors.Is(err, dedup.ErrInvalid) {
		t.Fatalf("a batch with no plan for its events: %v, want the store's refusal", err)
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
