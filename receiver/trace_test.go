package receiver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/examples/orders"
	"github.com/oncehook/oncehook/receiver"
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
		receiver.AttrSource: "stripe", receiver.AttrEventID: "evt_tr_1", receiver.AttrEventType: "order.paid", receiver.AttrOutcome: "accepted"} {
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
	if commit[receiver.AttrOutcome].AsString() != "accepted" || commit[receiver.AttrDynamoDBCalls].AsInt64() != 1 ||
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
	if dup.SpanContext().TraceID() == root.SpanContext().TraceID() || attrs(dup)[receiver.AttrOutcome].AsString() != "duplicate" {
		t.Fatalf("duplicate: trace %s, outcome %v: want a trace of its own, outcome duplicate", dup.SpanContext().TraceID(), attrs(dup)[receiver.AttrOutcome])
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
		links[0].SpanContext.SpanID().String() != "00f067aa0ba902b7" || links[0].Attributes[0] != receiver.AttrLink.String("provider") {
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
			if attrs(s)[receiver.AttrEventID].AsString() != "evt_tr_hi" {
				t.Errorf("%s linked a malformed traceparent", attrs(s)[receiver.AttrEventID].AsString())
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
