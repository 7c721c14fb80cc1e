package receiver_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/examples/orders"
	"github.com/oncehook/oncehook/receiver"
)

// attack9PanickingStore is the env's store whose Commit panics (an application's Committer, a
// commit observer of its own, a bug in the write path).
type attack9PanickingStore struct{ *dedup.Store }

func (s attack9PanickingStore) Commit(context.Context, dedup.Event, dedup.Plan) (dedup.Result, error) {
	panic("committer bug")
}

func (s attack9PanickingStore) CommitBatch(context.Context, []dedup.Event, []dedup.Plan) ([]dedup.Result, int, error) {
	panic("committer bug")
}

// TestAPanickingCommitLeavesNoSpanOpen: every span the receiver starts is ended, on every path.
// The fourth review made a planner's panic end the delivery's spans in error (endPanicked on
// the delivery and the plan step); the commit step has no such guard. When the Committer
// panics (Config.Store is an interface: an application's store, a test kit, an observer the
// dedup store calls inside Commit), the delivery span is ended in error by endPanicked and
// exported by launch's flush, while its "commit" child is never ended, so never exported: the
// trace of the one delivery that crashed shows a server span whose failing step is missing
// (and the SDK holds the open span until the process dies).
//
// The space: the commit of a single event, and of a batch (CommitBatch).
func TestAPanickingCommitLeavesNoSpanOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withSources(attack5BatchSources, map[string]string{"BATCH_SECRET": "batch-secret"}))
	for i, c := range []struct{ source, body string }{
		{"stripe", orderBody("evt_a9_c0", "ord_a9_c0")},
		{"batch", "[" + orderBody("evt_a9_c1", "ord_a9_c1") + "," + orderBody("evt_a9_c2", "ord_a9_c2") + "]"},
	} {
		rec := tracetest.NewSpanRecorder()
		planners := receiver.NewPlanners()
		for _, name := range e.file.Names() {
			orders.Register(planners, name)
		}
		h, err := receiver.New(receiver.Config{Sources: e.file, Secrets: e.secretsStore(), Store: attack9PanickingStore{e.store},
			Planners: planners, Now: e.clock, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
		if err != nil {
			t.Fatal(err)
		}
		req := e.request(c.source, c.body, nil, "")
		panicked := false
		func() {
			defer func() { panicked = recover() != nil }() // as Lambda's runtime does
			_, _ = h.Handle(context.Background(), req)
		}()
		if !panicked {
			t.Fatalf("case %d: the committer's panic did not go on", i)
		}
		started, open := openSpans(rec)
		if len(open) > 0 {
			t.Errorf("case %d (%s): started %q; a committer's panic left %q never ended (never exported)", i, c.source, started, open)
		}
	}
}
