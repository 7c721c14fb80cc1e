//go:build !oncehook_notrace_export

package tracing

import (
	"context"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exportLinked says whether OpenTelemetry's exporter is linked: it is unless the binary is built
// with -tags oncehook_notrace_export (export_off.go).
const exportLinked = true

// newExporter is OpenTelemetry's OTLP/HTTP exporter, configured by the SDK's own reading of the
// OTEL_EXPORTER_OTLP_ variables, with the stored headers (FromEnv's stored) when there are some.
func newExporter(ctx context.Context, headers map[string]string) (sdktrace.SpanExporter, error) {
	var opts []otlptracehttp.Option
	if headers != nil {
		opts = append(opts, otlptracehttp.WithHeaders(headers))
	}
	return otlptracehttp.New(ctx, opts...)
}
