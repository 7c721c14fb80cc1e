package infra

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/deployment"
	"github.com/oncehook/oncehook/sources"
)

// FunctionTag tags each function with its role in the deployment: receiver, outbox, sweeper.
const FunctionTag = "oncehook:function"

// part is one function's props: its name as Props names it (Receiver), its code (pkg the
// default's package) and its options.
type part struct {
	name string
	code Code
	pkg  string
	opts *FunctionOptions
}

// parts are the receiver's, the outbox's and the sweeper's props, in that order.
func parts(cfg *Props) []part {
	return []part{{"Receiver", cfg.Receiver.Code, ReceiverPackage, &cfg.Receiver.Function},
		{"Outbox", cfg.Outbox.Code, OutboxPackage, &cfg.Outbox.Function}, {"Sweeper", cfg.Sweeper.Code, SweeperPackage, &cfg.Sweeper.Function}}
}

// stageCode builds or checks each function's code, with the sources file beside it.
func stageCode(cfg Props, raw []byte) (map[string]staged, error) {
	staging, err := os.MkdirTemp("", "oncehook-code-")
	if err != nil {
		return nil, err
	}
	code := map[string]staged{}
	for _, f := range parts(&cfg) {
		arm64 := *f.opts.Architecture.Name() == *awslambda.Architecture_ARM_64().Name()
		c, name := f.code, strings.ToLower(f.name)
		if c.GoPackage == "" && c.Dir == "" && c.Lambda == nil {
			c = Code{GoPackage: f.pkg}
		}
		c.GoModuleDir = cmp.Or(c.GoModuleDir, cfg.GoModuleDir)
		if code[name], err = c.stage(name, arm64, compactJSON(raw), staging); err != nil {
			return nil, err
		}
	}
	return code, nil
}

// function defines one Lambda, with its own log group and role, tagged with its role in the
// deployment (oncehook:function) so tools find it without its name. Its environment is s, where
// its code says its sources file is, OpenTelemetry's settings, and Props.Environment.
func (b *builder) function(id string, opts FunctionOptions, s deployment.Settings, timeoutSeconds float64) (awslambda.Function, error) {
	scope, cfg := b.c, b.cfg
	logs := logGroup(scope, id+"Logs", cfg)
	name := strings.ToLower(id)
	// An explicit role instead of AWSLambdaBasicExecutionRole: logs only to its own group.
	role := awsiam.NewRole(scope, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("oncehook " + name),
	})
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("logs:CreateLogStream", "logs:PutLogEvents"),
		Resources: jsii.Strings(*logs.LogGroupArn() + ":*"),
	}))
	code := b.code[name]
	s.Sources, s.SourcesSHA256 = code.sources, code.sourcesSHA256
	all := s.Environment()
	if cfg.Telemetry.OpenTelemetry != nil {
		maps.Copy(all, telemetryEnv(cfg.Telemetry.OpenTelemetry))
	}
	maps.Copy(all, cfg.Environment)
	// The settings the function's start will read, checked as it will check them. One of
	// Props.Environment's known only at deploy (a token) is left to the start, as
	// OpenTelemetry's are (checkOtelEnv); the construct's own tokens (the table's name) stay,
	// as the start needs them set.
	getenv := func(k string) string {
		if _, set := cfg.Environment[k]; set && unresolved(all[k]) {
			return ""
		}
		return all[k]
	}
	settings, err := deployment.FromEnv(getenv)
	if err == nil {
		err = settings.CheckFile(b.file)
	}
	if err != nil {
		return nil, fmt.Errorf("the %s function's environment (Props.Environment): %w", name, err)
	}
	vars := map[string]*string{}
	for k, v := range all {
		vars[k] = jsii.String(v)
	}
	fn := awslambda.NewFunction(scope, jsii.String(id), &awslambda.FunctionProps{
		Role:         role,
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: opts.Architecture,
		Handler:      jsii.String("bootstrap"),
		Code:         code.code,
		MemorySize:   jsii.Number(opts.MemorySize),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(timeoutSeconds)),
		Environment:  &vars,
		LogGroup:     logs,
		Description:  jsii.String("oncehook " + name),
		Tracing:      cfg.Telemetry.Tracing,
	})
	if opts.ReservedConcurrency > 0 {
		fn.Node().DefaultChild().(awslambda.CfnFunction).SetReservedConcurrentExecutions(jsii.Number(opts.ReservedConcurrency))
	}
	awscdk.Tags_Of(fn).Add(jsii.String(FunctionTag), jsii.String(name), nil)
	return fn, checkEnvironment(fn, name, vars)
}

// logGroup is a log group of the stack's (a function's, the API's access logs), kept and
// encrypted as Props.Telemetry says.
func logGroup(scope constructs.Construct, id string, cfg Props) awslogs.LogGroup {
	return awslogs.NewLogGroup(scope, jsii.String(id), &awslogs.LogGroupProps{
		Retention: cfg.Telemetry.LogRetention, RemovalPolicy: cfg.Telemetry.LogRemoval, EncryptionKey: cfg.Telemetry.LogKey,
	})
}

// maxEnvironment is Lambda's limit on a function's environment: its variables' names and
// values, 4 KB in all.
const maxEnvironment = 4 << 10

// deployValue is what the size check counts for a value known only at deploy (a table's name,
// a queue's URL, bound ARNs), to warn of an environment such values could take over the limit.
const deployValue = 128

// checkEnvironment refuses a function's environment that is over Lambda's 4 KB with its
// literal values alone (CreateFunction would refuse it), and warns when values known only at
// deploy could take it over.
func checkEnvironment(fn awslambda.Function, name string, vars map[string]*string) error {
	literal, tokens := 0, 0
	stack := awscdk.Stack_Of(fn)
	for k, v := range vars {
		literal += len(k)
		if !unresolved(*v) {
			literal += len(*v)
			continue
		}
		// A value with tokens in it (ONCEHOOK_BINDINGS: JSON keys around names and ARNs):
		// its literal parts count, each value CloudFormation fills in at deploy is a token.
		l, t := resolvedSize(stack.Resolve(v))
		literal, tokens = literal+l, tokens+t
	}
	if literal > maxEnvironment {
		return fmt.Errorf("the %s function's environment: %d bytes with its literal values alone (the inline sources file, Props.Environment, Props.Telemetry.OpenTelemetry's settings), over Lambda's 4 KB: a smaller OpenTelemetry header or resource attributes, or Code.Dir or Code.GoPackage (which carry the sources file in the code, not the environment)",
			name, literal)
	}
	if literal+tokens*deployValue > maxEnvironment {
		awscdk.Annotations_Of(fn).AddWarningV2(jsii.String("oncehook:environment-size"), jsii.String(fmt.Sprintf(
			"the %s function's environment: %d bytes before its %d values known only at deploy (the table's name, the retry queue's URL, bound ARNs): Lambda refuses more than 4 KB in all",
			name, literal, tokens)), nil)
	}
	return nil
}

// resolvedSize is the literal bytes and the deploy-time values of a resolved CloudFormation
// value: strings, Fn::Join's parts and separators, and any other intrinsic as one value.
func resolvedSize(v any) (literal, tokens int) {
	switch v := v.(type) {
	case string:
		return len(v), 0
	case []any:
		for _, e := range v {
			l, t := resolvedSize(e)
			literal, tokens = literal+l, tokens+t
		}
		return literal, tokens
	case map[string]any:
		if join, ok := v["Fn::Join"].([]any); ok && len(v) == 1 && len(join) == 2 {
			sep, _ := join[0].(string)
			parts, _ := join[1].([]any)
			l, t := resolvedSize(parts)
			return l + len(sep)*max(len(parts)-1, 0), t
		}
	}
	return 0, 1
}

// checkFunctions fills in each function's options from the construct-wide ones and refuses
// what Lambda would, and a second reservation for the sweeper or the receiver.
func checkFunctions(cfg *Props, _ *sources.File) error {
	if !knob(&cfg.MemorySize, 256, 128, 10240, false) {
		return fmt.Errorf("Props.MemorySize %g: must be between 128 and 10240 MB", cfg.MemorySize)
	}
	if cfg.Sweeper.Function.ReservedConcurrency != 0 {
		return errors.New("Props.Sweeper.Function.ReservedConcurrency: the sweeper runs one at a time (reserved 1); Props.Sweeper.Unreserved removes the reservation")
	}
	for _, f := range parts(cfg) {
		if !knob(&f.opts.MemorySize, cfg.MemorySize, 128, 10240, false) {
			return fmt.Errorf("Props.%s.Function.MemorySize %g: must be between 128 and 10240 MB", f.name, f.opts.MemorySize)
		}
		if !knob(&f.opts.ReservedConcurrency, 0, 0, math.MaxInt32, true) {
			return fmt.Errorf("Props.%s.Function.ReservedConcurrency %g: must be a whole number, 0 for no reservation", f.name, f.opts.ReservedConcurrency)
		}
		if f.opts.Architecture == nil {
			f.opts.Architecture = awslambda.Architecture_ARM_64()
			if cfg.X86 {
				f.opts.Architecture = awslambda.Architecture_X86_64()
			}
		}
	}
	if !cfg.Sweeper.Unreserved {
		cfg.Sweeper.Function.ReservedConcurrency = 1 // one run at a time
	}
	return nil
}

// knob fills in a numeric prop's default (for 0) and says whether it is then between lo and hi,
// and, with whole, a whole number.
func knob(v *float64, def, lo, hi float64, whole bool) bool {
	*v = cmp.Or(*v, def)
	return *v >= lo && *v <= hi && (!whole || *v == math.Trunc(*v))
}

func allow(fn awslambda.Function, actions []string, resources ...*string) {
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	}))
}

// stackArn is the ARN of resource (its type and name, as the service writes them) in service,
// in the stack's partition, Region and account.
func stackArn(stack awscdk.Stack, service, resource string) string {
	return *stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String(service), Resource: jsii.String(resource), ArnFormat: awscdk.ArnFormat_NO_RESOURCE_NAME})
}

// What a function may do with a customer-managed key: use it for a table's items, or send to a
// queue or topic under it.
var (
	tableKeyActions = []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*"}
	sendKeyActions  = []string{"kms:GenerateDataKey", "kms:Decrypt"}
)

// allowKey lets fn use keys for actions through the named services only (kms:ViaService, in
// the stack's Region): the key itself decrypts nothing else for it. A nil key (a resource under
// AWS's own encryption) is skipped; with none left there is nothing to allow.
func allowKey(fn awslambda.Function, actions []string, keys []awskms.IKey, services ...string) {
	var arns []*string
	for _, k := range keys {
		if k != nil {
			arns = append(arns, k.KeyArn())
		}
	}
	if len(arns) == 0 {
		return
	}
	var via []any
	for _, s := range services {
		via = append(via, fmt.Sprintf("%s.%s.amazonaws.com", s, *awscdk.Stack_Of(fn).Region()))
	}
	var cond any = via
	if len(via) == 1 {
		cond = via[0]
	}
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings(actions...), Resources: &arns, Conditions: &map[string]any{"StringEquals": map[string]any{"kms:ViaService": cond}},
	}))
}

// grantTableKey lets fn use a table's customer-managed key, if it has one, through DynamoDB.
func grantTableKey(fn awslambda.Function, key awskms.IKey) {
	allowKey(fn, tableKeyActions, []awskms.IKey{key}, "dynamodb")
}
