//go:build oncehook_notrace_export

package tracing

import (
	"context"
	"errors"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exportLinked is false: this binary is built with -tags oncehook_notrace_export, without
// OpenTelemetry's exporter (and the gRPC packages it links), for a team that needs a smaller
// binary. Tracing off costs nothing either way; OTEL_TRACES_EXPORTER=otlp refuses the start.
const exportLinked = false

func newExporter(context.Context, map[string]string) (sdktrace.SpanExporter, error) {
	return nil, errors.New("built without OpenTelemetry's exporter (-tags oncehook_notrace_export)")
}
