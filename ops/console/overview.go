package console

import (
	"cmp"
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook/dedup"
)

type overviewView struct {
	FromMetrics bool
	MetricsErr  string
	Charts      []chart
	Claims      int
	More        bool
	// The failed attempts per source and per target, the most first.
	FailedSources, FailedTargets []*failureRow
	// The paused targets, and those of the sources file that may be paused.
	Paused   []*targetLoad
	Pausable []string
}

// failureRow is a source's or a target's failed attempts (retried or parked), those of intents
// that later succeeded included, over the last hour and the last day: from the metrics
// (Exact), or at least these (the histories the pending index holds).
type failureRow struct {
	Name      string
	Hour, Day int
	Exact     bool
}

// The overview's counters, per source and per target.
var (
	sourceSeries = []series{{"accepted", "s0"}, {"duplicates", "s1"}, {"replays refused", "s2"}, {"failures", "s3"}}
	targetSeries = []series{{"done", "s0"}, {"retried", "s1"}, {"parked", "s3"}}
	loadSeries   = []series{{"due", "s1"}, {"waiting", "s0"}, {"running", "s2"}, {"parked", "s3"}}
)

func (c *Console) overview(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	loads, cls, more, err := c.loads(ctx, true)
	if err != nil {
		return awsErr("reading the pending index", err)
	}
	bySource, byTarget := c.failures(cls)
	v := overviewView{Claims: len(cls), More: more}
	now := chart{Title: "Open and parked intents per target, now (pending index)", Series: loadSeries, AtLeast: more}
	for _, l := range loads {
		now.Rows = append(now.Rows, chartRow{Label: l.Target, Values: []float64{float64(l.Due), float64(l.Waiting), float64(l.Running), float64(l.Parked)}})
		failureOf(byTarget, l.Target)
		if l.Paused != nil {
			v.Paused = append(v.Paused, l)
		} else if c.src.Targets[l.Target] != nil {
			v.Pausable = append(v.Pausable, l.Target)
		}
	}
	if c.cfg.Metrics != nil {
		charts, err := c.metricCharts(ctx, byTarget)
		if err != nil {
			v.MetricsErr = c.logged(r, "reading the metrics", err)
		} else {
			v.FromMetrics = true
			v.Charts = charts
		}
	}
	v.FailedSources, v.FailedTargets = mostFirst(bySource), mostFirst(byTarget)
	v.Charts = append(v.Charts, now)
	if !v.FromMetrics {
		ch := c.indexSourceChart(cls)
		ch.AtLeast = more
		v.Charts = append(v.Charts, ch)
	}
	return c.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Data: v})
}

// metricCharts: per source and per target of failed, the last hour and the last day, from
// Metrics; and each target's failed attempts (retried and parked) in failed, exact.
func (c *Console) metricCharts(ctx context.Context, failed map[string]*failureRow) ([]chart, error) {
	srcs, targets := c.src.Names(), slices.Sorted(maps.Keys(failed))
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
	exact := map[string][2]int{} // applied to failed once both spans are read
	for k, span := range []struct {
		name string
		d    time.Duration
	}{{"last hour", time.Hour}, {"last day", 24 * time.Hour}} {
		sums, err := c.cfg.Metrics.Sums(ctx, end.Add(-span.d), end, qs)
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
			n := exact[t]
			n[k] = int(v[1] + v[2])
			exact[t] = n
			i += 3
		}
		out = append(out, sc, tc)
	}
	for t, n := range exact {
		failed[t].Hour, failed[t].Day, failed[t].Exact = n[0], n[1], true
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
	for _, s := range c.src.Names() {
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

// failures counts the failed attempts (retried or parked) of the last hour and the last day,
// per source and per target, in the histories of cls: lower bounds, since an intent that
// failed then succeeded is among them only while its claim is in the index.
func (c *Console) failures(cls []*dedup.Claim) (bySource, byTarget map[string]*failureRow) {
	now := c.cfg.Now()
	hour, day := now.Add(-time.Hour).UnixMilli(), now.Add(-24*time.Hour).UnixMilli()
	bySource, byTarget = map[string]*failureRow{}, map[string]*failureRow{}
	for _, s := range c.src.Names() {
		failureOf(bySource, s)
	}
	for _, cl := range cls {
		for _, in := range cl.Intents {
			for _, a := range in.History {
				if a.At < day || (a.Outcome != dedup.AttemptRetried && a.Outcome != dedup.IntentParked) {
					continue
				}
				for _, f := range []*failureRow{failureOf(bySource, cl.Source), failureOf(byTarget, in.Target)} {
					f.Day++
					if a.At >= hour {
						f.Hour++
					}
				}
			}
		}
	}
	return bySource, byTarget
}

func failureOf(m map[string]*failureRow, name string) *failureRow {
	if m[name] == nil {
		m[name] = &failureRow{Name: name}
	}
	return m[name]
}

// mostFirst: the rows with the most failures of the day first, then of the hour, then by name.
func mostFirst(m map[string]*failureRow) []*failureRow {
	rows := slices.Collect(maps.Values(m))
	slices.SortFunc(rows, func(a, b *failureRow) int {
		return cmp.Or(b.Day-a.Day, b.Hour-a.Hour, strings.Compare(a.Name, b.Name))
	})
	return rows
}
