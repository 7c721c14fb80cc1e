package launch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/oncehook/oncehook/internal/otelenv"
)

// TestTheTracesOwnHeadersReplaceTheGeneralOnes: the _TRACES_ variable wins over the general one.
// A deployment exporting its traces to one backend and its other signals (metrics, logs, the
// collector layer's own) to another sets each pair: OTEL_EXPORTER_OTLP_ENDPOINT and _HEADERS
// for the general one, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and _TRACES_HEADERS for traces.
// OpenTelemetry's own exporter (otlptracehttp, reading the same variables) sends the traces'
// endpoint the traces' headers alone; the functions' exporter adds the general ones, so the
// general backend's key is sent to the traces' backend, another vendor, on every export.
func TestTheTracesOwnHeadersReplaceTheGeneralOnes(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	traces := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
	}))
	defer traces.Close()
	env := map[string]string{
		"OTEL_TRACES_EXPORTER":               "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT":        "https://metrics.vendor-a.example",
		"OTEL_EXPORTER_OTLP_HEADERS":         "dd-api-key=vendor-a-secret",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": traces.URL + "/v1/traces",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS":  "x-honeycomb-team=vendor-b-key",
	}
	_, span := sdktrace.NewTracerProvider().Tracer("t").Start(context.Background(), "s")
	span.End()
	spans := []sdktrace.ReadOnlySpan{span.(sdktrace.ReadOnlySpan)}

	// OpenTelemetry's own exporter, from the same environment.
	for k, v := range env {
		t.Setenv(k, v)
	}
	theirs, err := otlptracehttp.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := theirs.ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	// The functions'.
	s, err := otelenv.Read(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if err := exporter(t, s).ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d exports reached the traces' endpoint, want 2", len(got))
	}
	for i, who := range []string{"otlptracehttp", "the functions' exporter"} {
		if v := got[i].Get("Dd-Api-Key"); v != "" {
			t.Errorf("%s sent the general backend's key to the traces' endpoint: Dd-Api-Key: %s", who, v)
		}
		if v := got[i].Get("X-Honeycomb-Team"); v != "vendor-b-key" {
			t.Errorf("%s sent X-Honeycomb-Team %q, want the traces' own", who, v)
		}
	}
}
