package infra

import (
	"strings"
	"testing"
)

// TestAnOpenTelemetryEnvironmentTheFunctionsRefuseFailsTheSynth: what the functions would
// refuse at start (launch), or what would silently override the prop, fails the synth naming
// the variable, as the prop's other settings that cannot work do: gRPC, which no exporter of
// the functions speaks, and the traces' own endpoint, which would replace Endpoint unseen.
func TestAnOpenTelemetryEnvironmentTheFunctionsRefuseFailsTheSynth(t *testing.T) {
	for _, c := range []struct {
		name string
		otel *OpenTelemetry
		want string
	}{
		{"gRPC", &OpenTelemetry{CollectorLayerArn: adotLayer, Environment: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"the traces' endpoint beside Endpoint", &OpenTelemetry{Endpoint: "https://a.example.com",
			Environment: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b.example.com/v1/traces"}}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
	} {
		p := prebuilt("arm64")
		p.OpenTelemetry = c.otel
		if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want a refusal naming %s", c.name, err, c.want)
		}
	}
}
