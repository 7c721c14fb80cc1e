package infra

import (
	"slices"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/sources"
)

// newDashboard is a dashboard of the metrics the functions actually write (watch.ours refuses
// any other): every alarm's state first, then the platform, then the same metrics as the
// alarms, by source and by target.
func newDashboard(scope constructs.Construct, cfg Props, file *sources.File, o *Oncehook) awscloudwatch.Dashboard {
	w := &watch{scope: scope, cfg: cfg, namespace: o.MetricsNamespace}
	api, receiverFn, worker, sweeper, dlq := o.Api, o.Receiver, o.Outbox, o.Sweeper, o.FailureQueue
	const five = 5 * time.Minute
	aws := awsMetric
	apiDims := map[string]*string{"ApiId": api.ApiId()}
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &metrics, Width: jsii.Number(8)})
	}
	var rows []*[]awscloudwatch.IWidget
	// An alarm status widget shows at most 100 alarms.
	for i := 0; i < len(o.Alarms); i += 100 {
		var shown []interfacesawscloudwatch.IAlarmRef
		for _, a := range o.Alarms[i:min(i+100, len(o.Alarms))] {
			shown = append(shown, a)
		}
		rows = append(rows, &[]awscloudwatch.IWidget{awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
			Title: jsii.String("alarms"), Alarms: &shown, Width: jsii.Number(24),
			SortBy: awscloudwatch.AlarmStatusWidgetSortBy_STATE_UPDATED_TIMESTAMP,
		})})
	}
	var errs, throttles, durations []awscloudwatch.IMetric
	for _, fn := range []awslambda.Function{receiverFn, worker, sweeper} {
		dims := map[string]*string{"FunctionName": fn.FunctionName()}
		errs = append(errs, aws("AWS/Lambda", "Errors", "Sum", five, dims))
		throttles = append(throttles, aws("AWS/Lambda", "Throttles", "Sum", five, dims))
		durations = append(durations, aws("AWS/Lambda", "Duration", "p99", five, dims))
	}
	rows = append(rows, &[]awscloudwatch.IWidget{
		graph("function errors", errs...), graph("function throttles", throttles...), graph("function duration p99 (ms)", durations...),
	}, &[]awscloudwatch.IWidget{
		graph("API 4xx and 5xx", aws("AWS/ApiGateway", "4xx", "Sum", five, apiDims), aws("AWS/ApiGateway", "5xx", "Sum", five, apiDims)),
		graph("API latency (ms)", aws("AWS/ApiGateway", "Latency", "p50", five, apiDims), aws("AWS/ApiGateway", "Latency", "p99", five, apiDims)),
		graph("failure queue depth", dlq.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Maximum")})),
	})
	for _, name := range file.Names() {
		src := []string{"source", name}
		rows = append(rows, &[]awscloudwatch.IWidget{
			graph(name+": deliveries", w.ours("Received", "Sum", five, src...), w.ours("Accepted", "Sum", five, src...), w.ours("Duplicate", "Sum", five, src...),
				w.ours("BackstopAbsorbed", "Sum", five, src...), w.ours("Probed", "Sum", five, src...)),
			graph(name+": refused", w.ours("SignatureRejected", "Sum", five, src...), w.ours("Rejected", "Sum", five, src...), w.ours("Unavailable", "Sum", five, src...),
				w.ours("Failed", "Sum", five, src...), w.ours("ReplayRefused", "Sum", five, src...), w.ours("UnknownType", "Sum", five, src...)),
			graph(name+": commit latency (ms)", w.ours("CommitLatency", "p50", five, src...), w.ours("CommitLatency", "p99", five, src...)),
		})
	}
	targets := append(sortedKeys(file.Targets), sortedKeys(cfg.Outbox.Executors)...)
	slices.Sort(targets)
	for _, t := range slices.Compact(targets) {
		tgt := []string{"target", t}
		rows = append(rows, &[]awscloudwatch.IWidget{
			graph(t+": intents", w.ours("IntentsDone", "Sum", five, tgt...), w.ours("IntentsRetried", "Sum", five, tgt...),
				w.ours("IntentsParked", "Sum", five, tgt...), w.ours("LeaseLost", "Sum", five, tgt...), w.ours("RetryNotScheduled", "Sum", five, tgt...),
				w.ours("IntentsHeld", "Sum", five, tgt...), w.ours("IntentsPaused", "Sum", five, tgt...)),
			graph(t+": call latency (ms)", w.ours("ExecutionLatency", "p50", five, tgt...), w.ours("ExecutionLatency", "p99", five, tgt...)),
		})
	}
	last := []awscloudwatch.IWidget{
		graph("sweeps", w.ours("SweepRuns", "Sum", five), w.ours("SweepRedriven", "Sum", five), w.ours("SweepSettled", "Sum", five),
			w.ours("SweepFailures", "Sum", five), w.ours("SweepDeferred", "Sum", five), w.ours("SweepIncomplete", "Sum", five)),
		graph("parked claims", w.ours("ParkedClaims", "Maximum", five)),
		graph("outbox iterator age (ms)", aws("AWS/Lambda", "IteratorAge", "Maximum", five, map[string]*string{"FunctionName": worker.FunctionName()})),
	}
	if len(cfg.Sweeper.AuditPrefixes) > 0 {
		last = append(last, graph("leak audit", w.ours("EffectsAudited", "Sum", five), w.ours("EffectsWithoutClaim", "Sum", five)))
	}
	rows = append(rows, &last)
	dash := awscloudwatch.NewDashboard(scope, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{Widgets: &rows})
	return dash
}
