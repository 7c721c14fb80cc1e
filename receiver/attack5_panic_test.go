package receiver_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/dedup"
)

// TestAPanickingPlannerLeavesNoSpanOpen: every span the receiver starts is ended, on
// a panic too. A planner is the application's code; when it panics, Lambda's runtime recovers
// the panic, answers the invocation with an error and stops the process. The delivery span
// and the plan span under it are never ended, so they are never exported: the one delivery
// an operator most needs to find leaves no trace at all (and the SDK keeps them as open spans
// until the process dies).
//
// The space: the panic in the plan of a single event and of a batch's first and second event.
func TestAPanickingPlannerLeavesNoSpanOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withSources(attack5BatchSources, map[string]string{"BATCH_SECRET": "batch-secret"}))
	for i, c := range []struct{ source, body string }{
		{"stripe", failingBody("evt_a5_p0")},
		{"batch", "[" + failingBody("evt_a5_p1") + "," + orderBody("evt_a5_p2", "ord_a5_p2") + "]"},
		{"batch", "[" + orderBody("evt_a5_p3", "ord_a5_p3") + "," + failingBody("evt_a5_p4") + "]"},
	} {
		rec := e.attack5Traced(func(context.Context, dedup.Event) (dedup.Plan, error) { panic("planner bug") })
		req := e.request(c.source, c.body, nil, "")
		func() {
			defer func() { _ = recover() }() // as Lambda's runtime does
			_, _ = e.handler.Handle(context.Background(), req)
		}()
		_, open := openSpans(rec)
		if len(rec.Started()) == 0 {
			t.Fatalf("case %d: no span started", i)
		}
		if len(open) > 0 {
			t.Errorf("case %d (%s): a planner's panic left spans %q started and never ended (never exported)", i, c.source, open)
		}
	}
}

// openSpans is the names of the spans rec saw started, and of those never ended.
func openSpans(rec *tracetest.SpanRecorder) (started, open []string) {
	ended := map[trace.SpanID]bool{}
	for _, s := range rec.Ended() {
		ended[s.SpanContext().SpanID()] = true
	}
	for _, s := range rec.Started() {
		started = append(started, s.Name())
		if !ended[s.SpanContext().SpanID()] {
			open = append(open, s.Name())
		}
	}
	return started, open
}
