// Package infra is oncehook as a CDK (Go) construct: one New(scope, id, props) defines the
// table, the receiver behind an HTTP API, the outbox worker on the table's stream and its
// retry queue, the scheduled sweeper, least-privilege IAM, alarms and a dashboard, and exposes
// each as a field of the result, on AWS or on an emulator (docs/stack.md).
//
// Each part is built by one function in its own file, with the checks of its props (table.go,
// receiver.go, outbox.go, sweeper.go, alarms.go, dashboard.go, telemetry.go); functions.go is
// what the three functions share, props.go runs the checks, bind.go binds the sources file's
// resources.
//
//	o := infra.New(stack, "Webhooks", &infra.Props{
//		SourcesFile: "sources.json",
//		Receiver:    infra.ReceiverProps{Code: infra.Code{GoPackage: "./cmd/receiver", GoModuleDir: ".."}},
//	})
//	o.Table.GrantReadData(myReportingFunction)
package infra

import (
	"cmp"
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/deployment"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/sources"
)

// Props configures an oncehook deployment: what it all shares, and one struct per part that
// overrides that part's defaults. Zero values are the safe defaults; the synth refuses what
// cannot work, naming the prop by its path (Props.Outbox.StreamBatchSize).
type Props struct {
	// SourcesFile is the deployment's sources file (required): validated at synth, the IAM
	// policies derived from it, and handed to the functions (see Code).
	SourcesFile string
	// GoModuleDir is where the functions' default packages are built (a module that requires
	// oncehook), and any Code.GoPackage without a GoModuleDir of its own. Default ".".
	GoModuleDir string
	// X86 deploys the functions on x86_64 instead of Graviton (arm64): an emulator on an amd64
	// host. A part's Function.Architecture sets one function's.
	X86 bool
	// Local marks a throwaway stack on an emulator: the table is destroyed with it and has no
	// deletion protection.
	Local bool
	// MemorySize of each function in MB (128 to 10,240). Default 256; a part's
	// Function.MemorySize sets one function's.
	MemorySize float64
	// Environment is added to every function's environment (it cannot replace oncehook's own).
	Environment map[string]string
	// AllowEnvSecrets and AllowPrivateTargets let a stack that is not Local keep what otherwise
	// fails its synth: "env" secrets (which the stack never sets), and targets on loopback or
	// private addresses.
	AllowEnvSecrets, AllowPrivateTargets bool

	// TableBindings bind the sources file's tables marked "bound": true to tables the app
	// defines or imports, by the name the file lists them under: the grants are on them, and
	// the functions get their names (ONCEHOOK_BINDINGS). docs/stack.md, "Binding the sources
	// file to the app's resources".
	TableBindings map[string]awsdynamodb.ITable
	// QueueBindings, TopicBindings, EventBusBindings, StateMachineBindings and
	// FunctionBindings bind the sources file's AWS targets marked "bound": true, by target
	// type (sqs, sns, eventbridge, stepfunctions, lambda), as TableBindings do its tables.
	QueueBindings        map[string]awssqs.IQueue
	TopicBindings        map[string]awssns.ITopic
	EventBusBindings     map[string]awsevents.IEventBus
	StateMachineBindings map[string]awsstepfunctions.IStateMachine
	FunctionBindings     map[string]awslambda.IFunction

	// Each part's props over its defaults: the table of claims, effect records and the outbox;
	// the receiver and its API; the outbox worker, its stream mapping and queues; the sweeper
	// and its leak audit; where the alarms go; the functions' metrics, logs and traces.
	Table     TableProps
	Receiver  ReceiverProps
	Outbox    OutboxProps
	Sweeper   SweeperProps
	Alarms    AlarmProps
	Telemetry TelemetryProps
}

// FunctionOptions are one function's settings over the construct-wide ones.
type FunctionOptions struct {
	// MemorySize in MB (128 to 10,240); default Props.MemorySize.
	MemorySize float64
	// Architecture, default Props.X86's (arm64 unless X86); the function's code is built for it.
	Architecture awslambda.Architecture
	// ReservedConcurrency caps the function's concurrent executions (0: no cap): the receiver's,
	// so a flood cannot take the account's concurrency from the outbox and the sweeper. Not for
	// the sweeper (SweeperProps.Unreserved).
	ReservedConcurrency float64
}

// Oncehook is a deployed oncehook: its resources are fields, to grant and extend with ordinary
// CDK calls (Table.GrantReadData(fn), Outbox.AddEnvironment(...)).
type Oncehook struct {
	constructs.Construct
	// Table is the table the construct created, or Props.Table.Existing.
	Table                     awsdynamodb.ITable
	Receiver, Outbox, Sweeper awslambda.Function
	Api                       awsapigatewayv2.HttpApi
	// WebhookUrl is <base>/hooks/{source}, the base the custom domain when there is one;
	// WebhookUrls has it per source, the URL to give each provider.
	WebhookUrl  *string
	WebhookUrls map[string]*string
	// DomainTarget is the regional host name a custom domain's DNS record points at (nil
	// without Props.Receiver.Domain).
	DomainTarget *string
	// RetryQueue wakes retried intents; FailureQueue takes what exhausted its retries.
	RetryQueue, FailureQueue awssqs.Queue
	Alarms                   []awscloudwatch.Alarm
	Dashboard                awscloudwatch.Dashboard
	// AlarmTopic is where the alarms send their ALARM and OK (Props.Alarms.Topic, or a new one).
	AlarmTopic awssns.ITopic
	// MetricsNamespace is the namespace the functions write their metrics in and the alarms
	// read (Props.Telemetry.MetricsNamespace or its default).
	MetricsNamespace string
	// StreamMapping is the outbox's mapping on the table's stream, SweepSchedule the sweeper's
	// rule, AccessLogs the API's access logs (nil with Props.Receiver.HttpApi).
	StreamMapping awslambdaeventsources.DynamoEventSource
	SweepSchedule awsevents.Rule
	AccessLogs    awslogs.LogGroup
	// Sources is the sources file as validated at synth.
	Sources *sources.File
}

// functions are the receiver, the outbox and the sweeper.
func (o *Oncehook) functions() []awslambda.Function {
	return []awslambda.Function{o.Receiver, o.Outbox, o.Sweeper}
}

// New defines an oncehook deployment in scope. Configuration that cannot work panics at synth
// with a message naming the prop or the sources file's field (the CDK's convention for props).
func New(scope constructs.Construct, id string, props *Props) *Oncehook {
	o, err := build(scope, id, props)
	if err != nil {
		panic("oncehook: " + err.Error())
	}
	return o
}

func build(scope constructs.Construct, id string, props *Props) (*Oncehook, error) {
	cfg, file, raw, err := configure(props)
	if err != nil {
		return nil, err
	}
	for _, w := range file.Warnings() {
		// Shown by cdk synth and cdk deploy; the stack still builds (cdk --strict refuses it).
		awscdk.Annotations_Of(scope).AddWarningV2(jsii.String("oncehook:sources:"+w.Field), jsii.String(props.SourcesFile+": "+w.String()), nil)
	}
	timings, err := outboxTimings(file, cfg.Outbox.Executors, int(cfg.Outbox.StreamBatchSize))
	if err != nil {
		return nil, err // an *outbox.ConfigError, which names the outbox's setting
	}
	bound, err := checkBindings(scope, awscdk.Stack_Of(scope), cfg, file)
	if err != nil {
		return nil, err
	}
	if o := cfg.Telemetry.OpenTelemetry; o != nil && o.CollectorLayerArn != "" {
		if err := placed(scope, awscdk.Stack_Of(scope), "Props.Telemetry.OpenTelemetry.CollectorLayerArn", "a function takes a layer of its own Region only: use the layer's ARN for the stack's Region",
			false, nil, jsii.String(o.CollectorLayerArn)); err != nil {
			return nil, err
		}
	}
	code, err := stageCode(cfg, raw)
	if err != nil {
		return nil, err
	}

	c := constructs.NewConstruct(scope, jsii.String(id))
	o := &Oncehook{Construct: c, Sources: file}
	stack := awscdk.Stack_Of(c)
	cfg.Telemetry.MetricsNamespace = cmp.Or(cfg.Telemetry.MetricsNamespace, defaultNamespace(*c.Node().Path()))
	o.MetricsNamespace = cfg.Telemetry.MetricsNamespace
	if cfg.Telemetry.LogKey != nil {
		allowLogs(stack, cfg.Telemetry.LogKey)
	}

	// One function per part, each after what it needs.
	if o.Table, err = newTable(c, stack, cfg); err != nil {
		return nil, err
	}
	b := &builder{c: c, stack: stack, cfg: cfg, file: file, bound: bound, code: code, timings: timings, o: o}
	b.settings = deployment.Settings{Table: *o.Table.TableName(), LogLevel: "info", PendingShards: cfg.Table.PendingShards,
		MetricsNamespace: cfg.Telemetry.MetricsNamespace, Bindings: bound.env(stack), Targets: sortedKeys(cfg.Outbox.Executors),
		NoDuplicateProbe: cfg.Receiver.NoDuplicateProbe}
	for _, part := range []func() error{b.receiver, b.outbox, b.sweeper} {
		if err := part(); err != nil {
			return nil, err
		}
	}
	telemetry(c, cfg, o.functions()...)
	o.AlarmTopic = newAlarmTopic(c, stack, cfg)
	o.Alarms = newAlarms(c, cfg, file, o)
	o.Dashboard = newDashboard(c, cfg, file, o)
	outputs(c, stack, o)
	suppress(o)
	return o, nil
}

// builder is what the functions' parts are built from, and the result so far.
type builder struct {
	c     constructs.Construct
	stack awscdk.Stack
	cfg   Props
	file  *sources.File
	bound *bindings
	code  map[string]staged
	// settings are every function's settings that the construct derives (the outbox and the
	// sweeper add theirs: workerSettings).
	settings deployment.Settings
	timings  outbox.Timings
	o        *Oncehook
}

// outputs are what an operator looks up after a deploy.
func outputs(c constructs.Construct, stack awscdk.Stack, o *Oncehook) {
	awscdk.NewCfnOutput(c, jsii.String("TableName"), &awscdk.CfnOutputProps{Value: o.Table.TableName(), Description: jsii.String("oncehook: the table of claims, effect records and the outbox")})
	awscdk.NewCfnOutput(c, jsii.String("AlarmTopicArn"), &awscdk.CfnOutputProps{Value: o.AlarmTopic.TopicArn(), Description: jsii.String("oncehook: the topic every alarm sends its ALARM and OK to")})
	awscdk.NewCfnOutput(c, jsii.String("FailureQueueUrl"), &awscdk.CfnOutputProps{Value: o.FailureQueue.QueueUrl(), Description: jsii.String("oncehook: stream records and wake-ups that exhausted their retries")})
	awscdk.NewCfnOutput(c, jsii.String("DashboardUrl"), &awscdk.CfnOutputProps{
		Value:       jsii.String(fmt.Sprintf("https://%s.console.aws.amazon.com/cloudwatch/home?region=%s#dashboards:name=%s", *stack.Region(), *stack.Region(), *o.Dashboard.DashboardName())),
		Description: jsii.String("oncehook: the dashboard"),
	})
}
