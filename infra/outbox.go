package infra

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/deployment"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/sources"
)

// OutboxProps override the outbox's defaults (Props.Outbox): oncehook's own outbox package, on
// the table's stream in batches of 100, two at once per shard, woken by a retry queue five at
// once; both queues under SQS's own encryption.
type OutboxProps struct {
	// Code is the function's code (default OutboxPackage, built from Props.GoModuleDir).
	Code Code
	// Function is the function's options over the construct-wide ones.
	Function FunctionOptions
	// Executors are the application's own executors, by the intent target each serves, as its
	// outbox and sweeper pass them to launch: their targets are ONCEHOOK_TARGETS, and their
	// bounds (outbox.Bounds, required) size the lease and the functions' timeouts.
	Executors map[string]outbox.Executor
	// StreamBatchSize is the stream records one outbox invocation gets (1 to 10,000; default
	// 100). The function's timeout is derived from it: a batch that could not run within
	// Lambda's 15 minutes fails the synth.
	StreamBatchSize float64
	// StreamParallelization is the stream mapping's parallelization factor (1 to 10): batches
	// of one shard processed at once, for an event rate one worker per shard cannot keep up
	// with (OutboxIteratorAge). Default 2.
	StreamParallelization float64
	// RetryConcurrency caps the outbox instances the retry queue's wake-ups run on at once (2
	// to 1000; default 5), so a burst of retries cannot take the receiver's concurrency.
	RetryConcurrency float64
	// QueueKey puts the retry and failure queues under a customer-managed KMS key (default
	// SQS's own encryption).
	QueueKey awskms.IKey
}

// outbox is the outbox: its queues, and its worker on the table's stream, woken by the retry
// queue for the intents it retries.
func (b *builder) outbox() error {
	cfg, o, timings := b.cfg, b.o, b.timings
	o.RetryQueue, o.FailureQueue = newQueues(b.c, cfg, timings)
	fn, err := b.function("Outbox", cfg.Outbox.Function, b.workerSettings(), timings.FunctionTimeout.Seconds())
	if err != nil {
		return err
	}
	o.Outbox = fn
	b.grantWorker(fn)

	o.StreamMapping = awslambdaeventsources.NewDynamoEventSource(o.Table, &awslambdaeventsources.DynamoEventSourceProps{
		StartingPosition:        awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:               jsii.Number(float64(timings.BatchSize)),
		MaxBatchingWindow:       awscdk.Duration_Seconds(jsii.Number(1)),
		BisectBatchOnError:      jsii.Bool(true),
		ReportBatchItemFailures: jsii.Bool(true),
		RetryAttempts:           jsii.Number(5),
		MaxRecordAge:            awscdk.Duration_Hours(jsii.Number(6)),
		ParallelizationFactor:   jsii.Number(cfg.Outbox.StreamParallelization),
		OnFailure:               awslambdaeventsources.NewSqsDlq(o.FailureQueue),
		// Only records that hand the worker due work (outbox.StreamFilterPatterns): a new
		// claim with intents, a re-admitted or re-driven one. The worker's own writes, TTL
		// REMOVEs and effect records never invoke the function.
		Filters: streamFilters(),
	})
	fn.AddEventSource(o.StreamMapping)
	fn.AddEventSource(awslambdaeventsources.NewSqsEventSource(o.RetryQueue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(cfg.Outbox.RetryConcurrency),
	}))
	return nil
}

// checkOutbox fills in the stream mapping's and the retry queue's defaults and refuses what
// Lambda would, and an application target that is also a target of the sources file.
func checkOutbox(cfg *Props, file *sources.File) error {
	if !knob(&cfg.Outbox.StreamParallelization, 2, 1, 10, true) {
		return fmt.Errorf("Props.Outbox.StreamParallelization %g: must be a whole number between 1 and 10", cfg.Outbox.StreamParallelization)
	}
	if !knob(&cfg.Outbox.StreamBatchSize, outboxBatchSize, 1, 10000, true) {
		return fmt.Errorf("Props.Outbox.StreamBatchSize %g: must be a whole number between 1 and 10000 (Lambda's batch for a DynamoDB stream)", cfg.Outbox.StreamBatchSize)
	}
	if !knob(&cfg.Outbox.RetryConcurrency, 5, 2, 1000, false) {
		return fmt.Errorf("Props.Outbox.RetryConcurrency %g: must be between 2 and 1000 (Lambda's MaximumConcurrency for SQS)", cfg.Outbox.RetryConcurrency)
	}
	for _, t := range sortedKeys(cfg.Outbox.Executors) {
		if tg := file.Targets[t]; tg != nil {
			return fmt.Errorf("Props.Outbox.Executors: %q is also a target of the sources file (type %s)", t, tg.Type)
		}
	}
	if _, err := outbox.Bounds(cfg.Outbox.Executors); err != nil {
		return fmt.Errorf("Props.Outbox.%s", strings.TrimPrefix(err.Error(), "outbox: "))
	}
	return nil
}

// workerSettings are the outbox's and the sweeper's settings: every function's, the retry
// queue they schedule retries on, and the lease they hold an intent for.
func (b *builder) workerSettings() deployment.Settings {
	s := b.settings
	s.RetryQueueURL, s.Lease = *b.o.RetryQueue.QueueUrl(), b.timings.Lease
	return s
}

// grantWorker is what the outbox and the sweeper both may do (least privilege:
// launch/testdata/calls.json): schedule retries (SendMessage only: the scheduler is given the
// queue's URL), lease and record (UpdateItem), read a claim (GetItem), call each AWS target.
func (b *builder) grantWorker(fn awslambda.Function) {
	allow(fn, []string{"sqs:SendMessage"}, b.o.RetryQueue.QueueArn())
	allowKey(fn, sendKeyActions, []awskms.IKey{b.cfg.Outbox.QueueKey}, "sqs")
	allow(fn, []string{"dynamodb:UpdateItem", "dynamodb:GetItem"}, b.o.Table.TableArn())
	b.grantTargets(fn)
	grantTableKey(fn, b.o.Table.EncryptionKey())
}

// newQueues are the retry queue that wakes retried intents and the failure queue that takes
// what exhausted its retries, both SSL-only and encrypted (under Props.Outbox.QueueKey if set).
func newQueues(c constructs.Construct, cfg Props, timings outbox.Timings) (retries, dlq awssqs.Queue) {
	queue := func(id string, p awssqs.QueueProps) awssqs.Queue {
		p.EnforceSSL, p.Encryption, p.EncryptionMasterKey = jsii.Bool(true), awssqs.QueueEncryption_SQS_MANAGED, cfg.Outbox.QueueKey
		if cfg.Outbox.QueueKey != nil {
			p.Encryption = awssqs.QueueEncryption_KMS
		}
		return awssqs.NewQueue(c, jsii.String(id), &p)
	}
	dlq = queue("OutboxFailures", awssqs.QueueProps{RetentionPeriod: awscdk.Duration_Days(jsii.Number(14))})
	// Wake-ups for retried intents, delayed until they are due (outbox.SQSScheduler), visible
	// again after six times the function's timeout, as Lambda's SQS mapping asks.
	retries = queue("OutboxRetries", awssqs.QueueProps{
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(min(6*timings.FunctionTimeout.Seconds(), 43200))),
		RetentionPeriod:   awscdk.Duration_Days(jsii.Number(4)),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(5)},
	})
	return retries, dlq
}

// The outbox's stream batch by default; its worker runs a batch whole (outbox.Config's default).
const outboxBatchSize = 100

// outboxTimings derives the lease and the outbox's and the sweeper's timeouts from the targets'
// timeouts (the executors' bounds for the application's own) and the stream batch, with
// outbox.PlanTimings as the functions' start does: the synth fails on timings that cannot work.
func outboxTimings(f *sources.File, custom map[string]outbox.Executor, batch int) (outbox.Timings, error) {
	calls, err := outbox.Bounds(custom)
	if err != nil {
		return outbox.Timings{}, err
	}
	for name, t := range f.Targets {
		calls[name] = time.Duration(t.Timeout)
	}
	// The outbox runs a whole batch at once, up to outbox.DefaultConcurrency records
	// (outbox.Config.Concurrency 0): one round of calls for a batch of up to 256.
	t, err := outbox.PlanTimings(batch, min(batch, outbox.DefaultConcurrency), calls)
	if err != nil && t.FunctionTimeout > outbox.MaxFunctionTimeout && batch != outboxBatchSize {
		return t, fmt.Errorf("Props.Outbox.StreamBatchSize %d: %w", batch, err)
	}
	return t, err
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

// grantTargets lets fn call each AWS target of the sources file, and nothing else of its
// service: the resource its ARN names, or the bound one (with its key, through that service).
func (b *builder) grantTargets(fn awslambda.Function) {
	stack := b.stack
	for _, name := range sortedKeys(b.file.Targets) {
		t := b.file.Targets[name]
		actions, ok := targetActions[t.Type]
		if !ok {
			continue
		}
		arn := jsii.String(t.ARN)
		if bt := b.bound.targets[name]; t.Bound && bt != nil {
			arn = bt.arn
			allowKey(fn, sendKeyActions, []awskms.IKey{bt.key}, map[string]string{sources.TargetSQS: "sqs", sources.TargetSNS: "sns"}[t.Type])
		} else if t.Type == sources.TargetEventBridge && !strings.HasPrefix(t.ARN, "arn:") {
			arn = jsii.String(stackArn(stack, "events", "event-bus/"+t.ARN))
		}
		if t.Type == sources.TargetStepFunctions {
			// A retry that meets ExecutionAlreadyExists reads the execution to compare inputs.
			allow(fn, []string{"states:DescribeExecution"}, executionArn(stack, arn))
		}
		allow(fn, actions, arn)
	}
}
