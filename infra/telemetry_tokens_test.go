package infra

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/launch/tracing"
)

// TestATelemetryValueKnownOnlyAtDeployIsLeftToTheStart: an endpoint or an attribute whose value is
// a CDK token (the stack's Region in a vendor's regional intake, a parameter, an SSM value)
// has no value at synth to check. The synth passes it to the functions, which check it at
// start, rather than refuse the placeholder text it sees; a value with no token is still
// checked at synth, next to it.
func TestATelemetryValueKnownOnlyAtDeployIsLeftToTheStart(t *testing.T) {
	regional := "https://otlp." + *awscdk.Aws_REGION() + ".example.com"
	for name, o := range map[string]*OpenTelemetry{
		"Endpoint":             {Endpoint: regional},
		"_TRACES_ENDPOINT":     {CollectorLayerArn: adotLayer, Environment: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": regional + "/v1/traces"}},
		"_RESOURCE_ATTRIBUTES": {Endpoint: "https://otlp.example.com", Environment: map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "cloud.account.id=" + *awscdk.Aws_ACCOUNT_ID()}},
	} {
		p := prebuilt("arm64")
		p.Telemetry.OpenTelemetry = o
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
	p.Telemetry.OpenTelemetry = &OpenTelemetry{Endpoint: regional, Environment: map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}}
	if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_TIMEOUT") {
		t.Errorf("beside a token, a bad timeout: got %v, want a refusal naming OTEL_EXPORTER_OTLP_TIMEOUT", err)
	}
}

// TestATracesSettingKnownOnlyAtDeployIsNotJudgedByTheGeneralOne: the synth refuses exactly what
// the functions refuse at start, and leaves a value holding a CDK token (known only at deploy)
// to the start. A _TRACES_ variable wins over the general one at start, the general one then
// being never read (it may be set for metrics or logs that go elsewhere: gRPC, another
// collector). When the _TRACES_ value is a token, the synth drops it and checks the general
// one in its place, as if it were the traces' own, and refuses a deployment whose functions
// would start: here the token is a parameter that can only be a value the start takes.
func TestATracesSettingKnownOnlyAtDeployIsNotJudgedByTheGeneralOne(t *testing.T) {
	cases := []struct {
		name, general, generalValue, traces, allowed string
	}{
		{"protocol", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"},
		{"endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://localhost:4318/v1/traces"},
		{"timeout", "OTEL_EXPORTER_OTLP_TIMEOUT", "10s", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "5000"},
		{"compression", "OTEL_EXPORTER_OTLP_COMPRESSION", "zstd", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip"},
	}
	for _, c := range cases {
		// The start, with the only value the parameter can take: accepted.
		atStart := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", c.general: c.generalValue, c.traces: c.allowed}
		if err := tracing.CheckEnv(atStart); err != nil {
			t.Fatalf("%s: the start refuses %v: %v", c.name, atStart, err)
		}
		_, err := synthesizeWith(func(stack awscdk.Stack) *Props {
			v := awscdk.NewCfnParameter(stack, jsii.String("Traces"), &awscdk.CfnParameterProps{
				Default: jsii.String(c.allowed), AllowedValues: jsii.Strings(c.allowed),
			}).ValueAsString()
			p := prebuilt("arm64")
			p.Telemetry.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: adotLayer, Environment: map[string]string{
				c.general: c.generalValue, c.traces: *v,
			}}
			return p
		}, nil)
		if err != nil {
			t.Errorf("%s: %s=%s beside %s from a parameter that can only be %q (which wins at start, and which start takes): the synth refuses: %v",
				c.name, c.general, c.generalValue, c.traces, c.allowed, err)
		}
	}
}
