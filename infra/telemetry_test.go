package infra

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// adotLayer is ADOT's collector layer for arm64 in us-east-1, as AWS publishes it.
const adotLayer = "arn:aws:lambda:us-east-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1"

func envOf(fn map[string]any) map[string]any {
	e, _ := fn["Environment"].(map[string]any)
	v, _ := e["Variables"].(map[string]any)
	return v
}

// TestOpenTelemetryIsOffByDefault: without the prop no function has an OpenTelemetry variable,
// a layer, or X-Ray's actions.
func TestOpenTelemetryIsOffByDefault(t *testing.T) {
	for name, fn := range functionsByTag(t, synth.tpl) {
		for k := range envOf(fn) {
			if strings.HasPrefix(k, "OTEL_") {
				t.Errorf("%s: %s set by default", name, k)
			}
		}
		if fn["Layers"] != nil {
			t.Errorf("%s: layers %v by default", name, fn["Layers"])
		}
	}
	for _, prefix := range []string{"OncehookReceiverRole", "OncehookOutboxRole", "OncehookSweeperRole"} {
		if pairs, _ := policyPairs(synth.tpl, prefix); strings.Contains(strings.Join(pairs, "\n"), "xray:") {
			t.Errorf("%s: X-Ray actions by default: %v", prefix, pairs)
		}
	}
}

// TestTheOpenTelemetryPropWiresEveryFunction: a collector layer is added to each function,
// whose environment turns OTLP export on with the settings given, and X-Ray's two write
// actions are granted, on "*" (they support no resource), cdk-nag's finding suppressed with
// the reason. With an endpoint instead, the functions export there, and no layer is added.
func TestTheOpenTelemetryPropWiresEveryFunction(t *testing.T) {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Traced"), nil)
	p := prebuilt("arm64")
	p.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: adotLayer, XRay: true,
		Environment: map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"}}
	New(stack, "Oncehook", p)
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	tpl := assertions.Template_FromStack(stack, nil)
	for name, fn := range functionsByTag(t, tpl) {
		env := envOf(fn)
		if env["OTEL_TRACES_EXPORTER"] != "otlp" || env["OTEL_TRACES_SAMPLER_ARG"] != "0.1" || env["OTEL_EXPORTER_OTLP_ENDPOINT"] != nil {
			t.Errorf("%s: environment %v", name, env)
		}
		if l := asSlice(fn["Layers"]); len(l) != 1 || l[0] != adotLayer {
			t.Errorf("%s: layers %v, want the collector", name, fn["Layers"])
		}
	}
	for _, prefix := range []string{"OncehookReceiverRole", "OncehookOutboxRole", "OncehookSweeperRole"} {
		pairs, _ := policyPairs(tpl, prefix)
		all := strings.Join(pairs, "\n")
		if !strings.Contains(all, "xray:PutTraceSegments *") || !strings.Contains(all, "xray:PutTelemetryRecords *") || strings.Contains(all, "xray:GetSamplingRules") {
			t.Errorf("%s: %v, want X-Ray's two write actions", prefix, pairs)
		}
	}
	for _, kind := range []string{"Error", "Warning"} {
		var found *[]*cxapi.SynthesisMessage
		if kind == "Error" {
			found = assertions.Annotations_FromStack(stack).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
		} else {
			found = assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
		}
		for _, m := range *found {
			t.Errorf("cdk-nag %s at %s: %v", kind, *m.Id, m.Entry.Data)
		}
	}

	p = prebuilt("arm64")
	p.OpenTelemetry = &OpenTelemetry{Endpoint: "https://otlp.example.com:4318"}
	tpl, err := synthesize(p)
	if err != nil {
		t.Fatal(err)
	}
	for name, fn := range functionsByTag(t, tpl) {
		if env := envOf(fn); env["OTEL_TRACES_EXPORTER"] != "otlp" || env["OTEL_EXPORTER_OTLP_ENDPOINT"] != "https://otlp.example.com:4318" || fn["Layers"] != nil {
			t.Errorf("%s: environment %v, layers %v", name, env, fn["Layers"])
		}
	}
}

// TestAnOpenTelemetryPropThatCannotWorkFailsTheSynth: each is refused naming the field.
func TestAnOpenTelemetryPropThatCannotWorkFailsTheSynth(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*Props)
		want string
	}{
		{"neither a layer nor an endpoint", func(p *Props) { p.OpenTelemetry = &OpenTelemetry{XRay: true} }, "Props.OpenTelemetry: set CollectorLayerArn"},
		{"a layer's name, not its ARN", func(p *Props) {
			p.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: "aws-otel-collector-arm64-ver-0-117-0"}
		}, "Props.OpenTelemetry.CollectorLayerArn"},
		{"a layer without its version", func(p *Props) {
			p.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: strings.TrimSuffix(adotLayer, ":1")}
		}, "Props.OpenTelemetry.CollectorLayerArn"},
		{"an endpoint without a scheme", func(p *Props) { p.OpenTelemetry = &OpenTelemetry{Endpoint: "otlp.example.com:4318"} }, "Props.OpenTelemetry.Endpoint"},
		{"the exporter in the environment", func(p *Props) {
			p.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: adotLayer, Environment: map[string]string{"OTEL_TRACES_EXPORTER": "none"}}
		}, "OTEL_TRACES_EXPORTER is set by the prop"},
		{"the endpoint twice", func(p *Props) {
			p.OpenTelemetry = &OpenTelemetry{Endpoint: "https://a.example.com", Environment: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://b.example.com"}}
		}, "OTEL_EXPORTER_OTLP_ENDPOINT is set by the prop"},
		{"another setting in its environment", func(p *Props) {
			p.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: adotLayer, Environment: map[string]string{"LOG_LEVEL": "debug"}}
		}, "LOG_LEVEL is not an OpenTelemetry setting"},
		{"OpenTelemetry's settings in Props.Environment", func(p *Props) {
			p.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: adotLayer}
			p.Environment = map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}
		}, "Props.Environment: OTEL_TRACES_SAMPLER"},
	} {
		p := prebuilt("arm64")
		c.set(p)
		if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}
