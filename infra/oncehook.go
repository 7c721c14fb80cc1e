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
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
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

// Props configures an oncehook deployment. The zero values are the safe defaults; only
// SourcesFile is required.
type Props struct {
	// SourcesFile is the deployment's sources file (required). It is validated at synth (a
	// retention shorter than a provider's promise, timings that cannot work and the like fail
	// the synth, naming the field), the IAM policies are derived from it, and the functions are
	// handed this same file (see Code).
	SourcesFile string
	// Receiver, Outbox and Sweeper are the functions' code. Default: oncehook's own packages
	// (ReceiverPackage and so on), built from GoModuleDir.
	Receiver, Outbox, Sweeper Code
	// GoModuleDir is where the default packages are built (a module that requires oncehook).
	// Default ".".
	GoModuleDir string
	// X86 deploys the functions on x86_64 instead of Graviton (arm64): an emulator on an amd64
	// host.
	X86 bool
	// Local marks a throwaway stack on an emulator: the table is destroyed with it and has no
	// deletion protection.
	Local bool
	// MemorySize of each function in MB (128 to 10,240). Default 256; ReceiverFunction and
	// the like set one function's.
	MemorySize float64
	// ReceiverFunction, OutboxFunction and SweeperFunction set one function's memory,
	// architecture and reserved concurrency over the defaults above.
	ReceiverFunction, OutboxFunction, SweeperFunction FunctionOptions
	// Environment is added to every function's environment (it cannot replace oncehook's own).
	Environment map[string]string
	// Targets are the intent targets the application's own executors serve (its outbox and
	// sweeper pass them to launch.Outbox and launch.Sweeper): ONCEHOOK_TARGETS, so the
	// receiver refuses intents for any other target and the outbox refuses to start without
	// an executor for each.
	Targets []string
	// PendingShards is the pending index's shard count: raise it with the event rate
	// (docs/capacity.md), never lower it. Default 16.
	PendingShards int
	// DuplicateSpike is the number of duplicates per source in 5 minutes that alarms (a redrive
	// in progress, or handler latency over the provider's timeout). Default 500.
	DuplicateSpike float64
	// HttpApi is an existing HTTP API to add the webhook route to; default a new one.
	HttpApi awsapigatewayv2.HttpApi
	// ThrottleRate and ThrottleBurst bound the new API's requests per second (default 1,000
	// and 2,000): a flood of unsigned requests is refused at API Gateway rather than starting
	// receivers that refuse them one by one.
	ThrottleRate, ThrottleBurst float64
	// AllowEnvSecrets and AllowPrivateTargets let a stack that is not Local keep what only works
	// locally: secrets read from the functions' environment ("env" references, which the stack
	// never sets: the receiver would fail at start), and targets on loopback or private
	// addresses. Without them such a sources file fails the synth, naming the source or target.
	AllowEnvSecrets, AllowPrivateTargets bool
	// AlarmTopic receives every alarm's ALARM and OK; default a new topic (Oncehook.AlarmTopic),
	// to subscribe whoever is on call.
	AlarmTopic awssns.ITopic
	// AlarmEmails and AlarmHttpsEndpoints subscribe the alarm topic (the construct's own or
	// AlarmTopic): each address gets every ALARM and OK once it confirms the subscription. A
	// stack with neither and no AlarmTopic synthesizes with a warning: its alarms reach nobody.
	AlarmEmails, AlarmHttpsEndpoints []string
	// MetricsNamespace is the CloudWatch namespace the functions write their metrics in and the
	// alarms read: one per deployment, so that staging and production in one account do not feed
	// each other's alarms. Default DefaultNamespace + "/" + the construct's path
	// ("oncehook/Production/Webhooks"), unique per construct instance in an account and Region.
	MetricsNamespace string
	// StreamParallelization is the stream mapping's parallelization factor (1 to 10): batches
	// of one shard processed at once, for an event rate one worker per shard cannot keep up
	// with (OutboxIteratorAge). Default 2.
	StreamParallelization float64
	// StreamBatchSize is the stream records one outbox invocation gets (1 to 10,000). Default
	// 100. The outbox runs up to outbox.DefaultConcurrency (256) records at once, so its
	// function's timeout is derived from the rounds a batch takes and the slowest target's
	// timeout: a batch that could not run within Lambda's 15 minutes fails the synth.
	StreamBatchSize float64
	// LogRetention is how long the functions' and the API's log groups keep their lines.
	// Default one month.
	LogRetention awslogs.RetentionDays
	// LogRemoval is what becomes of those log groups when the stack deletes them. Default
	// DESTROY (the lines expire anyway); RETAIN for an audit trail that outlives the stack.
	LogRemoval awscdk.RemovalPolicy
	// QueueKey puts the retry and failure queues under a customer-managed KMS key (default
	// SQS's own encryption); the functions that send to them may use it through SQS.
	QueueKey awskms.IKey
	// LogKey puts every log group (the functions' and the API's) under a customer-managed KMS
	// key (default CloudWatch Logs' own encryption). A key defined in the app is given the
	// statement that lets CloudWatch Logs use it for this account's log groups; an imported
	// key's policy must have it already.
	LogKey awskms.IKey
	// Tracing is the functions' X-Ray tracing (awslambda.Tracing_ACTIVE, which also lets each
	// role send its segments); default none.
	Tracing awslambda.Tracing
	// OpenTelemetry turns on the functions' OpenTelemetry traces, exported to a collector
	// layer or an OTLP endpoint (see OpenTelemetry); default off.
	OpenTelemetry *OpenTelemetry
	// RetryConcurrency caps the outbox instances the retry queue's wake-ups run on at once
	// (the SQS mapping's MaximumConcurrency, 2 to 1000), so a burst of retries after an outage
	// cannot take the account's concurrency from the receiver. Default 5.
	RetryConcurrency float64
	// ReceiverReservedConcurrency caps the receiver's concurrent executions (0: no cap), so a
	// flood cannot take the account's concurrency from the outbox and the sweeper. (A new
	// account's unreserved minimum of 100 leaves little to reserve.)
	ReceiverReservedConcurrency float64
	// SecretsKeys are the customer-managed KMS keys the sources file's secrets and SecureString
	// parameters are encrypted under: the receiver may decrypt with them through Secrets Manager
	// and SSM only (kms:ViaService). Secrets under the AWS managed keys need none.
	SecretsKeys []awskms.IKey
	// TableEncryption and TableKey choose the table's encryption, as in awsdynamodb.TableProps:
	// AWS owned (the default), AWS managed, or customer managed (TableKey, or a new key with
	// rotation). Claims and effect records hold payload fields: an email, an address. With a
	// customer-managed key each function may use it for the table.
	TableEncryption awsdynamodb.TableEncryption
	TableKey        awskms.IKey
	// TableLogicalID keeps the table's CloudFormation logical id. The id follows the
	// construct's path, so renaming or moving the construct would replace the table (a new,
	// empty one: its dedup history lost, a redrive run again); set this to the id the table
	// has in the deployed template ("WebhooksTable1A2B3C4D") and the same table stays.
	TableLogicalID string
	// ExistingTable adopts a table the construct does not create: one of another stack (a
	// stateful stack that outlives this one), one defined beside the construct, or one created
	// outside CloudFormation and imported with awsdynamodb.Table_FromTableAttributes (with its
	// TableStreamArn, and EncryptionKey when it is under a customer-managed key). The stream
	// mapping, every grant, the alarms, the dashboard and the outputs are then on it, and no
	// table is created. It must be what oncehook's code needs: key pk (string, partition) and
	// sk (string, sort), a stream of NEW_IMAGE or NEW_AND_OLD_IMAGES, TTL on expires_at, and
	// the pending index (partition key pending_shard, string; sort key pending_since, number;
	// keys projected at least), in the stack's account and Region. The synth refuses a table
	// without a stream ARN and, for a table defined in the app, any of these it does not have;
	// an imported table's settings cannot be read at synth, and the team keeps them
	// (docs/stack.md, "Adopting a table"). Not with TableLogicalID, TableEncryption or
	// TableKey, which configure the table the construct creates.
	ExistingTable awsdynamodb.ITable
	// TableBindings bind the sources file's tables marked "bound": true (which name no table)
	// to tables the app defines or imports, by the name the file lists them under: the
	// receiver is granted what each table's actions need (and the sweeper Scan where it
	// audits), on that table and its customer-managed key, and the functions are handed its
	// name as CloudFormation resolves it (ONCEHOOK_BINDINGS, applied by launch at start). So
	// one sources file serves every account and stage, and the table needs no fixed physical
	// name. A bound table is in the stack's account and Region, has the key the file's entry
	// names (checked at synth for a table defined in the app), and is not ExistingTable.
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
	// SourceThrottles overrides ThrottleRate and ThrottleBurst for a source's own route (each
	// source has one: POST /hooks/<name>), so one provider's flood cannot use up another's
	// allowance. Only with the construct's own API.
	SourceThrottles map[string]Throttle
	// Domain serves the webhook API on a custom domain, so that the URL each provider is
	// configured with survives replacing the API. Only with the construct's own API.
	Domain *Domain
	// AuditPrefixes turns on the leak audit: each sweep reads the next AuditSample items
	// (default 100) of the table and counts records under these partition-key prefixes (the
	// ones only put effects write: ORDER#) that no claim wrote (EffectsWithoutClaim, alarmed).
	// See dedup.Auditor.
	AuditPrefixes []string
	AuditSample   int
	// UnreservedSweeper leaves the sweeper without its reserved concurrency of 1, for an account
	// whose concurrency quota has nothing to reserve (a new account's 10). Its lock item still
	// keeps two runs from overlapping; the reservation keeps a second one from even starting.
	UnreservedSweeper bool
}

// Oncehook is a deployed oncehook: its resources are fields, to grant and extend with ordinary
// CDK calls (Table.GrantReadData(fn), Outbox.AddEnvironment(...)).
type Oncehook struct {
	constructs.Construct
	// Table is the table the construct created, or Props.ExistingTable.
	Table                     awsdynamodb.ITable
	Receiver, Outbox, Sweeper awslambda.Function
	Api                       awsapigatewayv2.HttpApi
	// WebhookUrl is <base>/hooks/{source}, the base the custom domain when there is one;
	// WebhookUrls has it per source, the URL to give each provider.
	WebhookUrl  *string
	WebhookUrls map[string]*string
	// DomainTarget is the regional host name a custom domain's DNS record points at (nil
	// without Props.Domain).
	DomainTarget *string
	// RetryQueue wakes retried intents; FailureQueue takes the stream records and wake-ups that
	// exhausted their retries.
	RetryQueue, FailureQueue awssqs.Queue
	Alarms                   []awscloudwatch.Alarm
	Dashboard                awscloudwatch.Dashboard
	// AlarmTopic is where the alarms send their ALARM and OK (Props.AlarmTopic, or a new one).
	AlarmTopic awssns.ITopic
	// MetricsNamespace is the namespace the functions write their metrics in and the alarms
	// read (Props.MetricsNamespace or its default).
	MetricsNamespace string
	// StreamMapping is the outbox's mapping on the table's stream, SweepSchedule the sweeper's
	// rule, AccessLogs the API's access-log group (nil with Props.HttpApi).
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
	timings, err := outboxTimings(file, cfg.Targets, int(cfg.StreamBatchSize))
	if err != nil {
		return nil, err // an *outbox.ConfigError, which names the outbox's setting
	}
	bound, err := checkBindings(scope, awscdk.Stack_Of(scope), cfg, file)
	if err != nil {
		return nil, err
	}
	if o := cfg.OpenTelemetry; o != nil && o.CollectorLayerArn != "" {
		if err := placed(scope, awscdk.Stack_Of(scope), "Props.OpenTelemetry.CollectorLayerArn", "a function takes a layer of its own Region only: use the layer's ARN for the stack's Region",
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
	if cfg.MetricsNamespace == "" {
		cfg.MetricsNamespace = defaultNamespace(*c.Node().Path())
	}
	o.MetricsNamespace = cfg.MetricsNamespace
	if cfg.LogKey != nil {
		allowLogs(stack, cfg.LogKey)
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
