package targets

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

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
			_, span := startCall(ctx, "EventBridge", "PutEvents", trace.SpanKindProducer, func() []attribute.KeyValue {
				return []attribute.KeyValue{semconv.MessagingOperationTypeSend, semconv.MessagingDestinationName("default")}
			})
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
