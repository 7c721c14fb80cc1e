package targets

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sns"
)

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
		"SNS X-Amzn-Trace-Id":          func() { _ = snsTraceHeader(ctx, []func(*sns.Options){}) },
		"Lambda X-Amzn-Trace-Id":       func() { _ = lambdaTraceHeader(ctx, []func(*lambda.Options){}) },
		"EventBridge, SFN TraceHeader": func() { _ = optional(xray(ctx)) },
	} {
		if n := testing.AllocsPerRun(200, f); n != 0 {
			t.Errorf("%s: %v allocations with tracing off", name, n)
		}
	}
}
