package tracecontext

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

func TestXRayIsTheSpanContextInX_RaysForm(t *testing.T) {
	t.Cleanup(func() { otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) }) // none, as before
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	for flags, want := range map[trace.TraceFlags]string{
		0x01: "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1",
		0x00: "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=0",
		0x03: "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1",
	} {
		ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags}))
		if got := XRay(ctx); got != want {
			t.Errorf("flags %02x: XRay = %q, want %q", byte(flags), got, want)
		}
	}
	if got := XRay(context.Background()); got != "" {
		t.Errorf("no span context: XRay = %q", got)
	}
}

// TestFieldsAreBoundedAndNoneWhenOff: nothing without a propagator (tracing off) or without a
// span context; a field over MaxValue bytes or with a byte outside printable ASCII is left out.
func TestFieldsAreBoundedAndNoneWhenOff(t *testing.T) {
	long, err := trace.ParseTraceState(strings.Repeat("k", 200) + "=" + strings.Repeat("v", 200) + "," + strings.Repeat("j", 200) + "=v")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceState: long})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	if f := Fields(ctx); f != nil {
		t.Fatalf("no propagator (tracing off): %v", f)
	}
	otel.SetTextMapPropagator(propagation.TraceContext{})
	defer otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	f := Fields(ctx)
	if f["traceparent"] != "00-01000000000000000000000000000000-0200000000000000-00" || f["tracestate"] != "" {
		t.Fatalf("%v: want the traceparent, and the tracestate over %d bytes left out", f, MaxValue)
	}
	if f := Fields(context.Background()); f != nil {
		t.Fatalf("no span context: %v", f)
	}
}
