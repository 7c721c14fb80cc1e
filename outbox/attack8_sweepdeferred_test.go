package outbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

// attack8Scheduler records the wake-ups it is asked for.
type attack8Scheduler struct {
	mu  sync.Mutex
	pks []string
}

func (s *attack8Scheduler) Schedule(_ context.Context, pk string, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pks = append(s.pks, pk)
	return nil
}

// TestASweptClaimHandedOffIsNoErrorSpan: a span is in error where something failed. A sweep
// whose run has no time for a claim's intent (its target's calls are longer than what is left:
// outbox.ErrNoTime) does not fail it: the sweeper counts it Deferred, never a Failure, leases
// nothing, spends no attempt, and with a Scheduler hands it to the outbox function at once
// (HandedOff), which runs it in its own time. Its "sweep claim" span is in error all the same,
// described by ErrNoTime's text, as a claim whose write failed would be: a sweeper sized
// shorter than a slow target (a warning at its start, not a fault) makes every such claim an
// error span on every run.
//
// The space: a claim with one intent of a slow target, and one with an intent of a quick
// target beside it (the quick one runs, the slow one is deferred); a Scheduler takes the
// hand-off. The report is the reference: Deferred and HandedOff, no Failures.
func TestASweptClaimHandedOffIsNoErrorSpan(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec, tp := recorder()
	plans := map[string][]dedup.Intent{
		"evt_a8_slow": {{Name: "report.upload", Target: "slow", Payload: []byte(`{}`)}},
		"evt_a8_both": {{Name: "email.send", Target: "email", Payload: []byte(`{}`)}, {Name: "report.upload", Target: "slow", Payload: []byte(`{}`)}},
	}
	for id, intents := range plans {
		ctx, span := tp.Tracer("receiver").Start(context.Background(), "commit")
		if _, err := e.store.Commit(ctx, dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)}, dedup.Plan{Intents: intents}); err != nil {
			t.Fatal(err)
		}
		span.End()
	}
	sched := &attack8Scheduler{}
	w := e.worker(func(c *outbox.Config) {
		// A target whose calls may take a minute: longer than the sweep's run has.
		c.Executors["slow"] = &outbox.HTTPExecutor{URL: e.down.URL, Timeout: time.Minute}
		c.TracerProvider = tp
		c.Scheduler = sched
		c.Lease = 2 * time.Minute // a lease the slow target's calls fit
	})
	e.advance(5 * time.Minute) // past the sweeper's minimum age
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := (&outbox.Sweeper{Worker: w, MinAge: time.Minute}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Claims != 2 || rep.Deferred != 2 || rep.HandedOff != 2 || rep.Failures != 0 {
		t.Fatalf("report %+v: want 2 claims, both deferred and handed off, no failure", rep)
	}
	claims := spansNamed(rec, outbox.SpanSweepClaim)
	if len(claims) != 2 {
		t.Fatalf("%d sweep claim spans, want 2", len(claims))
	}
	for _, s := range claims {
		if s.Status().Code == codes.Error {
			t.Errorf("%s (%s): deferred and handed off (report: Deferred %d, HandedOff %d, Failures %d), and its span is in error: %q",
				s.Name(), spanAttrs(s)[outbox.AttrEventID].AsString(), rep.Deferred, rep.HandedOff, rep.Failures, s.Status().Description)
		}
	}
}
