package infra

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
)

// TestATelemetryValueKnownOnlyAtDeployIsLeftToTheStart: an endpoint or a header whose value is
// a CDK token (the stack's Region in a vendor's regional intake, a parameter, an SSM value)
// has no value at synth to check. The synth passes it to the functions, which check it at
// start, rather than refuse the placeholder text it sees; a value with no token is still
// checked at synth, next to it.
func TestATelemetryValueKnownOnlyAtDeployIsLeftToTheStart(t *testing.T) {
	regional := "https://otlp." + *awscdk.Aws_REGION() + ".example.com"
	for name, o := range map[string]*OpenTelemetry{
		"Endpoint":         {Endpoint: regional},
		"_TRACES_ENDPOINT": {CollectorLayerArn: adotLayer, Environment: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": regional + "/v1/traces"}},
		"_HEADERS":         {Endpoint: "https://otlp.example.com", Environment: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key=" + *awscdk.Aws_ACCOUNT_ID()}},
	} {
		p := prebuilt("arm64")
		p.OpenTelemetry = o
		tpl, err := synthesize(p)
		if err != nil {
			t.Errorf("%s: a token's value fails the synth: %v", name, err)
			continue
		}
		for fn, props := range functionsByTag(t, tpl) {
			b, _ := json.Marshal(envOf(props))
			if !strings.Contains(string(b), "AWS::") {
				t.Errorf("%s: %s's environment holds no reference to the token: %s", name, fn, b)
			}
		}
	}
	p := prebuilt("arm64")
	p.OpenTelemetry = &OpenTelemetry{Endpoint: regional, Environment: map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}}
	if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_TIMEOUT") {
		t.Errorf("beside a token, a bad timeout: got %v, want a refusal naming OTEL_EXPORTER_OTLP_TIMEOUT", err)
	}
}
