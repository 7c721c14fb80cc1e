package targets

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TestTheXRayHeaderFollowsTheSpanWhateverTheW3CFields: the AWS targets carry X-Ray's header
// whenever the calls carry a trace at all (OTEL_PROPAGATORS other than none), the W3C
// traceparent or not: with baggage alone it is still there, and with no propagator (none) it
// is not.
func TestTheXRayHeaderFollowsTheSpanWhateverTheW3CFields(t *testing.T) {
	t.Cleanup(func() { otel.SetTextMapPropagator(propagation.TraceContext{}) }) // as TestMain sets it
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	for name, c := range map[string]struct {
		prop propagation.TextMapPropagator
		want string
	}{
		"tracecontext": {propagation.TraceContext{}, "Root=1-01000000-000000000000000000000000;Parent=0200000000000000;Sampled=1"},
		"baggage":      {propagation.Baggage{}, "Root=1-01000000-000000000000000000000000;Parent=0200000000000000;Sampled=1"},
		"none":         {propagation.NewCompositeTextMapPropagator(), ""},
	} {
		otel.SetTextMapPropagator(c.prop)
		if got := xray(ctx); got != c.want {
			t.Errorf("OTEL_PROPAGATORS=%s: X-Ray header %q, want %q", name, got, c.want)
		}
	}
}

func TestXRayIsTheSpanContextInX_RaysForm(t *testing.T) {
	t.Cleanup(func() { otel.SetTextMapPropagator(propagation.TraceContext{}) }) // as TestMain sets it
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	for flags, want := range map[trace.TraceFlags]string{
		0x01: "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1",
		0x00: "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=0",
		0x03: "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1",
	} {
		ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags}))
		if got := xray(ctx); got != want {
			t.Errorf("flags %02x: XRay = %q, want %q", byte(flags), got, want)
		}
	}
	if got := xray(context.Background()); got != "" {
		t.Errorf("no span context: XRay = %q", got)
	}
}
