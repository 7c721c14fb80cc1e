package receiver

import (
	"context"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/trace"
)

// ParseTraceparent is how the receiver reads a provider's traceparent, for the fuzz target.
func ParseTraceparent(h string) (trace.SpanContext, bool) { return parseTraceparent(h) }

// HandleUnobserved is Handle without the log line and the metrics: what BenchmarkHandle
// measures as the hot path the issue names (verify, parse, plan, build the request).
func (h *Handler) HandleUnobserved(ctx context.Context, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	d := &delivery{req: fromV2(req), start: time.Now(), source: "unknown"}
	h.handle(ctx, d)
	return events.APIGatewayV2HTTPResponse{StatusCode: d.resp.status, Headers: d.resp.headers, Body: d.resp.body}
}

// The duplicate probe's window, for the tests that drive a source in and out of a redrive.
const (
	WindowSlots = windowSlots
	WindowMin   = windowMin
	WindowSpan  = windowSpan
)
