package infra

import (
	"cmp"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/emf"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
)

// AlarmProps override the alarms' defaults (Props.Alarms): a new topic nobody is subscribed to
// (the synth warns), and a duplicate spike at 500 in 5 minutes.
type AlarmProps struct {
	// Topic receives every alarm's ALARM and OK; default a new topic (Oncehook.AlarmTopic).
	Topic awssns.ITopic
	// Emails and HttpsEndpoints subscribe the alarm topic; with neither and no Topic the synth
	// warns that the alarms reach nobody.
	Emails, HttpsEndpoints []string
	// DuplicateSpike is the number of duplicates per source in 5 minutes that alarms (a redrive,
	// or handler latency over the provider's timeout). Default 500.
	DuplicateSpike float64
}

// DefaultNamespace begins the namespace of the functions' EMF metrics, DefaultNamespace/<the
// construct's path>, unless Props.Telemetry.MetricsNamespace names another.
const DefaultNamespace = emf.DefaultNamespace

// emitted is every (metric, dimensions) the functions write: the receiver's and the outbox's
// catalogs, which their own tests hold the code to. A metric the construct names must be in it.
var emitted = func() map[string]bool {
	m := map[string]bool{}
	for _, e := range append(receiver.EmittedMetrics(), outbox.EmittedMetrics()...) {
		m[e.Name+"/"+strings.Join(e.Dimensions, ",")] = true
	}
	return m
}()

// watch is what the alarms and the dashboard are built from: the deployment's resources and
// their metrics.
type watch struct {
	scope  constructs.Construct
	cfg    Props
	o      *Oncehook
	alarms []awscloudwatch.Alarm
}

// metrics are a math expression's metrics, by the names it uses.
type metrics = map[string]awscloudwatch.IMetric

// ours is one of the functions' own metrics, by name and dimensions; it panics at synth on a
// metric the functions do not write (a dashboard of empty graphs is how an operator goes blind).
func (w *watch) ours(name, stat string, period time.Duration, dims ...string) awscloudwatch.IMetric {
	var keys []string
	m := map[string]*string{}
	for i := 0; i+1 < len(dims); i += 2 {
		keys = append(keys, dims[i])
		m[dims[i]] = jsii.String(dims[i+1])
	}
	if !emitted[name+"/"+strings.Join(keys, ",")] {
		panic(fmt.Sprintf("oncehook: the stack names metric %s with dimensions %v, which no function writes", name, keys))
	}
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(w.o.MetricsNamespace), MetricName: jsii.String(name),
		Statistic: jsii.String(stat), Period: awscdk.Duration_Seconds(jsii.Number(period.Seconds())), DimensionsMap: &m})
}

// sums are the functions' own metrics names, summed over period, with dims.
func (w *watch) sums(period time.Duration, dims []string, names ...string) []awscloudwatch.IMetric {
	var ms []awscloudwatch.IMetric
	for _, name := range names {
		ms = append(ms, w.ours(name, "Sum", period, dims...))
	}
	return ms
}

// every is a metric's statistic over period, for the CDK's own metric methods
// (Function.MetricErrors, HttpApi.MetricServerError, ITable.Metric).
func every(period time.Duration, stat string) *awscloudwatch.MetricOptions {
	return &awscloudwatch.MetricOptions{Period: awscdk.Duration_Seconds(jsii.Number(period.Seconds())), Statistic: jsii.String(stat)}
}

// failures is the failure queue's depth.
func (w *watch) failures() awscloudwatch.IMetric {
	return w.o.FailureQueue.MetricApproximateNumberOfMessagesVisible(every(5*time.Minute, "Maximum"))
}

// expr is a math expression over using, evaluated every period.
func expr(label, expression string, period time.Duration, using metrics) awscloudwatch.IMetric {
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(expression), UsingMetrics: &using, Label: jsii.String(label),
		Period: awscdk.Duration_Seconds(jsii.Number(period.Seconds())),
	})
}

// rate is 100 x part / whole over a period, 0 while whole is under minimum (too few to judge).
func rate(label string, part, whole awscloudwatch.IMetric, minimum float64, period time.Duration) awscloudwatch.IMetric {
	return expr(label, fmt.Sprintf("IF(whole >= %g, 100 * part / whole, 0)", minimum), period, metrics{"part": part, "whole": whole})
}

// alarmSpec is one alarm: its threshold over M of N periods (default 1 of 1), and what missing
// data means (default not breaching).
type alarmSpec struct {
	id, description string
	metric          awscloudwatch.IMetric
	threshold       float64
	below           bool // alarm when under the threshold (a heartbeat)
	m, n            float64
	missing         awscloudwatch.TreatMissingData
}

func (w *watch) alarm(a alarmSpec) {
	if _, math := a.metric.(awscloudwatch.MathExpression); math && w.cfg.Local {
		// MiniStack's CloudFormation refuses an alarm on metric math (and evaluates no alarm
		// at all); the template tests check these on the stack for AWS.
		return
	}
	op := awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD
	if a.below {
		op = awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD
	}
	if a.n == 0 {
		a.m, a.n = 1, 1
	}
	a.missing = cmp.Or(a.missing, awscloudwatch.TreatMissingData_NOT_BREACHING)
	al := awscloudwatch.NewAlarm(w.scope, jsii.String(a.id), &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String(a.description), Metric: a.metric, Threshold: jsii.Number(a.threshold),
		EvaluationPeriods: jsii.Number(a.n), DatapointsToAlarm: jsii.Number(a.m), ComparisonOperator: op, TreatMissingData: a.missing,
	})
	action := awscloudwatchactions.NewSnsAction(w.o.AlarmTopic)
	al.AddAlarmAction(action)
	al.AddOkAction(action)
	w.alarms = append(w.alarms, al)
}

// newAlarms defines what pages someone, each alarm sending its ALARM and OK to the alarm topic.
// docs/operations.md says what to do when each fires.
func newAlarms(scope constructs.Construct, cfg Props, file *sources.File, o *Oncehook) []awscloudwatch.Alarm {
	w := &watch{scope: scope, cfg: cfg, o: o}
	const minute, five = time.Minute, 5 * time.Minute

	// The outbox.
	w.alarm(alarmSpec{id: "OutboxDlqNotEmpty", description: "Stream records or wake-ups gave up after their retries; the sweeper re-drives the intents, but look at why",
		metric: w.failures()})
	w.alarm(alarmSpec{id: "OutboxIteratorAge", description: "The outbox worker is falling behind the table's stream (over 5 minutes)",
		metric: o.Outbox.Metric(jsii.String("IteratorAge"), every(five, "Maximum")), threshold: 300_000, m: 2, n: 3})
	// Missing data keeps the state: a sweeper that stopped is the heartbeat's to report, and
	// must not turn a parked alarm OK.
	w.alarm(alarmSpec{id: "ParkedIntents", description: "Claims with intents parked for an operator (a permanent error, a redirect, no executor, attempts exhausted): hookctl parked lists them",
		metric: w.ours("ParkedClaims", "Maximum", five), missing: awscloudwatch.TreatMissingData_IGNORE})
	w.alarm(alarmSpec{id: "SweeperHeartbeat", description: "The sweeper has not run for 10 minutes: nothing re-drives what the stream and retry paths leave behind, and the parked gauge is stale",
		metric: w.ours("SweepRuns", "Sum", 10*time.Minute), threshold: 1, below: true, missing: awscloudwatch.TreatMissingData_BREACHING})
	// A deferral is the run's clock running out, which the next run or the outbox function
	// (the sweeper hands it the intent) takes over; a deferral in every run for 15 minutes is
	// an intent no function gets to.
	w.alarm(alarmSpec{id: "SweepDeferred", description: "Every sweep for 15 minutes deferred intents it had no time for: a target slower than the sweeper's timeout, or a backlog; they run only when something runs them (docs/operations.md)",
		metric: w.ours("SweepDeferred", "Sum", five), m: 3, n: 3})
	if len(cfg.Sweeper.AuditPrefixes) > 0 {
		w.alarm(alarmSpec{id: "EffectsWithoutClaim", description: "The leak audit found effect records no claim wrote: something writes them outside oncehook's transaction (the sweeper's log names each key)",
			metric: w.ours("EffectsWithoutClaim", "Sum", five)})
	}

	// The receiver, per source.
	for _, name := range file.Names() {
		src := []string{"source", name}
		sum := func(metric string, period time.Duration) awscloudwatch.IMetric {
			return w.ours(metric, "Sum", period, src...)
		}
		w.alarm(alarmSpec{id: "DuplicateSpike-" + name, description: "Duplicates from " + name + " above the usual trickle: a redrive, or handler latency over the provider's timeout",
			metric: sum("Duplicate", five), threshold: cfg.Alarms.DuplicateSpike, m: 2, n: 3})
		w.alarm(alarmSpec{id: "SignatureRejected-" + name, description: "Over half of " + name + "'s deliveries fail their signature (a broken secret rotation 401s every delivery until the provider disables the endpoint)",
			metric: rate("SignatureRejected %", sum("SignatureRejected", five), sum("Received", five), 20, five), threshold: 50, m: 2, n: 3})
		w.alarm(alarmSpec{id: "ReceiverFailing-" + name, description: "Over 5% of " + name + "'s deliveries are answered 503 (DynamoDB throttled or slow) or 500 (a planner or configuration error)",
			metric: expr("503 and 500 %", "IF(recv >= 10, 100 * (unavailable + failed) / recv, 0)", minute,
				metrics{"recv": sum("Received", minute), "unavailable": sum("Unavailable", minute), "failed": sum("Failed", minute)}),
			threshold: 5, m: 3, n: 5})
		// The rate above judges only 10 deliveries a minute and more: under that, a count. A
		// provider retries a failed delivery within the hour (docs/operations.md), so a
		// source failing everything fails twice in an hour at any volume; one 503 does not page.
		w.alarm(alarmSpec{id: "DeliveriesFailing-" + name, description: "Two or more 5-minute periods in the last hour with deliveries from " + name + " answered 503 or 500, at any volume: the provider retries, then disables the endpoint",
			metric: expr("503 and 500", "FILL(unavailable, 0) + FILL(failed, 0)", five, metrics{"unavailable": sum("Unavailable", five), "failed": sum("Failed", five)}),
			m:      2, n: 12})
		w.alarm(alarmSpec{id: "UnknownTypes-" + name, description: "Events from " + name + " of types no planner is registered for: a planner missing or misnamed (unknown_types says whether they were claimed empty)",
			metric: sum("UnknownType", five)})
		// Secrets in a store are re-read at their maximum age (env and public keys never
		// change). A failed re-read keeps the values held (deliveries go on), so a secret
		// revoked at the store keeps verifying until one succeeds: ten minutes of failures pages.
		if slices.ContainsFunc(file.Sources[name].Secrets, func(r sources.SecretRef) bool { return r.SecretsManager != "" || r.SSM != "" }) {
			w.alarm(alarmSpec{id: "SecretRefreshFailed-" + name, description: "The receiver could not re-read " + name + "'s secrets from Secrets Manager or SSM: it keeps the values it holds, so a secret revoked there still verifies (its log's secret_refresh_error says why: permissions, throttling, a key)",
				metric: sum("SecretRefreshFailed", five), m: 2, n: 3})
		}
		if file.Sources[name].Guarded() {
			w.alarm(alarmSpec{id: "ReplayRefused-" + name, description: "A signed body from " + name + " came again under another event id: a captured delivery replayed (or the provider sent one fact twice)",
				metric: sum("ReplayRefused", five)})
		}
	}
	// A downstream that fails: intents retry with backoff for about half an hour before they
	// park (ParkedIntents). Most of a target's attempts retried for 15 minutes pages first.
	for _, t := range allTargets(file, cfg) {
		tgt := []string{"target", t}
		w.alarm(alarmSpec{id: "TargetRetrying-" + t, description: "Over half of the attempts at target " + t + " are retried, for 15 minutes: the downstream is failing; its intents park in about 30 minutes",
			metric: expr("retried %", "IF(FILL(retried, 0) + FILL(done, 0) > 0, 100 * FILL(retried, 0) / (FILL(retried, 0) + FILL(done, 0)), 0)", five,
				metrics{"retried": w.ours("IntentsRetried", "Sum", five, tgt...), "done": w.ours("IntentsDone", "Sum", five, tgt...)}),
			threshold: 50, m: 3, n: 3})
	}
	// The platform under them.
	w.alarm(alarmSpec{id: "Api5xx", description: "Over 1% of requests to the webhook API are answered 5xx (the receiver failing, throttled, or timing out)",
		metric: rate("5xx %", o.Api.MetricServerError(every(minute, "Sum")), o.Api.MetricCount(every(minute, "Sum")), 10, minute), threshold: 1, m: 3, n: 5})
	w.alarm(alarmSpec{id: "Api5xxCount", description: "Two or more 5-minute periods in the last hour with requests to the webhook API answered 5xx, at any volume (Api5xx judges only 10 a minute and more)",
		metric: expr("5xx", "FILL(errors, 0)", five, metrics{"errors": o.Api.MetricServerError(every(five, "Sum"))}), m: 2, n: 12})
	tightest := receiverTimeout(file)
	w.alarm(alarmSpec{id: "ReceiverLatency", description: fmt.Sprintf("The receiver's p99 duration is over 80%% of the tightest provider timeout (%s): deliveries are about to be retried as failures", tightest),
		metric: o.Receiver.MetricDuration(every(minute, "p99")), threshold: 0.8 * float64(tightest.Milliseconds()), m: 3, n: 5})
	for _, fn := range o.functions() {
		id := *fn.Node().Id()
		w.alarm(alarmSpec{id: id + "Errors", description: "Over 1% of the " + id + " function's invocations fail (a function that cannot start names the bad setting in its log)",
			metric: rate("errors %", fn.MetricErrors(every(minute, "Sum")), fn.MetricInvocations(every(minute, "Sum")), 1, minute), threshold: 1, m: 3, n: 5})
		w.alarm(alarmSpec{id: id + "Throttles", description: "The " + id + " function is being throttled (account or reserved concurrency)",
			metric: fn.MetricThrottles(every(minute, "Sum")), m: 3, n: 5})
	}
	w.alarm(alarmSpec{id: "TableThrottled", description: "DynamoDB throttles writes to the table: the receiver answers 503s",
		metric: o.Table.Metric(jsii.String("WriteThrottleEvents"), every(minute, "Sum")), m: 2, n: 3})
	index := every(minute, "Sum") // the table's metric, of its pending index
	index.DimensionsMap = &map[string]*string{"TableName": o.Table.TableName(), "GlobalSecondaryIndexName": jsii.String(dedup.PendingIndex)}
	w.alarm(alarmSpec{id: "PendingIndexThrottled", description: "DynamoDB throttles the pending index, which throttles the table's writes too: raise PendingShards (docs/capacity.md)",
		metric: o.Table.Metric(jsii.String("WriteThrottleEvents"), index), m: 2, n: 3})
	return w.alarms
}

// allTargets are the intent targets, sorted: the sources file's and the application's own.
func allTargets(file *sources.File, cfg Props) []string {
	targets := append(sortedKeys(file.Targets), sortedKeys(cfg.Outbox.Executors)...)
	slices.Sort(targets)
	return slices.Compact(targets)
}

// newAlarmTopic is Props.Alarms.Topic, or a new topic this account's alarms may publish to,
// with Props.Alarms' subscriptions.
func newAlarmTopic(c constructs.Construct, stack awscdk.Stack, cfg Props) awssns.ITopic {
	topic := cfg.Alarms.Topic
	if topic == nil {
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
				"ArnLike":      map[string]any{"aws:SourceArn": stackArn(stack, "cloudwatch", "alarm:*")},
				"StringEquals": map[string]any{"aws:SourceAccount": *stack.Account()},
			},
		}))
		nag(t, "AwsSolutions-SNS2", "CloudWatch alarms cannot publish to a topic under the AWS managed SNS key; notifications carry alarm names and states, no secrets. Pass Props.Alarms.Topic with a customer-managed key to encrypt.")
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

// checkAlarms fills in the duplicate spike's default and refuses one no count crosses as meant
// (below 0 any duplicate breaches it, NaN or +Inf cannot be written), and a subscription SNS
// would refuse.
func checkAlarms(cfg *Props, _ *sources.File) error {
	if !knob(&cfg.Alarms.DuplicateSpike, 500, 0, math.MaxFloat64, false) {
		return fmt.Errorf("Props.Alarms.DuplicateSpike %g: must be a positive number of duplicates in 5 minutes (0 for the default, 500)", cfg.Alarms.DuplicateSpike)
	}
	for i, e := range cfg.Alarms.Emails {
		if at := strings.LastIndexByte(e, '@'); at < 1 || at == len(e)-1 || strings.ContainsAny(e, " \t\n,;") {
			return fmt.Errorf("Props.Alarms.Emails[%d] %q: not an email address", i, e)
		}
	}
	for i, e := range cfg.Alarms.HttpsEndpoints {
		if u, err := url.Parse(e); err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("Props.Alarms.HttpsEndpoints[%d] %s: must be an https:// URL (only its scheme and host are shown: the rest may hold the integration's key)", i, shownURL(e))
		}
	}
	return nil
}
