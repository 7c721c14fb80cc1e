package infra

import (
	"testing"

	"github.com/oncehook/oncehook/internal/otelenv"
)

// TestOpenTelemetrySettingsInPropsEnvironmentAreCheckedAtSynth: the synth refuses what the
// functions would refuse at start, so that a deployment that cannot start fails before it is
// deployed. Props.Environment is added to every function's environment; with
// Props.OpenTelemetry set, an OTEL_ variable there is refused, but without it the variables
// pass unchecked, and every function reads them at start (launch: OTEL_TRACES_EXPORTER turns
// tracing on) and refuses to start on what it cannot honour: the synth passes a stack whose
// three functions exit 1 on their first invocation.
func TestOpenTelemetrySettingsInPropsEnvironmentAreCheckedAtSynth(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"another exporter": {"OTEL_TRACES_EXPORTER": "console"},
		"gRPC":             {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		"a bad endpoint":   {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"},
		"a bad sampler":    {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "10%"},
	} {
		if _, err := otelenv.Read(func(k string) string { return env[k] }); err == nil {
			t.Fatalf("%s: the start takes %v", name, env)
		}
		p := prebuilt("arm64")
		p.Environment = env
		if _, err := synthesize(p); err == nil {
			t.Errorf("%s: Props.Environment %v, which every function refuses at start, passes the synth", name, env)
		}
	}
}
