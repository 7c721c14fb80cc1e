// Command tracefn is the Lambda function the targets tests deploy to the emulator to see what
// trace context an invocation brought: it fails, its message the envelope's traceparent and
// the X-Ray trace header Lambda gave the invocation (_X_AMZN_TRACE_ID), which the executor's
// error quotes.
package main

import (
	"context"
	"errors"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/oncehook/oncehook/outbox/targets"
)

func main() {
	lambda.Start(func(_ context.Context, e targets.Envelope) (map[string]string, error) {
		return nil, errors.New("tp=" + e.Traceparent + " x=" + os.Getenv("_X_AMZN_TRACE_ID"))
	})
}
