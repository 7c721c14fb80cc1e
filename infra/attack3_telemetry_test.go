package infra

import (
	"strings"
	"testing"
)

// TestAResourceAttributesVariableTheFunctionsRefuseFailsTheSynth: OTEL_RESOURCE_ATTRIBUTES is
// one of the variables launch reads, and a pair without its value ("team=payments,tier") makes
// every function refuse to start (launch.TracingFromEnv: "OTEL_RESOURCE_ATTRIBUTES: ...
// missing value"). The construct promises to refuse at synth what the functions would refuse
// at start, so the same value in Props.OpenTelemetry.Environment fails the synth, naming it.
func TestAResourceAttributesVariableTheFunctionsRefuseFailsTheSynth(t *testing.T) {
	p := prebuilt("arm64")
	p.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: adotLayer, Environment: map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "team=payments,tier"}}
	if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), "OTEL_RESOURCE_ATTRIBUTES") {
		t.Errorf("got %v, want a refusal naming OTEL_RESOURCE_ATTRIBUTES (the functions refuse it at start)", err)
	}
}
