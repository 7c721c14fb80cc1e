package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/oncehook/oncehook/ops/console"
)

// fakeCloudWatch answers GetMetricData with, for each query, its index+1 in two values.
type fakeCloudWatch struct {
	calls []*cloudwatch.GetMetricDataInput
}

func (f *fakeCloudWatch) GetMetricData(_ context.Context, in *cloudwatch.GetMetricDataInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error) {
	f.calls = append(f.calls, in)
	out := &cloudwatch.GetMetricDataOutput{}
	for _, q := range in.MetricDataQueries {
		out.MetricDataResults = append(out.MetricDataResults, cwtypes.MetricDataResult{Id: q.Id, Values: []float64{1, 2}})
	}
	return out, nil
}

// The emulator cannot be asked (MiniStack computes no metrics from EMF lines), so the
// queries CloudWatch sends are checked as sent: the namespace, the metric and its one
// dimension, Sum over one period spanning the range, batches of 500.
func TestCloudWatchAsksForOneSumPerQueryOverTheRange(t *testing.T) {
	t.Parallel()
	f := &fakeCloudWatch{}
	m := &console.CloudWatch{Client: f, Namespace: "shop-metrics"}
	end := time.Date(2026, 12, 4, 21, 0, 0, 0, time.UTC)
	qs := make([]console.MetricQuery, 501)
	for i := range qs {
		qs[i] = console.MetricQuery{Name: "Accepted", Dimension: "source", Value: "shop"}
	}
	qs[500] = console.MetricQuery{Name: "IntentsDone", Dimension: "target", Value: "email"}
	sums, err := m.Sums(context.Background(), end.Add(-time.Hour), end, qs)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 2 || len(f.calls[0].MetricDataQueries) != 500 || len(f.calls[1].MetricDataQueries) != 1 {
		t.Fatalf("%d calls", len(f.calls))
	}
	q := f.calls[1].MetricDataQueries[0].MetricStat
	if aws.ToString(q.Metric.Namespace) != "shop-metrics" || aws.ToString(q.Metric.MetricName) != "IntentsDone" || aws.ToString(q.Stat) != "Sum" ||
		aws.ToInt32(q.Period) != 3600 || aws.ToString(q.Metric.Dimensions[0].Name) != "target" || aws.ToString(q.Metric.Dimensions[0].Value) != "email" {
		t.Fatalf("query %+v", q)
	}
	if len(sums) != 501 || sums[0] != 3 || sums[500] != 3 {
		t.Fatalf("sums %v..., want each query's values summed", sums[:3])
	}
}
