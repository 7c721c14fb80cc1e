package receiver_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

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
