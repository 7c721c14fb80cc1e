package console

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/oncehook/oncehook/emf"
)

// Metrics reads the stack's counters for the overview's charts.
type Metrics interface {
	// Sums returns each query's sum over [start, end), in order; a metric with no data
	// sums to 0.
	Sums(ctx context.Context, start, end time.Time, qs []MetricQuery) ([]float64, error)
}

// MetricQuery names one counter of the functions' namespace and one dimension's value:
// Accepted by source "shop", IntentsDone by target "email".
type MetricQuery struct {
	Name, Dimension, Value string
}

// CloudWatchAPI is the part of the CloudWatch client CloudWatch uses.
type CloudWatchAPI interface {
	GetMetricData(ctx context.Context, in *cloudwatch.GetMetricDataInput, optFns ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error)
}

// CloudWatch reads the functions' EMF metrics from CloudWatch: one GetMetricData call for up
// to 500 queries.
type CloudWatch struct {
	Client CloudWatchAPI
	// Namespace is the stack's metrics namespace (infra.Props.Telemetry.MetricsNamespace). Default
	// emf.DefaultNamespace.
	Namespace string
}

// Sums implements Metrics with one period covering [start, end), statistic Sum.
func (m *CloudWatch) Sums(ctx context.Context, start, end time.Time, qs []MetricQuery) ([]float64, error) {
	ns := cmp.Or(m.Namespace, emf.DefaultNamespace)
	period := max(60, int32(end.Sub(start).Round(time.Minute)/time.Second))
	out := make([]float64, len(qs))
	for first := 0; first < len(qs); first += 500 {
		batch := qs[first:min(first+500, len(qs))]
		in := &cloudwatch.GetMetricDataInput{StartTime: aws.Time(start), EndTime: aws.Time(end)}
		for i, q := range batch {
			in.MetricDataQueries = append(in.MetricDataQueries, cwtypes.MetricDataQuery{
				Id: aws.String("m" + strconv.Itoa(first+i)),
				MetricStat: &cwtypes.MetricStat{
					Metric: &cwtypes.Metric{Namespace: aws.String(ns), MetricName: aws.String(q.Name),
						Dimensions: []cwtypes.Dimension{{Name: aws.String(q.Dimension), Value: aws.String(q.Value)}}},
					Period: aws.Int32(period),
					Stat:   aws.String("Sum"),
				},
			})
		}
		p := cloudwatch.NewGetMetricDataPaginator(m.Client, in)
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("cloudwatch: %w", err)
			}
			for _, r := range page.MetricDataResults {
				i, err := strconv.Atoi(aws.ToString(r.Id)[1:])
				if err != nil || i < 0 || i >= len(out) {
					continue
				}
				for _, v := range r.Values {
					out[i] += v
				}
			}
		}
	}
	return out, nil
}
