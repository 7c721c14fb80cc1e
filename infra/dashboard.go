package infra

import (
	"slices"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/oncehook/oncehook/sources"
)

// newDashboard is every alarm's state, then the platform's metrics, then the functions' own
// by source and by target.
func newDashboard(scope constructs.Construct, cfg Props, file *sources.File, o *Oncehook) awscloudwatch.Dashboard {
	w := &watch{scope: scope, cfg: cfg, o: o}
	const five = 5 * time.Minute
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &metrics, Width: jsii.Number(8)})
	}
	var rows []*[]awscloudwatch.IWidget
	// An alarm status widget shows at most 100 alarms.
	for shown := range slices.Chunk(o.Alarms, 100) {
		alarms := make([]interfacesawscloudwatch.IAlarmRef, len(shown))
		for i, a := range shown {
			alarms[i] = a
		}
		rows = append(rows, &[]awscloudwatch.IWidget{awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
			Title: jsii.String("alarms"), Alarms: &alarms, Width: jsii.Number(24), SortBy: awscloudwatch.AlarmStatusWidgetSortBy_STATE_UPDATED_TIMESTAMP,
		})})
	}
	var errs, throttles, durations []awscloudwatch.IMetric
	for _, fn := range o.functions() {
		errs = append(errs, fn.MetricErrors(every(five, "Sum")))
		throttles = append(throttles, fn.MetricThrottles(every(five, "Sum")))
		durations = append(durations, fn.MetricDuration(every(five, "p99")))
	}
	rows = append(rows, &[]awscloudwatch.IWidget{
		graph("function errors", errs...), graph("function throttles", throttles...), graph("function duration p99 (ms)", durations...),
	}, &[]awscloudwatch.IWidget{
		graph("API 4xx and 5xx", o.Api.MetricClientError(every(five, "Sum")), o.Api.MetricServerError(every(five, "Sum"))),
		graph("API latency (ms)", o.Api.MetricLatency(every(five, "p50")), o.Api.MetricLatency(every(five, "p99"))),
		graph("failure queue depth", w.failures()),
	})
	for _, name := range file.Names() {
		src := []string{"source", name}
		rows = append(rows, &[]awscloudwatch.IWidget{
			graph(name+": deliveries", w.sums(five, src, "Received", "Accepted", "Duplicate", "BackstopAbsorbed", "Probed")...),
			graph(name+": refused", w.sums(five, src, "SignatureRejected", "Rejected", "Unavailable", "Failed", "ReplayRefused", "UnknownType")...),
			graph(name+": commit latency (ms)", w.ours("CommitLatency", "p50", five, src...), w.ours("CommitLatency", "p99", five, src...)),
		})
	}
	for _, t := range allTargets(file, cfg) {
		tgt := []string{"target", t}
		rows = append(rows, &[]awscloudwatch.IWidget{
			graph(t+": intents", w.sums(five, tgt, "IntentsDone", "IntentsRetried", "IntentsParked", "LeaseLost", "RetryNotScheduled", "IntentsHeld", "IntentsPaused")...),
			graph(t+": call latency (ms)", w.ours("ExecutionLatency", "p50", five, tgt...), w.ours("ExecutionLatency", "p99", five, tgt...)),
		})
	}
	last := []awscloudwatch.IWidget{
		graph("sweeps", w.sums(five, nil, "SweepRuns", "SweepRedriven", "SweepSettled", "SweepFailures", "SweepDeferred", "SweepIncomplete")...),
		graph("parked claims", w.ours("ParkedClaims", "Maximum", five)),
		graph("outbox iterator age (ms)", o.Outbox.Metric(jsii.String("IteratorAge"), every(five, "Maximum"))),
	}
	if len(cfg.Sweeper.AuditPrefixes) > 0 {
		last = append(last, graph("leak audit", w.sums(five, nil, "EffectsAudited", "EffectsWithoutClaim")...))
	}
	rows = append(rows, &last)
	return awscloudwatch.NewDashboard(scope, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{Widgets: &rows})
}
