package infra

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
)

// AlarmProps override the alarms' defaults (Props.Alarms): a new topic nobody is subscribed to
// (the synth warns), and a duplicate spike at 500 in 5 minutes.
type AlarmProps struct {
	// Topic receives every alarm's ALARM and OK; default a new topic (Oncehook.AlarmTopic), to
	// subscribe whoever is on call.
	Topic awssns.ITopic
	// Emails and HttpsEndpoints subscribe the alarm topic (the construct's own or Topic): each
	// address gets every ALARM and OK once it confirms the subscription. A stack with neither
	// and no Topic synthesizes with a warning: its alarms reach nobody.
	Emails, HttpsEndpoints []string
	// DuplicateSpike is the number of duplicates per source in 5 minutes that alarms (a redrive
	// in progress, or handler latency over the provider's timeout). Default 500.
	DuplicateSpike float64
}

// DefaultNamespace is where the functions' EMF metrics land unless Props.Telemetry.MetricsNamespace
// names another.
const DefaultNamespace = "oncehook"

// emitted is every (metric, dimensions) the functions write: the receiver's and the outbox's
// catalogs, which their own tests hold the code to. A metric the construct names must be in it.
var emitted = func() map[string]bool {
	m := map[string]bool{}
	for _, e := range append(receiver.EmittedMetrics(), outbox.EmittedMetrics()...) {
		m[e.Name+"/"+strings.Join(e.Dimensions, ",")] = true
	}
	return m
}()

// watch is what the alarms and the dashboard are built from.
type watch struct {
	scope     constructs.Construct
	cfg       Props
	namespace string
	topic     awssns.ITopic
	alarms    []awscloudwatch.Alarm
}

// ours is one of the functions' own metrics, by name and dimensions; it panics at synth on a
// metric the functions do not write (a dashboard of empty graphs is how an operator goes blind).
func (w *watch) ours(name, stat string, period time.Duration, dims ...string) awscloudwatch.Metric {
	var keys []string
	m := map[string]*string{}
	for i := 0; i+1 < len(dims); i += 2 {
		keys = append(keys, dims[i])
		m[dims[i]] = jsii.String(dims[i+1])
	}
	if !emitted[name+"/"+strings.Join(keys, ",")] {
		panic(fmt.Sprintf("oncehook: the stack names metric %s with dimensions %v, which no function writes", name, keys))
	}
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String(w.namespace), MetricName: jsii.String(name), Statistic: jsii.String(stat),
		Period: awscdk.Duration_Seconds(jsii.Number(period.Seconds())), DimensionsMap: &m,
	})
}

// alarmSpec is one alarm: its threshold over M of N periods, and what missing data means.
type alarmSpec struct {
	id, description string
	metric          awscloudwatch.IMetric
	threshold       float64
	below           bool // alarm when under the threshold (a heartbeat)
	m, n            float64
	missing         awscloudwatch.TreatMissingData
}

func (w *watch) alarm(a alarmSpec) awscloudwatch.Alarm {
	if _, math := a.metric.(awscloudwatch.MathExpression); math && w.cfg.Local {
		// MiniStack's CloudFormation refuses an alarm on metric math (and evaluates no alarm
		// at all); the template tests check these on the stack for AWS.
		return nil
	}
	op := awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD
	if a.below {
		op = awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD
	}
	al := awscloudwatch.NewAlarm(w.scope, jsii.String(a.id), &awscloudwatch.AlarmProps{
		AlarmDescription:   jsii.String(a.description),
		Metric:             a.metric,
		Threshold:          jsii.Number(a.threshold),
		EvaluationPeriods:  jsii.Number(a.n),
		DatapointsToAlarm:  jsii.Number(a.m),
		ComparisonOperator: op,
		TreatMissingData:   a.missing,
	})
	action := awscloudwatchactions.NewSnsAction(w.topic)
	al.AddAlarmAction(action)
	al.AddOkAction(action)
	w.alarms = append(w.alarms, al)
	return al
}

// rate is 100 x part / whole over a period, 0 while whole is under minimum (too few to judge).
func rate(label string, part, whole awscloudwatch.IMetric, minimum float64, period time.Duration) awscloudwatch.IMetric {
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression:   jsii.String(fmt.Sprintf("IF(whole >= %g, 100 * part / whole, 0)", minimum)),
		UsingMetrics: &map[string]awscloudwatch.IMetric{"part": part, "whole": whole},
		Label:        jsii.String(label),
		Period:       awscdk.Duration_Seconds(jsii.Number(period.Seconds())),
	})
}

// newAlarms defines what pages someone, each alarm sending its ALARM and OK to the alarm topic.
// docs/operations.md says what to do when each fires.
func newAlarms(scope constructs.Construct, cfg Props, file *sources.File, o *Oncehook) []awscloudwatch.Alarm {
	w := &watch{scope: scope, cfg: cfg, namespace: o.MetricsNamespace, topic: o.AlarmTopic}
	table, api, receiverFn, worker, sweeper, dlq := o.Table, o.Api, o.Receiver, o.Outbox, o.Sweeper, o.FailureQueue
	const minute, five = time.Minute, 5 * time.Minute
	notBreaching, breaching, ignore := awscloudwatch.TreatMissingData_NOT_BREACHING, awscloudwatch.TreatMissingData_BREACHING, awscloudwatch.TreatMissingData_IGNORE
	aws := awsMetric
	tightest := time.Duration(0)
	for _, name := range file.Names() {
		if d := time.Duration(file.Sources[name].DeliveryTimeout); tightest == 0 || d < tightest {
			tightest = d
		}
	}

	// The outbox.
	w.alarm(alarmSpec{id: "OutboxDlqNotEmpty", description: "Stream records or wake-ups gave up after their retries; the sweeper re-drives the intents, but look at why",
		metric:    dlq.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Maximum")}),
		threshold: 0, m: 1, n: 1, missing: notBreaching})
	w.alarm(alarmSpec{id: "OutboxIteratorAge", description: "The outbox worker is falling behind the table's stream (over 5 minutes)",
		metric: aws("AWS/Lambda", "IteratorAge", "Maximum", five, map[string]*string{"FunctionName": worker.FunctionName()}), threshold: 300_000, m: 2, n: 3, missing: notBreaching})
	// Missing data keeps the state: a sweeper that stopped is the heartbeat's to report, and
	// must not turn a parked alarm OK.
	w.alarm(alarmSpec{id: "ParkedIntents", description: "Claims with intents parked for an operator (a permanent error, a redirect, no executor, attempts exhausted): hookctl parked lists them",
		metric: w.ours("ParkedClaims", "Maximum", five), threshold: 0, m: 1, n: 1, missing: ignore})
	w.alarm(alarmSpec{id: "SweeperHeartbeat", description: "The sweeper has not run for 10 minutes: nothing re-drives what the stream and retry paths leave behind, and the parked gauge is stale",
		metric: w.ours("SweepRuns", "Sum", 10*time.Minute), threshold: 1, below: true, m: 1, n: 1, missing: breaching})
	// A deferral is the run's clock running out, which the next run or the outbox function
	// (the sweeper hands it the intent) takes over; a deferral in every run for 15 minutes is
	// an intent no function gets to.
	w.alarm(alarmSpec{id: "SweepDeferred", description: "Every sweep for 15 minutes deferred intents it had no time for: a target slower than the sweeper's timeout, or a backlog; they run only when something runs them (docs/operations.md)",
		metric: w.ours("SweepDeferred", "Sum", five), threshold: 0, m: 3, n: 3, missing: notBreaching})

	if len(cfg.Sweeper.AuditPrefixes) > 0 {
		w.alarm(alarmSpec{id: "EffectsWithoutClaim", description: "The leak audit found effect records no claim wrote: something writes them outside oncehook's transaction (the sweeper's log names each key)",
			metric: w.ours("EffectsWithoutClaim", "Sum", five), threshold: 0, m: 1, n: 1, missing: notBreaching})
	}

	// The receiver, per source.
	for _, name := range file.Names() {
		src := []string{"source", name}
		received := w.ours("Received", "Sum", five, src...)
		w.alarm(alarmSpec{id: "DuplicateSpike-" + name, description: "Duplicates from " + name + " above the usual trickle: a redrive, or handler latency over the provider's timeout",
			metric: w.ours("Duplicate", "Sum", five, src...), threshold: cfg.Alarms.DuplicateSpike, m: 2, n: 3, missing: notBreaching})
		w.alarm(alarmSpec{id: "SignatureRejected-" + name, description: "Over half of " + name + "'s deliveries fail their signature (a broken secret rotation 401s every delivery until the provider disables the endpoint)",
			metric: rate("SignatureRejected %", w.ours("SignatureRejected", "Sum", five, src...), received, 20, five), threshold: 50, m: 2, n: 3, missing: notBreaching})
		w.alarm(alarmSpec{id: "ReceiverFailing-" + name, description: "Over 5% of " + name + "'s deliveries are answered 503 (DynamoDB throttled or slow) or 500 (a planner or configuration error)",
			metric: awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
				Expression: jsii.String("IF(recv >= 10, 100 * (unavailable + failed) / recv, 0)"),
				UsingMetrics: &map[string]awscloudwatch.IMetric{"recv": w.ours("Received", "Sum", minute, src...),
					"unavailable": w.ours("Unavailable", "Sum", minute, src...), "failed": w.ours("Failed", "Sum", minute, src...)},
				Label: jsii.String("503 and 500 %"), Period: awscdk.Duration_Minutes(jsii.Number(1)),
			}), threshold: 5, m: 3, n: 5, missing: notBreaching})
		// The rate above judges only 10 deliveries a minute and more: under that, a count. A
		// provider retries a failed delivery within the hour (docs/operations.md), so a
		// source failing everything fails twice in an hour at any volume; one 503 does not page.
		w.alarm(alarmSpec{id: "DeliveriesFailing-" + name, description: "Two or more 5-minute periods in the last hour with deliveries from " + name + " answered 503 or 500, at any volume: the provider retries, then disables the endpoint",
			metric: awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
				Expression: jsii.String("FILL(unavailable, 0) + FILL(failed, 0)"),
				UsingMetrics: &map[string]awscloudwatch.IMetric{
					"unavailable": w.ours("Unavailable", "Sum", five, src...), "failed": w.ours("Failed", "Sum", five, src...)},
				Label: jsii.String("503 and 500"), Period: awscdk.Duration_Minutes(jsii.Number(5)),
			}), threshold: 0, m: 2, n: 12, missing: notBreaching})
		w.alarm(alarmSpec{id: "UnknownTypes-" + name, description: "Events from " + name + " of types no planner is registered for: a planner missing or misnamed (unknown_types says whether they were claimed empty)",
			metric: w.ours("UnknownType", "Sum", five, src...), threshold: 0, m: 1, n: 1, missing: notBreaching})
		if readsAStore(file.Sources[name]) {
			// A failed re-read keeps the values held (deliveries go on), so a secret revoked at
			// the store keeps verifying until one succeeds: ten minutes of failures pages.
			w.alarm(alarmSpec{id: "SecretRefreshFailed-" + name, description: "The receiver could not re-read " + name + "'s secrets from Secrets Manager or SSM: it keeps the values it holds, so a secret revoked there still verifies (its log's secret_refresh_error says why: permissions, throttling, a key)",
				metric: w.ours("SecretRefreshFailed", "Sum", five, src...), threshold: 0, m: 2, n: 3, missing: notBreaching})
		}
		if file.Sources[name].Guarded() {
			w.alarm(alarmSpec{id: "ReplayRefused-" + name, description: "A signed body from " + name + " came again under another event id: a captured delivery replayed (or the provider sent one fact twice)",
				metric: w.ours("ReplayRefused", "Sum", five, src...), threshold: 0, m: 1, n: 1, missing: notBreaching})
		}
	}
	// A downstream that fails: intents retry with backoff for about half an hour before they
	// park (ParkedIntents). Most of a target's attempts retried for 15 minutes pages first.
	outageTargets := append(sortedKeys(file.Targets), sortedKeys(cfg.Outbox.Executors)...)
	slices.Sort(outageTargets)
	for _, t := range slices.Compact(outageTargets) {
		tgt := []string{"target", t}
		w.alarm(alarmSpec{id: "TargetRetrying-" + t, description: "Over half of the attempts at target " + t + " are retried, for 15 minutes: the downstream is failing; its intents park in about 30 minutes",
			metric: awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
				Expression: jsii.String("IF(FILL(retried, 0) + FILL(done, 0) > 0, 100 * FILL(retried, 0) / (FILL(retried, 0) + FILL(done, 0)), 0)"),
				UsingMetrics: &map[string]awscloudwatch.IMetric{
					"retried": w.ours("IntentsRetried", "Sum", five, tgt...), "done": w.ours("IntentsDone", "Sum", five, tgt...)},
				Label: jsii.String("retried %"), Period: awscdk.Duration_Minutes(jsii.Number(5)),
			}), threshold: 50, m: 3, n: 3, missing: notBreaching})
	}
	// The platform under them.
	apiDims := map[string]*string{"ApiId": api.ApiId()}
	w.alarm(alarmSpec{id: "Api5xx", description: "Over 1% of requests to the webhook API are answered 5xx (the receiver failing, throttled, or timing out)",
		metric:    rate("5xx %", aws("AWS/ApiGateway", "5xx", "Sum", minute, apiDims), aws("AWS/ApiGateway", "Count", "Sum", minute, apiDims), 10, minute),
		threshold: 1, m: 3, n: 5, missing: notBreaching})
	w.alarm(alarmSpec{id: "Api5xxCount", description: "Two or more 5-minute periods in the last hour with requests to the webhook API answered 5xx, at any volume (Api5xx judges only 10 a minute and more)",
		metric: awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String("FILL(errors, 0)"), UsingMetrics: &map[string]awscloudwatch.IMetric{"errors": aws("AWS/ApiGateway", "5xx", "Sum", five, apiDims)},
			Label: jsii.String("5xx"), Period: awscdk.Duration_Minutes(jsii.Number(5)),
		}), threshold: 0, m: 2, n: 12, missing: notBreaching})
	w.alarm(alarmSpec{id: "ReceiverLatency", description: fmt.Sprintf("The receiver's p99 duration is over 80%% of the tightest provider timeout (%s): deliveries are about to be retried as failures", tightest),
		metric:    aws("AWS/Lambda", "Duration", "p99", minute, map[string]*string{"FunctionName": receiverFn.FunctionName()}),
		threshold: 0.8 * float64(tightest.Milliseconds()), m: 3, n: 5, missing: notBreaching})
	for id, fn := range map[string]awslambda.Function{"Receiver": receiverFn, "Outbox": worker, "Sweeper": sweeper} {
		fnDims := map[string]*string{"FunctionName": fn.FunctionName()}
		w.alarm(alarmSpec{id: id + "Errors", description: "Over 1% of the " + id + " function's invocations fail (a function that cannot start names the bad setting in its log)",
			metric:    rate("errors %", aws("AWS/Lambda", "Errors", "Sum", minute, fnDims), aws("AWS/Lambda", "Invocations", "Sum", minute, fnDims), 1, minute),
			threshold: 1, m: 3, n: 5, missing: notBreaching})
		w.alarm(alarmSpec{id: id + "Throttles", description: "The " + id + " function is being throttled (account or reserved concurrency)",
			metric: aws("AWS/Lambda", "Throttles", "Sum", minute, fnDims), threshold: 0, m: 3, n: 5, missing: notBreaching})
	}
	tableDims := map[string]*string{"TableName": table.TableName()}
	indexDims := map[string]*string{"TableName": table.TableName(), "GlobalSecondaryIndexName": jsii.String(dedup.PendingIndex)}
	w.alarm(alarmSpec{id: "TableThrottled", description: "DynamoDB throttles writes to the table: the receiver answers 503s",
		metric: aws("AWS/DynamoDB", "WriteThrottleEvents", "Sum", minute, tableDims), threshold: 0, m: 2, n: 3, missing: notBreaching})
	w.alarm(alarmSpec{id: "PendingIndexThrottled", description: "DynamoDB throttles the pending index, which throttles the table's writes too: raise PendingShards (docs/capacity.md)",
		metric: aws("AWS/DynamoDB", "WriteThrottleEvents", "Sum", minute, indexDims), threshold: 0, m: 2, n: 3, missing: notBreaching})

	return w.alarms
}

// awsMetric is one of AWS's own metrics (AWS/Lambda, AWS/ApiGateway, AWS/DynamoDB).
func awsMetric(namespace, name, stat string, period time.Duration, dims map[string]*string) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(namespace), MetricName: jsii.String(name),
		Statistic: jsii.String(stat), Period: awscdk.Duration_Seconds(jsii.Number(period.Seconds())), DimensionsMap: &dims})
}

// newAlarmTopic is Props.Alarms.Topic, or a new topic this account's alarms may publish to, with
// Props.Alarms.Emails and Props.Alarms.HttpsEndpoints subscribed (subscribe).
func newAlarmTopic(c constructs.Construct, stack awscdk.Stack, cfg Props) awssns.ITopic {
	topic := cfg.Alarms.Topic
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
	subscribe(c, topic, cfg)
	return topic
}

// subscribe subscribes Props.Alarms.Emails and Props.Alarms.HttpsEndpoints to the alarm topic, and
// warns at synth when nothing is: the alarms would fire into a topic nobody reads.
func subscribe(c constructs.Construct, topic awssns.ITopic, cfg Props) {
	for i, e := range cfg.Alarms.Emails {
		awssns.NewSubscription(c, jsii.String(fmt.Sprintf("AlarmEmail%d", i)), &awssns.SubscriptionProps{
			Topic: topic, Protocol: awssns.SubscriptionProtocol_EMAIL, Endpoint: jsii.String(e),
		})
	}
	for i, e := range cfg.Alarms.HttpsEndpoints {
		awssns.NewSubscription(c, jsii.String(fmt.Sprintf("AlarmHttps%d", i)), &awssns.SubscriptionProps{
			Topic: topic, Protocol: awssns.SubscriptionProtocol_HTTPS, Endpoint: jsii.String(e),
		})
	}
	if cfg.Alarms.Topic == nil && len(cfg.Alarms.Emails) == 0 && len(cfg.Alarms.HttpsEndpoints) == 0 {
		awscdk.Annotations_Of(c).AddWarningV2(jsii.String("oncehook:unsubscribed"),
			jsii.String("nothing is subscribed to the alarm topic: set Props.Alarms.Emails, Props.Alarms.HttpsEndpoints or Props.Alarms.Topic, or subscribe Oncehook.AlarmTopic, or the alarms reach nobody"), nil)
	}
}

// checkAlarms fills in the duplicate spike's default and refuses a subscription SNS would.
func checkAlarms(cfg *Props, _ *sources.File) error {
	if cfg.Alarms.DuplicateSpike == 0 {
		cfg.Alarms.DuplicateSpike = 500
	}
	for i, e := range cfg.Alarms.Emails {
		if at := strings.LastIndexByte(e, '@'); at < 1 || at == len(e)-1 || strings.ContainsAny(e, " \t\n,;") {
			return fmt.Errorf("Props.Alarms.Emails[%d] %q: not an email address", i, e)
		}
	}
	for i, e := range cfg.Alarms.HttpsEndpoints {
		if u, err := url.Parse(e); err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("Props.Alarms.HttpsEndpoints[%d] %q: must be an https:// URL", i, e)
		}
	}
	return nil
}

// readsAStore reports whether a source's secrets are re-read from a store (Secrets Manager,
// SSM) at their maximum age; environment variables and public keys never change under it.
func readsAStore(s *sources.Source) bool {
	for _, ref := range s.Secrets {
		if ref.SecretsManager != "" || ref.SSM != "" {
			return true
		}
	}
	return false
}
