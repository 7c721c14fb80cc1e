package tracecontext

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

func TestXRayIsTheTraceparentsFieldsInX_RaysForm(t *testing.T) {
	for in, want := range map[string]string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00": "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=0",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03": "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": "",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01": "",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7":    "",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz": "",
		"": "",
	} {
		if got := XRay(in); got != want {
			t.Errorf("XRay(%q) = %q, want %q", in, got, want)
		}
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
