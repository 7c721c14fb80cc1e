package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

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

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

// TestMain sets W3C Trace Context as the global propagator, as launch does with tracing on:
// the executors carry what it writes. A test without a span in its context carries nothing.
func TestMain(m *testing.M) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	os.Exit(m.Run())
}

// heard is a real local HTTP downstream that records each call's headers and answers with the
// next status of its script (the last repeats; 200 when empty).
type heard struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
	script  []int
}

func newHeard(t *testing.T, script ...int) *heard {
	h := &heard{script: script}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.headers = append(h.headers, r.Header.Clone())
		status := http.StatusOK
		if n := len(h.headers) - 1; len(h.script) > 0 {
			status = h.script[min(n, len(h.script)-1)]
		}
		h.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *heard) calls() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.headers...)
}

// recorder is an SDK tracer provider that keeps every ended span in memory.
func recorder() (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	rec := tracetest.NewSpanRecorder()
	return rec, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// spansNamed are the spans named name (or, ending in a space, starting with it), in the order
// they ended.
func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name || strings.HasSuffix(name, " ") && strings.HasPrefix(s.Name(), name) {
			out = append(out, s)
		}
	}
	return out
}

// childOf reports whether s is a child of p.
func childOf(s, p sdktrace.ReadOnlySpan) bool {
	return s.Parent().SpanID() == p.SpanContext().SpanID() && s.SpanContext().TraceID() == p.SpanContext().TraceID()
}

// commitTraced commits an event with one intent under a "commit" span of the receiver's
// tracer, as the receiver does, and returns that span.
func commitTraced(t *testing.T, e *env, tp trace.TracerProvider, id string) sdktrace.ReadOnlySpan {
	t.Helper()
	ctx, span := tp.Tracer("receiver").Start(context.Background(), "commit")
	_, err := e.store.Commit(ctx, dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{"template":"paid"}`)}}})
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	return span.(sdktrace.ReadOnlySpan)
}

// TestTheOutboxsSpansContinueTheReceiversTrace: a claim committed under a span, read back from
// the table's stream as Lambda delivers it, runs its intent as a child of that span, however
// late: the intent span (linked to the invocation that ran it) with the lease, the call and the
// finish under it, and the HTTP executor's client span under the call. The downstream, a real
// local server, reads a traceparent in the same trace whose parent is that client span, next
// to the Idempotency-Key as it always is.
func TestTheOutboxsSpansContinueTheReceiversTrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec, tp := recorder()
	commit := commitTraced(t, e, tp, "evt_tr_1")
	down := newHeard(t)
	w := e.worker(func(c *outbox.Config) {
		c.Executors["email"] = &outbox.HTTPExecutor{URL: down.URL, Timeout: 2 * time.Second}
		c.TracerProvider = tp
	})
	ctx, invocation := tp.Tracer("launch").Start(context.Background(), "outbox invocation")
	var batch events.DynamoDBEvent
	for _, r := range e.records() {
		if r.EventName == "INSERT" {
			batch.Records = append(batch.Records, r)
		}
	}
	if resp, err := w.HandleStream(ctx, batch); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v %v", resp, err)
	}
	invocation.End()

	intents := spansNamed(rec, outbox.SpanIntent+" ")
	if len(intents) != 1 || intents[0].Name() != "intent email.send" || !childOf(intents[0], commit) {
		t.Fatalf("intent spans %v: want one, a child of the commit span %s", intents, commit.SpanContext().SpanID())
	}
	intent := intents[0]
	if l := intent.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != invocation.SpanContext().SpanID() {
		t.Fatalf("intent links %+v: want the invocation", l)
	}
	a := spanAttrs(intent)
	if a[dedup.AttrOutcome].AsString() != outbox.OutcomeDone || a[outbox.AttrAttempt].AsInt64() != 1 ||
		a["messaging.message.id"].AsString() != "shop:evt_tr_1:email.send" || intent.SpanKind() != trace.SpanKindConsumer {
		t.Fatalf("intent span %v %v", intent.SpanKind(), a)
	}
	steps := map[string]sdktrace.ReadOnlySpan{}
	for _, name := range []string{outbox.SpanLease, outbox.SpanCall + " email", outbox.SpanFinish} {
		s := spansNamed(rec, name)
		if len(s) != 1 || !childOf(s[0], intent) {
			t.Fatalf("%s: %v, want one child of the intent span", name, s)
		}
		steps[name] = s[0]
	}
	if a := spanAttrs(steps[outbox.SpanLease]); a[outbox.AttrLease].AsString() != "taken" || a["rpc.method"].AsString() != "DynamoDB/UpdateItem" {
		t.Fatalf("lease span %v", a)
	}
	if a := spanAttrs(steps[outbox.SpanFinish]); a[outbox.AttrStatus].AsString() != dedup.IntentDone {
		t.Fatalf("finish span %v", a)
	}
	post := spansNamed(rec, http.MethodPost)
	if len(post) != 1 || !childOf(post[0], steps[outbox.SpanCall+" email"]) || post[0].SpanKind() != trace.SpanKindClient ||
		spanAttrs(post[0])["http.response.status_code"].AsInt64() != 200 {
		t.Fatalf("HTTP client spans %v", post)
	}
	calls := down.calls()
	if len(calls) != 1 {
		t.Fatalf("%d calls", len(calls))
	}
	sc, ok := traceparentOf(calls[0])
	if !ok || sc.TraceID() != commit.SpanContext().TraceID() || sc.SpanID() != post[0].SpanContext().SpanID() || !sc.IsSampled() {
		t.Fatalf("traceparent %q: want trace %s, parent %s", calls[0].Get("Traceparent"), commit.SpanContext().TraceID(), post[0].SpanContext().SpanID())
	}
	if k := calls[0].Get("Idempotency-Key"); k != "shop:evt_tr_1:email.send" {
		t.Fatalf("Idempotency-Key %q", k)
	}
}

// traceparentOf reads a call's W3C traceparent.
func traceparentOf(h http.Header) (trace.SpanContext, bool) {
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h))
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// TestARetryHoursLaterIsInTheSameTrace: an attempt that fails is retried hours later (the
// worker's clock moved on, the claim read as a wake-up reads it), and by the sweeper: every
// attempt is a child of the commit span, the sweep's claim span too (linked to its sweep),
// each call carries the trace. What is recorded and sent is what an untraced twin records and
// is sent: tracing changes neither.
func TestARetryHoursLaterIsInTheSameTrace(t *testing.T) {
	t.Parallel()
	e, twin := newEnv(t), newEnv(t) // the twin's table: a sweep reads every claim of its own
	rec, tp := recorder()
	commit := commitTraced(t, e, tp, "evt_tr_2")
	if _, err := twin.store.Commit(context.Background(), dedup.Event{Source: "shop", ID: "evt_tr_3", Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{"template":"paid"}`)}}}); err != nil {
		t.Fatal(err)
	}
	traced, plain := newHeard(t, 503, 503, 200), newHeard(t, 503, 503, 200)
	type run struct {
		e  *env
		id string
		w  *outbox.Worker
	}
	runs := []run{
		{e, "evt_tr_2", e.worker(func(c *outbox.Config) {
			c.Executors["email"] = &outbox.HTTPExecutor{URL: traced.URL, Timeout: 2 * time.Second}
			c.TracerProvider = tp
		})},
		{twin, "evt_tr_3", twin.worker(func(c *outbox.Config) {
			c.Executors["email"] = &outbox.HTTPExecutor{URL: plain.URL, Timeout: 2 * time.Second}
		})},
	}
	for _, r := range runs {
		if _, err := r.w.Process(context.Background(), r.e.claim(r.id)); err != nil { // the stream's attempt
			t.Fatal(err)
		}
		r.e.advance(3 * time.Hour)
		if _, err := r.w.Process(context.Background(), r.e.claim(r.id)); err != nil { // a wake-up's, hours later
			t.Fatal(err)
		}
		r.e.advance(3 * time.Hour)
		if _, err := (&outbox.Sweeper{Worker: r.w, MinAge: time.Minute}).Run(context.Background()); err != nil { // and the sweeper's
			t.Fatal(err)
		}
	}

	intents := spansNamed(rec, outbox.SpanIntent+" ")
	if len(intents) != 3 {
		t.Fatalf("%d intent spans, want 3 (one traced worker's attempts)", len(intents))
	}
	sweeps, claims := spansNamed(rec, outbox.SpanSweep), spansNamed(rec, outbox.SpanSweepClaim)
	if len(sweeps) != 1 || len(claims) != 1 || !childOf(claims[0], commit) || len(claims[0].Links()) != 1 ||
		claims[0].Links()[0].SpanContext.SpanID() != sweeps[0].SpanContext().SpanID() {
		t.Fatalf("sweeps %v, claims %v: want the claim's span a child of the commit, linked to its sweep", sweeps, claims)
	}
	for i, s := range intents {
		want := commit
		if i == 2 {
			want = claims[0]
		}
		if !childOf(s, want) {
			t.Fatalf("attempt %d: parent %s, want %s (%s)", i+1, s.Parent().SpanID(), want.SpanContext().SpanID(), want.Name())
		}
	}
	if spans := spansNamed(rec, outbox.SpanFinish); len(spans) != 3 || spanAttrs(spans[0])[outbox.AttrStatus].AsString() != dedup.IntentPending ||
		spanAttrs(spans[2])[outbox.AttrStatus].AsString() != dedup.IntentDone {
		t.Fatalf("finish spans %v", spans)
	}
	if spansNamed(rec, outbox.SpanCall+" email")[0].Status().Code != codes.Error {
		t.Fatal("a 503's call span is not in error")
	}
	for i, h := range traced.calls() {
		if sc, ok := traceparentOf(h); !ok || sc.TraceID() != commit.SpanContext().TraceID() {
			t.Fatalf("attempt %d carried %q", i+1, h.Get("Traceparent"))
		}
	}
	for i, h := range plain.calls() {
		if h.Get("Traceparent") != "" || h.Get("Tracestate") != "" {
			t.Fatalf("untraced attempt %d carried a trace context: %v", i+1, h)
		}
	}
	// Recorded and sent alike: the same statuses, attempts and errors, the same calls with the
	// same headers but the trace context.
	a, b := e.claim("evt_tr_2").Intents["email.send"], twin.claim("evt_tr_3").Intents["email.send"]
	if a.Status != b.Status || a.Attempts != b.Attempts || strings.Replace(a.LastError, traced.URL, plain.URL, 1) != b.LastError || a.Status != dedup.IntentDone {
		t.Fatalf("traced %+v\nplain  %+v", a, b)
	}
	tc, pc := traced.calls(), plain.calls()
	if len(tc) != 3 || len(pc) != 3 {
		t.Fatalf("%d and %d calls, want 3 each", len(tc), len(pc))
	}
	for i := range tc {
		x, y := tc[i].Clone(), pc[i].Clone()
		x.Del("Traceparent")
		if strings.Replace(strings.Join(x.Values("Idempotency-Key"), ","), "evt_tr_2", "evt_tr_3", 1) != y.Get("Idempotency-Key") {
			t.Fatalf("call %d: keys %v and %v", i, x.Values("Idempotency-Key"), y.Values("Idempotency-Key"))
		}
		x.Del("Idempotency-Key")
		y.Del("Idempotency-Key")
		if len(x) != len(y) {
			t.Fatalf("call %d: headers %v and %v", i, x, y)
		}
	}
}

// TestAPropagatedHeaderNeverReplacesATargetsOwn: a target whose static headers set a
// traceparent keeps it, and the Idempotency-Key is the intent's whatever the headers say.
func TestAPropagatedHeaderNeverReplacesATargetsOwn(t *testing.T) {
	t.Parallel()
	_, tp := recorder()
	down := newHeard(t)
	const theirs = "00-11111111111111111111111111111111-2222222222222222-00"
	x := &outbox.HTTPExecutor{URL: down.URL, Headers: map[string]string{"traceparent": theirs, "Idempotency-Key": "static", "X-Team": "a"}}
	ctx, span := tp.Tracer("test").Start(context.Background(), "call")
	err := x.Execute(ctx, outbox.Task{Source: "shop", EventID: "e", Intent: "i", IdempotencyKey: "shop:e:i", Payload: []byte(`{}`)})
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	h := down.calls()[0]
	if h.Get("Traceparent") != theirs || len(h.Values("Traceparent")) != 1 || h.Get("Idempotency-Key") != "shop:e:i" || h.Get("X-Team") != "a" {
		t.Fatalf("headers %v", h)
	}
}

// TestWithTracingOffNothingIsCarried: a worker without a tracer provider, on a claim that
// holds a trace context and with a propagator set, starts no span and adds no header.
func TestWithTracingOffNothingIsCarried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec, tp := recorder()
	commitTraced(t, e, tp, "evt_tr_4")
	ended := len(rec.Ended())
	down := newHeard(t)
	w := e.worker(func(c *outbox.Config) {
		c.Executors["email"] = &outbox.HTTPExecutor{URL: down.URL, Timeout: 2 * time.Second}
	})
	if _, err := w.Process(context.Background(), e.claim("evt_tr_4")); err != nil {
		t.Fatal(err)
	}
	if h := down.calls()[0]; h.Get("Traceparent") != "" || h.Get("Tracestate") != "" {
		t.Fatalf("headers %v", h)
	}
	if n := len(rec.Ended()); n != ended {
		t.Fatalf("%d spans ended with tracing off", n-ended)
	}
}

// TestTheLargestClaimWithATraceContextHasRoomForItsBookkeeping: the largest claim Commit
// accepts under a span (its 26 bytes of trace context stored) goes through the longest
// bookkeeping with tracing on and stays within 400 KB after every write. (That tracing does
// not change which claim is the largest is dedup's TestTracingNeverChangesWhatIsAccepted.)
func TestTheLargestClaimWithATraceContextHasRoomForItsBookkeeping(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, tp := recorder()
	intent := func(n int) dedup.Plan {
		return dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`"` + strings.Repeat("p", n) + `"`)}}}
	}
	commit := func(n int) error {
		ctx, span := tp.Tracer("receiver").Start(context.Background(), "commit")
		defer span.End()
		_, err := e.store.Commit(ctx, dedup.Event{Source: "shop", ID: "evt_tb_1", Type: "order.paid", Payload: []byte(`{}`)}, intent(n))
		return err
	}
	// As in TestTheLargestClaimCommitAcceptsHasRoomForEveryBookkeepingWrite: each refusal says
	// how far over a payload is, and a refused Commit writes nothing.
	var le *dedup.LimitError
	largest := dedup.MaxItemBytes
	for {
		err := commit(largest)
		if err == nil {
			break
		}
		if !errors.As(err, &le) || le.Got <= le.Max {
			t.Fatalf("a %d-byte payload: %v", largest, err)
		}
		largest -= le.Got - le.Max
	}
	if e.claim("evt_tb_1").Trace == nil {
		t.Fatal("no trace context stored")
	}
	long := strings.Repeat("é", 600)
	x := &scriptedReporter{steps: []func() (string, error){
		func() (string, error) { return "", outbox.Permanent(errors.New(long)) },
		func() (string, error) { return "", errors.New(long) },
		func() (string, error) { return long, nil },
	}}
	w := e.worker(func(c *outbox.Config) { c.Executors["email"] = x; c.TracerProvider = tp })
	measure := func(step, want string) {
		t.Helper()
		out, err := e.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(e.table),
			Key: key(dedup.ClaimKey("shop", "evt_tb_1")), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if n := storedSize(out.Item); n > dedup.MaxItemBytes {
			t.Fatalf("after %s the claim is %d bytes, over %d", step, n, dedup.MaxItemBytes)
		}
		if in := e.claim("evt_tb_1").Intents["email.send"]; in.Status != want {
			t.Fatalf("after %s: %s, want %s", step, in.Status, want)
		}
	}
	process := func(step, want string) {
		t.Helper()
		if _, err := w.Process(context.Background(), e.claim("evt_tb_1")); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		measure(step, want)
	}
	process("a permanent failure", dedup.IntentParked)
	if err := redriveByAt(context.Background(), e.client, e.table, e.claim("evt_tb_1"), "email.send", e.now(), strings.Repeat("o", dedup.MaxRedrivenBy)); err != nil {
		t.Fatal(err)
	}
	measure("the redrive", dedup.IntentPending)
	process("a retried failure", dedup.IntentPending)
	e.advance(time.Minute)
	process("done with a long report", dedup.IntentDone)
}

// TestAClaimWhoseTraceCannotBeReadStillRuns: a claim whose trace attribute was written as a
// string (by hand, by a tool) runs its intent from its stream record as any other: a trace
// context never decides whether work runs.
func TestAClaimWhoseTraceCannotBeReadStillRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, tp := recorder()
	commitTraced(t, e, tp, "evt_tr_5")
	if _, err := e.client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(e.table), Key: key(dedup.ClaimKey("shop", "evt_tr_5")),
		UpdateExpression:          aws.String("SET #t = :t"),
		ExpressionAttributeNames:  map[string]string{"#t": "trace"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberS{Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
	}); err != nil {
		t.Fatal(err)
	}
	down := newHeard(t)
	w := e.worker(func(c *outbox.Config) {
		c.Executors["email"] = &outbox.HTTPExecutor{URL: down.URL, Timeout: 2 * time.Second}
		c.TracerProvider = tp
	})
	var batch events.DynamoDBEvent
	for _, r := range e.records() {
		if r.EventName == "MODIFY" {
			batch.Records = append(batch.Records, r) // the claim as the hand edit left it (its wake marker still on)
		}
	}
	if resp, err := w.HandleStream(context.Background(), batch); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v %v", resp, err)
	}
	if n := len(down.calls()); n != 1 {
		t.Fatalf("%d calls: want the intent run", n)
	}
	if in := e.claim("evt_tr_5").Intents["email.send"]; in.Status != dedup.IntentDone {
		t.Fatalf("intent %+v: want it done", in)
	}
}

// leaks is every place of the ended spans that holds one of secrets: a status description, an
// attribute, an event's attribute.
func leaks(spans []sdktrace.ReadOnlySpan, secrets ...string) []string {
	var found []string
	has := func(s string) bool {
		for _, x := range secrets {
			if strings.Contains(s, x) {
				return true
			}
		}
		return false
	}
	for _, s := range spans {
		if has(s.Status().Description) {
			found = append(found, s.Name()+" status: "+s.Status().Description)
		}
		for _, kv := range s.Attributes() {
			if has(kv.Value.Emit()) {
				found = append(found, s.Name()+" "+string(kv.Key)+": "+kv.Value.Emit())
			}
		}
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				if has(kv.Value.Emit()) {
					found = append(found, s.Name()+" event "+ev.Name+" "+string(kv.Key)+": "+kv.Value.Emit())
				}
			}
		}
	}
	return found
}

// TestAFailedCallToAnyFormOfWebhookURLNeverRecordsItsPathOrPassword: a call that never reached
// an answer (a refused connection) is described in its span by the URL's scheme and host,
// whatever form the target's URL takes. net/http names the URL in its error as it re-writes
// it (the password as ***, the scheme lower-cased, a space escaped), so a description that
// only replaces net/http's form of the URL leaves the executor's own "POST <url>:" prefix,
// the URL as configured, in the span: its path, and its userinfo's password.
func TestAFailedCallToAnyFormOfWebhookURLNeverRecordsItsPathOrPassword(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]string{
		"userinfo":     "http://hook:pw-SECRETPASS@127.0.0.1:1/services/T000SECRET/B000SECRET",
		"upper scheme": "HTTP://127.0.0.1:1/services/T000SECRET/B000SECRET",
		"space":        "http://127.0.0.1:1/services/T000SECRET B000SECRET",
		"non-ascii":    "http://127.0.0.1:1/services/T000SECRET/\u00e9B000SECRET",
	} {
		rec, tp := recorder()
		x := &outbox.HTTPExecutor{URL: url}
		ctx, span := tp.Tracer("test").Start(context.Background(), "call hook")
		err := x.Execute(ctx, outbox.Task{Source: "shop", EventID: "e", Intent: "i", IdempotencyKey: "shop:e:i", Payload: []byte(`{}`)})
		span.End()
		if err == nil {
			t.Fatalf("%s: the call succeeded", name)
		}
		for _, l := range leaks(rec.Ended(), "SECRET") {
			t.Errorf("%s: a span holds the URL's path or password: %s", name, l)
		}
	}
}

// TestADownstreamsStatusLineNeverPutsTheURLsPathInASpan: a non-2xx answer is described in a
// span "by its status alone", since what the downstream says may quote the path it was called
// on ("Cannot POST /hooks/<token>"). The status line's reason phrase is the downstream's text
// as much as its body is: a server that answers "404 Cannot POST /services/<token>" must not
// put the token in the span.
func TestADownstreamsStatusLineNeverPutsTheURLsPathInASpan(t *testing.T) {
	t.Parallel()
	// As some frameworks answer: the reason phrase names the route that was not found.
	addr := rawServer(t, func(_ int, req *http.Request) string {
		return "HTTP/1.1 404 Cannot POST " + req.URL.Path + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
	})
	rec, tp := recorder()
	x := &outbox.HTTPExecutor{URL: "http://" + addr + "/services/T000SECRET/B000SECRET"}
	ctx, span := tp.Tracer("test").Start(context.Background(), "call hook")
	err := x.Execute(ctx, outbox.Task{Source: "shop", EventID: "e", Intent: "i", IdempotencyKey: "shop:e:i", Payload: []byte(`{}`)})
	span.End()
	if err == nil {
		t.Fatal("the call succeeded")
	}
	for _, l := range leaks(rec.Ended(), "SECRET") {
		t.Errorf("a span holds the URL's path, as the downstream's status line quoted it: %s", l)
	}
}

// TestAFailedHTTPCallNeverRecordsTheTargetsURLPathInASpan: a webhook URL's path is its secret
// (Slack's, Discord's incoming webhooks), which is why the client span names only the host and
// port. A call that fails (a 500, a refused connection) must not put that path in a span
// either, as the status description of the client span or of the span above it.
func TestAFailedHTTPCallNeverRecordsTheTargetsURLPathInASpan(t *testing.T) {
	t.Parallel()
	const secret = "T000SECRET/B000SECRET/XXXXsecrettokenXXXX"
	down := newHeard(t, http.StatusInternalServerError)
	for name, url := range map[string]string{
		"500":     down.URL + "/services/" + secret,
		"refused": "http://127.0.0.1:1/services/" + secret,
	} {
		rec, tp := recorder()
		x := &outbox.HTTPExecutor{URL: url, Timeout: 2 * time.Second}
		ctx, span := tp.Tracer("test").Start(context.Background(), "call email")
		err := x.Execute(ctx, outbox.Task{Source: "shop", EventID: "e", Intent: "i", IdempotencyKey: "shop:e:i", Payload: []byte(`{}`)})
		span.End()
		if err == nil {
			t.Fatalf("%s: the call succeeded", name)
		}
		for _, s := range rec.Ended() {
			if strings.Contains(s.Status().Description, "secret") {
				t.Errorf("%s: span %q's status holds the URL's path: %q", name, s.Name(), s.Status().Description)
			}
			for _, kv := range s.Attributes() {
				if strings.Contains(kv.Value.Emit(), "secret") {
					t.Errorf("%s: span %q's %s holds the URL's path: %q", name, s.Name(), kv.Key, kv.Value.Emit())
				}
			}
			for _, ev := range s.Events() {
				for _, kv := range ev.Attributes {
					if strings.Contains(kv.Value.Emit(), "secret") {
						t.Errorf("%s: span %q's event %s holds the URL's path", name, s.Name(), ev.Name)
					}
				}
			}
		}
	}
}

// TestAMalformedAnswerNeverPutsTheDownstreamsWordsInASpan: a span never holds a downstream's
// answer, and the webhook URL's path is its secret. An answer net/http cannot read (a header
// line it refuses, a Content-Length or Transfer-Encoding it does not take) fails the call with
// an error that quotes the offending bytes of the answer; the span's status must describe the
// failure without them, as it describes a non-2xx answer by its code alone. Every kind of
// malformed answer below quotes the path the downstream was called on, as a framework's error
// answer does ("Cannot POST /services/<token>").
func TestAMalformedAnswerNeverPutsTheDownstreamsWordsInASpan(t *testing.T) {
	t.Parallel()
	const secret = "SECRET"
	answers := map[string]func(path string) string{
		"header line without a colon": func(p string) string {
			return "HTTP/1.1 404 Not Found\r\nCannot POST " + p + "\r\nContent-Length: 0\r\n\r\n"
		},
		"header name with a space": func(p string) string {
			return "HTTP/1.1 404 Not Found\r\nRequested Path: " + p + "\r\nContent-Length: 0\r\n\r\n"
		},
		"continuation line first": func(p string) string {
			return "HTTP/1.1 404 Not Found\r\n Cannot POST " + p + "\r\nContent-Length: 0\r\n\r\n"
		},
		"bad Content-Length": func(p string) string {
			return "HTTP/1.1 404 Not Found\r\nContent-Length: " + p + "\r\n\r\n"
		},
		"unknown Transfer-Encoding": func(p string) string {
			return "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: " + p + "\r\n\r\n"
		},
		"not a status line": func(p string) string {
			return "Cannot-POST-" + p + "\r\n\r\n"
		},
		"bad version": func(p string) string {
			return "HTTP/x" + p + " 404 Not Found\r\nContent-Length: 0\r\n\r\n"
		},
	}
	for name, answer := range answers {
		addr := rawServer(t, func(_ int, req *http.Request) string { return answer(req.URL.Path) })
		rec, tp := recorder()
		x := &outbox.HTTPExecutor{URL: "http://" + addr + "/services/T0" + secret + "/B0" + secret}
		ctx, span := tp.Tracer("test").Start(context.Background(), "call hook")
		err := x.Execute(ctx, outbox.Task{Source: "shop", EventID: "e", Intent: "i", IdempotencyKey: "shop:e:i", Payload: []byte(`{}`)})
		span.End()
		if err == nil {
			t.Errorf("%s: the call succeeded", name)
			continue
		}
		for _, l := range leaks(rec.Ended(), secret) {
			t.Errorf("%s: a span holds the downstream's answer, quoting the URL's path: %s", name, l)
		}
	}
}

// TestAHeldIntentIsNoErrorSpan: a span is in error where something failed and in no
// other case. An intent its target's limit holds back (outbox.OutcomeHeld) has not failed:
// it is not leased, spends no attempt, never parks, and runs at its turn; the worker logs no
// warning for it and counts it apart from failures, as it does a busy intent (another worker
// holds it), whose span is not in error. Its intent span is in error all the same, described
// by the limiter's "try again in ..." text: a target at its configured rate fills the traces'
// error rate with turns that were flow control, and an alert on intent spans in error fires
// on a system working as configured.
//
// The space: held by the process's own rate bucket (the second of a claim's intents to one
// rated target, and every one after it), beside the busy intent as the reference.
func TestAHeldIntentIsNoErrorSpan(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec, tp := recorder()
	ctx, span := tp.Tracer("receiver").Start(context.Background(), "commit")
	intents := []dedup.Intent{
		{Name: "email.a", Target: "email", Payload: []byte(`{}`)},
		{Name: "email.b", Target: "email", Payload: []byte(`{}`)},
		{Name: "email.c", Target: "email", Payload: []byte(`{}`)},
	}
	if _, err := e.store.Commit(ctx, dedup.Event{Source: "shop", ID: "evt_a5_held", Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Intents: intents}); err != nil {
		t.Fatal(err)
	}
	span.End()
	w := e.worker(func(c *outbox.Config) {
		c.TracerProvider = tp
		c.Limits = map[string]outbox.Limit{"email": {Rate: 0.01}} // one call, then 100 s to the next
	})
	sum, err := w.Process(context.Background(), e.claim("evt_a5_held"))
	if sum[outbox.OutcomeDone] != 1 || sum[outbox.OutcomeHeld] != 2 {
		t.Fatalf("summary %v (%v): want one done and two held", sum, err)
	}
	if err != nil && !strings.Contains(err.Error(), "held back") {
		t.Fatalf("process: %v", err) // held without a scheduler: handed back for the caller to deliver again
	}
	held := 0
	for _, s := range spansNamed(rec, outbox.SpanIntent+" ") {
		if spanAttrs(s)[dedup.AttrOutcome].AsString() != outbox.OutcomeHeld {
			continue
		}
		held++
		if s.Status().Code == codes.Error {
			t.Errorf("%s: held back by its target's rate (no attempt spent, nothing failed), and its span is in error: %q", s.Name(), s.Status().Description)
		}
	}
	if held != 2 {
		t.Fatalf("%d held intent spans, want 2", held)
	}

	// The reference: an intent another worker holds is busy, and its span is not in error.
	rec2, tp2 := recorder()
	busy := e.worker(func(c *outbox.Config) { c.TracerProvider = tp2 })
	claim := e.claim("evt_a5_held")
	for name, in := range claim.Intents {
		if in.Status == dedup.IntentDone {
			in.Status, in.NextAttemptAt = dedup.IntentPending, 0 // as a stale record shows it
			claim.Intents[name] = in
		}
	}
	if _, err := busy.Process(context.Background(), claim); err != nil {
		t.Logf("reference: %v", err)
	}
	for _, s := range spansNamed(rec2, outbox.SpanIntent+" ") {
		if spanAttrs(s)[dedup.AttrOutcome].AsString() == outbox.OutcomeBusy && s.Status().Code == codes.Error {
			t.Fatalf("reference: a busy intent's span is in error")
		}
	}
}

// wakeRecorder records the wake-ups it is asked for.
type wakeRecorder struct {
	mu  sync.Mutex
	pks []string
}

func (s *wakeRecorder) Schedule(_ context.Context, pk string, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pks = append(s.pks, pk)
	return nil
}

// TestASweptClaimHandedOffIsNoErrorSpan: a span is in error where something failed. A sweep
// whose run has no time for a claim's intent (its target's calls are longer than what is left:
// outbox.ErrNoTime) does not fail it: the sweeper counts it Deferred, never a Failure, leases
// nothing, spends no attempt, and with a Scheduler hands it to the outbox function at once
// (HandedOff), which runs it in its own time. Its "sweep claim" span is in error all the same,
// described by ErrNoTime's text, as a claim whose write failed would be: a sweeper sized
// shorter than a slow target (a warning at its start, not a fault) makes every such claim an
// error span on every run.
//
// The space: a claim with one intent of a slow target, and one with an intent of a quick
// target beside it (the quick one runs, the slow one is deferred); a Scheduler takes the
// hand-off. The report is the reference: Deferred and HandedOff, no Failures.
func TestASweptClaimHandedOffIsNoErrorSpan(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec, tp := recorder()
	plans := map[string][]dedup.Intent{
		"evt_a8_slow": {{Name: "report.upload", Target: "slow", Payload: []byte(`{}`)}},
		"evt_a8_both": {{Name: "email.send", Target: "email", Payload: []byte(`{}`)}, {Name: "report.upload", Target: "slow", Payload: []byte(`{}`)}},
	}
	for id, intents := range plans {
		ctx, span := tp.Tracer("receiver").Start(context.Background(), "commit")
		if _, err := e.store.Commit(ctx, dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)}, dedup.Plan{Intents: intents}); err != nil {
			t.Fatal(err)
		}
		span.End()
	}
	sched := &wakeRecorder{}
	w := e.worker(func(c *outbox.Config) {
		// A target whose calls may take a minute: longer than the sweep's run has.
		c.Executors["slow"] = &outbox.HTTPExecutor{URL: e.down.URL, Timeout: time.Minute}
		c.TracerProvider = tp
		c.Scheduler = sched
		c.Lease = 2 * time.Minute // a lease the slow target's calls fit
	})
	e.advance(5 * time.Minute) // past the sweeper's minimum age
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := (&outbox.Sweeper{Worker: w, MinAge: time.Minute}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Claims != 2 || rep.Deferred != 2 || rep.HandedOff != 2 || rep.Failures != 0 {
		t.Fatalf("report %+v: want 2 claims, both deferred and handed off, no failure", rep)
	}
	claims := spansNamed(rec, outbox.SpanSweepClaim)
	if len(claims) != 2 {
		t.Fatalf("%d sweep claim spans, want 2", len(claims))
	}
	for _, s := range claims {
		if s.Status().Code == codes.Error {
			t.Errorf("%s (%s): deferred and handed off (report: Deferred %d, HandedOff %d, Failures %d), and its span is in error: %q",
				s.Name(), spanAttrs(s)[dedup.AttrEventID].AsString(), rep.Deferred, rep.HandedOff, rep.Failures, s.Status().Description)
		}
	}
}

// TestTraceFieldsAreBoundedAndNoneWhenOff: nothing without a propagator (tracing off) or without a
// span context; a field over 512 bytes or with a byte outside printable ASCII is left out.
func TestTraceFieldsAreBoundedAndNoneWhenOff(t *testing.T) {
	long, err := trace.ParseTraceState(strings.Repeat("k", 200) + "=" + strings.Repeat("v", 200) + "," + strings.Repeat("j", 200) + "=v")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceState: long})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	defer otel.SetTextMapPropagator(propagation.TraceContext{}) // as TestMain sets it
	if f := outbox.TraceFields(ctx); f != nil {
		t.Fatalf("no propagator (tracing off): %v", f)
	}
	otel.SetTextMapPropagator(propagation.TraceContext{})
	f := outbox.TraceFields(ctx)
	if f["traceparent"] != "00-01000000000000000000000000000000-0200000000000000-00" || f["tracestate"] != "" {
		t.Fatalf("%v: want the traceparent, and the tracestate over 512 bytes left out", f)
	}
	if f := outbox.TraceFields(context.Background()); f != nil {
		t.Fatalf("no span context: %v", f)
	}
}

// TestACallSpanWithNoErrorTypeGivenGetsTheErrorsKind: EndCall with an empty errType records the
// kind the worker reads from the error: an HTTP answer's status code, how an executor marked it,
// a timeout, or _OTHER; a given errType is kept.
func TestACallSpanWithNoErrorTypeGivenGetsTheErrorsKind(t *testing.T) {
	rec, tp := recorder()
	ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")
	defer parent.End()
	for i, c := range []struct {
		err         error
		given, want string
	}{
		{&outbox.StatusError{URL: "https://example.com/hook", StatusCode: 503, Status: "503 Service Unavailable"}, "", "503"},
		{outbox.Permanent(errors.New("refused")), "", "permanent"},
		{outbox.NotSent(errors.New("throttled")), "", "not_sent"},
		{outbox.Deduplicated(errors.New("exists")), "", "deduplicated"},
		{fmt.Errorf("SQS SendMessage: %w", context.DeadlineExceeded), "", "timeout"},
		{errors.New("reset"), "", "_OTHER"},
		{errors.New("reset"), "dynamodb", "dynamodb"},
	} {
		_, span := outbox.StartCall(ctx, fmt.Sprint("call ", i), trace.SpanKindClient)
		outbox.EndCall(span, c.err, c.given)
		got := spansNamed(rec, fmt.Sprint("call ", i))
		if len(got) != 1 || spanAttrs(got[0])["error.type"].AsString() != c.want {
			t.Errorf("%v (given %q): error.type %v, want %q", c.err, c.given, got, c.want)
		}
	}
}
