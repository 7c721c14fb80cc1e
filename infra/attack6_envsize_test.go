package infra

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// TestTelemetryThatOverflowsTheFunctionsEnvironmentFailsTheSynth: Lambda refuses a function
// whose environment variables total more than 4 KB (keys and values), at CreateFunction, that
// is at deploy. With Code.Lambda the construct puts the sources file in the environment
// (ONCEHOOK_SOURCES) and accepts one of up to 3 KB (maxInlineSources: "how much of Lambda's 4
// KB of environment an inline sources file may use"), the rest being its own few variables.
// Props.OpenTelemetry then adds its own, unbounded and unchecked: the exporter, the endpoint,
// a vendor's key in OTEL_EXPORTER_OTLP_HEADERS (a bearer token, a JWT of a kilobyte is
// common), resource attributes. A stack the synth passes, and whose every function's literal
// environment (before CloudFormation's tokens add the table's name and the queue's URL)
// already exceeds 4 KB, cannot be deployed: the synth should refuse it, naming the prop.
func TestTelemetryThatOverflowsTheFunctionsEnvironmentFailsTheSynth(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"sources":{`)
	for i := range 27 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"src%02d":{"scheme":"github","secrets":[{"ssm":"/oncehook/src%02d"}],"retry_horizon":"1h","redrive_window":"3d"}`, i, i)
	}
	b.WriteString(`},"targets":{"email":{"url":"https://email.example.com/send","timeout":"10s"}}}`)
	if b.Len() > maxInlineSources {
		t.Fatalf("the sources file is %d bytes, over the inline limit", b.Len())
	}
	file := filepath.Join(t.TempDir(), "sources.json")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	props := func() *Props {
		code := Code{Lambda: awslambda.Code_FromAsset(jsii.String(synth.bootstraps["arm64"]), nil)}
		return &Props{SourcesFile: file, Receiver: code, Outbox: code, Sweeper: code}
	}
	if _, err := synthesize(props()); err != nil {
		t.Fatalf("a %d-byte sources file inline, without tracing: %v", b.Len(), err)
	}
	p := props()
	p.OpenTelemetry = &OpenTelemetry{Endpoint: "https://otlp.eu01.example-observability.com:443",
		Environment: map[string]string{
			"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer " + strings.Repeat("eyJhbGciOiJSUzI1NiJ9", 40),
			"OTEL_RESOURCE_ATTRIBUTES":   "deployment.environment=production,team=payments,service.namespace=webhooks",
			"OTEL_TRACES_SAMPLER":        "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1",
		}}
	tpl, err := synthesize(p)
	if err != nil {
		if !strings.Contains(err.Error(), "OpenTelemetry") && !strings.Contains(err.Error(), "4 KB") {
			t.Fatalf("refused, without naming the prop: %v", err)
		}
		return
	}
	for name, fn := range functionsByTag(t, tpl) {
		size := 0
		for k, v := range envOf(fn) {
			size += len(k)
			if s, ok := v.(string); ok {
				size += len(s)
			}
		}
		if size > 4096 {
			t.Errorf("%s: the synth passed an environment of at least %d bytes (its literal values alone), over Lambda's 4 KB: the deployment fails at CreateFunction", name, size)
		}
	}
}
