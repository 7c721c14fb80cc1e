package targets

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/outbox"
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
	if m := messageFields(ctx, own(5), 0, maxMessageBytes); len(m) != 7 || m["traceparent"] == "" || m["tracestate"] != "vendor=v1" {
		t.Fatalf("5 of ours: %v, want both fields added", m)
	}
	if m := messageFields(ctx, own(9), 0, maxMessageBytes); len(m) != 10 || m["traceparent"] == "" || m["tracestate"] != "" {
		t.Fatalf("9 of ours: %v, want traceparent alone added", m)
	}
	if m := messageFields(ctx, own(10), 0, maxMessageBytes); len(m) != 10 || m["traceparent"] != "" {
		t.Fatalf("10 of ours: %v, want nothing added", m)
	}
	mine := map[string]string{"traceparent": "ours", "idempotency_key": "k"}
	if m := messageFields(ctx, mine, 0, maxMessageBytes); m["traceparent"] != "ours" || m["idempotency_key"] != "k" {
		t.Fatalf("%v: an attribute of ours replaced", m)
	}
	if m := messageFields(context.Background(), own(5), 0, maxMessageBytes); len(m) != 5 {
		t.Fatalf("no span: %v, want nothing added", m)
	}
}

// TestTheTraceIsTheFirstThingGivenUpAtTheSizeLimit: at every body size from well under the
// limit to past it, the trace's attributes join a message only while the message with them
// stays within 256 KiB (as SNS counts: body, then each attribute's name, type and value), and
// the envelope takes the trace only while it stays within its room; without a trace they are
// what they were.
func TestTheTraceIsTheFirstThingGivenUpAtTheSizeLimit(t *testing.T) {
	ts, err := trace.ParseTraceState("vendor=v1")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, TraceState: ts})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	size := func(m map[string]string, body int) int {
		for k, v := range m {
			body += attributeBytes(k, v)
		}
		return body
	}
	for body := maxMessageBytes - 200; body <= maxMessageBytes+10; body++ {
		own := map[string]string{"idempotency_key": "shop:e:i", "source": "shop"}
		plain := size(own, body)
		m := messageFields(ctx, own, body, maxMessageBytes)
		if got := size(m, body); got > maxMessageBytes && got != plain {
			t.Fatalf("body %d: the trace took the message to %d bytes", body, got)
		}
		if _, ok := m["traceparent"]; !ok && plain+attributeBytes("traceparent", "00-01000000000000000000000000000000-0200000000000000-01") <= maxMessageBytes {
			t.Fatalf("body %d: traceparent left out of a message it fits", body)
		}
	}
	for _, room := range []int{100, 150, 200, 250, 300} {
		b, err := envelope(ctx, outbox.Task{IdempotencyKey: "k", Source: "s", EventID: "e", Intent: "i", Payload: []byte(`{"a":1}`)}, room)
		if err != nil {
			t.Fatal(err)
		}
		traced := strings.Contains(string(b), "traceparent")
		if traced && len(b) > room {
			t.Errorf("room %d: an envelope of %d bytes with the trace", room, len(b))
		}
		if !traced && room >= 250 {
			t.Errorf("room %d: the trace left out of an envelope it fits (%d bytes without it)", room, len(b))
		}
	}
}

// TestWithTracingOffNoCarrierCostsAnAllocation: with no span in the context (tracing off), the
// trace carriers each AWS executor adds to its call (SQS's AWSTraceHeader, the X-Amzn-Trace-Id
// of SNS's and Lambda's requests, EventBridge's and Step Functions' TraceHeader) are nothing,
// and building that nothing allocates nothing: tracing off adds no allocation to a call on the
// outbox's hot path. Deriving X-Ray's header from an absent traceparent still splits the empty
// string, once per call of every AWS executor.
func TestWithTracingOffNoCarrierCostsAnAllocation(t *testing.T) {
	ctx := context.Background()
	for name, f := range map[string]func(){
		"SQS AWSTraceHeader":           func() { _ = sqsSystemAttributes(ctx) },
		"SNS X-Amzn-Trace-Id":          func() { _ = withXRayHeader(ctx, []func(*sns.Options){}, sns.WithAPIOptions) },
		"Lambda X-Amzn-Trace-Id":       func() { _ = withXRayHeader(ctx, []func(*lambda.Options){}, lambda.WithAPIOptions) },
		"EventBridge, SFN TraceHeader": func() { _ = optional(xray(ctx)) },
	} {
		if n := testing.AllocsPerRun(200, f); n != 0 {
			t.Errorf("%s: %v allocations with tracing off", name, n)
		}
	}
}

// TestWithTracingOffACallsSpanCostsNoAllocation: with no span in the context (tracing off),
// the client span each executor starts and ends around its call, as its Execute writes it,
// allocates nothing: no span name, no attribute slice for a span never started.
func TestWithTracingOffACallsSpanCostsNoAllocation(t *testing.T) {
	ctx := context.Background()
	const queue = "https://sqs.us-east-1.amazonaws.com/123456789012/orders"
	const topic = "arn:aws:sns:us-east-1:123456789012:orders"
	for name, f := range map[string]func(){
		"SQS": func() {
			_, span := startCall(ctx, "SQS", "SendMessage", trace.SpanKindProducer, func() []attribute.KeyValue { return sqsAttrs(queue) })
			endCall(span, "", nil)
		},
		"SNS": func() {
			_, span := startCall(ctx, "SNS", "Publish", trace.SpanKindProducer, func() []attribute.KeyValue { return snsAttrs(topic) })
			endCall(span, "", nil)
		},
		"EventBridge": func() {
			_, span := startCall(ctx, "EventBridge", "PutEvents", trace.SpanKindProducer, func() []attribute.KeyValue { return sendAttrs("default") })
			endCall(span, "", nil)
		},
		"Lambda": func() {
			_, span := startCall(ctx, "Lambda", "Invoke", trace.SpanKindClient, func() []attribute.KeyValue { return lambdaAttrs("orders") })
			endCall(span, "", nil)
		},
	} {
		if n := testing.AllocsPerRun(200, f); n != 0 {
			t.Errorf("%s: %v allocations with tracing off", name, n)
		}
	}
}
