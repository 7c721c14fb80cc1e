package infra

import (
	"errors"
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/sources"
)

// SweeperProps override the sweeper's defaults (Props.Sweeper): oncehook's own sweeper package,
// every 2 minutes, one run at a time, without the leak audit.
type SweeperProps struct {
	// Code is the function's code (default SweeperPackage, built from Props.GoModuleDir).
	Code Code
	// Function is the function's memory and architecture over the construct-wide ones (not its
	// reserved concurrency: see Unreserved).
	Function FunctionOptions
	// Unreserved leaves the sweeper without its reserved concurrency of 1, for an account whose
	// quota has nothing to reserve; its lock item still keeps two runs from overlapping.
	Unreserved bool
	// AuditPrefixes turns on the leak audit: each sweep reads the next AuditSample items
	// (default 100) and counts records under these prefixes that no claim wrote (dedup.Auditor).
	AuditPrefixes []string
	AuditSample   int
}

// sweeper is the sweeper: its function, one run at a time, every 2 minutes; it re-drives what
// the stream and retry paths left behind (the pending index), and runs the leak audit.
func (b *builder) sweeper() error {
	cfg, o := b.cfg, b.o
	s := b.workerSettings()
	s.AuditPrefixes, s.AuditSample = cfg.Sweeper.AuditPrefixes, cfg.Sweeper.AuditSample
	fn, err := b.function("Sweeper", cfg.Sweeper.Function, s, b.timings.SweeperTimeout.Seconds())
	if err != nil {
		return err
	}
	o.Sweeper = fn
	// Besides the outbox's: it reads the pending index (Query).
	b.grantWorker(fn)
	allow(fn, []string{"dynamodb:Query"}, jsii.String(*o.Table.TableArn()+"/index/"+dedup.PendingIndex))
	if len(cfg.Sweeper.AuditPrefixes) > 0 {
		allow(fn, []string{"dynamodb:Scan"}, o.Table.TableArn()) // the leak audit's sample
	}
	b.grantAudits(fn)

	// The sweeper's runs are asynchronous: Lambda's defaults (2 retries, kept 6 hours) would
	// queue throttled runs behind its reserved concurrency of 1. A run that could not start is
	// dropped; the next comes in 2 minutes.
	fn.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(0),
		MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(60)),
	})
	o.SweepSchedule = awsevents.NewRule(b.c, jsii.String("SweepSchedule"), &awsevents.RuleProps{
		Description: jsii.String("re-drive outbox intents the stream path left behind"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(2))),
	})
	// The rule's target and EventBridge's permission are written here rather than by
	// awseventstargets, whose Go package alone brings RDS, ECS, AppSync and more into every
	// CDK app's first build (docs/measured.md). No retries, as above.
	o.SweepSchedule.Node().DefaultChild().(awsevents.CfnRule).AddPropertyOverride(jsii.String("Targets"), []map[string]any{{
		"Id": "Target0", "Arn": fn.FunctionArn(),
		"RetryPolicy": map[string]any{"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60},
	}})
	fn.AddPermission(jsii.String("SweepSchedule"), &awslambda.Permission{
		Principal: awsiam.NewServicePrincipal(jsii.String("events.amazonaws.com"), nil),
		SourceArn: o.SweepSchedule.RuleArn(),
	})
	return nil
}

// checkSweeper refuses a leak audit that cannot work (dedup.Auditor's own checks).
func checkSweeper(cfg *Props, _ *sources.File) error {
	if len(cfg.Sweeper.AuditPrefixes) > 0 || cfg.Sweeper.AuditSample != 0 {
		a := dedup.Auditor{Prefixes: cfg.Sweeper.AuditPrefixes, Sample: cfg.Sweeper.AuditSample}
		var inv *dedup.InvalidError
		if err := a.Validate(); errors.As(err, &inv) {
			return fmt.Errorf("Props.Sweeper.Audit%s: %s", inv.Field, inv.Reason) // Props.Sweeper.AuditPrefixes[1], Props.Sweeper.AuditSample
		}
	}
	return nil
}

// grantAudits lets the sweeper sample the application's tables the sources file audits (Scan),
// with a bound table's customer-managed key through DynamoDB only.
func (b *builder) grantAudits(sweeper awslambda.Function) {
	for _, name := range sortedKeys(b.file.Tables) {
		t := b.file.Tables[name]
		if !t.Audit {
			continue
		}
		arn, key := b.appTable(name, t)
		allowKey(sweeper, []string{"kms:Decrypt"}, []awskms.IKey{key}, "dynamodb")
		allow(sweeper, []string{"dynamodb:Scan"}, arn) // the leak audit's sample
	}
}
