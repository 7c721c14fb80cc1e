package receiver_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/examples/orders"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
)

// traced is the env's handler with a tracer provider recording every span in memory.
func (e *env) traced() *tracetest.SpanRecorder {
	e.t.Helper()
	rec := tracetest.NewSpanRecorder()
	planners := receiver.NewPlanners()
	for _, name := range e.file.Names() {
		orders.Register(planners, name)
	}
	h, err := receiver.New(receiver.Config{Sources: e.file, Secrets: e.secretsStore(), Store: e.store, Planners: planners,
		Now: e.clock, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	if err != nil {
		e.t.Fatal(err)
	}
	e.handler = h
	return rec
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// byName indexes the spans of one trace by name (each name once in a delivery's trace).
func byName(t *testing.T, spans []sdktrace.ReadOnlySpan) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	m := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if _, dup := m[s.Name()]; dup {
			t.Fatalf("two %q spans", s.Name())
		}
		m[s.Name()] = s
	}
	return m
}

// TestADeliveryIsOneTraceOfItsSteps: a delivery is a server span, a root, with verify, plan and
// commit under it; the attributes say what it was and what its commit did (the outcome, the
// DynamoDB calls), and the claim stores the commit span's context for the outbox to continue.
// A duplicate is a trace of its own, and leaves the claim's context as the first commit wrote it.
func TestADeliveryIsOneTraceOfItsSteps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := e.traced()
	if r := e.post(e.request("stripe", orderBody("evt_tr_1", "ord_tr_1"), nil, "")); r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, r.Body)
	}
	spans := byName(t, rec.Ended())
	root := spans[receiver.SpanDelivery]
	if root == nil || root.Parent().IsValid() || root.SpanKind() != trace.SpanKindServer {
		t.Fatalf("delivery span %v: want a server span, a root", root)
	}
	a := attrs(root)
	for k, want := range map[attribute.Key]string{"http.request.method": "POST", "http.route": "/hooks/{source}", "faas.trigger": "http",
		dedup.AttrSource: "stripe", dedup.AttrEventID: "evt_tr_1", receiver.AttrEventType: "order.paid", dedup.AttrOutcome: "accepted"} {
		if got := a[k].Emit(); got != want {
			t.Errorf("delivery span %s = %q, want %q", k, got, want)
		}
	}
	if a["http.response.status_code"].AsInt64() != 200 || a[receiver.AttrDynamoDBCalls].AsInt64() != 1 || root.Status().Code == codes.Error {
		t.Errorf("delivery span: status %v, calls %v, span status %v", a["http.response.status_code"], a[receiver.AttrDynamoDBCalls], root.Status())
	}
	for _, name := range []string{receiver.SpanVerify, receiver.SpanPlan, receiver.SpanCommit} {
		s := spans[name]
		if s == nil || s.Parent().SpanID() != root.SpanContext().SpanID() || s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Fatalf("%s: %v, want a child of the delivery span", name, s)
		}
	}
	commit := attrs(spans[receiver.SpanCommit])
	if commit[dedup.AttrOutcome].AsString() != "accepted" || commit[receiver.AttrDynamoDBCalls].AsInt64() != 1 ||
		commit[receiver.AttrEffects].AsInt64() != 1 || commit[receiver.AttrIntents].AsInt64() != 1 {
		t.Errorf("commit span attributes %v", commit)
	}
	stored := e.claimOf("stripe", "evt_tr_1").TraceContext()
	if want := spans[receiver.SpanCommit].SpanContext(); stored.TraceID() != want.TraceID() || stored.SpanID() != want.SpanID() || !stored.IsSampled() {
		t.Fatalf("the claim holds %v, want the commit span's %v", stored, want)
	}

	rec2 := e.traced()
	if r := e.post(e.request("stripe", orderBody("evt_tr_1", "ord_tr_1"), nil, "")); !strings.Contains(r.Body, `"duplicate":true`) {
		t.Fatalf("the second delivery: %d %s", r.StatusCode, r.Body)
	}
	dup := byName(t, rec2.Ended())[receiver.SpanDelivery]
	if dup.SpanContext().TraceID() == root.SpanContext().TraceID() || attrs(dup)[dedup.AttrOutcome].AsString() != "duplicate" {
		t.Fatalf("duplicate: trace %s, outcome %v: want a trace of its own, outcome duplicate", dup.SpanContext().TraceID(), attrs(dup)[dedup.AttrOutcome])
	}
	if again := e.claimOf("stripe", "evt_tr_1").TraceContext(); again.SpanID() != stored.SpanID() {
		t.Fatal("a duplicate changed the claim's trace context")
	}
}

// TestAProvidersTraceparentIsALinkNeverTheParent: a well-formed traceparent the provider sent
// is recorded as a link; the delivery's trace is its own, and what the claim stores is ours.
func TestAProvidersTraceparentIsALinkNeverTheParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := e.traced()
	const theirs = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req := e.request("stripe", orderBody("evt_tr_2", "ord_tr_2"), http.Header{"Traceparent": {theirs}, "Tracestate": {"congo=t61rcWkgMzE"}}, "")
	if r := e.post(req); r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, r.Body)
	}
	root := byName(t, rec.Ended())[receiver.SpanDelivery]
	if root.Parent().IsValid() || root.SpanContext().TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("the delivery continued the provider's trace: parent %v, trace %s", root.Parent(), root.SpanContext().TraceID())
	}
	links := root.Links()
	if len(links) != 1 || links[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		links[0].SpanContext.SpanID().String() != "00f067aa0ba902b7" || links[0].Attributes[0] != dedup.AttrLink.String("provider") {
		t.Fatalf("links %+v: want the provider's traceparent", links)
	}
	if links[0].SpanContext.TraceState().Len() != 0 {
		t.Fatal("the provider's tracestate was kept on the link")
	}
	if stored := e.claimOf("stripe", "evt_tr_2").TraceContext(); stored.TraceID() != root.SpanContext().TraceID() {
		t.Fatalf("the claim stores trace %s, want the delivery's own", stored.TraceID())
	}
}

// TestARESTAPIsTraceparentIsALinkInTheSendersCase: a REST API's event keeps the sender's
// header case, and its Traceparent is the provider's link as a lower-case one is.
func TestARESTAPIsTraceparentIsALinkInTheSendersCase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := e.traced()
	v2 := e.request("stripe", orderBody("evt_tr_v1", "ord_tr_v1"), nil, "")
	r, err := e.handler.HandleV1(context.Background(), events.APIGatewayProxyRequest{
		Path: "/hooks/stripe", HTTPMethod: "POST", PathParameters: map[string]string{"source": "stripe"}, Body: v2.Body,
		Headers: map[string]string{"Stripe-Signature": v2.Headers["stripe-signature"], "Traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	})
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, r.Body)
	}
	if links := byName(t, rec.Ended())[receiver.SpanDelivery].Links(); len(links) != 1 || links[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("links %+v: want the provider's traceparent", links)
	}
}

// TestAHostileTraceContextIsIgnored: a traceparent or tracestate that is huge, malformed or
// holds control characters is no link and no error: the delivery is answered, claimed and
// traced exactly as one without it, and the claim's context is the receiver's own.
func TestAHostileTraceContextIsIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := e.traced()
	valid := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for i, h := range []http.Header{
		{"Traceparent": {strings.Repeat("0", 1<<20)}},
		{"Traceparent": {valid + strings.Repeat("-x", 1<<15)}},
		{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nX-Injected: 1"}},
		{"Traceparent": {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"}}, // upper case
		{"Traceparent": {"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}},
		{"Traceparent": {"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"}},
		{"Traceparent": {"\x00\x01\x02\x7f"}, "Tracestate": {strings.Repeat("k=v,", 1<<16)}},
		{"Traceparent": {valid}, "Tracestate": {strings.Repeat("\x1b[31m", 1<<12)}},
	} {
		id := "evt_tr_h" + string(rune('a'+i))
		if r := e.post(e.request("stripe", orderBody(id, "ord_"+id), h, "")); r.StatusCode != 200 || strings.Contains(r.Body, "duplicate\":true") {
			t.Fatalf("hostile %d: %d %s, want accepted", i, r.StatusCode, r.Body)
		}
	}
	roots, linked := 0, 0
	for _, s := range rec.Ended() {
		if s.Name() != receiver.SpanDelivery {
			continue
		}
		roots++
		for _, l := range s.Links() {
			if l.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || l.SpanContext.TraceState().Len() != 0 {
				t.Errorf("a link from a hostile header: %+v", l)
			}
		}
		if len(s.Links()) > 0 {
			linked++
			if attrs(s)[dedup.AttrEventID].AsString() != "evt_tr_hi" {
				t.Errorf("%s linked a malformed traceparent", attrs(s)[dedup.AttrEventID].AsString())
			}
		}
	}
	if roots != 9 || linked != 1 {
		t.Fatalf("%d delivery spans, %d linked: want 9, and the one valid traceparent (its tracestate dropped) linked", roots, linked)
	}
}

// TestARefusedDeliveryIsTracedAsRefused: a bad signature ends the trace at verify, in error
// there; the server span is not (a 4xx is the sender's), and nothing is claimed.
func TestARefusedDeliveryIsTracedAsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := e.traced()
	req := e.request("stripe", orderBody("evt_tr_3", "ord_tr_3"), nil, "")
	req.Body = strings.Replace(req.Body, "ord_tr_3", "ord_tr_X", 1)
	if r := e.post(req); r.StatusCode != 401 {
		t.Fatalf("%d %s", r.StatusCode, r.Body)
	}
	spans := byName(t, rec.Ended())
	if v := spans[receiver.SpanVerify]; v == nil || v.Status().Code != codes.Error {
		t.Fatalf("verify span %v: want it in error", v)
	}
	if spans[receiver.SpanCommit] != nil || spans[receiver.SpanPlan] != nil {
		t.Fatal("a refused delivery planned or committed")
	}
	root := spans[receiver.SpanDelivery]
	if root.Status().Code == codes.Error || attrs(root)["http.response.status_code"].AsInt64() != 401 || attrs(root)[receiver.AttrErrorKind].AsString() != "signature" {
		t.Fatalf("delivery span %v %v", root.Status(), attrs(root))
	}
}

// TestWithoutATracerNothingIsStoredOnTheClaim: tracing off (no TracerProvider) starts no span,
// and a claim is written without a trace context.
func TestWithoutATracerNothingIsStoredOnTheClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if r := e.post(e.request("stripe", orderBody("evt_tr_4", "ord_tr_4"), http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}, "")); r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, r.Body)
	}
	if c := e.claimOf("stripe", "evt_tr_4"); c.Trace != nil {
		t.Fatalf("the claim holds %x", c.Trace)
	}
}

// TestABatchIsOneDeliverySpan: a batch's events are planned under one plan span and committed
// under one commit span, whose context every claim of the batch stores.
func TestABatchIsOneDeliverySpan(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withSources(`{"sources": {"batch": {"scheme": "hmac-sha256", "hmac": {"header": "X-Sig", "prefix": "sha256="},
		"secrets": [{"env": "BATCH_SECRET"}], "batch": true, "event_id": {"json": "id"}, "event_type": {"json": "type"},
		"retry_horizon": "1h", "redrive_window": "1d"}}}`, map[string]string{"BATCH_SECRET": "batch-secret"}))
	rec := e.traced()
	body := "[" + orderBody("evt_tb_1", "ord_tb_1") + "," + orderBody("evt_tb_2", "ord_tb_2") + "]"
	if r := e.post(e.request("batch", body, nil, "")); r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, r.Body)
	}
	spans := byName(t, rec.Ended())
	commit := spans[receiver.SpanCommit]
	if commit == nil || attrs(commit)[receiver.AttrEvents].AsInt64() != 2 || commit.Parent().SpanID() != spans[receiver.SpanDelivery].SpanContext().SpanID() {
		t.Fatalf("commit span %v", commit)
	}
	for _, id := range []string{"evt_tb_1", "evt_tb_2"} {
		if sc := e.claimOf("batch", id).TraceContext(); sc.SpanID() != commit.SpanContext().SpanID() {
			t.Fatalf("%s stores %v, want the batch's commit span", id, sc)
		}
	}
}

// FuzzTraceparentNeverFails: whatever a sender puts in traceparent, it is read as a valid
// context or as none, within its bounds, and nothing panics.
func FuzzTraceparentNeverFails(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "congo=t61rcWkgMzE")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future", "")
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", "a=\x00")
	f.Fuzz(func(t *testing.T, tp, _ string) {
		sc, ok := receiver.ParseTraceparent(tp)
		if ok != sc.IsValid() || ok && (len(tp) > 256 || len(tp) < 55 || sc.TraceState().Len() != 0) {
			t.Fatalf("%q read as %v, %v", tp, sc, ok)
		}
	})
}

// claimOf reads a claim as stored.
func (e *env) claimOf(source, id string) *dedup.Claim {
	e.t.Helper()
	out, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: dedup.ClaimKey(source, id)}, "sk": &types.AttributeValueMemberS{Value: dedup.ClaimSK}}})
	if err != nil || out.Item == nil {
		e.t.Fatalf("claim %s/%s: %v", source, id, err)
	}
	c, err := dedup.UnmarshalClaim(out.Item)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

const tracedBatchSources = `{"sources": {
  "stripe": {"scheme": "stripe", "secrets": [{"env": "STRIPE_SECRET"}], "retry_horizon": "3d", "redrive_window": "30d"},
  "batch":  {"scheme": "hmac-sha256", "hmac": {"header": "X-Sig", "prefix": "sha256="},
             "secrets": [{"env": "BATCH_SECRET"}], "batch": true, "event_id": {"json": "id"}, "event_type": {"json": "type"},
             "retry_horizon": "1h", "redrive_window": "1d"}}}`

// tracedWith is the env's handler, traced into a recorder, with the reference planners and
// a planner for "order.failing" on every source that fails with err.
func (e *env) tracedWith(fail func(ctx context.Context, ev dedup.Event) (dedup.Plan, error)) *tracetest.SpanRecorder {
	e.t.Helper()
	rec := tracetest.NewSpanRecorder()
	planners := receiver.NewPlanners()
	for _, name := range e.file.Names() {
		orders.Register(planners, name)
		planners.Handle(name, "order.failing", fail)
	}
	h, err := receiver.New(receiver.Config{Sources: e.file, Secrets: e.secretsStore(), Store: e.store, Planners: planners,
		Now: e.clock, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	if err != nil {
		e.t.Fatal(err)
	}
	e.handler = h
	return rec
}

func failingBody(id string) string {
	return `{"id":"` + id + `","type":"order.failing","timestamp":"2026-08-25T09:14:03Z","data":{"order_id":"o","customer_email":"ada@example.com"}}`
}

// TestABatchsFailedPlanIsAPlanSpanInError: a planner that fails (a 500: the planner is
// ours to fix; or a 400: the payload) puts the plan span in error, as the single event's path
// does (its plan span ends with the planner's error). A batch's one plan span ends without an
// error whatever its planners did: the trace of a refused batch shows a plan that succeeded,
// and no span of it is in error at all when the answer is a 400.
//
// The space: each failure a planner can return (a plain error, a PayloadError), at each place
// in a batch (first, after a good event), on a batch source, with the same failure on a
// single-event source as the reference.
func TestABatchsFailedPlanIsAPlanSpanInError(t *testing.T) {
	t.Parallel()
	failures := []error{errors.New("planner: the catalogue is down"), &receiver.PayloadError{Field: "data.order_id", Reason: "is not an order"}}
	for fi, failure := range failures {
		e := newEnv(t, withSources(tracedBatchSources, map[string]string{"BATCH_SECRET": "batch-secret"}))
		rec := e.tracedWith(func(context.Context, dedup.Event) (dedup.Plan, error) { return dedup.Plan{}, failure })

		// The reference: one event, its planner fails.
		single := e.post(e.request("stripe", failingBody("evt_a5_single"), nil, ""))
		if single.StatusCode < 400 {
			t.Fatalf("failure %d: single: %d %s", fi, single.StatusCode, single.Body)
		}
		plan := byName(t, rec.Ended())[receiver.SpanPlan]
		if plan == nil || plan.Status().Code != codes.Error {
			t.Fatalf("failure %d: the single event's plan span %v: the reference wants it in error", fi, plan)
		}

		for place, body := range []string{
			"[" + failingBody("evt_a5_b0") + "," + orderBody("evt_a5_b1", "ord_a5_b1") + "]",
			"[" + orderBody("evt_a5_b2", "ord_a5_b2") + "," + failingBody("evt_a5_b3") + "]",
		} {
			rec := e.tracedWith(func(context.Context, dedup.Event) (dedup.Plan, error) { return dedup.Plan{}, failure })
			r := e.post(e.request("batch", body, nil, ""))
			if r.StatusCode != single.StatusCode {
				t.Fatalf("failure %d place %d: batch answered %d %s, the single event %d", fi, place, r.StatusCode, r.Body, single.StatusCode)
			}
			plan := byName(t, rec.Ended())[receiver.SpanPlan]
			if plan == nil {
				t.Fatalf("failure %d place %d: no plan span", fi, place)
			}
			if plan.Status().Code != codes.Error {
				t.Errorf("failure %d (%v) at place %d: the batch answered %d, and its plan span's status is %v: want it in error, as the single event's",
					fi, failure, place, r.StatusCode, plan.Status())
			}
		}
	}
}

// TestTracingOffStoresNoContextTheCallerHad: with tracing off (no TracerProvider) the
// receiver starts no span and stores nothing on a claim (docs/operations.md, Traces: "Off by
// default, and then free: ... nothing is stored on a claim"). A handler context that already
// holds a span context (a propagation middleware in front of ServeHTTP that extracts the
// provider's traceparent, as otelhttp does; a Lambda wrapper's span) must not change that:
// the claim would otherwise store the provider's trace (a hostile sender chooses it), and an
// outbox with tracing on would continue it as the parent of every intent and send the
// provider's trace id to every downstream.
//
// The space: the context's span context is the provider's remote traceparent, sampled and not,
// or a local span (a wrapper's) from an SDK provider; each is delivered through Handle with
// that context, and once through ServeHTTP behind a W3C-extracting middleware.
func TestTracingOffStoresNoContextTheCallerHad(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // e.handler: no TracerProvider
	theirs := []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
	}
	var cases []context.Context
	for _, tp := range theirs {
		cases = append(cases, propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp}))
	}
	wrapperCtx, wrapper := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder())).Tracer("a lambda wrapper").Start(context.Background(), "invocation")
	defer wrapper.End()
	cases = append(cases, wrapperCtx)

	for i, ctx := range cases {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			t.Fatalf("case %d: no span context to start from", i)
		}
		id := "evt_a5_off_" + string(rune('a'+i))
		resp, err := e.handler.Handle(ctx, e.request("stripe", orderBody(id, "ord_"+id), nil, ""))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("case %d: %d %s %v", i, resp.StatusCode, resp.Body, err)
		}
		if c := e.claimOf("stripe", id); c.Trace != nil {
			t.Errorf("case %d: tracing off, the claim stores the caller's trace context %x (trace %s)", i, []byte(c.Trace), c.TraceContext().TraceID())
		}
	}

	// ServeHTTP behind a middleware that extracts the sender's W3C headers into the request's
	// context, as an instrumented HTTP server does.
	mw := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.handler.ServeHTTP(w, r.WithContext(propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))))
	})
	srv := httptest.NewServer(mw)
	defer srv.Close()
	const id = "evt_a5_off_http"
	signed := e.request("stripe", orderBody(id, "ord_"+id), http.Header{"Traceparent": {theirs[0]}}, "")
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/stripe", strings.NewReader(signed.Body))
	for k, v := range signed.Headers {
		if k != "host" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ServeHTTP: %d %s", resp.StatusCode, body)
	}
	if c := e.claimOf("stripe", id); c.Trace != nil {
		t.Errorf("ServeHTTP, tracing off: the claim stores the sender's traceparent (trace %s): a hostile header was stored", c.TraceContext().TraceID())
	}
}

// TestAPanickingPlannerLeavesNoSpanOpen: every span the receiver starts is ended, on
// a panic too. A planner is the application's code; when it panics, Lambda's runtime recovers
// the panic, answers the invocation with an error and stops the process. The delivery span
// and the plan span under it are never ended, so they are never exported: the one delivery
// an operator most needs to find leaves no trace at all (and the SDK keeps them as open spans
// until the process dies).
//
// The space: the panic in the plan of a single event and of a batch's first and second event.
func TestAPanickingPlannerLeavesNoSpanOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withSources(tracedBatchSources, map[string]string{"BATCH_SECRET": "batch-secret"}))
	for i, c := range []struct{ source, body string }{
		{"stripe", failingBody("evt_a5_p0")},
		{"batch", "[" + failingBody("evt_a5_p1") + "," + orderBody("evt_a5_p2", "ord_a5_p2") + "]"},
		{"batch", "[" + orderBody("evt_a5_p3", "ord_a5_p3") + "," + failingBody("evt_a5_p4") + "]"},
	} {
		rec := e.tracedWith(func(context.Context, dedup.Event) (dedup.Plan, error) { panic("planner bug") })
		req := e.request(c.source, c.body, nil, "")
		func() {
			defer func() { _ = recover() }() // as Lambda's runtime does
			_, _ = e.handler.Handle(context.Background(), req)
		}()
		_, open := openSpans(rec)
		if len(rec.Started()) == 0 {
			t.Fatalf("case %d: no span started", i)
		}
		if len(open) > 0 {
			t.Errorf("case %d (%s): a planner's panic left spans %q started and never ended (never exported)", i, c.source, open)
		}
	}
}

// openSpans is the names of the spans rec saw started, and of those never ended.
func openSpans(rec *tracetest.SpanRecorder) (started, open []string) {
	ended := map[trace.SpanID]bool{}
	for _, s := range rec.Ended() {
		ended[s.SpanContext().SpanID()] = true
	}
	for _, s := range rec.Started() {
		started = append(started, s.Name())
		if !ended[s.SpanContext().SpanID()] {
			open = append(open, s.Name())
		}
	}
	return started, open
}

// TestTheServerSpansNameIsItsMethods: an HTTP server span is named "{method}
// {http.route}" (OpenTelemetry's HTTP conventions; "HTTP {http.route}" for a method the
// conventions do not know, http.request.method _OTHER), so that its name and its
// http.request.method never disagree. The delivery span is "POST /hooks/{source}" whatever the
// request's method: Intercom's HEAD check (answered 200), a GET or a PUT (405) are traced as
// POSTs with http.request.method HEAD, GET or PUT beside the name, and a backend grouping
// operations by span name counts them among the deliveries.
//
// The space: every method the receiver names, and one it does not, to a known source.
func TestTheServerSpansNameIsItsMethods(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct{ method, want string }{
		{"POST", "POST /hooks/{source}"},
		{"HEAD", "HEAD /hooks/{source}"},
		{"GET", "GET /hooks/{source}"},
		{"PUT", "PUT /hooks/{source}"},
		{"DELETE", "DELETE /hooks/{source}"},
		{"OPTIONS", "OPTIONS /hooks/{source}"},
		{"PROPFIND", "HTTP /hooks/{source}"},
	} {
		rec := e.traced()
		req := e.request("stripe", orderBody("evt_a5_m_"+c.method, "ord_a5_m"), nil, "")
		req.RequestContext.HTTP.Method = c.method
		_ = e.post(req)
		spans := byName(t, rec.Ended())
		if spans[c.want] == nil {
			for name, s := range spans {
				if s.Parent().IsValid() {
					continue
				}
				t.Errorf("%s request: the server span is named %q with http.request.method %q: want %q",
					c.method, name, attrs(s)["http.request.method"].Emit(), c.want)
			}
		}
	}
}

// TestANoopProviderStoresNoContextTheCallerHad: a delivery's trace is its own, a root
// (Config.TracerProvider: "The trace is the delivery's own: a provider's traceparent is
// recorded as a link, never as the parent"), and the claim stores its commit span's context
// or none (CHANGELOG, fourth review: "with tracing off, a claim stores no span context the
// handler's caller had"). Config.TracerProvider's own doc names otel.GetTracerProvider() as a
// value to set: before an SDK is installed (a container whose OTEL_ settings are off, a test)
// that provider starts no span, and neither does tracenoop.NewTracerProvider(). Such a tracer
// ignores trace.WithNewRoot and hands back the context's span context, so the "delivery span"
// is the caller's: a middleware that extracted the sender's traceparent (otelhttp), or a Lambda
// wrapper's span. The receiver only guards the nil provider (untraced), and the claim then
// stores the caller's (the sender's) trace context, which an outbox with tracing on continues as
// every intent's parent and sends to every downstream.
//
// The space: the sender's traceparent, sampled and not, extracted into the handler's context,
// through a noop provider and through the global provider before any SDK.
func TestANoopProviderStoresNoContextTheCallerHad(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	providers := map[string]trace.TracerProvider{"noop": tracenoop.NewTracerProvider(), "global, no SDK": otel.GetTracerProvider()}
	theirs := []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
	}
	n := 0
	for pname, tp := range providers {
		planners := receiver.NewPlanners()
		for _, name := range e.file.Names() {
			orders.Register(planners, name)
		}
		h, err := receiver.New(receiver.Config{Sources: e.file, Secrets: e.secretsStore(), Store: e.store, Planners: planners,
			Now: e.clock, TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range theirs {
			ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
			n++
			id := "evt_a8_noop_" + string(rune('a'+n))
			resp, err := h.Handle(ctx, e.request("stripe", orderBody(id, "ord_"+id), nil, ""))
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: %d %s %v", pname, resp.StatusCode, resp.Body, err)
			}
			if c := e.claimOf("stripe", id); c.Trace != nil {
				t.Errorf("%s provider, the caller's context %s: the claim stores trace %s span %s (the sender's own traceparent)",
					pname, tp, c.TraceContext().TraceID(), c.TraceContext().SpanID())
			}
		}
	}
}

// panickingStore is the env's store whose Commit panics (an application's Committer, a
// commit observer of its own, a bug in the write path).
type panickingStore struct{ *dedup.Store }

func (s panickingStore) Commit(context.Context, dedup.Event, dedup.Plan) (dedup.Result, error) {
	panic("committer bug")
}

func (s panickingStore) CommitBatch(context.Context, []dedup.Event, []dedup.Plan) ([]dedup.Result, int, error) {
	panic("committer bug")
}

// TestAPanickingCommitLeavesNoSpanOpen: every span the receiver starts is ended, on every path.
// The fourth review made a planner's panic end the delivery's spans in error (endPanicked on
// the delivery and the plan step); the commit step has no such guard. When the Committer
// panics (Config.Store is an interface: an application's store, a test kit, an observer the
// dedup store calls inside Commit), the delivery span is ended in error by endPanicked and
// exported by launch's flush, while its "commit" child is never ended, so never exported: the
// trace of the one delivery that crashed shows a server span whose failing step is missing
// (and the SDK holds the open span until the process dies).
//
// The space: the commit of a single event, and of a batch (CommitBatch).
func TestAPanickingCommitLeavesNoSpanOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withSources(tracedBatchSources, map[string]string{"BATCH_SECRET": "batch-secret"}))
	for i, c := range []struct{ source, body string }{
		{"stripe", orderBody("evt_a9_c0", "ord_a9_c0")},
		{"batch", "[" + orderBody("evt_a9_c1", "ord_a9_c1") + "," + orderBody("evt_a9_c2", "ord_a9_c2") + "]"},
	} {
		rec := tracetest.NewSpanRecorder()
		planners := receiver.NewPlanners()
		for _, name := range e.file.Names() {
			orders.Register(planners, name)
		}
		h, err := receiver.New(receiver.Config{Sources: e.file, Secrets: e.secretsStore(), Store: panickingStore{e.store},
			Planners: planners, Now: e.clock, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
		if err != nil {
			t.Fatal(err)
		}
		req := e.request(c.source, c.body, nil, "")
		panicked := false
		func() {
			defer func() { panicked = recover() != nil }() // as Lambda's runtime does
			_, _ = h.Handle(context.Background(), req)
		}()
		if !panicked {
			t.Fatalf("case %d: the committer's panic did not go on", i)
		}
		started, open := openSpans(rec)
		if len(open) > 0 {
			t.Errorf("case %d (%s): started %q; a committer's panic left %q never ended (never exported)", i, c.source, started, open)
		}
	}
}

// panickingSecrets are the env's secrets whose Refresh panics (an application's
// Secrets: Config.Secrets is an interface).
type panickingSecrets struct{ *sources.Secrets }

func (panickingSecrets) Refresh(context.Context, string) (bool, error) {
	panic("secrets bug")
}

// TestAPanickingSecretsRefreshLeavesNoSpanOpen: every span the receiver starts is ended, on
// every path. A delivery whose signature fails has its secrets re-read (Secrets.Refresh) while
// the verify span is open; when that panics, the delivery span is ended in error by
// endPanicked (and exported by launch's flush), and the verify span under it never is: the
// exported trace shows a server span in error with no step that failed.
//
// The space: a signature that does not match, and one whose header is missing.
func TestAPanickingSecretsRefreshLeavesNoSpanOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i, mangle := range []func(map[string]string){ // API Gateway's lower-cased headers
		func(h map[string]string) { h["stripe-signature"] += "0" },
		func(h map[string]string) { delete(h, "stripe-signature") },
	} {
		rec := tracetest.NewSpanRecorder()
		planners := receiver.NewPlanners()
		for _, name := range e.file.Names() {
			orders.Register(planners, name)
		}
		h, err := receiver.New(receiver.Config{Sources: e.file, Secrets: panickingSecrets{e.secretsStore()}, Store: e.store,
			Planners: planners, Now: e.clock, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
		if err != nil {
			t.Fatal(err)
		}
		req := e.request("stripe", orderBody("evt_a9_v"+string(rune('0'+i)), "ord_a9_v"), nil, "")
		headers := map[string]string{}
		for k, v := range req.Headers {
			headers[k] = v
		}
		mangle(headers)
		req.Headers = headers
		panicked := false
		func() {
			defer func() { panicked = recover() != nil }() // as Lambda's runtime does
			_, _ = h.Handle(context.Background(), req)
		}()
		if !panicked {
			t.Fatalf("case %d: Refresh was not called, or its panic did not go on", i)
		}
		started, open := openSpans(rec)
		if len(open) > 0 {
			t.Errorf("case %d: started %q; a panic in Secrets.Refresh left %q never ended (never exported)", i, started, open)
		}
	}
}
