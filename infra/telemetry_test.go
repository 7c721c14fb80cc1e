package infra

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsssm"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/oncehook/oncehook/launch/tracing"
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
	p.Telemetry.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: adotLayer, XRay: true,
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
	p.Telemetry.OpenTelemetry = &OpenTelemetry{Endpoint: "https://otlp.example.com:4318"}
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

// TestAnOpenTelemetryPropThatCannotWorkFailsTheSynth: each is refused naming the field. The
// construct refuses at synth what the functions would refuse at start (launch), or what would
// silently override the prop, naming the variable: gRPC, which no exporter of the functions
// speaks; the traces' own endpoint, which would replace Endpoint unseen; and a resource
// attribute without its value ("team=payments,tier"), which makes every function refuse to
// start (tracing.FromEnv: "OTEL_RESOURCE_ATTRIBUTES: ... missing value").
func TestAnOpenTelemetryPropThatCannotWorkFailsTheSynth(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*Props)
		want string
	}{
		{"neither a layer nor an endpoint", func(p *Props) { p.Telemetry.OpenTelemetry = &OpenTelemetry{XRay: true} }, "Props.Telemetry.OpenTelemetry: set CollectorLayerArn"},
		{"a layer's name, not its ARN", func(p *Props) {
			p.Telemetry.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: "aws-otel-collector-arm64-ver-0-117-0"}
		}, "Props.Telemetry.OpenTelemetry.CollectorLayerArn"},
		{"a layer without its version", func(p *Props) {
			p.Telemetry.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: strings.TrimSuffix(adotLayer, ":1")}
		}, "Props.Telemetry.OpenTelemetry.CollectorLayerArn"},
		{"an endpoint without a scheme", func(p *Props) { p.Telemetry.OpenTelemetry = &OpenTelemetry{Endpoint: "otlp.example.com:4318"} }, "Props.Telemetry.OpenTelemetry.Endpoint"},
		{"the exporter in the environment", func(p *Props) {
			p.Telemetry.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: adotLayer, Environment: map[string]string{"OTEL_TRACES_EXPORTER": "none"}}
		}, "OTEL_TRACES_EXPORTER is set by the prop"},
		{"the endpoint twice", func(p *Props) {
			p.Telemetry.OpenTelemetry = &OpenTelemetry{Endpoint: "https://a.example.com", Environment: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://b.example.com"}}
		}, "OTEL_EXPORTER_OTLP_ENDPOINT is set by the prop"},
		{"another setting in its environment", func(p *Props) {
			p.Telemetry.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: adotLayer, Environment: map[string]string{"LOG_LEVEL": "debug"}}
		}, "LOG_LEVEL is not an OpenTelemetry setting"},
		{"OpenTelemetry's settings in Props.Environment", func(p *Props) {
			p.Telemetry.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: adotLayer}
			p.Environment = map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}
		}, "Props.Environment: OTEL_TRACES_SAMPLER"},
		{"gRPC", func(p *Props) {
			p.Telemetry.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: adotLayer, Environment: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}}
		}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"the traces' endpoint beside Endpoint", func(p *Props) {
			p.Telemetry.OpenTelemetry = &OpenTelemetry{Endpoint: "https://a.example.com",
				Environment: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b.example.com/v1/traces"}}
		}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{"a resource attribute without its value", func(p *Props) {
			p.Telemetry.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: adotLayer, Environment: map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "team=payments,tier"}}
		}, "OTEL_RESOURCE_ATTRIBUTES"},
	} {
		p := prebuilt("arm64")
		c.set(p)
		if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// TestOpenTelemetrySettingsInPropsEnvironmentAreCheckedAtSynth: the synth refuses what the
// functions would refuse at start, so that a deployment that cannot start fails before it is
// deployed. Props.Environment is added to every function's environment; with
// Props.Telemetry.OpenTelemetry set, an OTEL_ variable there is refused, but without it the variables
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
		if err := tracing.CheckEnv(env); err == nil {
			t.Fatalf("%s: the start takes %v", name, env)
		}
		p := prebuilt("arm64")
		p.Environment = env
		if _, err := synthesize(p); err == nil {
			t.Errorf("%s: Props.Environment %v, which every function refuses at start, passes the synth", name, env)
		}
	}
}

// TestAnEndpointTheSynthRefusesIsNeverQuoted: an OTLP intake's key is often its endpoint's path
// or query ("https://otlp.vendor.example/v1/<key>", "?api-key=<key>") or its userinfo, and the
// functions' start never quotes the endpoint it refuses (launch: "OTEL_EXPORTER_OTLP_ENDPOINT:
// not an http(s) URL"), nor logs or names it in an export error but by scheme and host. The
// construct's own check of Props.Telemetry.OpenTelemetry.Endpoint quotes it whole: a typo in the scheme,
// a missing scheme or a bad escape puts the intake's key in the synth's error, which CI logs
// and build output keep.
//
// The space: endpoints the synth refuses (no scheme, a misspelt or other scheme, a bad escape
// in the path, a space in the host), each holding the key in its path, its query or its
// userinfo.
func TestAnEndpointTheSynthRefusesIsNeverQuoted(t *testing.T) {
	const secret = "SECRETKEY"
	var cases []string
	for _, prefix := range []string{"", "htps://", "grpc://", "https:/", "otlp://"} {
		for _, rest := range []string{
			"otlp.vendor.example/v1/" + secret,
			"otlp.vendor.example/v1/traces?api-key=" + secret,
			"user:" + secret + "@otlp.vendor.example/v1/traces",
		} {
			cases = append(cases, prefix+rest)
		}
	}
	cases = append(cases,
		"https://otlp.vendor.example/v1/"+secret+"/%zz",
		"https://otlp vendor.example/v1/traces?api-key="+secret,
		"https://user:"+secret+"@otlp.vendor.example:port/v1/traces",
	)
	refused := 0
	for _, endpoint := range cases {
		err := checkTelemetry(&Props{Telemetry: TelemetryProps{OpenTelemetry: &OpenTelemetry{Endpoint: endpoint}}}, nil)
		if err == nil {
			continue
		}
		refused++
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Endpoint %q refused with the intake's key in the error: %v", endpoint, err)
		}
	}
	if refused == 0 {
		t.Fatal("no endpoint refused: the space tested nothing")
	}
}

// TestTelemetryThatOverflowsTheFunctionsEnvironmentFailsTheSynth: Lambda refuses a function
// whose environment variables total more than 4 KB (keys and values), at CreateFunction, that
// is at deploy. With Code.Lambda the construct puts the sources file in the environment
// (ONCEHOOK_SOURCES) and accepts one of up to 3 KB (maxInlineSources: "how much of Lambda's 4
// KB of environment an inline sources file may use"), the rest being its own few variables.
// Props.Telemetry.OpenTelemetry then adds its own, unbounded and unchecked: the exporter, the endpoint,
// resource attributes (a build's attestation, a kilobyte); a vendor's key no longer (it is
// read from HeadersSecret at start). A stack the synth passes, and whose every function's literal
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
		return &Props{SourcesFile: file, Receiver: ReceiverProps{Code: code}, Outbox: OutboxProps{Code: code}, Sweeper: SweeperProps{Code: code}}
	}
	if _, err := synthesize(props()); err != nil {
		t.Fatalf("a %d-byte sources file inline, without tracing: %v", b.Len(), err)
	}
	p := props()
	p.Telemetry.OpenTelemetry = &OpenTelemetry{Endpoint: "https://otlp.eu01.example-observability.com:443",
		Environment: map[string]string{
			"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=production,team=payments,service.namespace=webhooks,build.attestation=" + strings.Repeat("eyJhbGciOiJSUzI1NiJ9", 40),
			"OTEL_TRACES_SAMPLER":      "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1",
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

// TestACollectorLayerForAnotherArchitectureFailsTheSynth: collector layers are built per
// architecture, and name it (ADOT's aws-otel-collector-<arm64|amd64>-ver-..., OpenTelemetry's
// opentelemetry-collector-<arm64|amd64>-...; CollectorLayerArn's documentation: "for the
// functions' architecture (arm64 unless X86)"). A layer of the other architecture is an
// extension binary the function cannot execute: each function's environment fails to
// initialise, every delivery with it, not only its traces. The construct adds the one ARN to
// all three functions whatever their architecture, Props.X86's or each FunctionOptions', and
// refuses neither an arm64 collector on x86_64 functions nor a mix of architectures (a single
// ARN cannot be both) at synth, though it refuses a prebuilt bootstrap of the wrong
// architecture there.
func TestACollectorLayerForAnotherArchitectureFailsTheSynth(t *testing.T) {
	const amd64Layer = "arn:aws:lambda:us-east-1:901920570463:layer:aws-otel-collector-amd64-ver-0-117-0:1"
	otelArm := "arn:aws:lambda:us-east-1:184161586896:layer:opentelemetry-collector-arm64-0_12_0:1"
	if _, err := synthesize(withLayer(prebuilt("arm64"), adotLayer)); err != nil {
		t.Fatalf("arm64 functions, arm64 layer: %v", err)
	}
	x86 := func(arn string) *Props {
		p := withLayer(prebuilt("amd64"), arn)
		p.X86 = true
		return p
	}
	if _, err := synthesize(x86(amd64Layer)); err != nil {
		t.Fatalf("x86_64 functions, amd64 layer: %v", err)
	}
	mixed := func(arn string) *Props {
		p := withLayer(prebuilt("arm64"), arn)
		p.Receiver.Code = Code{Dir: synth.bootstraps["amd64"]}
		p.Receiver.Function.Architecture = awslambda.Architecture_X86_64()
		return p
	}
	for name, p := range map[string]*Props{
		"X86 functions, ADOT's arm64 layer":                 x86(adotLayer),
		"X86 functions, OpenTelemetry's arm64 layer":        x86(otelArm),
		"arm64 functions, ADOT's amd64 layer":               withLayer(prebuilt("arm64"), amd64Layer),
		"an x86_64 receiver beside arm64 ones, arm64 layer": mixed(adotLayer),
		"an x86_64 receiver beside arm64 ones, amd64 layer": mixed(amd64Layer),
	} {
		if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), "CollectorLayerArn") {
			t.Errorf("%s: got %v, want a refusal naming Props.Telemetry.OpenTelemetry.CollectorLayerArn", name, err)
		}
	}
}

// synthesizeIn is synthesize in a stack with an environment of its own.
func synthesizeIn(region string, p *Props) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	stack := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("S"), &awscdk.StackProps{
		Env: &awscdk.Environment{Account: jsii.String("123456789012"), Region: jsii.String(region)}})
	New(stack, "Oncehook", p)
	return nil
}

// TestACollectorLayerOfAnotherRegionFailsTheSynth: a Lambda layer is a Regional resource, and a
// function can only use a layer version of its own Region (CreateFunction refuses another's),
// as Props.Telemetry.OpenTelemetry.CollectorLayerArn's documentation says ("the ARN must be the stack's
// Region's"). The construct refuses at synth, naming the prop, a bound resource known to be in
// another Region than the stack (checkBindings' placed); a collector layer's ARN names its
// Region as plainly, and a stack with its own env names its Region. The synth passes a stack
// in eu-west-1 with us-east-1's ADOT layer (the ARN the docs' example names for another Region
// is one copy away), and the deployment fails at CloudFormation.
func TestACollectorLayerOfAnotherRegionFailsTheSynth(t *testing.T) {
	if err := synthesizeIn("us-east-1", withLayer(prebuilt("arm64"), adotLayer)); err != nil {
		t.Fatalf("the layer in the stack's own Region: %v", err)
	}
	for _, region := range []string{"eu-west-1", "us-west-2", "ap-southeast-2"} {
		err := synthesizeIn(region, withLayer(prebuilt("arm64"), adotLayer))
		if err == nil || !strings.Contains(err.Error(), "CollectorLayerArn") {
			t.Errorf("a stack in %s with a us-east-1 collector layer (%s): got %v, want a refusal naming Props.Telemetry.OpenTelemetry.CollectorLayerArn", region, adotLayer, err)
		}
	}
}

func withLayer(p *Props, arn string) *Props {
	p.Telemetry.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: arn, XRay: true}
	return p
}

// TestAnOTLPHeadersKeyNeverLandsInTheTemplate: a vendor's intake key is an OTLP header
// (OTEL_EXPORTER_OTLP_HEADERS, or its _TRACES_ form: "api-key=<key>"), and the construct's
// OpenTelemetry props, or Props.Environment, put whatever they are given into every function's
// environment: the key is then in the synthesized template in plain text (and in cdk.out, the
// CloudFormation console, GetFunctionConfiguration's answer). The synth must either keep it
// out of the template or refuse it, naming the prop to use instead and without quoting it.
func TestAnOTLPHeadersKeyNeverLandsInTheTemplate(t *testing.T) {
	const key = "SECRETINTAKEKEY"
	for name, set := range map[string]func(*Props){
		"OpenTelemetry.Environment's _HEADERS": func(p *Props) {
			p.Telemetry.OpenTelemetry = &OpenTelemetry{Endpoint: "https://otlp.example.com", Environment: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key=" + key}}
		},
		"OpenTelemetry.Environment's _TRACES_HEADERS": func(p *Props) {
			p.Telemetry.OpenTelemetry = &OpenTelemetry{Endpoint: "https://otlp.example.com", Environment: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api-key=" + key}}
		},
		"Props.Environment's _HEADERS": func(p *Props) {
			p.Environment = map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=" + key}
		},
		"Props.Environment's _HEADERS beside the prop": func(p *Props) {
			p.Telemetry.OpenTelemetry = &OpenTelemetry{CollectorLayerArn: adotLayer}
			p.Environment = map[string]string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api-key=" + key}
		},
	} {
		p := prebuilt("arm64")
		set(p)
		tpl, err := synthesize(p)
		if err != nil {
			if strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "HeadersSecret") {
				t.Errorf("%s: refused with %q, want it to name Props.Telemetry.OpenTelemetry.HeadersSecret and never quote the key", name, err)
			}
			continue
		}
		b, _ := json.Marshal(tpl.ToJSON())
		if strings.Contains(string(b), key) {
			t.Errorf("%s: the intake's key is in the synthesized template in plain text", name)
		}
	}
}

// TestAHeaderFromADynamicReferenceIsRefusedToo: a CloudFormation dynamic reference keeps the
// key out of the template, and Lambda resolves it into the function's environment, where
// GetFunctionConfiguration shows it in plain text: the synth refuses it as it refuses a plain
// value, naming the secret props.
func TestAHeaderFromADynamicReferenceIsRefusedToo(t *testing.T) {
	p := prebuilt("arm64")
	p.Telemetry.OpenTelemetry = &OpenTelemetry{Endpoint: "https://otlp.example.com",
		Environment: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key={{resolve:secretsmanager:intake:SecretString:api-key}}"}}
	if _, err := synthesize(p); err == nil || !strings.Contains(err.Error(), "HeadersSecret") || strings.Contains(err.Error(), "resolve:") {
		t.Fatalf("got %v, want a refusal naming HeadersSecret, without the value", err)
	}
}

// TestTheExportersHeadersComeFromASecretEachFunctionMayRead: with HeadersSecret (or
// HeadersParameter) each function's environment names the store (launch reads it at start),
// holds no header, and its role may read that secret and no other; both props at once are
// refused.
func TestTheExportersHeadersComeFromASecretEachFunctionMayRead(t *testing.T) {
	for _, c := range []struct {
		name, variable, action string
		set                    func(awscdk.Stack, *OpenTelemetry)
	}{
		{"HeadersSecret", tracing.OTLPHeadersSecret, "secretsmanager:GetSecretValue", func(stack awscdk.Stack, o *OpenTelemetry) {
			o.HeadersSecret = awssecretsmanager.NewSecret(stack, jsii.String("Intake"), nil)
		}},
		{"HeadersParameter", tracing.OTLPHeadersParameter, "ssm:GetParameter", func(stack awscdk.Stack, o *OpenTelemetry) {
			o.HeadersParameter = awsssm.StringParameter_FromSecureStringParameterAttributes(stack, jsii.String("Intake"),
				&awsssm.SecureStringParameterAttributes{ParameterName: jsii.String("/otel/intake-headers")})
		}},
	} {
		tpl, err := synthesizeWith(func(stack awscdk.Stack) *Props {
			p := prebuilt("arm64")
			p.Telemetry.OpenTelemetry = &OpenTelemetry{Endpoint: "https://otlp.example.com"}
			c.set(stack, p.Telemetry.OpenTelemetry)
			return p
		}, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for name, fn := range functionsByTag(t, tpl) {
			env := envOf(fn)
			if env[c.variable] == nil || env["OTEL_EXPORTER_OTLP_HEADERS"] != nil || env["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] != nil {
				t.Errorf("%s: %s's environment %v, want %s and no header", c.name, name, env, c.variable)
			}
		}
		for _, prefix := range []string{"OncehookReceiverRole", "OncehookOutboxRole", "OncehookSweeperRole"} {
			pairs, _ := policyPairs(tpl, prefix)
			all := strings.Join(pairs, "\n")
			if !strings.Contains(all, c.action+" ") || (c.name == "HeadersParameter" && !strings.Contains(all, "/otel/intake-headers")) {
				t.Errorf("%s: %s may not read the headers: %v", c.name, prefix, pairs)
			}
		}
	}
	_, err := synthesizeWith(func(stack awscdk.Stack) *Props {
		p := prebuilt("arm64")
		p.Telemetry.OpenTelemetry = &OpenTelemetry{Endpoint: "https://otlp.example.com",
			HeadersSecret: awssecretsmanager.NewSecret(stack, jsii.String("Intake"), nil),
			HeadersParameter: awsssm.StringParameter_FromSecureStringParameterAttributes(stack, jsii.String("Param"),
				&awsssm.SecureStringParameterAttributes{ParameterName: jsii.String("/otel/intake-headers")})}
		return p
	}, nil)
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("both props: got %v, want a refusal", err)
	}
}

// TestTheStoredHeadersGrantsPassCdkNag: the read each function's role is given on an imported
// secret (by name) or SecureString parameter names that one resource: cdk-nag's AwsSolutions
// checks find nothing, as for the rest of the construct.
func TestTheStoredHeadersGrantsPassCdkNag(t *testing.T) {
	for name, set := range map[string]func(awscdk.Stack, *OpenTelemetry){
		"HeadersSecret": func(s awscdk.Stack, o *OpenTelemetry) {
			o.HeadersSecret = awssecretsmanager.Secret_FromSecretNameV2(s, jsii.String("Intake"), jsii.String("otel/intake"))
		},
		"HeadersParameter": func(s awscdk.Stack, o *OpenTelemetry) {
			o.HeadersParameter = awsssm.StringParameter_FromSecureStringParameterAttributes(s, jsii.String("Intake"),
				&awsssm.SecureStringParameterAttributes{ParameterName: jsii.String("/otel/intake")})
		},
	} {
		app := awscdk.NewApp(nil)
		stack := awscdk.NewStack(app, jsii.String("Traced"), nil)
		p := prebuilt("arm64")
		p.Telemetry.OpenTelemetry = &OpenTelemetry{Endpoint: "https://otlp.example.com"}
		set(stack, p.Telemetry.OpenTelemetry)
		New(stack, "Oncehook", p)
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
		tpl := assertions.Template_FromStack(stack, nil)
		annotations := assertions.Annotations_FromStack(stack)
		for _, m := range *annotations.FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))) {
			t.Errorf("%s: cdk-nag error at %s: %v", name, *m.Id, m.Entry.Data)
		}
		for _, m := range *annotations.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))) {
			t.Errorf("%s: cdk-nag warning at %s: %v", name, *m.Id, m.Entry.Data)
		}
		pairs, _ := policyPairs(tpl, "OncehookSweeperRole")
		if all := strings.Join(pairs, "\n"); !strings.Contains(all, "otel/intake") {
			t.Errorf("%s: the sweeper's role may not read the headers: %v", name, pairs)
		}
	}
}

// TestTheStoredHeadersVariablesAreNotPropsEnvironments: ONCEHOOK_OTLP_HEADERS_SECRET and
// _PARAMETER name where the functions read the exporter's headers at start, and only the
// store Props.Telemetry.OpenTelemetry names is granted: the construct derives them. Set in
// Props.Environment beside HeadersSecret, one the start refuses ("set one of them") or a store
// the roles may not read, it fails the synth naming Props.Environment and the variable.
func TestTheStoredHeadersVariablesAreNotPropsEnvironments(t *testing.T) {
	for _, variable := range []string{tracing.OTLPHeadersSecret, tracing.OTLPHeadersParameter} {
		_, err := synthesizeWith(func(stack awscdk.Stack) *Props {
			p := prebuilt("arm64")
			p.Telemetry.OpenTelemetry = &OpenTelemetry{Endpoint: "https://otlp.example.com",
				HeadersSecret: awssecretsmanager.NewSecret(stack, jsii.String("Intake"), nil)}
			p.Environment = map[string]string{variable: "/otel/other-headers"}
			return p
		}, nil)
		if err == nil || !strings.Contains(err.Error(), "Props.Environment") || !strings.Contains(err.Error(), variable) {
			t.Errorf("Props.Environment %s beside HeadersSecret: got %v, want the synth refused naming both", variable, err)
		}
	}
}
