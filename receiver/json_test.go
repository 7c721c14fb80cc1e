package receiver_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
)

type checkout struct {
	ID   string `json:"id"`
	Data struct {
		Object struct {
			ID     string `json:"id"`
			Amount int64  `json:"amount_total"`
			Meta   map[string]string
		} `json:"object"`
	} `json:"data"`
	hidden string //lint:ignore U1000 an unexported field is never decoded
}

// HandleJSON decodes the body into the team's struct; a mistyped field is a PayloadError (400)
// naming the field's path, never a zero value, and the planner is not run.
func TestHandleJSONDecodesAndRefusesMistypedFields(t *testing.T) {
	ps := receiver.NewPlanners()
	var got checkout
	ran := 0
	receiver.HandleJSON(ps, "stripe", "checkout.session.completed", func(_ context.Context, _ dedup.Event, v checkout) (dedup.Plan, error) {
		got, ran = v, ran+1
		return dedup.Plan{}, nil
	})
	plan := func(body string) error {
		_, known, err := ps.Plan(context.Background(), dedup.Event{Source: "stripe", Type: "checkout.session.completed", Payload: []byte(body)})
		if !known {
			t.Fatal("not registered")
		}
		return err
	}
	if err := plan(`{"id":"evt_1","data":{"object":{"id":"cs_1","amount_total":1200,"Meta":{"k":"v"}}},"extra":[1]}`); err != nil {
		t.Fatal(err)
	}
	if got.Data.Object.ID != "cs_1" || got.Data.Object.Amount != 1200 || got.Data.Object.Meta["k"] != "v" || ran != 1 {
		t.Fatalf("decoded %+v", got)
	}
	for _, c := range []struct{ body, field string }{
		{`{"id":"evt_1","data":{"object":{"id":12}}}`, "data.object.id"},
		{`{"data":{"object":{"amount_total":"12"}}}`, "data.object.amount_total"},
		{`{"data":{"object":{"amount_total":1.5}}}`, "data.object.amount_total"},
		{`{"data":{"object":{"Meta":{"k":1}}}}`, "data.object.Meta"}, // encoding/json names the map, not its key,
		{`{"data":[]}`, "data"},
		{`{"data":{"object":{"amount_total":1e999}}}`, "data.object.amount_total"},
		{`[]`, "body"},
		{`{"id":`, "body"},
		{`{"id":"a"} {"id":"b"}`, "body"},
	} {
		err := plan(c.body)
		var pe *receiver.PayloadError
		if !errors.As(err, &pe) || !errors.Is(err, receiver.ErrBadPayload) || pe.Field != c.field {
			t.Errorf("%s: got %v, want a PayloadError naming %s", c.body, err, c.field)
		} else if strings.Contains(pe.Reason, "1e999") || strings.Contains(pe.Reason, "1.5") {
			t.Errorf("%s: the reason %q holds the body's value", c.body, pe.Reason)
		}
	}
	if ran != 1 {
		t.Fatalf("the planner ran %d times on refused bodies", ran-1)
	}
}

// HandleJSON refuses a body cut off mid-value as one that ended early (encoding/json's
// "unexpected EOF"), a PayloadError on body, never as holding a character it does not hold.
func TestHandleJSONRefusesATruncatedBodyAsEndingEarly(t *testing.T) {
	ps := receiver.NewPlanners()
	receiver.HandleJSON(ps, "stripe", "checkout.session.completed", func(_ context.Context, _ dedup.Event, v checkout) (dedup.Plan, error) {
		return dedup.Plan{}, nil
	})
	for _, body := range []string{`{"id":`, `{"id":"evt_1","data":{"object":{"id":"cs_1\`, `{"id":"evt_\u00`, `[{"id":"evt_1"},n`} {
		_, _, err := ps.Plan(context.Background(), dedup.Event{Source: "stripe", Type: "checkout.session.completed", Payload: []byte(body)})
		var pe *receiver.PayloadError
		if !errors.As(err, &pe) || pe.Field != "body" || pe.Reason != "is not valid JSON: unexpected EOF" {
			t.Errorf("%s: got %v, want a PayloadError on body: is not valid JSON: unexpected EOF", body, err)
		}
	}
}

// A nil planner is a registration mistake the receiver's New reports, as with Handle.
func TestHandleJSONNilIsRefused(t *testing.T) {
	f, err := sources.Parse([]byte(`{"sources": {"stripe": {"scheme": "stripe", "secrets": [{"env": "S"}], "retry_horizon": "3d", "redrive_window": "30d"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	register := func(ps *receiver.Planners) { receiver.HandleJSON[checkout](ps, "stripe", "x", nil) }
	if _, _, err := receivertest.NewHandler(f, map[string]string{"stripe": "whsec_test"}, register); err == nil || !strings.Contains(err.Error(), "stripe x is nil") {
		t.Fatalf("New: %v, want the nil planner named", err)
	}
}

// Through the real receiver and store: a typed planner's struct becomes a PutEffectOf record
// in the team's own table; a body whose field has the wrong JSON type is answered 400 naming
// the field, nothing is claimed or written, and the provider's corrected redelivery (the same
// event id) is accepted.
func TestHandleJSONThroughTheReceiverAndTheStore(t *testing.T) {
	t.Parallel()
	client := awstest.Client(t)
	table := awstest.Table(t, client)
	f, err := sources.Parse([]byte(`{"sources": {"stripe": {"scheme": "stripe", "secrets": [{"env": "S"}], "retry_horizon": "3d", "redrive_window": "30d"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	type order struct {
		PK     string `dynamodbav:"pk"`
		SK     string `dynamodbav:"sk"`
		Amount int64  `dynamodbav:"amount"`
	}
	ps := receiver.NewPlanners()
	receiver.HandleJSON(ps, "stripe", "checkout.session.completed", func(_ context.Context, _ dedup.Event, v checkout) (dedup.Plan, error) {
		put, err := dedup.PutEffectOf(order{PK: "ORDER#" + v.Data.Object.ID, SK: "CHECKOUT", Amount: v.Data.Object.Amount})
		return dedup.Plan{Effects: []dedup.Effect{put.IfAbsent()}}, err
	})
	h, err := receiver.New(receiver.Config{Sources: f, Secrets: staticKeys{"stripe": {"whsec_test"}}, Store: store, Planners: ps})
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(body string) receivertest.Response {
		req, err := receivertest.Request(f, "stripe", "whsec_test", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := receivertest.Deliver(context.Background(), h, req)
		return resp
	}
	bad := deliver(`{"id":"evt_1","type":"checkout.session.completed","data":{"object":{"id":"cs_1","amount_total":"1200"}}}`)
	if bad.Outcome != receivertest.Refused || bad.Status != 400 || bad.Field != "data.object.amount_total" {
		t.Fatalf("a mistyped amount: %+v", bad)
	}
	if items := awstest.Items(t, client, table); len(items) != 0 {
		t.Fatalf("a refused body wrote %d items", len(items))
	}
	good := deliver(`{"id":"evt_1","type":"checkout.session.completed","data":{"object":{"id":"cs_1","amount_total":1200}}}`)
	if good.Outcome != receivertest.Accepted {
		t.Fatalf("the corrected redelivery: %+v", good)
	}
	var got []order
	for _, it := range awstest.Items(t, client, table) {
		var o order
		if err := attributevalue.UnmarshalMap(it, &o); err != nil {
			t.Fatal(err)
		}
		if o.SK == "CHECKOUT" {
			got = append(got, o)
		}
	}
	if len(got) != 1 || got[0] != (order{PK: "ORDER#cs_1", SK: "CHECKOUT", Amount: 1200}) {
		t.Fatalf("orders written: %+v", got)
	}
}

// For any body, a typed planner either runs with what encoding/json decodes, or the body is
// refused with a *PayloadError whose field is one of T's paths (or "body") and whose reason is
// short: a hostile body's bytes never reach the answer. go test runs the seeds; go test
// -fuzz=FuzzHandleJSON explores.
func FuzzHandleJSON(f *testing.F) {
	for _, s := range []string{`{"id":"evt_1","data":{"object":{"id":"cs_1","amount_total":1200}}}`, `{"data":{"object":{"amount_total":"` + strings.Repeat("9", 500) + `"}}}`,
		`{"data":{"object":{"amount_total":` + strings.Repeat("9", 500) + `}}}`, `{"data":{"object":{"Meta":{"` + strings.Repeat("k", 500) + `":1}}}}`, `[`, `null`, `{"id":"a"}{`, "\xff"} {
		f.Add([]byte(s))
	}
	paths := map[string]bool{"body": true, "id": true, "data": true, "data.object": true, "data.object.id": true, "data.object.amount_total": true, "data.object.Meta": true}
	ps := receiver.NewPlanners()
	var got checkout
	receiver.HandleJSON(ps, "stripe", "t", func(_ context.Context, _ dedup.Event, v checkout) (dedup.Plan, error) {
		got = v
		return dedup.Plan{}, nil
	})
	f.Fuzz(func(t *testing.T, body []byte) {
		got = checkout{}
		_, _, err := ps.Plan(context.Background(), dedup.Event{Source: "stripe", Type: "t", Payload: body})
		var want checkout
		werr := json.Unmarshal(body, &want)
		if err == nil {
			if werr != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("accepted %q as %+v; encoding/json: %+v, %v", body, got, want, werr)
			}
			return
		}
		var pe *receiver.PayloadError
		if !errors.As(err, &pe) {
			t.Fatalf("%q: %v, not a *PayloadError", body, err)
		}
		if !paths[pe.Field] || len(pe.Reason) > 200 {
			t.Fatalf("%q: field %q, reason %q", body, pe.Field, pe.Reason)
		}
	})
}
