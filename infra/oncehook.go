// Package infra is oncehook as a CDK (Go) construct: one New(scope, id, props) defines the
// table, the receiver behind an HTTP API, the outbox worker on the table's stream and its
// retry queue, the scheduled sweeper, least-privilege IAM, alarms and a dashboard, and exposes
// each as a field of the result. The same construct deploys to AWS and to a
// LocalStack-compatible emulator; infra/app is oncehook's own app, a thin user of it.
//
//	o := infra.New(stack, "Webhooks", &infra.Props{
//		SourcesFile: "sources.json",
//		Receiver:    infra.Code{GoPackage: "./cmd/receiver", GoModuleDir: ".."},
//	})
//	o.Table.GrantReadData(myReportingFunction)
package infra

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscertificatemanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsroute53"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsroute53targets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
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

// FunctionOptions are one function's settings over the construct-wide ones.
type FunctionOptions struct {
	// MemorySize in MB (128 to 10,240); default Props.MemorySize.
	MemorySize float64
	// Architecture, default Props.X86's (arm64 unless X86). The function's code must be built
	// for it: a prebuilt bootstrap of another architecture fails the synth.
	Architecture awslambda.Architecture
	// ReservedConcurrency caps the function's concurrent executions (0: no cap). Not for the
	// sweeper, which has 1 (Props.UnreservedSweeper removes it).
	ReservedConcurrency float64
}

// Throttle is a steady rate (requests per second) and a burst.
type Throttle struct {
	Rate, Burst float64
}

// Domain is a custom domain for the webhook API.
type Domain struct {
	// Name is the domain name, such as hooks.example.com (required).
	Name string
	// Certificate is an ACM certificate covering Name, in the stack's region (required).
	Certificate awscertificatemanager.ICertificate
	// Zone, when set, gets an alias A record for Name pointing at the API; otherwise point a
	// CNAME at Oncehook.DomainTarget yourself.
	Zone awsroute53.IHostedZone
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

	if cfg.ExistingTable != nil {
		if err := adopt(c, stack, cfg.ExistingTable); err != nil {
			return nil, err
		}
		o.Table = cfg.ExistingTable
	} else {
		o.Table = newTable(c, cfg)
	}

	o.RetryQueue, o.FailureQueue = newQueues(c, cfg, timings)
	if cfg.LogKey != nil {
		allowLogs(stack, cfg.LogKey)
	}

	o.Receiver, o.Outbox, o.Sweeper, err = newFunctions(c, cfg, file, code, timings, o.Table, o.RetryQueue, bound.env(stack))
	if err != nil {
		return nil, err
	}
	telemetry(c, cfg, o.Receiver, o.Outbox, o.Sweeper)
	grantAll(stack, cfg, file, bound, o.Table, o.RetryQueue, o.Receiver, o.Outbox, o.Sweeper)

	api, base, err := webhookAPI(c, cfg, file, o.Receiver, o)
	if err != nil {
		return nil, err
	}
	o.Api = api
	o.WebhookUrl = jsii.String(base + "/hooks/{source}")
	o.WebhookUrls = map[string]*string{}
	for _, name := range file.Names() {
		o.WebhookUrls[name] = jsii.String(base + "/hooks/" + name)
	}

	o.StreamMapping, o.SweepSchedule = triggers(c, cfg, timings, o.Table, o.FailureQueue, o.RetryQueue, o.Outbox, o.Sweeper)

	o.AlarmTopic = alarmTopic(c, stack, cfg)
	subscribe(c, o.AlarmTopic, cfg)
	o.Alarms, o.Dashboard = alarms(c, cfg, file, cfg.MetricsNamespace, o.AlarmTopic, o.Table, api, o.Receiver, o.Outbox, o.Sweeper, o.FailureQueue)
	outputs(c, stack, o)
	suppress(api, o.FailureQueue, o.Outbox, o.Receiver, o.Outbox, o.Sweeper)
	return o, nil
}

// configure reads and validates the sources file and the props, filling in the defaults:
// everything that cannot work is refused here, before a resource is defined.
func configure(props *Props) (cfg Props, file *sources.File, raw []byte, err error) {
	if props == nil || props.SourcesFile == "" {
		return cfg, nil, nil, errors.New("Props.SourcesFile is required")
	}
	raw, err = os.ReadFile(props.SourcesFile)
	if err != nil {
		return cfg, nil, nil, fmt.Errorf("Props.SourcesFile: %w", err)
	}
	file, err = sources.Parse(raw)
	if err != nil {
		return cfg, nil, nil, fmt.Errorf("%s: %w", props.SourcesFile, err)
	}
	cfg = *props
	if cfg.DuplicateSpike == 0 {
		cfg.DuplicateSpike = 500
	}
	if cfg.PendingShards == 0 {
		cfg.PendingShards = dedup.PendingShards
	}
	if cfg.PendingShards < 1 || cfg.PendingShards > dedup.MaxPendingShards {
		return cfg, nil, nil, fmt.Errorf("Props.PendingShards %d: must be between 1 and %d", cfg.PendingShards, dedup.MaxPendingShards)
	}
	if cfg.MemorySize == 0 {
		cfg.MemorySize = 256
	}
	if cfg.ThrottleRate == 0 {
		cfg.ThrottleRate = 1000
	}
	if cfg.ThrottleBurst == 0 {
		cfg.ThrottleBurst = 2000
	}
	if cfg.GoModuleDir == "" {
		cfg.GoModuleDir = "."
	}
	if id := cfg.TableLogicalID; id != "" && !logicalID(id) {
		return cfg, nil, nil, fmt.Errorf("Props.TableLogicalID %q: a CloudFormation logical id is 1-255 letters and digits", id)
	}
	if cfg.ExistingTable != nil {
		switch {
		case cfg.TableLogicalID != "":
			return cfg, nil, nil, errors.New("Props.TableLogicalID: keeps the id of the table the construct creates, and with Props.ExistingTable it creates none")
		case cfg.TableEncryption != "" || cfg.TableKey != nil:
			return cfg, nil, nil, errors.New("Props.TableEncryption and Props.TableKey: configure the table the construct creates, and with Props.ExistingTable it creates none (an imported table's key is given with it: awsdynamodb.TableAttributes.EncryptionKey)")
		case cfg.ExistingTable.TableStreamArn() == nil:
			return cfg, nil, nil, errors.New("Props.ExistingTable: has no stream, and the outbox runs on the table's stream: give the table a stream of NEW_IMAGE or NEW_AND_OLD_IMAGES, and import it with awsdynamodb.Table_FromTableAttributes and its TableStreamArn")
		}
	}
	if cfg.TableKey != nil && cfg.TableEncryption != awsdynamodb.TableEncryption_CUSTOMER_MANAGED {
		return cfg, nil, nil, errors.New("Props.TableKey: only with TableEncryption CUSTOMER_MANAGED")
	}
	if len(cfg.AuditPrefixes) > 0 || cfg.AuditSample != 0 {
		a := dedup.Auditor{Prefixes: cfg.AuditPrefixes, Sample: cfg.AuditSample}
		var inv *dedup.InvalidError
		if err := a.Validate(); errors.As(err, &inv) {
			return cfg, nil, nil, fmt.Errorf("Props.Audit%s: %s", inv.Field, inv.Reason) // Props.AuditPrefixes[1], Props.AuditSample
		}
	}
	if cfg.MetricsNamespace != "" && !validNamespace(cfg.MetricsNamespace) {
		return cfg, nil, nil, fmt.Errorf("Props.MetricsNamespace %q: 1-255 characters, not starting with AWS/, of letters, digits and . - _ / # :", cfg.MetricsNamespace)
	}
	if cfg.StreamParallelization == 0 {
		cfg.StreamParallelization = 2
	}
	if cfg.StreamParallelization < 1 || cfg.StreamParallelization > 10 || cfg.StreamParallelization != float64(int(cfg.StreamParallelization)) {
		return cfg, nil, nil, fmt.Errorf("Props.StreamParallelization %g: must be a whole number between 1 and 10", cfg.StreamParallelization)
	}
	if cfg.StreamBatchSize == 0 {
		cfg.StreamBatchSize = outboxBatchSize
	}
	if cfg.StreamBatchSize < 1 || cfg.StreamBatchSize > 10000 || cfg.StreamBatchSize != float64(int(cfg.StreamBatchSize)) {
		return cfg, nil, nil, fmt.Errorf("Props.StreamBatchSize %g: must be a whole number between 1 and 10000 (Lambda's batch for a DynamoDB stream)", cfg.StreamBatchSize)
	}
	if cfg.LogRetention == "" {
		cfg.LogRetention = awslogs.RetentionDays_ONE_MONTH
	}
	if cfg.LogRemoval == "" {
		cfg.LogRemoval = awscdk.RemovalPolicy_DESTROY
	}
	if err := checkFunctions(&cfg); err != nil {
		return cfg, nil, nil, err
	}
	if cfg.RetryConcurrency == 0 {
		cfg.RetryConcurrency = 5
	}
	if cfg.RetryConcurrency < 2 || cfg.RetryConcurrency > 1000 {
		return cfg, nil, nil, fmt.Errorf("Props.RetryConcurrency %g: must be between 2 and 1000 (Lambda's MaximumConcurrency for SQS)", cfg.RetryConcurrency)
	}
	for i, e := range cfg.AlarmEmails {
		if at := strings.LastIndexByte(e, '@'); at < 1 || at == len(e)-1 || strings.ContainsAny(e, " \t\n,;") {
			return cfg, nil, nil, fmt.Errorf("Props.AlarmEmails[%d] %q: not an email address", i, e)
		}
	}
	for i, e := range cfg.AlarmHttpsEndpoints {
		if u, err := url.Parse(e); err != nil || u.Scheme != "https" || u.Host == "" {
			return cfg, nil, nil, fmt.Errorf("Props.AlarmHttpsEndpoints[%d] %q: must be an https:// URL", i, e)
		}
	}
	if !cfg.Local {
		if err := deployable(file, cfg); err != nil {
			return cfg, nil, nil, err
		}
	}
	for _, t := range cfg.Targets {
		if file.Targets[t] != nil {
			return cfg, nil, nil, fmt.Errorf("Props.Targets: %q is also an HTTP target of the sources file", t)
		}
	}
	for k := range cfg.Environment {
		if reservedEnv[k] {
			return cfg, nil, nil, fmt.Errorf("Props.Environment: %s is set by the construct", k)
		}
	}
	if err := checkTelemetry(&cfg); err != nil {
		return cfg, nil, nil, err
	}
	return cfg, file, raw, nil
}

// stageCode builds or checks each function's code, with the sources file beside it.
func stageCode(cfg Props, raw []byte) (map[string]staged, error) {
	staging, err := os.MkdirTemp("", "oncehook-code-")
	if err != nil {
		return nil, err
	}
	code := map[string]staged{}
	for _, f := range []struct {
		name string
		c    Code
		def  string
		opts FunctionOptions
	}{{"receiver", cfg.Receiver, ReceiverPackage, cfg.ReceiverFunction}, {"outbox", cfg.Outbox, OutboxPackage, cfg.OutboxFunction}, {"sweeper", cfg.Sweeper, SweeperPackage, cfg.SweeperFunction}} {
		arm64 := *f.opts.Architecture.Name() == *awslambda.Architecture_ARM_64().Name()
		c := f.c
		if c.GoPackage == "" && c.Dir == "" && c.Lambda == nil {
			c = Code{GoPackage: f.def}
		}
		if c.GoPackage != "" && c.GoModuleDir == "" {
			c.GoModuleDir = cfg.GoModuleDir
		}
		if code[f.name], err = c.stage(f.name, arm64, compactJSON(raw), staging); err != nil {
			return nil, err
		}
	}
	return code, nil
}

// newTable is the design's table: claims, effect records and the pending index.
func newTable(c constructs.Construct, cfg Props) awsdynamodb.Table {
	removal := awscdk.RemovalPolicy_RETAIN
	if cfg.Local {
		removal = awscdk.RemovalPolicy_DESTROY
	}
	table := awsdynamodb.NewTable(c, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(dedup.PartitionKey), Type: awsdynamodb.AttributeType_STRING},
		SortKey:             &awsdynamodb.Attribute{Name: jsii.String(dedup.SortKey), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(dedup.TTLAttribute),
		Stream:              awsdynamodb.StreamViewType_NEW_IMAGE,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(!cfg.Local),
		RemovalPolicy:      removal,
		Encryption:         cfg.TableEncryption,
		EncryptionKey:      cfg.TableKey,
	})
	if cfg.TableLogicalID != "" {
		table.Node().DefaultChild().(awsdynamodb.CfnTable).OverrideLogicalId(jsii.String(cfg.TableLogicalID))
	}
	table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(dedup.PendingIndex),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String(dedup.IndexPartitionKey), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String(dedup.IndexSortKey), Type: awsdynamodb.AttributeType_NUMBER},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})
	return table
}

// newQueues are the retry queue that wakes retried intents and the failure queue that takes
// what exhausted its retries.
func newQueues(c constructs.Construct, cfg Props, timings outbox.Timings) (retries, dlq awssqs.Queue) {
	// Wake-ups for retried intents, delayed until they are due (outbox.SQSScheduler). Their
	// visibility timeout is six times the function's, as Lambda's SQS mapping asks.
	queueEncryption := awssqs.QueueEncryption_SQS_MANAGED
	if cfg.QueueKey != nil {
		queueEncryption = awssqs.QueueEncryption_KMS
	}
	dlq = awssqs.NewQueue(c, jsii.String("OutboxFailures"), &awssqs.QueueProps{
		RetentionPeriod:     awscdk.Duration_Days(jsii.Number(14)),
		EnforceSSL:          jsii.Bool(true),
		Encryption:          queueEncryption,
		EncryptionMasterKey: cfg.QueueKey,
	})
	retries = awssqs.NewQueue(c, jsii.String("OutboxRetries"), &awssqs.QueueProps{
		VisibilityTimeout:   awscdk.Duration_Seconds(jsii.Number(min(6*timings.FunctionTimeout.Seconds(), 43200))),
		RetentionPeriod:     awscdk.Duration_Days(jsii.Number(4)),
		EnforceSSL:          jsii.Bool(true),
		Encryption:          queueEncryption,
		EncryptionMasterKey: cfg.QueueKey,
		DeadLetterQueue:     &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(5)},
	})
	return retries, dlq
}

// allowLogs lets CloudWatch Logs encrypt with key, for log groups of this account only.
func allowLogs(stack awscdk.Stack, key awskms.IKey) {
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String(fmt.Sprintf("logs.%s.amazonaws.com", *stack.Region())), nil)},
		Actions:    jsii.Strings("kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"ArnLike": map[string]any{
			"kms:EncryptionContext:aws:logs:arn": fmt.Sprintf("arn:%s:logs:%s:%s:log-group:*", *stack.Partition(), *stack.Region(), *stack.Account()),
		}},
	}), jsii.Bool(true))
}

// newFunctions are the receiver, the outbox worker and the sweeper, each with its own role and
// log group, and the environment that points them at the table and the retry queue.
func newFunctions(c constructs.Construct, cfg Props, file *sources.File, code map[string]staged, timings outbox.Timings,
	table awsdynamodb.ITable, retries awssqs.Queue, bindings string) (receiver, worker, sweeper awslambda.Function, err error) {
	env := map[string]string{"TABLE_NAME": *table.TableName(), "LOG_LEVEL": "info", "PENDING_SHARDS": fmt.Sprint(cfg.PendingShards),
		"METRICS_NAMESPACE": cfg.MetricsNamespace}
	if cfg.OpenTelemetry != nil {
		for k, v := range telemetryEnv(cfg.OpenTelemetry) {
			env[k] = v
		}
	}
	if bindings != "" {
		env["ONCEHOOK_BINDINGS"] = bindings // every function binds the whole file at start
	}
	if len(cfg.Targets) > 0 {
		env["ONCEHOOK_TARGETS"] = strings.Join(cfg.Targets, ",")
	}
	for k, v := range cfg.Environment {
		env[k] = v
	}
	outboxEnv := map[string]string{"RETRY_QUEUE_URL": *retries.QueueUrl(), "LEASE_SECONDS": fmt.Sprint(int(timings.Lease.Seconds()))}
	for k, v := range env {
		outboxEnv[k] = v
	}
	if receiver, err = function(c, "Receiver", cfg, cfg.ReceiverFunction, code["receiver"], env, receiverTimeout(file).Seconds()); err != nil {
		return nil, nil, nil, err
	}
	if worker, err = function(c, "Outbox", cfg, cfg.OutboxFunction, code["outbox"], outboxEnv, timings.FunctionTimeout.Seconds()); err != nil {
		return nil, nil, nil, err
	}
	sweeperEnv := map[string]string{}
	for k, v := range outboxEnv {
		sweeperEnv[k] = v
	}
	if len(cfg.AuditPrefixes) > 0 {
		sweeperEnv["AUDIT_PREFIXES"] = strings.Join(cfg.AuditPrefixes, ",")
		if cfg.AuditSample > 0 {
			sweeperEnv["AUDIT_SAMPLE"] = fmt.Sprint(cfg.AuditSample)
		}
	}
	if sweeper, err = function(c, "Sweeper", cfg, cfg.SweeperFunction, code["sweeper"], sweeperEnv, timings.SweeperTimeout.Seconds()); err != nil {
		return nil, nil, nil, err
	}
	if !cfg.UnreservedSweeper {
		sweeper.Node().DefaultChild().(awslambda.CfnFunction).SetReservedConcurrentExecutions(jsii.Number(1))
	}
	return receiver, worker, sweeper, nil
}

// maxEnvironment is Lambda's limit on a function's environment: its variables' names and
// values, 4 KB in all.
const maxEnvironment = 4 << 10

// deployValue is what the size check counts for a value known only at deploy (a table's name,
// a queue's URL, bound ARNs): a warning, not a refusal, when the environment could pass the
// limit with such values this long.
const deployValue = 128

// checkEnvironment refuses a function's environment that is over Lambda's 4 KB with its
// literal values alone (CreateFunction would refuse it), and warns when values known only at
// deploy could take it over. An inline sources file (Code.Lambda) and OpenTelemetry's
// settings (a vendor's header) are what fill it.
func checkEnvironment(fn awslambda.Function, name string, vars map[string]*string) error {
	literal, tokens := 0, 0
	for k, v := range vars {
		literal += len(k)
		if unresolved(*v) {
			tokens++
			continue
		}
		literal += len(*v)
	}
	if literal > maxEnvironment {
		return fmt.Errorf("the %s function's environment: %d bytes with its literal values alone (the inline sources file, Props.Environment, Props.OpenTelemetry's settings), over Lambda's 4 KB: a smaller OpenTelemetry header or resource attributes, or Code.Dir or Code.GoPackage (which carry the sources file in the code, not the environment)",
			strings.ToLower(name), literal)
	}
	if literal+tokens*deployValue > maxEnvironment {
		awscdk.Annotations_Of(fn).AddWarningV2(jsii.String("oncehook:environment-size"), jsii.String(fmt.Sprintf(
			"the %s function's environment: %d bytes before its %d values known only at deploy (the table's name, the retry queue's URL, bound ARNs): Lambda refuses more than 4 KB in all",
			strings.ToLower(name), literal, tokens)), nil)
	}
	return nil
}

// grantAll gives each function's role exactly what its code does, on exactly its resources.
func grantAll(stack awscdk.Stack, cfg Props, file *sources.File, bound *bindings, table awsdynamodb.ITable, retries awssqs.Queue, receiver, worker, sweeper awslambda.Function) {
	// SendMessage only (GrantSendMessages adds GetQueueAttributes and GetQueueUrl, which the
	// scheduler never calls: it is given the queue's URL).
	allow(worker, []string{"sqs:SendMessage"}, retries.QueueArn())
	allow(sweeper, []string{"sqs:SendMessage"}, retries.QueueArn())
	if cfg.QueueKey != nil {
		// Sending to a queue under a customer-managed key encrypts with it, through SQS only.
		for _, fn := range []awslambda.Function{worker, sweeper} {
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:    jsii.Strings("kms:GenerateDataKey", "kms:Decrypt"),
				Resources:  jsii.Strings(*cfg.QueueKey.KeyArn()),
				Conditions: &map[string]any{"StringEquals": map[string]any{"kms:ViaService": fmt.Sprintf("sqs.%s.amazonaws.com", *stack.Region())}},
			}))
		}
	}

	// Least privilege: each function gets exactly the actions its code issues (recorded from
	// its requests in launch/testdata/calls.json, which the IAM test holds these to). The
	// receiver's transaction puts the claim, its body guard and put effects (PutItem) and
	// applies update effects (UpdateItem); it reads a claim on a duplicate (GetItem) and, on a
	// redelivered batch, the claims still to write (BatchGetItem). The
	// outbox and the sweeper lease and record (UpdateItem) and read a woken or swept claim.
	// Effects on the table itself may be of every kind the API accepts (ownTableActions).
	allow(receiver, append(ownTableActions(), "dynamodb:BatchGetItem"), table.TableArn())
	allow(worker, []string{"dynamodb:UpdateItem", "dynamodb:GetItem"}, table.TableArn())
	allow(sweeper, []string{"dynamodb:UpdateItem", "dynamodb:GetItem"}, table.TableArn())
	allow(sweeper, []string{"dynamodb:Query"}, jsii.String(*table.TableArn()+"/index/"+dedup.PendingIndex))
	if len(cfg.AuditPrefixes) > 0 {
		allow(sweeper, []string{"dynamodb:Scan"}, table.TableArn()) // the leak audit's sample
	}
	grantSecrets(stack, file, receiver, cfg.SecretsKeys)
	grantTables(stack, file, bound, receiver, sweeper)
	grantTargets(stack, file, bound, worker, sweeper)
	if key := table.EncryptionKey(); key != nil {
		// Through DynamoDB only (the table's items and its stream), as the secrets' keys are
		// through Secrets Manager and SSM: the key itself decrypts nothing else for them.
		for _, fn := range []awslambda.Function{receiver, worker, sweeper} {
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:    jsii.Strings("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*"),
				Resources:  jsii.Strings(*key.KeyArn()),
				Conditions: &map[string]any{"StringEquals": map[string]any{"kms:ViaService": fmt.Sprintf("dynamodb.%s.amazonaws.com", *stack.Region())}},
			}))
		}
	}
}

// triggers are what runs the outbox (the table's stream, the retry queue) and the sweeper (a
// schedule).
func triggers(c constructs.Construct, cfg Props, timings outbox.Timings, table awsdynamodb.ITable, dlq, retries awssqs.Queue,
	worker, sweeper awslambda.Function) (awslambdaeventsources.DynamoEventSource, awsevents.Rule) {
	stream := awslambdaeventsources.NewDynamoEventSource(table, &awslambdaeventsources.DynamoEventSourceProps{
		StartingPosition:        awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:               jsii.Number(float64(timings.BatchSize)),
		MaxBatchingWindow:       awscdk.Duration_Seconds(jsii.Number(1)),
		BisectBatchOnError:      jsii.Bool(true),
		ReportBatchItemFailures: jsii.Bool(true),
		RetryAttempts:           jsii.Number(5),
		MaxRecordAge:            awscdk.Duration_Hours(jsii.Number(6)),
		ParallelizationFactor:   jsii.Number(cfg.StreamParallelization),
		OnFailure:               awslambdaeventsources.NewSqsDlq(dlq),
		// Only records that hand the worker due work (outbox.StreamFilterPatterns): a new
		// claim with intents, a re-admitted or re-driven one. The worker's own writes, TTL
		// REMOVEs and effect records never invoke the function.
		Filters: streamFilters(),
	})
	worker.AddEventSource(stream)
	worker.AddEventSource(awslambdaeventsources.NewSqsEventSource(retries, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(cfg.RetryConcurrency),
	}))
	// The sweeper's runs are asynchronous: Lambda's defaults (2 retries, kept 6 hours) would
	// queue throttled runs behind its reserved concurrency of 1. A run that could not start is
	// dropped; the next comes in 2 minutes.
	sweeper.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(0),
		MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(60)),
	})

	schedule := awsevents.NewRule(c, jsii.String("SweepSchedule"), &awsevents.RuleProps{
		Description: jsii.String("re-drive outbox intents the stream path left behind"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(2))),
		// A run that could not start is not worth starting late: the next one comes soon.
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(sweeper, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(0),
			MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(60)),
		})},
	})
	return stream, schedule
}

// alarmTopic is Props.AlarmTopic, or a new topic this account's alarms may publish to.
func alarmTopic(c constructs.Construct, stack awscdk.Stack, cfg Props) awssns.ITopic {
	topic := cfg.AlarmTopic
	if topic == nil {
		// Not encrypted: CloudWatch cannot publish to a topic under the AWS managed key, and an
		// alarm notification carries names and states, no secrets (suppress.go).
		t := awssns.NewTopic(c, jsii.String("Alarms"), &awssns.TopicProps{DisplayName: jsii.String("oncehook alarms"), EnforceSSL: jsii.Bool(true)})
		// A topic policy replaces SNS's default one, whose Allow is what lets CloudWatch
		// publish: without this statement (EnforceSSL's policy has only a Deny) alarms fire
		// and no message is sent. Only this account's alarms.
		t.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("CloudWatchAlarmsPublish"),
			Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
			Actions:    jsii.Strings("sns:Publish"),
			Resources:  jsii.Strings(*t.TopicArn()),
			Conditions: &map[string]any{
				"ArnLike":      map[string]any{"aws:SourceArn": fmt.Sprintf("arn:%s:cloudwatch:%s:%s:alarm:*", *stack.Partition(), *stack.Region(), *stack.Account())},
				"StringEquals": map[string]any{"aws:SourceAccount": *stack.Account()},
			},
		}))
		suppressTopic(t)
		topic = t
	}
	return topic
}

// accessLogFormat is one JSON line per request: who sent it, to which route, what API Gateway
// and the receiver answered, how long each took, and why an integration failed.
const accessLogFormat = `{"requestId":"$context.requestId","requestTime":"$context.requestTime","ip":"$context.identity.sourceIp",` +
	`"userAgent":"$context.identity.userAgent","method":"$context.httpMethod","path":"$context.path","routeKey":"$context.routeKey",` +
	`"protocol":"$context.protocol","status":"$context.status","responseLength":"$context.responseLength","latency":"$context.responseLatency",` +
	`"integrationStatus":"$context.integrationStatus","integrationLatency":"$context.integrationLatency",` +
	`"error":"$context.error.message","integrationError":"$context.integrationErrorMessage"}`

// webhookAPI adds one route per source, POST /hooks/<name>, to the API (a request for any other
// source is answered 404 by API Gateway, without starting the receiver) and returns it with
// the base URL the providers are given.
func webhookAPI(c constructs.Construct, cfg Props, file *sources.File, receiver awslambda.Function, o *Oncehook) (awsapigatewayv2.HttpApi, string, error) {
	for _, name := range sortedKeys(cfg.SourceThrottles) {
		th := cfg.SourceThrottles[name]
		if file.Sources[name] == nil {
			return nil, "", fmt.Errorf("Props.SourceThrottles: %q is not a source of the sources file", name)
		}
		if th.Rate <= 0 || th.Burst <= 0 {
			return nil, "", fmt.Errorf("Props.SourceThrottles[%q]: Rate and Burst must both be positive", name)
		}
	}
	if cfg.Domain != nil && (cfg.Domain.Name == "" || cfg.Domain.Certificate == nil) {
		return nil, "", errors.New("Props.Domain: Name and Certificate are required")
	}
	api := cfg.HttpApi
	if api != nil {
		if cfg.Domain != nil || len(cfg.SourceThrottles) > 0 {
			return nil, "", errors.New("Props.Domain and Props.SourceThrottles configure the construct's own API: with Props.HttpApi, map domains and set route throttling on that API")
		}
	} else {
		var mapping *awsapigatewayv2.DomainMappingOptions
		if d := cfg.Domain; d != nil {
			dn := awsapigatewayv2.NewDomainName(c, jsii.String("Domain"), &awsapigatewayv2.DomainNameProps{
				DomainName: jsii.String(d.Name), Certificate: d.Certificate, SecurityPolicy: awsapigatewayv2.SecurityPolicy_TLS_1_2,
			})
			mapping = &awsapigatewayv2.DomainMappingOptions{DomainName: dn}
			o.DomainTarget = dn.RegionalDomainName()
			if d.Zone != nil {
				awsroute53.NewARecord(c, jsii.String("DomainRecord"), &awsroute53.ARecordProps{
					Zone: d.Zone, RecordName: jsii.String(d.Name),
					Target: awsroute53.RecordTarget_FromAlias(awsroute53targets.NewApiGatewayv2DomainProperties(dn.RegionalDomainName(), dn.RegionalHostedZoneId())),
				})
			}
		}
		api = awsapigatewayv2.NewHttpApi(c, jsii.String("Api"), &awsapigatewayv2.HttpApiProps{
			Description:          jsii.String("oncehook webhook receiver"),
			DefaultDomainMapping: mapping,
		})
		accessLogs := awslogs.NewLogGroup(c, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
			Retention:     cfg.LogRetention,
			RemovalPolicy: cfg.LogRemoval,
			EncryptionKey: cfg.LogKey,
		})
		o.AccessLogs = accessLogs
		stage := api.DefaultStage().Node().DefaultChild().(awsapigatewayv2.CfnStage)
		stage.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
			DestinationArn: accessLogs.LogGroupArn(),
			Format:         jsii.String(accessLogFormat),
		})
		stage.SetDefaultRouteSettings(&awsapigatewayv2.CfnStage_RouteSettingsProperty{
			ThrottlingRateLimit:  jsii.Number(cfg.ThrottleRate),
			ThrottlingBurstLimit: jsii.Number(cfg.ThrottleBurst),
		})
		if len(cfg.SourceThrottles) > 0 {
			settings := map[string]any{}
			for name, th := range cfg.SourceThrottles {
				// CloudFormation's own keys: RouteSettings is a JSON map, which jsii passes as is.
				settings["POST /hooks/"+name] = map[string]any{"ThrottlingRateLimit": th.Rate, "ThrottlingBurstLimit": th.Burst}
			}
			stage.SetRouteSettings(settings)
		}
	}
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("ReceiverIntegration"), receiver, nil)
	for _, name := range file.Names() {
		methods := []awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_POST}
		if file.Sources[name].Scheme == "intercom" {
			// Intercom checks a new endpoint with a HEAD before it sends anything.
			methods = append(methods, awsapigatewayv2.HttpMethod_HEAD)
		}
		api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String("/hooks/" + name),
			Methods:     &methods,
			Integration: integration,
		})
	}
	base := *api.ApiEndpoint()
	if cfg.Domain != nil {
		base = "https://" + cfg.Domain.Name
	}
	return api, base, nil
}

// deployable refuses, for a stack on AWS, a sources file that only works on a developer's
// machine: an env secret (the stack sets no such variable) or a target on a loopback or private
// address (unreachable from Lambda, or an SSRF hole).
func deployable(f *sources.File, cfg Props) error {
	for _, name := range f.Names() {
		for i, ref := range f.Sources[name].Secrets {
			if ref.Env != "" && !cfg.AllowEnvSecrets {
				return fmt.Errorf("sources.%s.secrets[%d]: %q is read from the environment, which this stack does not set: use secretsmanager or ssm (or Props.AllowEnvSecrets and Props.Environment)", name, i, ref.Env)
			}
		}
	}
	for _, name := range sortedKeys(f.Targets) {
		if f.Targets[name].Type != sources.TargetHTTP {
			continue // an AWS resource, reached through its service's API
		}
		u, err := url.Parse(f.Targets[name].URL)
		if err != nil {
			return fmt.Errorf("targets.%s.url: %w", name, err)
		}
		if private(u.Hostname()) && !cfg.AllowPrivateTargets {
			return fmt.Errorf("targets.%s.url: %s is a loopback or private address, not reachable from Lambda on AWS (Props.AllowPrivateTargets if it is, in a VPC)", name, u.Host)
		}
	}
	return nil
}

func private(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified())
}

// receiverTimeout is the tightest provider's delivery timeout: past it the answer is worth
// nothing (the provider has counted the delivery failed), and the handler itself answers 503
// a second before it.
func receiverTimeout(f *sources.File) time.Duration {
	t := time.Duration(0)
	for _, name := range f.Names() {
		if d := time.Duration(f.Sources[name].DeliveryTimeout); t == 0 || d < t {
			t = d
		}
	}
	return t
}

// defaultNamespace is DefaultNamespace and the construct's path, each character CloudWatch
// does not take in a namespace replaced with "_".
func defaultNamespace(path string) string {
	ns := []rune(DefaultNamespace + "/" + path)
	for i, r := range ns {
		if !namespaceRune(r) {
			ns[i] = '_'
		}
	}
	if len(ns) > 255 {
		ns = ns[:255]
	}
	return string(ns)
}

func namespaceRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-_/#:", r)
}

// ownTableActions are the DynamoDB actions the receiver's transaction needs on oncehook's own
// table: the claim and its body guard (PutItem), a duplicate's claim (GetItem), and an effect of
// each kind the API accepts (dedup.PutEffect, UpdateEffect, DeleteEffect, CheckEffect:
// sources.TableActions), which a planner may write there as well as in its own tables.
func ownTableActions() []string {
	actions := []string{"dynamodb:GetItem", "dynamodb:PutItem"}
	for _, a := range sources.TableActions {
		actions = append(actions, a)
	}
	slices.Sort(actions)
	return slices.Compact(actions)
}

// subscribe subscribes Props.AlarmEmails and Props.AlarmHttpsEndpoints to the alarm topic, and
// warns at synth when nothing is: the alarms would fire into a topic nobody reads.
func subscribe(c constructs.Construct, topic awssns.ITopic, cfg Props) {
	for i, e := range cfg.AlarmEmails {
		awssns.NewSubscription(c, jsii.String(fmt.Sprintf("AlarmEmail%d", i)), &awssns.SubscriptionProps{
			Topic: topic, Protocol: awssns.SubscriptionProtocol_EMAIL, Endpoint: jsii.String(e),
		})
	}
	for i, e := range cfg.AlarmHttpsEndpoints {
		awssns.NewSubscription(c, jsii.String(fmt.Sprintf("AlarmHttps%d", i)), &awssns.SubscriptionProps{
			Topic: topic, Protocol: awssns.SubscriptionProtocol_HTTPS, Endpoint: jsii.String(e),
		})
	}
	if cfg.AlarmTopic == nil && len(cfg.AlarmEmails) == 0 && len(cfg.AlarmHttpsEndpoints) == 0 {
		awscdk.Annotations_Of(c).AddWarningV2(jsii.String("oncehook:unsubscribed"),
			jsii.String("nothing is subscribed to the alarm topic: set Props.AlarmEmails, Props.AlarmHttpsEndpoints or Props.AlarmTopic, or subscribe Oncehook.AlarmTopic, or the alarms reach nobody"), nil)
	}
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

func logicalID(id string) bool {
	if id == "" || len(id) > 255 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func validNamespace(ns string) bool {
	if ns == "" || len(ns) > 255 || strings.HasPrefix(ns, "AWS/") {
		return false
	}
	for _, r := range ns {
		if !namespaceRune(r) {
			return false
		}
	}
	return true
}

// reservedEnv are the variables the construct sets itself.
var reservedEnv = map[string]bool{"AUDIT_PREFIXES": true, "AUDIT_SAMPLE": true, "TABLE_NAME": true, "METRICS_NAMESPACE": true, "PENDING_SHARDS": true, "ONCEHOOK_TARGETS": true, "RETRY_QUEUE_URL": true,
	"LEASE_SECONDS": true, "ONCEHOOK_SOURCES": true, "ONCEHOOK_SOURCES_FILE": true, "ONCEHOOK_SOURCES_SHA256": true, "ONCEHOOK_FAULTS": true, "ONCEHOOK_BINDINGS": true}

func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

// function defines one Lambda, with its own log group and role, tagged with its role in the
// deployment (oncehook:function) so tools find it without its name.
func function(scope constructs.Construct, id string, cfg Props, opts FunctionOptions, code staged, env map[string]string, timeoutSeconds float64) (awslambda.Function, error) {
	logs := awslogs.NewLogGroup(scope, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		Retention:     cfg.LogRetention,
		RemovalPolicy: cfg.LogRemoval,
		EncryptionKey: cfg.LogKey,
	})
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
	vars := map[string]*string{}
	for k, v := range env {
		vars[k] = jsii.String(v)
	}
	for k, v := range code.env {
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
		Tracing:      cfg.Tracing,
	})
	if opts.ReservedConcurrency > 0 {
		fn.Node().DefaultChild().(awslambda.CfnFunction).SetReservedConcurrentExecutions(jsii.Number(opts.ReservedConcurrency))
	}
	awscdk.Tags_Of(fn).Add(jsii.String(FunctionTag), jsii.String(name), nil)
	return fn, checkEnvironment(fn, name, vars)
}

// FunctionTag tags each function with its role in the deployment: receiver, outbox, sweeper.
const FunctionTag = "oncehook:function"

func allow(fn awslambda.Function, actions []string, resources ...*string) {
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	}))
}

// targetActions are the calls each AWS target type's executor makes (outbox/targets).
var targetActions = map[string][]string{
	sources.TargetSQS:         {"sqs:SendMessage"},
	sources.TargetSNS:         {"sns:Publish"},
	sources.TargetEventBridge: {"events:PutEvents"},
	// DescribeStateMachine: the executor reads the machine's type (standard or express) once,
	// and acts on it; without it every start would fail as access denied and park.
	sources.TargetStepFunctions: {"states:StartExecution", "states:DescribeStateMachine"},
	sources.TargetLambda:        {"lambda:InvokeFunction"},
}

// grantTargets lets the outbox and the sweeper (which runs what the outbox left behind) call
// each AWS target of the sources file, and nothing else of its service: the resource its ARN
// names, or the one Props binds it to (with the queue's or topic's customer-managed key, which
// sending encrypts with, through that service only).
func grantTargets(stack awscdk.Stack, f *sources.File, bound *bindings, fns ...awslambda.Function) {
	for _, name := range sortedKeys(f.Targets) {
		t := f.Targets[name]
		actions, ok := targetActions[t.Type]
		if !ok {
			continue
		}
		arn := jsii.String(t.ARN)
		if b := bound.targets[name]; t.Bound && b != nil {
			arn = b.arn
			if b.key != nil {
				service := map[string]string{sources.TargetSQS: "sqs", sources.TargetSNS: "sns"}[t.Type]
				for _, fn := range fns {
					fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
						Actions:    jsii.Strings("kms:GenerateDataKey", "kms:Decrypt"),
						Resources:  jsii.Strings(*b.key.KeyArn()),
						Conditions: &map[string]any{"StringEquals": map[string]any{"kms:ViaService": fmt.Sprintf("%s.%s.amazonaws.com", service, *stack.Region())}},
					}))
				}
			}
		} else if t.Type == sources.TargetEventBridge && !strings.HasPrefix(t.ARN, "arn:") {
			arn = jsii.String(fmt.Sprintf("arn:%s:events:%s:%s:event-bus/%s", *stack.Partition(), *stack.Region(), *stack.Account(), t.ARN))
		}
		if t.Type == sources.TargetStepFunctions {
			// A retry that meets ExecutionAlreadyExists reads the execution to compare inputs.
			for _, fn := range fns {
				allow(fn, []string{"states:DescribeExecution"}, executionArn(stack, arn))
			}
		}
		for _, fn := range fns {
			allow(fn, actions, arn)
		}
	}
}

// grantTables lets the receiver do to each of the application's own tables (the sources
// file's tables: named, or bound by Props.TableBindings) exactly what its effects do there, in
// the claim's transaction, and the sweeper sample the audited ones; a bound table's
// customer-managed key is usable for that through DynamoDB only.
func grantTables(stack awscdk.Stack, f *sources.File, bound *bindings, fn, sweeper awslambda.Function) {
	for _, name := range sortedKeys(f.Tables) {
		t := f.Tables[name]
		var actions []string
		for _, a := range t.Actions {
			actions = append(actions, sources.TableActions[a])
		}
		slices.Sort(actions)
		var arn *string
		if b := bound.tables[name]; t.Bound && b != nil {
			arn = b.TableArn()
			if key := b.EncryptionKey(); key != nil {
				via := map[string]any{"StringEquals": map[string]any{"kms:ViaService": fmt.Sprintf("dynamodb.%s.amazonaws.com", *stack.Region())}}
				fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
					Actions: jsii.Strings("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*"), Resources: jsii.Strings(*key.KeyArn()), Conditions: &via,
				}))
				if t.Audit {
					sweeper.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
						Actions: jsii.Strings("kms:Decrypt"), Resources: jsii.Strings(*key.KeyArn()), Conditions: &via,
					}))
				}
			}
		} else if arn = jsii.String(t.PhysicalName(name)); !strings.HasPrefix(*arn, "arn:") {
			arn = jsii.String(fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s", *stack.Partition(), *stack.Region(), *stack.Account(), *arn))
		}
		allow(fn, slices.Compact(actions), arn)
		if t.Audit {
			allow(sweeper, []string{"dynamodb:Scan"}, arn) // the leak audit's sample
		}
	}
}

// grantSecrets lets the receiver read exactly the secrets the sources file names, by reference:
// the stack never sees a secret's value. (Secrets referenced by "env" are for local runs; the
// stack does not set them.) Customer-managed keys the secrets are under may decrypt for it
// only through Secrets Manager and SSM.
func grantSecrets(stack awscdk.Stack, f *sources.File, fn awslambda.Function, keys []awskms.IKey) {
	var sm, ps []string
	for _, name := range f.Names() {
		for _, ref := range f.Sources[name].Secrets {
			switch {
			case ref.SecretsManager != "":
				sm = append(sm, secretArns(stack, ref.SecretsManager)...)
			case ref.SSM != "":
				ps = append(ps, parameterArn(stack, ref.SSM))
			}
		}
	}
	sort.Strings(sm)
	sort.Strings(ps)
	if len(sm) > 0 {
		allow(fn, []string{"secretsmanager:GetSecretValue"}, *jsii.Strings(slices.Compact(sm)...)...)
	}
	if len(ps) > 0 {
		allow(fn, []string{"ssm:GetParameter"}, *jsii.Strings(slices.Compact(ps)...)...)
	}
	if len(keys) > 0 {
		var arns []*string
		for _, k := range keys {
			arns = append(arns, k.KeyArn())
		}
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("kms:Decrypt"),
			Resources: &arns,
			Conditions: &map[string]any{"StringEquals": map[string]any{"kms:ViaService": []any{
				fmt.Sprintf("secretsmanager.%s.amazonaws.com", *stack.Region()), fmt.Sprintf("ssm.%s.amazonaws.com", *stack.Region()),
			}}},
		}))
	}
}

// secretArns is the resources a Secrets Manager reference may read: a name matches any of the
// six-character suffixes Secrets Manager appends; an ARN may be complete (with the suffix) or
// partial (without it), which cannot be told apart, so both are granted.
func secretArns(stack awscdk.Stack, ref string) []string {
	if strings.HasPrefix(ref, "arn:") {
		return []string{ref, ref + "-??????"}
	}
	return []string{fmt.Sprintf("arn:%s:secretsmanager:%s:%s:secret:%s-??????", *stack.Partition(), *stack.Region(), *stack.Account(), ref)}
}

// parameterArn is the resource an SSM reference reads: a name, or an ARN, either with a
// version or label selector (name:3, name:live), which IAM does not see.
func parameterArn(stack awscdk.Stack, ref string) string {
	if strings.HasPrefix(ref, "arn:") {
		if i := strings.Index(ref, ":parameter/"); i >= 0 {
			name := ref[i+len(":parameter/"):]
			if j := strings.IndexByte(name, ':'); j >= 0 {
				name = name[:j]
			}
			return ref[:i] + ":parameter/" + name
		}
		return ref
	}
	name, _, _ := strings.Cut(ref, ":") // parameter names have no colons
	return fmt.Sprintf("arn:%s:ssm:%s:%s:parameter/%s", *stack.Partition(), *stack.Region(), *stack.Account(), trimSlash(name))
}

func trimSlash(s string) string {
	if len(s) > 0 && s[0] == '/' {
		return s[1:]
	}
	return s
}

// checkFunctions fills in each function's options from the construct-wide ones and refuses
// what Lambda would: memory outside 128-10,240 MB, a negative reservation, a second one for the
// sweeper or the receiver.
func checkFunctions(cfg *Props) error {
	if cfg.MemorySize < 128 || cfg.MemorySize > 10240 {
		return fmt.Errorf("Props.MemorySize %g: must be between 128 and 10240 MB", cfg.MemorySize)
	}
	if cfg.ReceiverReservedConcurrency != 0 {
		if cfg.ReceiverFunction.ReservedConcurrency != 0 {
			return errors.New("Props.ReceiverFunction.ReservedConcurrency: set it or Props.ReceiverReservedConcurrency, not both")
		}
		cfg.ReceiverFunction.ReservedConcurrency = cfg.ReceiverReservedConcurrency
	}
	if cfg.SweeperFunction.ReservedConcurrency != 0 {
		return errors.New("Props.SweeperFunction.ReservedConcurrency: the sweeper runs one at a time (reserved 1); Props.UnreservedSweeper removes the reservation")
	}
	for _, f := range []struct {
		name string
		o    *FunctionOptions
	}{{"ReceiverFunction", &cfg.ReceiverFunction}, {"OutboxFunction", &cfg.OutboxFunction}, {"SweeperFunction", &cfg.SweeperFunction}} {
		if f.o.MemorySize == 0 {
			f.o.MemorySize = cfg.MemorySize
		}
		if f.o.MemorySize < 128 || f.o.MemorySize > 10240 {
			return fmt.Errorf("Props.%s.MemorySize %g: must be between 128 and 10240 MB", f.name, f.o.MemorySize)
		}
		if f.o.ReservedConcurrency < 0 || f.o.ReservedConcurrency != float64(int(f.o.ReservedConcurrency)) {
			return fmt.Errorf("Props.%s.ReservedConcurrency %g: must be a whole number, 0 for no reservation", f.name, f.o.ReservedConcurrency)
		}
		if f.o.Architecture == nil {
			f.o.Architecture = awslambda.Architecture_ARM_64()
			if cfg.X86 {
				f.o.Architecture = awslambda.Architecture_X86_64()
			}
		}
	}
	return nil
}

// The outbox's stream batch by default; its worker runs a batch whole (outbox.Config's default).
const outboxBatchSize = 100

// outboxTimings derives the lease and the outbox and sweeper functions' timeouts from the
// targets' timeouts and the stream batch with outbox.PlanTimings, the computation the
// functions' start applies too, so the synth fails on timings that cannot work, naming the
// target or the batch. The application's own targets (Props.Targets) get the default timeout:
// the synth cannot see their executors.
func outboxTimings(f *sources.File, custom []string, batch int) (outbox.Timings, error) {
	calls := map[string]time.Duration{}
	for _, name := range custom {
		calls[name] = 0
	}
	for name, t := range f.Targets {
		calls[name] = time.Duration(t.Timeout)
	}
	// The outbox runs a whole batch at once, up to outbox.DefaultConcurrency records
	// (outbox.Config.Concurrency 0): one round of calls for a batch of up to 256.
	t, err := outbox.PlanTimings(batch, min(batch, outbox.DefaultConcurrency), calls)
	if err != nil && t.FunctionTimeout > outbox.MaxFunctionTimeout && batch != outboxBatchSize {
		return t, fmt.Errorf("Props.StreamBatchSize %d: %w", batch, err)
	}
	return t, err
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// streamFilters turns outbox.StreamFilterPatterns into the mapping's filter criteria.
func streamFilters() *[]*map[string]interface{} {
	var filters []*map[string]interface{}
	for _, p := range outbox.StreamFilterPatterns() {
		pattern := map[string]interface{}(p)
		filters = append(filters, awslambda.FilterCriteria_Filter(&pattern))
	}
	return &filters
}
