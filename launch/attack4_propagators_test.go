package launch

import (
	"context"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
)

// TestOTELPropagatorsIsHonouredOrRefused: OTEL_ variables the functions cannot honour are
// refused at start naming the variable; what is taken is honoured. OTEL_PROPAGATORS says what
// the functions' calls carry to the downstreams (the executors write what the global propagator
// writes, and carry a "baggage" field when it writes one). OpenTelemetry's own default is
// "tracecontext,baggage"; a deployment asking for baggage, or for B3 or X-Ray's header for its
// downstreams' tracers, gets W3C traceparent and tracestate alone, without a word at start.
func TestOTELPropagatorsIsHonouredOrRefused(t *testing.T) {
	for value, want := range map[string][]string{
		"tracecontext,baggage": {"traceparent", "tracestate", "baggage"},
		"baggage,tracecontext": {"traceparent", "tracestate", "baggage"},
		"b3":                   {"x-b3-traceid"},
		"b3multi":              {"x-b3-traceid"},
		"xray":                 {"x-amzn-trace-id"},
	} {
		t.Setenv("OTEL_PROPAGATORS", value)
		tr, err := startTracing(t, map[string]string{"OTEL_TRACES_EXPORTER": "otlp"})
		if err != nil {
			if !strings.Contains(err.Error(), "OTEL_PROPAGATORS") {
				t.Errorf("OTEL_PROPAGATORS=%s: refused without naming it: %v", value, err)
			}
			continue // refused at start: fine
		}
		fields := otel.GetTextMapPropagator().Fields()
		_ = tr.Shutdown(context.Background())
		for _, f := range want {
			if !slices.ContainsFunc(fields, func(g string) bool {
				return strings.EqualFold(f, g) || strings.EqualFold(g, "b3") && strings.HasPrefix(f, "x-b3")
			}) {
				t.Errorf("OTEL_PROPAGATORS=%s is taken at start, and the calls carry %v: no %s", value, fields, f)
				break
			}
		}
	}
}
