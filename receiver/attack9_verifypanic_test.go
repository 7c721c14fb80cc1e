package receiver_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/oncehook/oncehook/examples/orders"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
)

// attack9PanickingSecrets are the env's secrets whose Refresh panics (an application's
// Secrets: Config.Secrets is an interface).
type attack9PanickingSecrets struct{ *sources.Secrets }

func (attack9PanickingSecrets) Refresh(context.Context, string) (bool, error) {
	panic("secrets bug")
}

// TestAPanickingSecretsRefreshLeavesNoSpanOpen: every span the receiver starts is ended, on
// every path. A delivery whose signature fails has its secrets re-read (Secrets.Refresh) while
// the verify span is open; when that panics, the delivery span is ended in error by
// endPanicked (and exported by launch's flush), and the verify span under it never is: the
// exported trace shows a server span in error with no step that failed.
//
// The space: a signature that does not match, and one whose header is missing.
func TestAPanickingSecretsRefreshLeavesNoSpanOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i, mangle := range []func(map[string]string){ // API Gateway's lower-cased headers
		func(h map[string]string) { h["stripe-signature"] += "0" },
		func(h map[string]string) { delete(h, "stripe-signature") },
	} {
		rec := tracetest.NewSpanRecorder()
		planners := receiver.NewPlanners()
		for _, name := range e.file.Names() {
			orders.Register(planners, name)
		}
		h, err := receiver.New(receiver.Config{Sources: e.file, Secrets: attack9PanickingSecrets{e.secretsStore()}, Store: e.store,
			Planners: planners, Now: e.clock, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
		if err != nil {
			t.Fatal(err)
		}
		req := e.request("stripe", orderBody("evt_a9_v"+string(rune('0'+i)), "ord_a9_v"), nil, "")
		headers := map[string]string{}
		for k, v := range req.Headers {
			headers[k] = v
		}
		mangle(headers)
		req.Headers = headers
		panicked := false
		func() {
			defer func() { panicked = recover() != nil }() // as Lambda's runtime does
			_, _ = h.Handle(context.Background(), req)
		}()
		if !panicked {
			t.Fatalf("case %d: Refresh was not called, or its panic did not go on", i)
		}
		started, open := openSpans(rec)
		if len(open) > 0 {
			t.Errorf("case %d: started %q; a panic in Secrets.Refresh left %q never ended (never exported)", i, started, open)
		}
	}
}
