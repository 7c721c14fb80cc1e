package receiver

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
)

// HandleUnobserved is Handle without the log line and the metrics: what BenchmarkHandle
// measures as the hot path the issue names (verify, parse, plan, build the request).
func (h *Handler) HandleUnobserved(ctx context.Context, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	return h.handle(ctx, req, &delivery{source: "unknown"})
}
