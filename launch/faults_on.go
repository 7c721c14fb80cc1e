//go:build faultinject

package launch

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/internal/faults"
)

// FaultInjection reports whether this binary can inject faults (built with -tags faultinject:
// the local stack's builds only, never `make synth`'s).
const FaultInjection = true

// dynamoDBFaults puts the fault injector of ONCEHOOK_FAULTS under the DynamoDB client, with a
// loud warning and a log line per fault, when the value asks for DynamoDB faults; otherwise it
// changes nothing. A malformed value stops the function at start.
func dynamoDBFaults(logger *slog.Logger, value string) ([]func(*dynamodb.Options), error) {
	spec, err := faults.Parse(value)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", faults.Env, err)
	}
	if !spec.Downstream.Zero() {
		logger.Warn(faults.Env+": the downstream faults are the harness's own and are ignored here", "downstream", spec.Downstream)
	}
	if !spec.DynamoDBOn() {
		return nil, nil
	}
	spec = spec.OnlyDynamoDB()
	logger.Warn("FAULT INJECTION IS ON: this function's DynamoDB client throttles, fails and loses answers on purpose ("+
		faults.Env+"); never in production", "faults", spec.String())
	tr := faults.NewTransport(http.DefaultTransport, spec)
	tr.OnFault = func(op string, kind faults.Kind) {
		// One line per fault: a run counts them in the function's logs.
		logger.Warn(faults.LogLine, "operation", op, "kind", string(kind))
	}
	return []func(*dynamodb.Options){func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: tr} }}, nil
}
