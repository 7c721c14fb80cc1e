package tracing

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/oncehook/oncehook/receiver"
)

// resetOtel puts OpenTelemetry's globals back as a process starts them: no provider, no
// propagator (FromEnv sets both).
func resetOtel(t *testing.T) {
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	})
}

// TestTracingIsOnOnlyWhenTheSettingSaysOTLP: unset, none and OTEL_SDK_DISABLED are off (no
// provider); otlp is on; anything the functions cannot do is refused at start, naming the
// variable.
func TestTracingIsOnOnlyWhenTheSettingSaysOTLP(t *testing.T) {
	resetOtel(t)
	vars := []string{"OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_COMPRESSION"}
	for _, c := range []struct {
		name string
		env  map[string]string
		on   bool
		err  string
	}{
		{"unset", nil, false, ""},
		{"none", map[string]string{"OTEL_TRACES_EXPORTER": "none"}, false, ""},
		{"otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, ""},
		{"OTLP, spelled otherwise", map[string]string{"OTEL_TRACES_EXPORTER": " OTLP"}, true, ""},
		{"otlp but the SDK disabled", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, false, ""},
		{"an exporter not linked", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, `OTEL_TRACES_EXPORTER="zipkin"`},
		{"two exporters", map[string]string{"OTEL_TRACES_EXPORTER": "otlp,console"}, false, "OTEL_TRACES_EXPORTER"},
		{"gRPC", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, `OTEL_EXPORTER_OTLP_PROTOCOL="grpc"`},
		{"an endpoint that is not a URL", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}, false, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"a header without a value", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": "api-key"}, false, "OTEL_EXPORTER_OTLP_HEADERS"},
		{"a timeout that is not a number", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TIMEOUT": "5s"}, false, "OTEL_EXPORTER_OTLP_TIMEOUT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, v := range vars {
				t.Setenv(v, c.env[v])
			}
			tr, err := FromEnv(context.Background(), slog.New(slog.DiscardHandler), nil)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("%v, want an error naming %s", err, c.err)
				}
				return
			}
			if err != nil || (tr.TracerProvider() != nil) != c.on {
				t.Fatalf("%+v %v, want on %v", tr, err, c.on)
			}
		})
	}
}

// BenchmarkFlushOfADeliverysSpans is what tracing on adds to each invocation after the
// handler: the export of a delivery's four spans, OTLP/HTTP to a collector on loopback (as a
// collector layer listens on localhost), before the answer leaves.
func BenchmarkFlushOfADeliverysSpans(b *testing.B) {
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer col.Close()
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	exp, err := exporterFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	tr := &Tracing{Provider: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))}
	defer func() { _ = tr.Shutdown(context.Background()) }()
	tracer := tr.Provider.Tracer(receiver.TracerName)
	b.ReportAllocs()
	for b.Loop() {
		ctx, root := tracer.Start(context.Background(), receiver.SpanDelivery, trace.WithAttributes(attribute.String("oncehook.source", "shop")))
		for _, step := range []string{receiver.SpanVerify, receiver.SpanPlan, receiver.SpanCommit} {
			_, s := tracer.Start(ctx, step)
			s.End()
		}
		root.End()
		tr.Flush(ctx)
	}
}

// exporterFromEnv is OpenTelemetry's exporter as the functions build it from the process's
// OTLP variables, each export bounded as the flush bounds it, and its errors as the functions
// log them (exportFailure).
func exporterFromEnv() (sdktrace.SpanExporter, error) {
	exp, err := otlptracehttp.New(context.Background())
	return loggedExporter{exp}, err
}

type loggedExporter struct{ sdktrace.SpanExporter }

func (x loggedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	if err := x.SpanExporter.ExportSpans(ctx, spans); err != nil {
		return errors.New(exportFailure(err, shownEndpoint(os.Getenv)))
	}
	return nil
}
