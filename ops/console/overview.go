package console

import (
	"net/http"
	"time"

	"github.com/oncehook/oncehook/dedup"
)

type overviewView struct {
	FromMetrics bool
	MetricsErr  string
	Charts      []chart
	Claims      int
	More        bool
}

// The overview's counters, per source and per target.
var (
	sourceSeries = []series{{"accepted", "s0"}, {"duplicates", "s1"}, {"replays refused", "s2"}, {"failures", "s3"}}
	targetSeries = []series{{"done", "s0"}, {"retried", "s1"}, {"parked", "s3"}}
	loadSeries   = []series{{"due", "s1"}, {"waiting", "s0"}, {"running", "s2"}, {"parked", "s3"}}
)

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	loads, cls, more, err := c.loads(ctx, true)
	if err != nil {
		c.awsFail(w, r, "reading the pending index", err)
		return
	}
	v := overviewView{Claims: len(cls), More: more}
	now := chart{Title: "Open and parked intents per target, now (pending index)", Series: loadSeries, AtLeast: more}
	for _, l := range loads {
		now.Rows = append(now.Rows, chartRow{Label: l.Target, Values: []float64{float64(l.Due), float64(l.Waiting), float64(l.Running), float64(l.Parked)}})
	}
	if c.cfg.Metrics != nil {
		charts, err := c.metricCharts(r, loads)
		if err != nil {
			v.MetricsErr = c.logged(r, "reading the metrics", err)
		} else {
			v.FromMetrics = true
			v.Charts = charts
		}
	}
	v.Charts = append(v.Charts, now)
	if !v.FromMetrics {
		ch := c.indexSourceChart(cls)
		ch.AtLeast = more
		v.Charts = append(v.Charts, ch)
	}
	c.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Data: v})
}

// metricCharts: per source and per target, the last hour and the last day, from Metrics.
func (c *Console) metricCharts(r *http.Request, loads []*targetLoad) ([]chart, error) {
	srcs := c.sourceNames()
	var targets []string
	for _, l := range loads {
		targets = append(targets, l.Target)
	}
	var qs []MetricQuery
	for _, s := range srcs {
		for _, m := range []string{"Accepted", "Duplicate", "ReplayRefused", "Failed", "Unavailable"} {
			qs = append(qs, MetricQuery{Name: m, Dimension: "source", Value: s})
		}
	}
	for _, t := range targets {
		for _, m := range []string{"IntentsDone", "IntentsRetried", "IntentsParked"} {
			qs = append(qs, MetricQuery{Name: m, Dimension: "target", Value: t})
		}
	}
	end := c.cfg.Now().Truncate(time.Minute).Add(time.Minute)
	var out []chart
	for _, span := range []struct {
		name string
		d    time.Duration
	}{{"last hour", time.Hour}, {"last day", 24 * time.Hour}} {
		sums, err := c.cfg.Metrics.Sums(r.Context(), end.Add(-span.d), end, qs)
		if err != nil {
			return nil, err
		}
		sc := chart{Title: "Deliveries per source, " + span.name, Series: sourceSeries}
		i := 0
		for _, s := range srcs {
			v := sums[i : i+5]
			sc.Rows = append(sc.Rows, chartRow{Label: s, Values: []float64{v[0], v[1], v[2], v[3] + v[4]}})
			i += 5
		}
		tc := chart{Title: "Intents per target, " + span.name, Series: targetSeries}
		for _, t := range targets {
			v := sums[i : i+3]
			tc.Rows = append(tc.Rows, chartRow{Label: t, Values: v})
			i += 3
		}
		out = append(out, sc, tc)
	}
	return out, nil
}

// indexSourceChart: without metrics, the claims in the pending index per source, by how long
// ago they entered it.
func (c *Console) indexSourceChart(cls []*dedup.Claim) chart {
	ch := chart{Title: "Claims with open or parked intents per source, by when they entered the index", Series: []series{{"last hour", "s0"}, {"last day", "s1"}, {"older", "s2"}}}
	now := c.cfg.Now()
	counts := map[string][]float64{}
	var order []string
	for _, s := range c.sourceNames() {
		counts[s] = make([]float64, 3)
		order = append(order, s)
	}
	for _, cl := range cls {
		if counts[cl.Source] == nil {
			counts[cl.Source] = make([]float64, 3)
			order = append(order, cl.Source)
		}
		switch age := now.Sub(time.UnixMilli(cl.PendingSince)); {
		case age <= time.Hour:
			counts[cl.Source][0]++
		case age <= 24*time.Hour:
			counts[cl.Source][1]++
		default:
			counts[cl.Source][2]++
		}
	}
	for _, s := range order {
		ch.Rows = append(ch.Rows, chartRow{Label: s, Values: counts[s]})
	}
	return ch
}
