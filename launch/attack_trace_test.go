package launch

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

// startTracing runs TracingFromEnv with env set over every OTLP variable (the others unset).
func startTracing(t *testing.T, env map[string]string) (*Tracing, error) {
	t.Helper()
	resetOtel(t)
	for _, v := range []string{"OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_TIMEOUT",
		"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"} {
		t.Setenv(v, env[v])
	}
	return TracingFromEnv(context.Background(), slog.New(slog.DiscardHandler))
}

// TestAMalformedOTLPHeaderIsRefusedWithoutQuotingItsValue: a vendor's key lives in
// OTEL_EXPORTER_OTLP_HEADERS; a header written wrong (a colon for the '=', a stray '%') is
// refused at start naming the variable, and the refusal, which the function logs as it exits,
// never holds the key.
func TestAMalformedOTLPHeaderIsRefusedWithoutQuotingItsValue(t *testing.T) {
	for _, h := range []string{"Authorization: Bearer s3cr3t-key", "Authorization=Basic s3cr3t-key%zz", "x-api-key=ok,api-key s3cr3t-key"} {
		_, err := startTracing(t, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": h})
		if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_HEADERS") {
			t.Fatalf("%q: %v, want a refusal naming OTEL_EXPORTER_OTLP_HEADERS", h, err)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%q: the refusal quotes the header's secret: %v", h, err)
		}
	}
}

// TestAnOTLPHeaderThatCannotBeSentIsRefusedAtStart: a header name or value net/http refuses to
// send (a space in the name, a line break decoded from the value) would fail every export,
// silently but for a warning each time; it is refused at start, naming the variable.
func TestAnOTLPHeaderThatCannotBeSentIsRefusedAtStart(t *testing.T) {
	for _, h := range []string{"api key=abc", "x-api-key=abc%0D%0AX-Injected: 1", "x-api-key=abc%00"} {
		tr, err := startTracing(t, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": h})
		if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_HEADERS") {
			if tr != nil {
				_ = tr.Shutdown(context.Background())
			}
			t.Errorf("%q: %v, want a refusal naming OTEL_EXPORTER_OTLP_HEADERS", h, err)
		}
	}
}

// TestAMalformedTracesEndpointIsRefusedNamingItsOwnVariable: the refusal names the variable
// that holds the malformed value, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, not the base one the
// deployment did not set.
func TestAMalformedTracesEndpointIsRefusedNamingItsOwnVariable(t *testing.T) {
	_, err := startTracing(t, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "localhost:4318/v1/traces"})
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
		t.Fatalf("%v, want a refusal naming OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", err)
	}
}

// TestASamplerThatCannotBeHonouredIsRefusedAtStart: OTEL_TRACES_SAMPLER (_ARG) is one of the
// variables launch reads (docs/operations.md); a sampler it does not know, or a ratio that is
// not one, is refused at start naming the variable, not replaced by sampling every delivery.
func TestASamplerThatCannotBeHonouredIsRefusedAtStart(t *testing.T) {
	for _, c := range []struct{ sampler, arg, want string }{
		{"parentbased_traceidratio_typo", "0.1", "OTEL_TRACES_SAMPLER"},
		{"parentbased_traceidratio", "ten percent", "OTEL_TRACES_SAMPLER_ARG"},
	} {
		tr, err := startTracing(t, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": c.sampler, "OTEL_TRACES_SAMPLER_ARG": c.arg})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			if tr != nil {
				_ = tr.Shutdown(context.Background())
			}
			t.Errorf("%s %q: %v, want a refusal naming %s", c.sampler, c.arg, err, c.want)
		}
	}
}

// TestTheTracesOwnProtocolWinsOverTheGeneralOne: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, when set,
// is the traces' protocol (the _TRACES_ variable first, as launch reads every other): a
// deployment whose metrics or logs go over gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc) and whose
// traces say http/protobuf starts, tracing on.
func TestTheTracesOwnProtocolWinsOverTheGeneralOne(t *testing.T) {
	resetOtel(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
	tr, err := startTracing(t, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
	if err != nil || tr.TracerProvider() == nil {
		t.Fatalf("%+v %v: want tracing on over http/protobuf", tr, err)
	}
	_ = tr.Shutdown(context.Background())
}
