package receiver_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/examples/orders"
	"github.com/oncehook/oncehook/receiver"
)

const attack5BatchSources = `{"sources": {
  "stripe": {"scheme": "stripe", "secrets": [{"env": "STRIPE_SECRET"}], "retry_horizon": "3d", "redrive_window": "30d"},
  "batch":  {"scheme": "hmac-sha256", "hmac": {"header": "X-Sig", "prefix": "sha256="},
             "secrets": [{"env": "BATCH_SECRET"}], "batch": true, "event_id": {"json": "id"}, "event_type": {"json": "type"},
             "retry_horizon": "1h", "redrive_window": "1d"}}}`

// attack5Traced is the env's handler, traced into a recorder, with the reference planners and
// a planner for "order.failing" on every source that fails with err.
func (e *env) attack5Traced(fail func(ctx context.Context, ev dedup.Event) (dedup.Plan, error)) *tracetest.SpanRecorder {
	e.t.Helper()
	rec := tracetest.NewSpanRecorder()
	planners := receiver.NewPlanners()
	for _, name := range e.file.Names() {
		orders.Register(planners, name)
		planners.Handle(name, "order.failing", fail)
	}
	h, err := receiver.New(receiver.Config{Sources: e.file, Secrets: e.secretsStore(), Store: e.store, Planners: planners,
		Now: e.clock, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	if err != nil {
		e.t.Fatal(err)
	}
	e.handler = h
	return rec
}

func failingBody(id string) string {
	return `{"id":"` + id + `","type":"order.failing","timestamp":"2026-08-25T09:14:03Z","data":{"order_id":"o","customer_email":"ada@example.com"}}`
}

// TestABatchsFailedPlanIsAPlanSpanInError: a planner that fails (a 500: the planner is
// ours to fix; or a 400: the payload) puts the plan span in error, as the single event's path
// does (its plan span ends with the planner's error). A batch's one plan span ends without an
// error whatever its planners did: the trace of a refused batch shows a plan that succeeded,
// and no span of it is in error at all when the answer is a 400.
//
// The space: each failure a planner can return (a plain error, a PayloadError), at each place
// in a batch (first, after a good event), on a batch source, with the same failure on a
// single-event source as the reference.
func TestABatchsFailedPlanIsAPlanSpanInError(t *testing.T) {
	t.Parallel()
	failures := []error{errors.New("planner: the catalogue is down"), &receiver.PayloadError{Field: "data.order_id", Reason: "is not an order"}}
	for fi, failure := range failures {
		e := newEnv(t, withSources(attack5BatchSources, map[string]string{"BATCH_SECRET": "batch-secret"}))
		rec := e.attack5Traced(func(context.Context, dedup.Event) (dedup.Plan, error) { return dedup.Plan{}, failure })

		// The reference: one event, its planner fails.
		single := e.post(e.request("stripe", failingBody("evt_a5_single"), nil, ""))
		if single.StatusCode < 400 {
			t.Fatalf("failure %d: single: %d %s", fi, single.StatusCode, single.Body)
		}
		plan := byName(t, rec.Ended())[receiver.SpanPlan]
		if plan == nil || plan.Status().Code != codes.Error {
			t.Fatalf("failure %d: the single event's plan span %v: the reference wants it in error", fi, plan)
		}

		for place, body := range []string{
			"[" + failingBody("evt_a5_b0") + "," + orderBody("evt_a5_b1", "ord_a5_b1") + "]",
			"[" + orderBody("evt_a5_b2", "ord_a5_b2") + "," + failingBody("evt_a5_b3") + "]",
		} {
			rec := e.attack5Traced(func(context.Context, dedup.Event) (dedup.Plan, error) { return dedup.Plan{}, failure })
			r := e.post(e.request("batch", body, nil, ""))
			if r.StatusCode != single.StatusCode {
				t.Fatalf("failure %d place %d: batch answered %d %s, the single event %d", fi, place, r.StatusCode, r.Body, single.StatusCode)
			}
			plan := byName(t, rec.Ended())[receiver.SpanPlan]
			if plan == nil {
				t.Fatalf("failure %d place %d: no plan span", fi, place)
			}
			if plan.Status().Code != codes.Error {
				t.Errorf("failure %d (%v) at place %d: the batch answered %d, and its plan span's status is %v: want it in error, as the single event's",
					fi, failure, place, r.StatusCode, plan.Status())
			}
		}
	}
}
