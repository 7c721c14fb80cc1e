// Package infra is oncehook as a CDK (Go) construct: one New(scope, id, props) defines the
// table, the receiver behind an HTTP API, the outbox worker on the table's stream and its
// retry queue, the scheduled sweeper, least-privilege IAM, alarms and a dashboard, and exposes
// each as a field of the result. The same construct deploys to AWS and to a
// LocalStack-compatible emulator; infra/app is oncehook's own app, a thin user of it.
//
// Each part is built by one function, in its own file, with the checks of its props: the
// table (table.go, newTable), the receiver and its API (receiver.go, newReceiver), the outbox,
// its queues and triggers (outbox.go, newOutbox), the sweeper and its schedule (sweeper.go,
// newSweeper), the alarms and their topic (alarms.go), the dashboard (dashboard.go) and the
// functions' telemetry (telemetry.go); functions.go is what the three functions share, props.go
// reads the sources file and runs the checks, bind.go binds the file's resources.
//
//	o := infra.New(stack, "Webhooks", &infra.Props{
//		SourcesFile: "sources.json",
//		Receiver:    infra.Code{GoPackage: "./cmd/receiver", GoModuleDir: ".."},
//	})
//	o.Table.GrantReadData(myReportingFunction)
package infra

import (
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

	"github.com/oncehook/oncehook/sources"
)

// Props configures an oncehook deployment: what the whole deployment shares at the top, and
// one struct per part (Table, Receiver, Outbox, Sweeper, Alarms, Telemetry) that overrides
// that part's defaults. The zero values are the safe defaults; only SourcesFile is required.
// The synth refuses what cannot work, naming the prop by its path (Props.Outbox.StreamBatchSize).
type Props struct {
	// SourcesFile is the deployment's sources file (required). It is validated at synth (a
	// retention shorter than a provider's promise, timings that cannot work and the like fail
	// the synth, naming the field), the IAM policies are derived from it, and the functions are
	// handed this same file (see Code).
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
	// AllowEnvSecrets and AllowPrivateTargets let a stack that is not Local keep what only works
	// locally: secrets read from the functions' environment ("env" references, which the stack
	// never sets: the receiver would fail at start), and targets on loopback or private
	// addresses. Without them such a sources file fails the synth, naming the source or target.
	AllowEnvSecrets, AllowPrivateTargets bool

	// TableBindings bind the sources file's tables marked "bound": true (which name no table)
	// to tables the app defines or imports, by the name the file lists them under: the
	// receiver is granted what each table's actions need (and the sweeper Scan where it
	// audits), on that table and its customer-managed key, and the functions are handed its
	// name as CloudFormation resolves it (ONCEHOOK_BINDINGS, applied by launch at start). So
	// one sources file serves every account and stage, and the table needs no fixed physical
	// name. A bound table is in the stack's account and Region, has the key the file's entry
	// names (checked at synth for a table defined in the app), and is not Table.Existing.
	TableBindings map[string]awsdynamodb.ITable
	// QueueBindings, TopicBindings, EventBusBindings, StateMachineBindings and
	// FunctionBindings bind the sources file's AWS targets marked "bound": true (which name
	// no arn) to resources the app defines or imports, by target type (sqs, sns, eventbridge,
	// stepfunctions, lambda): the outbox and the sweeper are granted the target's calls on
	// that resource (and a queue's or topic's customer-managed key through its service), and
	// are handed its ARN (ONCEHOOK_BINDINGS). The synth refuses a binding for a name the file
	// does not have, or names literally, or of another type; a bound entry without a binding;
	// a resource in another Region; a standard queue or topic for a target with a group_id.
	QueueBindings        map[string]awssqs.IQueue
	TopicBindings        map[string]awssns.ITopic
	EventBusBindings     map[string]awsevents.IEventBus
	StateMachineBindings map[string]awsstepfunctions.IStateMachine
	FunctionBindings     map[string]awslambda.IFunction

	// Table is the table of claims, effect records and the outbox: its encryption, its
	// logical id, its pending index's shards, or a table to adopt instead (TableProps).
	Table TableProps
	// Receiver is the receiver function and the webhook API in front of it (ReceiverProps).
	Receiver ReceiverProps
	// Outbox is the outbox worker, its stream mapping and its retry and failure queues
	// (OutboxProps).
	Outbox OutboxProps
	// Sweeper is the scheduled sweeper and its leak audit (SweeperProps).
	Sweeper SweeperProps
	// Alarms are where the alarms go and what pages (AlarmProps).
	Alarms AlarmProps
	// Telemetry is the functions' metrics namespace, logs and traces (TelemetryProps).
	Telemetry TelemetryProps
}

// FunctionOptions are one function's settings over the construct-wide ones.
type FunctionOptions struct {
	// MemorySize in MB (128 to 10,240); default Props.MemorySize.
	MemorySize float64
	// Architecture, default Props.X86's (arm64 unless X86). The function's code must be built
	// for it: a prebuilt bootstrap of another architecture fails the synth.
	Architecture awslambda.Architecture
	// ReservedConcurrency caps the function's concurrent executions (0: no cap). Not for the
	// sweeper, which has 1 (Props.Sweeper.Unreserved removes it).
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
	// RetryQueue wakes retried intents; FailureQueue takes the stream records and wake-ups that
	// exhausted their retries.
	RetryQueue, FailureQueue awssqs.Queue
	Alarms                   []awscloudwatch.Alarm
	Dashboard                awscloudwatch.Dashboard
	// AlarmTopic is where the alarms send their ALARM and OK (Props.Alarms.Topic, or a new one).
	AlarmTopic awssns.ITopic
	// MetricsNamespace is the namespace the functions write their metrics in and the alarms
	// read (Props.Telemetry.MetricsNamespace or its default).
	MetricsNamespace string
	// StreamMapping is the outbox's mapping on the table's stream, SweepSchedule the sweeper's
	// rule, AccessLogs the API's access-log group (nil with Props.Receiver.HttpApi).
	StreamMapping awslambdaeventsources.DynamoEventSource
	SweepSchedule awsevents.Rule
	AccessLogs    awslogs.LogGroup
	// Sources is the sources file as validated at synth.
	Sources *sources.File
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
	if cfg.Telemetry.MetricsNamespace == "" {
		cfg.Telemetry.MetricsNamespace = defaultNamespace(*c.Node().Path())
	}
	o.MetricsNamespace = cfg.Telemetry.MetricsNamespace
	if cfg.Telemetry.LogKey != nil {
		allowLogs(stack, cfg.Telemetry.LogKey)
	}

	// One function per part, in the order each needs the one before: the table; the receiver
	// and its API; the outbox, its queues and its triggers; the sweeper and its schedule; then
	// what watches them.
	if o.Table, err = newTable(c, stack, cfg); err != nil {
		return nil, err
	}
	env := functionEnv(cfg, o.Table, bound.env(stack))
	if err := newReceiver(c, stack, cfg, file, bound, code["receiver"], env, o); err != nil {
		return nil, err
	}
	if err := newOutbox(c, stack, cfg, file, bound, code["outbox"], env, timings, o); err != nil {
		return nil, err
	}
	if err := newSweeper(c, stack, cfg, file, bound, code["sweeper"], env, timings, o); err != nil {
		return nil, err
	}
	telemetry(c, cfg, o.Receiver, o.Outbox, o.Sweeper)
	o.AlarmTopic = newAlarmTopic(c, stack, cfg)
	o.Alarms = newAlarms(c, cfg, file, o)
	o.Dashboard = newDashboard(c, cfg, file, o)
	outputs(c, stack, o)
	suppress(o.Api, o.FailureQueue, o.Outbox, o.Receiver, o.Outbox, o.Sweeper)
	return o, nil
}

// outputs are what an operator looks up after a deploy: the table (created or adopted), the
// topic to subscribe, the queue that takes what gave up, the dashboard.
func outputs(c constructs.Construct, stack awscdk.Stack, o *Oncehook) {
	awscdk.NewCfnOutput(c, jsii.String("TableName"), &awscdk.CfnOutputProps{Value: o.Table.TableName(), Description: jsii.String("oncehook: the table of claims, effect records and the outbox")})
	awscdk.NewCfnOutput(c, jsii.String("AlarmTopicArn"), &awscdk.CfnOutputProps{Value: o.AlarmTopic.TopicArn(), Description: jsii.String("oncehook: the topic every alarm sends its ALARM and OK to")})
	awscdk.NewCfnOutput(c, jsii.String("FailureQueueUrl"), &awscdk.CfnOutputProps{Value: o.FailureQueue.QueueUrl(), Description: jsii.String("oncehook: stream records and wake-ups that exhausted their retries")})
	awscdk.NewCfnOutput(c, jsii.String("DashboardUrl"), &awscdk.CfnOutputProps{
		Value:       jsii.String(fmt.Sprintf("https://%s.console.aws.amazon.com/cloudwatch/home?region=%s#dashboards:name=%s", *stack.Region(), *stack.Region(), *o.Dashboard.DashboardName())),
		Description: jsii.String("oncehook: the dashboard"),
	})
}
