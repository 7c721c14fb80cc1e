package outbox_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

// atMostOnce makes both of the env's targets at-most-once.
func (e *env) atMostOnce(exec outbox.Executor) func(*outbox.Config) {
	return func(c *outbox.Config) {
		if exec == nil {
			exec = c.Executors["email"]
		}
		c.Executors["email"] = outbox.AtMostOnce(exec)
		c.Executors["http:fulfilment"] = outbox.AtMostOnce(exec)
	}
}

// parkedWith checks every intent is parked with an error naming why, and was called calls
// times.
func (e *env) parkedWith(t *testing.T, keys []string, calls int, why string) {
	t.Helper()
	if s := e.statuses(); s[dedup.IntentParked] != len(keys) {
		t.Fatalf("statuses %v: want every intent parked", s)
	}
	for _, c := range e.claims() {
		for name, in := range c.Intents {
			if !strings.Contains(in.LastError, why) {
				t.Fatalf("%s/%s: last_error %q, want it to say %q", c.EventID, name, in.LastError, why)
			}
			if !outbox.MayHaveBeenSent(in) { // what the operator's tools hold back from a bulk redrive
				t.Fatalf("%s/%s: parked with %q, and MayHaveBeenSent says no", c.EventID, name, in.LastError)
			}
		}
	}
	got, _, _ := e.down.snapshot()
	for _, k := range keys {
		if got[k] != calls {
			t.Fatalf("key %s called %d times, want %d", k, got[k], calls)
		}
	}
}

// TestAnAtMostOnceIntentWhoseWorkerStoppedMidCallIsParkedNotSentAgain: the worker calls the
// downstream, then cannot record the outcome (as if it died). Where an at-least-once intent is
// called again once its lease expires, an at-most-once one is parked for a person: one call.
func TestAnAtMostOnceIntentWhoseWorkerStoppedMidCallIsParkedNotSentAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.commit(3)
	recs := e.records()
	crashing := e.worker(e.atMostOnce(nil), diesAfterTheCall())
	_, _ = crashing.HandleStream(context.Background(), batch(recs))
	if s := e.statuses(); s[dedup.IntentRunning] != len(keys) {
		t.Fatalf("statuses %v: want every intent left running", s)
	}
	healthy := e.worker(e.atMostOnce(nil))
	e.advance(10 * time.Minute) // the leases expire
	if _, err := (&outbox.Sweeper{Worker: healthy}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A replayed stream record after the park changes nothing either.
	_, _ = healthy.HandleStream(context.Background(), batch(recs))
	e.parkedWith(t, keys, 1, "may have been sent")
}

// TestAnAtMostOnceIntentParksOnAFailureThatMayHaveReachedTheDownstream: a 500 is not retried
// (the downstream may have acted before failing); a 429 is (it was turned away).
func TestAnAtMostOnceIntentParksOnAFailureThatMayHaveReachedTheDownstream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.commit(2)
	e.down.fail = func(int, string) (int, time.Duration) { return http.StatusInternalServerError, 0 }
	w := e.worker(e.atMostOnce(nil))
	_, _ = w.HandleStream(context.Background(), batch(e.records()))
	e.parkedWith(t, keys, 1, "may have reached the downstream")

	e2 := newEnv(t)
	keys = e2.commit(2)
	var mu sync.Mutex
	throttled := map[string]bool{}
	e2.down.fail = func(_ int, key string) (int, time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if !throttled[key] { // each key's first call is throttled
			throttled[key] = true
			return http.StatusTooManyRequests, 0
		}
		return 0, 0
	}
	w = e2.worker(e2.atMostOnce(nil))
	_, _ = w.HandleStream(context.Background(), batch(e2.records()))
	e2.advance(5 * time.Minute) // past the backoff and the sweeper's minimum age
	if _, err := (&outbox.Sweeper{Worker: w}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := e2.statuses(); s[dedup.IntentDone] != len(keys) {
		t.Fatalf("statuses %v: a throttled at-most-once intent is retried, and done", s)
	}
}

// TestAnAtMostOnceIntentIsRetriedWhenTheConnectionWasRefused: nothing was sent.
func TestAnAtMostOnceIntentIsRetriedWhenTheConnectionWasRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keys := e.commit(1)
	refused := &outbox.HTTPExecutor{URL: "http://127.0.0.1:1/", Timeout: time.Second} // nothing listens on port 1
	w := e.worker(e.atMostOnce(refused))
	_, _ = w.HandleStream(context.Background(), batch(e.records()))
	if s := e.statuses(); s[dedup.IntentPending] != len(keys) {
		t.Fatalf("statuses %v: want both intents pending again", s)
	}
	for _, c := range e.claims() {
		for name, in := range c.Intents {
			if in.Attempts != 1 || !strings.Contains(in.LastError, "connection refused") {
				t.Fatalf("%s: %+v", name, in)
			}
		}
	}
}

// TestASecondWorkerDoesNotParkAnAtMostOnceIntentItsWorkerCanStillRecord: worker A's call has
// ended at its lease's end less the margin, and A is writing what it got. Another worker that
// sees the lease just expired (a clock a little ahead, a slow record) must leave it to A, not
// park it as stranded: A records it done.
func TestASecondWorkerDoesNotParkAnAtMostOnceIntentItsWorkerCanStillRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_amo_grace")
	slow := newBlocking()
	a := e.worker(func(c *outbox.Config) { c.Executors["email"] = outbox.AtMostOnce(slow) })
	done := make(chan outbox.Summary)
	go func() {
		sum, _ := a.Process(context.Background(), e.claim("evt_amo_grace"))
		done <- sum
	}()
	slow.await(t, done)
	e.advance(5*time.Second + 100*time.Millisecond) // past lease_until, within the margin
	b := e.worker(e.atMostOnce(nil))
	if sum, err := b.Process(context.Background(), e.claim("evt_amo_grace")); err != nil || sum[outbox.OutcomeParked] != 0 {
		t.Fatalf("second worker: %v, %v: it parked an intent whose worker may still record it", sum, err)
	}
	slow.release(nil)
	if sum := <-done; sum[outbox.OutcomeDone] != 1 {
		t.Fatalf("first worker: %v, want done", sum)
	}
	if in := e.claim("evt_amo_grace").Intents["email.send"]; in.Status != dedup.IntentDone {
		t.Fatalf("%+v: want done", in)
	}
	if _, _, total := e.down.snapshot(); total != 0 {
		t.Fatalf("the second worker called the downstream %d times", total)
	}
}

// TestALateDoneReplacesAStrandedParkSoARedriveCannotSendItAgain: worker A's call outlives its
// lease by far (an executor that ignores its deadline), the sweeper parks the intent as
// stranded ("may have been sent"), then A's call returns success. A records the truth, done,
// over the stranded park of its own attempt, so an operator's redrive is refused instead of
// sending the intent a second time.
func TestALateDoneReplacesAStrandedParkSoARedriveCannotSendItAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_amo_late")
	slow := newBlocking()
	a := e.worker(func(c *outbox.Config) { c.Executors["email"] = outbox.AtMostOnce(slow) })
	done := make(chan outbox.Summary)
	go func() {
		sum, _ := a.Process(context.Background(), e.claim("evt_amo_late"))
		done <- sum
	}()
	slow.await(t, done)
	e.advance(10 * time.Minute)
	if _, err := (&outbox.Sweeper{Worker: e.worker(e.atMostOnce(nil))}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if in := e.claim("evt_amo_late").Intents["email.send"]; in.Status != dedup.IntentParked || !strings.Contains(in.LastError, "may have been sent") {
		t.Fatalf("%+v: want it parked as stranded", in)
	}
	slow.release(nil)
	if sum := <-done; sum[outbox.OutcomeDone] != 1 {
		t.Fatalf("first worker: %v, want its done recorded", sum)
	}
	c := e.claim("evt_amo_late")
	if in := c.Intents["email.send"]; in.Status != dedup.IntentDone || in.Attempts != 1 {
		t.Fatalf("%+v: want done at attempt 1", in)
	}
	if c.PendingShard != "" {
		t.Fatalf("a claim with every intent done is under %q", c.PendingShard)
	}
	if err := redriveAt(context.Background(), e.client, e.table, c, "email.send", e.now()); !errors.Is(err, dedup.ErrNotParked) {
		t.Fatalf("redrive: %v, want ErrNotParked: the intent was sent", err)
	}
	if _, _, total := e.down.snapshot(); total != 0 {
		t.Fatalf("%d more downstream calls", total)
	}
}
