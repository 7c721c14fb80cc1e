package receiver_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/oncehook/oncehook/examples/orders"
	"github.com/oncehook/oncehook/receiver"
)

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
