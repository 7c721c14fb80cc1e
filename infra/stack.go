// Package main is the CDK app that deploys oncehook: the table, the receiver behind an HTTP
// API, the outbox worker on the table's stream, the scheduled sweeper, least-privilege IAM,
// alarms and a dashboard. The same app deploys to AWS and to a LocalStack-compatible emulator.
package main

import (
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/sources"
)

// StackConfig is what varies between deployments.
type StackConfig struct {
	awscdk.StackProps
	// Sources is the validated sources file; the functions read the same file, bundled beside
	// their binaries by `make build`.
	Sources *sources.File
	// CodeDir holds one folder per function with its bootstrap binary: dist/ after `make build`.
	CodeDir string
	// ARM64 selects Graviton (AWS); false builds for x86_64 (an emulator on an amd64 host).
	ARM64 bool
	// DeletionProtection protects the table (on for AWS; off for throwaway local stacks).
	DeletionProtection bool
	// PendingShards is the pending index's shard count, handed to every function
	// (PENDING_SHARDS): raise it with the event rate (docs/capacity.md), never lower it.
	// Default dedup.PendingShards.
	PendingShards int
	// DuplicateSpike is the number of duplicates per source in 5 minutes that alarms
	// (a redrive in progress, or handler latency over the provider's timeout). Default 500.
	DuplicateSpike float64
}

// NewStack defines the whole stack.
func NewStack(scope constructs.Construct, id string, cfg StackConfig) awscdk.Stack {
	if cfg.Sources == nil {
		panic("infra: a sources file is required")
	}
	if cfg.DuplicateSpike == 0 {
		cfg.DuplicateSpike = 500
	}
	stack := awscdk.NewStack(scope, jsii.String(id), &cfg.StackProps)

	removal := awscdk.RemovalPolicy_DESTROY
	if cfg.DeletionProtection {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	table := awsdynamodb.NewTable(stack, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(dedup.AttrPK), Type: awsdynamodb.AttributeType_STRING},
		SortKey:             &awsdynamodb.Attribute{Name: jsii.String(dedup.AttrSK), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(dedup.AttrExpiresAt),
		Stream:              awsdynamodb.StreamViewType_NEW_IMAGE,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(cfg.DeletionProtection),
		RemovalPolicy:      removal,
	})
	table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(dedup.PendingIndex),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String(dedup.AttrPendingShard), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String(dedup.AttrPendingSince), Type: awsdynamodb.AttributeType_NUMBER},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})

	timings, err := outboxTimings(cfg.Sources)
	if err != nil {
		panic(fmt.Sprintf("infra: outbox: %v", err))
	}
	// Wake-ups for retried intents, delayed until they are due (outbox.SQSScheduler). Their
	// visibility timeout is six times the function's, as Lambda's SQS mapping asks.
	dlq := awssqs.NewQueue(stack, jsii.String("OutboxFailures"), &awssqs.QueueProps{
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		EnforceSSL:      jsii.Bool(true),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
	})
	retries := awssqs.NewQueue(stack, jsii.String("OutboxRetries"), &awssqs.QueueProps{
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(min(6*timings.FunctionTimeout.Seconds(), 43200))),
		RetentionPeriod:   awscdk.Duration_Days(jsii.Number(4)),
		EnforceSSL:        jsii.Bool(true),
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(5)},
	})

	if cfg.PendingShards == 0 {
		cfg.PendingShards = dedup.PendingShards
	}
	if cfg.PendingShards < 1 || cfg.PendingShards > dedup.MaxPendingShards {
		panic(fmt.Sprintf("infra: PendingShards %d: must be between 1 and %d", cfg.PendingShards, dedup.MaxPendingShards))
	}
	env := map[string]*string{"TABLE_NAME": table.TableName(), "LOG_LEVEL": jsii.String("info"),
		"PENDING_SHARDS": jsii.String(fmt.Sprint(cfg.PendingShards))}
	outboxEnv := map[string]*string{"RETRY_QUEUE_URL": retries.QueueUrl(), "LEASE_SECONDS": jsii.String(fmt.Sprint(int(timings.Lease.Seconds())))}
	for k, v := range env {
		outboxEnv[k] = v
	}
	receiver := function(stack, "Receiver", cfg, "receiver", env, 10)
	worker := function(stack, "Outbox", cfg, "outbox", outboxEnv, timings.FunctionTimeout.Seconds())
	sweeper := function(stack, "Sweeper", cfg, "sweeper", outboxEnv, 300)
	retries.GrantSendMessages(worker)
	retries.GrantSendMessages(sweeper)

	// Least privilege: each function gets exactly the item actions its code issues.
	allow(receiver, []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem", "dynamodb:GetItem"}, table.TableArn())
	allow(worker, []string{"dynamodb:UpdateItem", "dynamodb:GetItem"}, table.TableArn())
	allow(sweeper, []string{"dynamodb:UpdateItem", "dynamodb:GetItem"}, table.TableArn())
	allow(sweeper, []string{"dynamodb:Query"}, jsii.String(*table.TableArn()+"/index/"+dedup.PendingIndex))
	grantSecrets(stack, cfg.Sources, receiver)

	api := awsapigatewayv2.NewHttpApi(stack, jsii.String("Api"), &awsapigatewayv2.HttpApiProps{
		Description: jsii.String("oncehook webhook receiver"),
	})
	api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
		Path:        jsii.String("/hooks/{source}"),
		Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_POST},
		Integration: awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("ReceiverIntegration"), receiver, nil),
	})
	accessLogs := awslogs.NewLogGroup(stack, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
		Retention:     awslogs.RetentionDays_ONE_MONTH,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	stage := api.DefaultStage().Node().DefaultChild().(awsapigatewayv2.CfnStage)
	stage.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: accessLogs.LogGroupArn(),
		Format: jsii.String(`{"requestId":"$context.requestId","ip":"$context.identity.sourceIp","routeKey":"$context.routeKey",` +
			`"status":"$context.status","latency":"$context.responseLatency","integrationError":"$context.integrationErrorMessage"}`),
	})

	worker.AddEventSource(awslambdaeventsources.NewDynamoEventSource(table, &awslambdaeventsources.DynamoEventSourceProps{
		StartingPosition:        awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:               jsii.Number(float64(timings.BatchSize)),
		MaxBatchingWindow:       awscdk.Duration_Seconds(jsii.Number(1)),
		BisectBatchOnError:      jsii.Bool(true),
		ReportBatchItemFailures: jsii.Bool(true),
		RetryAttempts:           jsii.Number(5),
		MaxRecordAge:            awscdk.Duration_Hours(jsii.Number(6)),
		ParallelizationFactor:   jsii.Number(2),
		OnFailure:               awslambdaeventsources.NewSqsDlq(dlq),
		// Only records that hand the worker due work (outbox.StreamFilterPatterns): a new
		// claim with intents, a re-admitted or re-driven one. The worker's own writes, TTL
		// REMOVEs and effect records never invoke the function.
		Filters: streamFilters(),
	}))
	worker.AddEventSource(awslambdaeventsources.NewSqsEventSource(retries, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
	}))

	awsevents.NewRule(stack, jsii.String("SweepSchedule"), &awsevents.RuleProps{
		Description: jsii.String("re-drive outbox intents the stream path left behind"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(2))),
		// A run that could not start is not worth starting late: the next one comes soon.
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(sweeper, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(0),
			MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(60)),
		})},
	})

	alarms(stack, cfg, receiver, worker, sweeper, dlq)
	suppress(api, dlq, worker, receiver, worker, sweeper)

	awscdk.NewCfnOutput(stack, jsii.String("WebhookUrl"), &awscdk.CfnOutputProps{
		Value:       jsii.String(*api.ApiEndpoint() + "/hooks/{source}"),
		Description: jsii.String("POST deliveries here, with {source} one of the sources file's names"),
	})
	awscdk.NewCfnOutput(stack, jsii.String("TableName"), &awscdk.CfnOutputProps{Value: table.TableName()})
	awscdk.NewCfnOutput(stack, jsii.String("ApiId"), &awscdk.CfnOutputProps{Value: api.ApiId()})
	return stack
}

// function defines one Lambda from dist/<name>/bootstrap, with its own log group.
func function(stack awscdk.Stack, id string, cfg StackConfig, name string, env map[string]*string, timeoutSeconds float64) awslambda.Function {
	arch := awslambda.Architecture_X86_64()
	if cfg.ARM64 {
		arch = awslambda.Architecture_ARM_64()
	}
	logs := awslogs.NewLogGroup(stack, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		Retention:     awslogs.RetentionDays_ONE_MONTH,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	// An explicit role instead of AWSLambdaBasicExecutionRole: logs only to its own group.
	role := awsiam.NewRole(stack, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("oncehook " + name),
	})
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("logs:CreateLogStream", "logs:PutLogEvents"),
		Resources: jsii.Strings(*logs.LogGroupArn() + ":*"),
	}))
	return awslambda.NewFunction(stack, jsii.String(id), &awslambda.FunctionProps{
		Role:         role,
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: arch,
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(cfg.CodeDir+"/"+name), nil),
		MemorySize:   jsii.Number(256),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(timeoutSeconds)),
		Environment:  &env,
		LogGroup:     logs,
		Description:  jsii.String("oncehook " + name),
	})
}

func allow(fn awslambda.Function, actions []string, resources ...*string) {
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	}))
}

// grantSecrets lets the receiver read exactly the secrets the sources file names, by reference:
// the stack never sees a secret's value. (Secrets referenced by "env" are for local runs; the
// stack does not set them.)
func grantSecrets(stack awscdk.Stack, f *sources.File, fn awslambda.Function) {
	var sm, ps []string
	for _, name := range f.Names() {
		for _, ref := range f.Sources[name].Secrets {
			switch {
			case ref.SecretsManager != "":
				sm = append(sm, secretArn(stack, ref.SecretsManager))
			case ref.SSM != "":
				ps = append(ps, fmt.Sprintf("arn:%s:ssm:%s:%s:parameter/%s", *stack.Partition(), *stack.Region(), *stack.Account(), trimSlash(ref.SSM)))
			}
		}
	}
	sort.Strings(sm)
	sort.Strings(ps)
	if len(sm) > 0 {
		allow(fn, []string{"secretsmanager:GetSecretValue"}, *jsii.Strings(sm...)...)
	}
	if len(ps) > 0 {
		allow(fn, []string{"ssm:GetParameter"}, *jsii.Strings(ps...)...)
	}
}

// secretArn accepts a full ARN or a name; a name matches any of Secrets Manager's six-character
// suffixes.
func secretArn(stack awscdk.Stack, ref string) string {
	if len(ref) > 4 && ref[:4] == "arn:" {
		return ref
	}
	return fmt.Sprintf("arn:%s:secretsmanager:%s:%s:secret:%s-??????", *stack.Partition(), *stack.Region(), *stack.Account(), ref)
}

func trimSlash(s string) string {
	if len(s) > 0 && s[0] == '/' {
		return s[1:]
	}
	return s
}

// The outbox's stream batch and the concurrency its worker runs it at (outbox.Config's default).
const (
	outboxBatchSize   = 100
	outboxConcurrency = 8
)

// outboxTimings derives the outbox function's lease and timeout from the slowest target and
// checks them against each other (outbox.CheckTimings), so the synth fails on timings that
// cannot work, naming the target.
func outboxTimings(f *sources.File) (outbox.Timings, error) {
	t := outbox.Timings{BatchSize: outboxBatchSize, Concurrency: outboxConcurrency, MaxCall: outbox.DefaultHTTPTimeout, Margin: outbox.DefaultMargin}
	slowest := ""
	for _, name := range sortedKeys(f.Targets) {
		if d := time.Duration(f.Targets[name].Timeout); d > t.MaxCall {
			t.MaxCall, slowest = d, name
		}
	}
	t.Lease = max(outbox.DefaultLease, t.MaxCall+t.Margin)
	t.FunctionTimeout = max(time.Minute, t.NeededFunctionTimeout())
	if t.FunctionTimeout > 15*time.Minute {
		return t, fmt.Errorf("target %q's timeout %s: a batch of %d records %d at a time would need a %s function, over Lambda's 15 minutes",
			slowest, t.MaxCall, t.BatchSize, t.Concurrency, t.NeededFunctionTimeout())
	}
	return t, outbox.CheckTimings(t)
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
