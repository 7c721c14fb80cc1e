package outbox_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

// TestAHeldIntentIsNoErrorSpan: a span is in error where something failed and in no
// other case. An intent its target's limit holds back (outbox.OutcomeHeld) has not failed:
// it is not leased, spends no attempt, never parks, and runs at its turn; the worker logs no
// warning for it and counts it apart from failures, as it does a busy intent (another worker
// holds it), whose span is not in error. Its intent span is in error all the same, described
// by the limiter's "try again in ..." text: a target at its configured rate fills the traces'
// error rate with turns that were flow control, and an alert on intent spans in error fires
// on a system working as configured.
//
// The space: held by the process's own rate bucket (the second of a claim's intents to one
// rated target, and every one after it), beside the busy intent as the reference.
func TestAHeldIntentIsNoErrorSpan(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec, tp := recorder()
	ctx, span := tp.Tracer("receiver").Start(context.Background(), "commit")
	intents := []dedup.Intent{
		{Name: "email.a", Target: "email", Payload: []byte(`{}`)},
		{Name: "email.b", Target: "email", Payload: []byte(`{}`)},
		{Name: "email.c", Target: "email", Payload: []byte(`{}`)},
	}
	if _, err := e.store.Commit(ctx, dedup.Event{Source: "shop", ID: "evt_a5_held", Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Intents: intents}); err != nil {
		t.Fatal(err)
	}
	span.End()
	w := e.worker(func(c *outbox.Config) {
		c.TracerProvider = tp
		c.Limits = map[string]outbox.Limit{"email": {Rate: 0.01}} // one call, then 100 s to the next
	})
	sum, err := w.Process(context.Background(), e.claim("evt_a5_held"))
	if sum[outbox.OutcomeDone] != 1 || sum[outbox.OutcomeHeld] != 2 {
		t.Fatalf("summary %v (%v): want one done and two held", sum, err)
	}
	if err != nil && !strings.Contains(err.Error(), "held back") {
		t.Fatalf("process: %v", err) // held without a scheduler: handed back for the caller to deliver again
	}
	held := 0
	for _, s := range spansNamed(rec, outbox.SpanIntent+" ") {
		if spanAttrs(s)[outbox.AttrOutcome].AsString() != outbox.OutcomeHeld {
			continue
		}
		held++
		if s.Status().Code == codes.Error {
			t.Errorf("%s: held back by its target's rate (no attempt spent, nothing failed), and its span is in error: %q", s.Name(), s.Status().Description)
		}
	}
	if held != 2 {
		t.Fatalf("%d held intent spans, want 2", held)
	}

	// The reference: an intent another worker holds is busy, and its span is not in error.
	rec2, tp2 := recorder()
	busy := e.worker(func(c *outbox.Config) { c.TracerProvider = tp2 })
	claim := e.claim("evt_a5_held")
	for name, in := range claim.Intents {
		if in.Status == dedup.IntentDone {
			in.Status, in.NextAttemptAt = dedup.IntentPending, 0 // as a stale record shows it
			claim.Intents[name] = in
		}
	}
	if _, err := busy.Process(context.Background(), claim); err != nil {
		t.Logf("reference: %v", err)
	}
	for _, s := range spansNamed(rec2, outbox.SpanIntent+" ") {
		if spanAttrs(s)[outbox.AttrOutcome].AsString() == outbox.OutcomeBusy && s.Status().Code == codes.Error {
			t.Fatalf("reference: a busy intent's span is in error")
		}
	}
}
