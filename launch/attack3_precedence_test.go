package launch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/oncehook/oncehook/internal/otelenv"
)

// TestTheTracesOwnHeaderWinsWhateverItsCase: OTEL_EXPORTER_OTLP_TRACES_HEADERS wins over
// OTEL_EXPORTER_OTLP_HEADERS (the traces' own variable over the general one). HTTP header names
// are case-insensitive: the traces' "Api-Key" replaces the general "api-key", on every export,
// rather than one of the two being sent at random (the map's order).
func TestTheTracesOwnHeaderWinsWhateverItsCase(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		for _, v := range r.Header.Values("Api-Key") {
			seen[v]++
		}
	}))
	defer srv.Close()
	env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL,
		"OTEL_EXPORTER_OTLP_HEADERS": "api-key=general-key", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "Api-Key=traces-key"}
	s, err := otelenv.Read(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	x := exporter(t, s)
	_, span := sdktrace.NewTracerProvider().Tracer("t").Start(context.Background(), "s")
	span.End()
	for range 50 {
		if err := x.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{span.(sdktrace.ReadOnlySpan)}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["general-key"] != 0 || seen["traces-key"] != 50 {
		t.Errorf("of 50 exports, %d sent the traces' own key and %d the general one", seen["traces-key"], seen["general-key"])
	}
}
