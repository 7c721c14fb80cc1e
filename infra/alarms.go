package infra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/sources"
)

// Namespace is where the functions' EMF metrics land.
const Namespace = "oncehook"

// alarms defines what pages someone, and a dashboard of the same signals. The README's
// operations section says what to do when each fires.
func alarms(stack constructs.Construct, cfg Props, file *sources.File, receiver, worker, sweeper awslambda.Function, dlq awssqs.Queue) ([]awscloudwatch.Alarm, awscloudwatch.Dashboard) {
	var all []awscloudwatch.Alarm
	five := awscdk.Duration_Minutes(jsii.Number(5))
	alarm := func(id, description string, metric awscloudwatch.IMetric, threshold float64) awscloudwatch.Alarm {
		a := awscloudwatch.NewAlarm(stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmDescription:   jsii.String(description),
			Metric:             metric,
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		all = append(all, a)
		return a
	}
	metric := func(name, stat string, dims map[string]*string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(Namespace), MetricName: jsii.String(name), Statistic: jsii.String(stat),
			Period: five, DimensionsMap: &dims,
		})
	}

	alarm("OutboxDlqNotEmpty", "Stream records gave up after their retries; the sweeper re-drives the intents, but look at why",
		dlq.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Maximum")}), 0)
	alarm("OutboxIteratorAge", "The outbox worker is falling behind the table's stream (over 5 minutes)",
		awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String("AWS/Lambda"), MetricName: jsii.String("IteratorAge"), Statistic: jsii.String("Maximum"),
			Period: five, DimensionsMap: &map[string]*string{"FunctionName": worker.FunctionName()},
		}), 300_000)
	alarm("ParkedIntents", "Claims with intents parked for an operator (permanent downstream errors or attempts exhausted)",
		metric("ParkedClaims", "Maximum", nil), 0)
	for _, name := range file.Names() {
		if file.Sources[name].ReplayGuard == "body" {
			alarm("ReplayRefused-"+name, "A signed body from "+name+" came again under another event id: a captured delivery replayed (or the provider sent one fact twice)",
				metric("ReplayRefused", "Sum", map[string]*string{"source": jsii.String(name)}), 0)
		}
		alarm("DuplicateSpike-"+name, "Duplicates from "+name+" above the usual trickle: a redrive, or handler latency over the provider's timeout",
			metric("Duplicate", "Sum", map[string]*string{"source": jsii.String(name)}), cfg.DuplicateSpike)
	}
	for id, fn := range map[string]awslambda.Function{"Receiver": receiver, "Outbox": worker, "Sweeper": sweeper} {
		alarm(id+"Errors", "The "+id+" function is failing invocations", fn.MetricErrors(&awscloudwatch.MetricOptions{Period: five}), 0)
	}

	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &metrics, Width: jsii.Number(8)})
	}
	dash := awscloudwatch.NewDashboard(stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		Widgets: &[]*[]awscloudwatch.IWidget{
			{
				graph("Deliveries", metric("Received", "Sum", nil), metric("Accepted", "Sum", nil), metric("Duplicate", "Sum", nil)),
				graph("Refused", metric("SignatureRejected", "Sum", nil), metric("Rejected", "Sum", nil), metric("Unavailable", "Sum", nil), metric("Failed", "Sum", nil)),
				graph("Commit latency (ms)", metric("CommitLatency", "p99", nil), metric("CommitLatency", "p50", nil)),
			},
			{
				graph("Intents", metric("IntentsDone", "Sum", nil), metric("IntentsRetried", "Sum", nil), metric("IntentsParked", "Sum", nil), metric("LeaseLost", "Sum", nil)),
				graph("Parked and swept", metric("ParkedClaims", "Maximum", nil), metric("SweepRedriven", "Sum", nil)),
				graph("Backstop and mismatches", metric("BackstopAbsorbed", "Sum", nil), metric("PayloadMismatch", "Sum", nil)),
			},
		},
	})
	return all, dash
}
