package outbox

import (
	"io"
	"sync"
	"time"

	"github.com/oncehook/oncehook/emf"
)

// Namespace is the CloudWatch namespace of the worker's metrics (shared with the receiver).
const Namespace = "oncehook"

// EMFMetrics writes one CloudWatch EMF document per intent turn and per sweep.
type EMFMetrics struct {
	mu sync.Mutex
	w  io.Writer
}

// NewEMFMetrics writes to w (stdout in Lambda).
func NewEMFMetrics(w io.Writer) *EMFMetrics { return &EMFMetrics{w: w} }

var byTarget = []string{"target"}

// Intent counts one turn: IntentsDone, IntentsRetried, IntentsParked or LeaseLost, and the
// execution latency, per target.
func (m *EMFMetrics) Intent(target, outcome string, latency time.Duration) {
	name := map[string]string{OutcomeDone: "IntentsDone", OutcomeRetry: "IntentsRetried", OutcomeParked: "IntentsParked", OutcomeLeaseLost: "LeaseLost"}[outcome]
	if name == "" {
		return
	}
	d := emf.New(Namespace, time.Now())
	d.Set("target", target)
	d.Count(name, byTarget)
	d.Add("ExecutionLatency", float64(latency.Microseconds())/1000, emf.Milliseconds, byTarget)
	m.write(d)
}

// Sweep reports ParkedIntents (the alarm's gauge) and what the sweep re-drove.
func (m *EMFMetrics) Sweep(r SweepReport) {
	d := emf.New(Namespace, time.Now())
	d.Add("ParkedIntents", float64(r.Parked), emf.Count)
	d.Add("SweepRedriven", float64(r.Summary[OutcomeDone]+r.Summary[OutcomeRetry]+r.Summary[OutcomeParked]), emf.Count)
	d.Add("SweepFailures", float64(r.Failures), emf.Count)
	m.write(d)
}

func (m *EMFMetrics) write(d *emf.Document) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _ = d.WriteTo(m.w)
}
