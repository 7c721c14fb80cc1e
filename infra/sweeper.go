package infra

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/sources"
)

// newSweeper is the sweeper: its function, one run at a time (reserved concurrency 1 unless
// Props.UnreservedSweeper), on a schedule every 2 minutes; it re-drives what the stream and
// retry paths left behind (the pending index), and samples the table for the leak audit.
func newSweeper(c constructs.Construct, stack awscdk.Stack, cfg Props, file *sources.File, bound *bindings, code staged,
	env map[string]string, timings outbox.Timings, o *Oncehook) error {
	sweeperEnv := outboxEnv(env, o.RetryQueue, timings)
	if len(cfg.AuditPrefixes) > 0 {
		sweeperEnv["AUDIT_PREFIXES"] = strings.Join(cfg.AuditPrefixes, ",")
		if cfg.AuditSample > 0 {
			sweeperEnv["AUDIT_SAMPLE"] = fmt.Sprint(cfg.AuditSample)
		}
	}
	fn, err := function(c, "Sweeper", cfg, cfg.SweeperFunction, code, sweeperEnv, timings.SweeperTimeout.Seconds())
	if err != nil {
		return err
	}
	o.Sweeper = fn
	if !cfg.UnreservedSweeper {
		fn.Node().DefaultChild().(awslambda.CfnFunction).SetReservedConcurrentExecutions(jsii.Number(1))
	}
	// Least privilege (launch/testdata/calls.json): the sweeper schedules retries, leases and
	// records (UpdateItem), reads a swept claim (GetItem) and the pending index (Query).
	allow(fn, []string{"sqs:SendMessage"}, o.RetryQueue.QueueArn())
	grantQueueKey(stack, cfg, fn)
	allow(fn, []string{"dynamodb:UpdateItem", "dynamodb:GetItem"}, o.Table.TableArn())
	allow(fn, []string{"dynamodb:Query"}, jsii.String(*o.Table.TableArn()+"/index/"+dedup.PendingIndex))
	if len(cfg.AuditPrefixes) > 0 {
		allow(fn, []string{"dynamodb:Scan"}, o.Table.TableArn()) // the leak audit's sample
	}
	grantAudits(stack, file, bound, fn)
	grantTargets(stack, file, bound, fn) // it runs what the outbox left behind
	grantTableKey(stack, o.Table, fn)

	// The sweeper's runs are asynchronous: Lambda's defaults (2 retries, kept 6 hours) would
	// queue throttled runs behind its reserved concurrency of 1. A run that could not start is
	// dropped; the next comes in 2 minutes.
	fn.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(0),
		MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(60)),
	})
	o.SweepSchedule = awsevents.NewRule(c, jsii.String("SweepSchedule"), &awsevents.RuleProps{
		Description: jsii.String("re-drive outbox intents the stream path left behind"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(2))),
		// A run that could not start is not worth starting late: the next one comes soon.
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fn, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(0),
			MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(60)),
		})},
	})
	return nil
}

// checkSweeper refuses a leak audit that cannot work (dedup.Auditor's own checks).
func checkSweeper(cfg *Props, _ *sources.File) error {
	if len(cfg.AuditPrefixes) > 0 || cfg.AuditSample != 0 {
		a := dedup.Auditor{Prefixes: cfg.AuditPrefixes, Sample: cfg.AuditSample}
		var inv *dedup.InvalidError
		if err := a.Validate(); errors.As(err, &inv) {
			return fmt.Errorf("Props.Audit%s: %s", inv.Field, inv.Reason) // Props.AuditPrefixes[1], Props.AuditSample
		}
	}
	return nil
}

// grantAudits lets the sweeper sample the application's tables the sources file audits (Scan),
// with a bound table's customer-managed key through DynamoDB only.
func grantAudits(stack awscdk.Stack, f *sources.File, bound *bindings, sweeper awslambda.Function) {
	for _, name := range sortedKeys(f.Tables) {
		t := f.Tables[name]
		if !t.Audit {
			continue
		}
		arn, key := appTable(stack, bound, name, t)
		if key != nil {
			sweeper.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions: jsii.Strings("kms:Decrypt"), Resources: jsii.Strings(*key.KeyArn()), Conditions: viaDynamoDB(stack),
			}))
		}
		allow(sweeper, []string{"dynamodb:Scan"}, arn) // the leak audit's sample
	}
}
