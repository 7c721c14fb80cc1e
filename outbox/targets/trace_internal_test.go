package targets

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestTraceAttributesNeverPassTheLimitNorReplaceOurs: the W3C fields join a message's
// attributes only under SQS's and SNS's limit of 10, traceparent first, and never in place of
// an attribute of the executor's.
func TestTraceAttributesNeverPassTheLimitNorReplaceOurs(t *testing.T) {
	ts, err := trace.ParseTraceState("vendor=v1")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, TraceState: ts})
	ctx := trace.ContextWithSpanContext(context.Background(), sc) // TestMain set the W3C propagator
	own := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprint("a", i)] = "v"
		}
		return m
	}
	if m := messageFields(ctx, own(5)); len(m) != 7 || m["traceparent"] == "" || m["tracestate"] != "vendor=v1" {
		t.Fatalf("5 of ours: %v, want both fields added", m)
	}
	if m := messageFields(ctx, own(9)); len(m) != 10 || m["traceparent"] == "" || m["tracestate"] != "" {
		t.Fatalf("9 of ours: %v, want traceparent alone added", m)
	}
	if m := messageFields(ctx, own(10)); len(m) != 10 || m["traceparent"] != "" {
		t.Fatalf("10 of ours: %v, want nothing added", m)
	}
	mine := map[string]string{"traceparent": "ours", "idempotency_key": "k"}
	if m := messageFields(ctx, mine); m["traceparent"] != "ours" || m["idempotency_key"] != "k" {
		t.Fatalf("%v: an attribute of ours replaced", m)
	}
	if m := messageFields(context.Background(), own(5)); len(m) != 5 {
		t.Fatalf("no span: %v, want nothing added", m)
	}
}
