package outbox

import (
	"cmp"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/oncehook/oncehook/emf"
)

// Namespace is the CloudWatch namespace of the worker's metrics (shared with the receiver)
// unless NewEMFMetrics is given another.
const Namespace = emf.DefaultNamespace

// EMFMetrics writes one CloudWatch EMF document per intent turn and per sweep.
type EMFMetrics struct {
	mu        sync.Mutex
	w         io.Writer
	namespace string
}

// NewEMFMetrics writes to w (stdout in Lambda), in namespace (Namespace when empty).
func NewEMFMetrics(w io.Writer, namespace string) *EMFMetrics {
	return &EMFMetrics{w: w, namespace: cmp.Or(namespace, Namespace)}
}

// EmittedMetrics is every metric the worker and the sweeper write, under each dimension set
// they write it with. A test holds EMFMetrics to it; the stack names only these.
func EmittedMetrics() []emf.Metric {
	var out []emf.Metric
	for _, n := range append(slices.Sorted(maps.Values(intentMetric)), "ExecutionLatency") {
		out = append(out, emf.Metric{Name: n, Dimensions: byTarget})
	}
	for _, n := range []string{"SweepRuns", "ParkedClaims", "SweepRedriven", "SweepSettled", "SweepFailures", "SweepDeferred", "SweepIncomplete",
		"EffectsAudited", "EffectsWithoutClaim"} {
		out = append(out, emf.Metric{Name: n})
	}
	return out
}

var byTarget = []string{"target"}

// intentMetric names each counted outcome of a turn (EmittedMetrics lists its names).
var intentMetric = map[string]string{
	OutcomeDone: "IntentsDone", OutcomeRetry: "IntentsRetried", OutcomeParked: "IntentsParked",
	OutcomeLeaseLost: "LeaseLost", outcomeUnscheduled: "RetryNotScheduled", OutcomeHeld: "IntentsHeld",
	OutcomePaused: "IntentsPaused",
}

// Intent counts one turn per target: IntentsDone, IntentsRetried, IntentsParked or LeaseLost
// with the execution latency; RetryNotScheduled, IntentsHeld or IntentsPaused without (no call).
func (m *EMFMetrics) Intent(target, outcome string, latency time.Duration) {
	name := intentMetric[outcome]
	if name == "" {
		return
	}
	d := emf.New(m.namespace, time.Now())
	d.Set("target", target)
	d.Count(name, byTarget)
	if outcome != outcomeUnscheduled && outcome != OutcomeHeld && outcome != OutcomePaused {
		d.Add("ExecutionLatency", float64(latency.Microseconds())/1000, emf.Milliseconds, byTarget)
	}
	m.write(d)
}

// Sweep reports one run: SweepRuns (the heartbeat, skipped runs included), ParkedClaims (the
// parked alarm's gauge), SweepRedriven, SweepSettled, SweepFailures, SweepDeferred and
// SweepIncomplete; with an audit, EffectsAudited and EffectsWithoutClaim (the leak alarm's).
func (m *EMFMetrics) Sweep(r SweepReport) {
	d := emf.New(m.namespace, time.Now())
	d.Add("SweepRuns", 1, emf.Count)
	if !r.Skipped {
		d.Add("ParkedClaims", float64(r.Parked), emf.Count)
		d.Add("SweepRedriven", float64(r.Summary[OutcomeDone]+r.Summary[OutcomeRetry]+r.Summary[OutcomeParked]), emf.Count)
		d.Add("SweepSettled", float64(r.Settled), emf.Count)
		d.Add("SweepFailures", float64(r.Failures), emf.Count)
		d.Add("SweepDeferred", float64(r.Deferred), emf.Count)
		incomplete := 0.0
		if r.Incomplete {
			incomplete = 1
		}
		d.Add("SweepIncomplete", incomplete, emf.Count)
		if r.Audit != nil {
			d.Add("EffectsAudited", float64(r.Audit.Effects), emf.Count)
			d.Add("EffectsWithoutClaim", float64(r.Audit.WithoutClaimCount), emf.Count)
		}
	}
	m.write(d)
}

func (m *EMFMetrics) write(d *emf.Document) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _ = d.WriteTo(m.w)
}
