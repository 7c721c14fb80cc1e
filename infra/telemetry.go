package infra

import (
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsssm"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/launch/tracing"
	"github.com/oncehook/oncehook/sources"
)

// TelemetryProps override what the functions emit and where (Props.Telemetry): metrics in a
// namespace of the construct's own, logs kept a month under CloudWatch Logs' own encryption,
// no traces.
type TelemetryProps struct {
	// MetricsNamespace is the CloudWatch namespace the functions write their metrics in and the
	// alarms read. Default DefaultNamespace + "/" + the construct's path, so that two
	// deployments in one account do not feed each other's alarms.
	MetricsNamespace string
	// LogRetention and LogRemoval are the functions' and the API's log groups' retention
	// (default one month) and removal policy (default DESTROY; RETAIN outlives the stack).
	LogRetention awslogs.RetentionDays
	LogRemoval   awscdk.RemovalPolicy
	// LogKey puts every log group under a customer-managed KMS key; a key defined in the app is
	// given the statement that lets CloudWatch Logs use it (an imported key must have it).
	LogKey awskms.IKey
	// Tracing is the functions' X-Ray tracing (awslambda.Tracing_ACTIVE); default none.
	Tracing awslambda.Tracing
	// OpenTelemetry turns on the functions' OpenTelemetry traces; default off.
	OpenTelemetry *OpenTelemetry
}

// OpenTelemetry turns on the functions' OpenTelemetry traces, exported over OTLP/HTTP to a
// collector layer on localhost or to an endpoint: set one of CollectorLayerArn and Endpoint
// (docs/operations.md, "Traces").
type OpenTelemetry struct {
	// CollectorLayerArn is a collector Lambda layer (ADOT's, or OpenTelemetry's own), added to
	// each function: of the stack's Region and the functions' architecture, which the synth
	// checks where it can.
	CollectorLayerArn string
	// Endpoint is an OTLP/HTTP endpoint the functions export to (OTEL_EXPORTER_OTLP_ENDPOINT).
	Endpoint string
	// XRay lets each function's role send to X-Ray, for a collector layer exporting there.
	XRay bool
	// HeadersSecret (Secrets Manager) or HeadersParameter (an SSM SecureString) holds the
	// exporter's headers, an intake's key, which the functions read at start: never in the
	// template nor an environment. Set one of them.
	HeadersSecret    awssecretsmanager.ISecret
	HeadersParameter awsssm.IStringParameter
	// Environment is more OpenTelemetry settings for every function (OTEL_ variables, the
	// collector's OPENTELEMETRY_COLLECTOR_CONFIG_URI), checked as the functions' start checks
	// them; not what the prop sets, nor the exporter's headers.
	Environment map[string]string
}

// layerArn is a Lambda layer version's ARN.
var layerArn = regexp.MustCompile(`^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:layer:[A-Za-z0-9_-]+:[0-9]+$`)

// checkTelemetry fills in the logs' defaults and refuses a namespace CloudWatch would, an
// OpenTelemetry prop that cannot work, naming the field, and, with that prop set, OTEL_
// variables in Props.Environment (one place sets them).
func checkTelemetry(cfg *Props, _ *sources.File) error {
	if ns := cfg.Telemetry.MetricsNamespace; ns != "" && !validNamespace(ns) {
		return fmt.Errorf("Props.Telemetry.MetricsNamespace %q: 1-255 characters, not starting with AWS/, of letters, digits and . - _ / # :", ns)
	}
	cfg.Telemetry.LogRetention = cmp.Or(cfg.Telemetry.LogRetention, awslogs.RetentionDays_ONE_MONTH)
	cfg.Telemetry.LogRemoval = cmp.Or(cfg.Telemetry.LogRemoval, awscdk.RemovalPolicy_DESTROY)
	o := cfg.Telemetry.OpenTelemetry
	if err := plainHeaders("Props.Environment", cfg.Environment); err != nil {
		return err
	}
	if o == nil {
		// The functions read OTEL_ variables wherever they come from: Props.Environment's are
		// checked as the start checks them.
		return checkOtelEnv("Props.Environment", cfg.Environment)
	}
	if err := plainHeaders("Props.Telemetry.OpenTelemetry.Environment", o.Environment); err != nil {
		return err
	}
	if o.HeadersSecret != nil && o.HeadersParameter != nil {
		return fmt.Errorf("Props.Telemetry.OpenTelemetry: set HeadersSecret or HeadersParameter, not both")
	}
	if o.CollectorLayerArn == "" && o.Endpoint == "" {
		return fmt.Errorf("Props.Telemetry.OpenTelemetry: set CollectorLayerArn (a collector layer) or Endpoint (an OTLP/HTTP endpoint)")
	}
	if a := o.CollectorLayerArn; a != "" && !unresolved(a) && !layerArn.MatchString(a) {
		return fmt.Errorf("Props.Telemetry.OpenTelemetry.CollectorLayerArn %q: not a layer version's ARN (arn:aws:lambda:<region>:<account>:layer:<name>:<version>)", a)
	}
	if err := checkLayerArchitecture(cfg); err != nil {
		return err
	}
	if e := o.Endpoint; e != "" && !unresolved(e) {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("Props.Telemetry.OpenTelemetry.Endpoint %s: want an http(s) URL (the functions post to <it>/v1/traces); only its scheme and host are shown, as the rest may hold a key", shownURL(e))
		}
	}
	for _, k := range sortedKeys(o.Environment) {
		switch {
		case k == "OTEL_TRACES_EXPORTER" || k == "OTEL_SDK_DISABLED" || (k == "OTEL_EXPORTER_OTLP_ENDPOINT" && o.Endpoint != ""):
			return fmt.Errorf("Props.Telemetry.OpenTelemetry.Environment: %s is set by the prop", k)
		case k == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" && o.Endpoint != "":
			return fmt.Errorf("Props.Telemetry.OpenTelemetry.Environment: %s would replace Endpoint for the traces: set one of them", k)
		case !strings.HasPrefix(k, "OTEL_") && !strings.HasPrefix(k, "OPENTELEMETRY_COLLECTOR_"):
			return fmt.Errorf("Props.Telemetry.OpenTelemetry.Environment: %s is not an OpenTelemetry setting (OTEL_..., OPENTELEMETRY_COLLECTOR_...): use Props.Environment", k)
		}
	}
	for k := range cfg.Environment {
		if strings.HasPrefix(k, "OTEL_") {
			return fmt.Errorf("Props.Environment: %s: with Props.Telemetry.OpenTelemetry, OpenTelemetry's settings go in its Environment", k)
		}
	}
	return checkOtelEnv("Props.Telemetry.OpenTelemetry.Environment", telemetryEnv(o))
}

// checkOtelEnv refuses what the functions' start would (tracing.CheckEnv) in vars. A value
// holding a token is known only at deploy, and left to the start, as is the general variable a
// _TRACES_ one with a token replaces.
func checkOtelEnv(field string, vars map[string]string) error {
	env := maps.Clone(vars)
	for k, v := range vars {
		if unresolved(v) {
			delete(env, k)
			if general, ok := strings.CutPrefix(k, "OTEL_EXPORTER_OTLP_TRACES_"); ok {
				delete(env, "OTEL_EXPORTER_OTLP_"+general)
			}
		}
	}
	if err := tracing.CheckEnv(env); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

// plainHeaders refuses the exporter's headers in a function's environment: they hold an
// intake's key, which would be in plain text there (a dynamic reference too, once resolved).
// The value is never quoted.
func plainHeaders(field string, env map[string]string) error {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if _, ok := env[k]; ok {
			return fmt.Errorf("%s: %s: the exporter's headers hold an intake's key, which the environment would show in plain text (its value is not shown): put them in a Secrets Manager secret or an SSM SecureString parameter and set Props.Telemetry.OpenTelemetry.HeadersSecret or HeadersParameter", field, k)
		}
	}
	return nil
}

// unresolved says whether s holds a CDK token, a value known only at deploy.
func unresolved(s string) bool { return *awscdk.Token_IsUnresolved(jsii.String(s)) }

// layerArch reads the architecture a collector layer's name gives (ADOT's
// aws-otel-collector-<arch>-ver-..., OpenTelemetry's opentelemetry-collector-<arch>-...), if any.
var layerArch = regexp.MustCompile(`:layer:[A-Za-z0-9_-]*?(?:^|[-_])(arm64|amd64|x86_64|x86-64)(?:[-_]|:)`)

// checkLayerArchitecture refuses a collector layer whose name says it is built for another
// architecture than a function's: an extension the function cannot execute fails every
// invocation's start, not only its traces.
func checkLayerArchitecture(cfg *Props) error {
	a := cfg.Telemetry.OpenTelemetry.CollectorLayerArn
	m := layerArch.FindStringSubmatch(a)
	if a == "" || unresolved(a) || m == nil {
		return nil
	}
	layer := "arm64"
	if m[1] != "arm64" {
		layer = "x86_64"
	}
	for _, f := range parts(cfg) {
		if arch := *f.opts.Architecture.Name(); arch != layer {
			return fmt.Errorf("Props.Telemetry.OpenTelemetry.CollectorLayerArn %q: a collector layer for %s, and the %s runs on %s (Props.%s.Function.Architecture, or Props.X86): use the layer built for %s; functions of both architectures cannot share one layer",
				a, layer, f.name, arch, f.name, arch)
		}
	}
	return nil
}

// telemetryEnv is the functions' OpenTelemetry environment.
func telemetryEnv(o *OpenTelemetry) map[string]string {
	env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}
	if o.Endpoint != "" {
		env["OTEL_EXPORTER_OTLP_ENDPOINT"] = o.Endpoint
	}
	if o.HeadersSecret != nil {
		env[tracing.OTLPHeadersSecret] = *o.HeadersSecret.SecretArn()
	}
	if o.HeadersParameter != nil {
		env[tracing.OTLPHeadersParameter] = *o.HeadersParameter.ParameterName()
	}
	maps.Copy(env, o.Environment)
	return env
}

// telemetry wires the OpenTelemetry prop into each function: the collector layer, the read of
// the exporter's stored headers, X-Ray's write actions (its environment is telemetryEnv).
func telemetry(scope constructs.Construct, cfg Props, fns ...awslambda.Function) {
	o := cfg.Telemetry.OpenTelemetry
	if o == nil {
		return
	}
	var layer awslambda.ILayerVersion
	if o.CollectorLayerArn != "" {
		layer = awslambda.LayerVersion_FromLayerVersionArn(scope, jsii.String("CollectorLayer"), jsii.String(o.CollectorLayerArn))
	}
	for _, fn := range fns {
		if layer != nil {
			fn.AddLayers(layer)
		}
		if o.HeadersSecret != nil {
			o.HeadersSecret.GrantRead(fn.Role(), nil)
		}
		if o.HeadersParameter != nil {
			o.HeadersParameter.GrantRead(fn.Role())
		}
		if o.XRay {
			allow(fn, []string{"xray:PutTraceSegments", "xray:PutTelemetryRecords"}, jsii.String("*"))
			nag(fn.Role(), "AwsSolutions-IAM5", "X-Ray's PutTraceSegments and PutTelemetryRecords support no resource-level permissions (Props.Telemetry.OpenTelemetry.XRay: the collector layer exports the function's traces to X-Ray).", "Resource::*")
		}
	}
}

// notNamespace is a character CloudWatch does not take in a namespace.
var notNamespace = regexp.MustCompile(`[^A-Za-z0-9._/#:-]`)

// defaultNamespace is DefaultNamespace and the construct's path, each character CloudWatch
// does not take in a namespace replaced with "_".
func defaultNamespace(path string) string {
	ns := notNamespace.ReplaceAllString(DefaultNamespace+"/"+path, "_")
	return ns[:min(len(ns), 255)]
}

func validNamespace(ns string) bool {
	return ns != "" && len(ns) <= 255 && !strings.HasPrefix(ns, "AWS/") && !notNamespace.MatchString(ns)
}

// allowLogs lets CloudWatch Logs encrypt with key, for log groups of this account only.
func allowLogs(stack awscdk.Stack, key awskms.IKey) {
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String(fmt.Sprintf("logs.%s.amazonaws.com", *stack.Region())), nil)},
		Actions:    jsii.Strings("kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"ArnLike": map[string]any{
			"kms:EncryptionContext:aws:logs:arn": stackArn(stack, "logs", "log-group:*"),
		}},
	}), jsii.Bool(true))
}
