package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/dedup"
)

type quotingError struct{}

func (quotingError) Error() string           { return "refused: the answer quoted jane@example.com" }
func (quotingError) SpanDescription() string { return "refused" }

// TestAnExecutorsSpanDescriptionIsWhatEverySpanRecords: an error with a SpanDescription,
// however an executor or the worker wraps it, is described by it in the call's and the
// intent's spans (redact, then Describe), and whole in last_error.
func TestAnExecutorsSpanDescriptionIsWhatEverySpanRecords(t *testing.T) {
	for name, err := range map[string]error{
		"bare":      quotingError{},
		"permanent": Permanent(quotingError{}),
		"not sent":  NotSent(quotingError{}),
		"wrapped":   fmt.Errorf("call: %w", quotingError{}),
	} {
		if got := describe(redact(err)); strings.Contains(got, "jane@") || got != "refused" {
			t.Errorf("%s: the span says %q", name, got)
		}
		if !strings.Contains(err.Error(), "jane@") {
			t.Errorf("%s: last_error lost the answer: %q", name, err)
		}
		if !errors.Is(redact(err), err) && !errors.As(redact(err), new(quotingError)) {
			t.Errorf("%s: the span's error no longer wraps the executor's", name)
		}
	}
}

// failingAPI answers every write at once with an error, so that a write costs only what the
// worker builds around it.
type failingAPI struct{ API }

var errDown = errors.New("down")

func (failingAPI) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, errDown
}

// TestWithTracingOffAnIntentsStepsAllocateNothingMore: tracing off (no TracerProvider: the
// worker's one tracer is a no-op provider's) is free on the outbox's hot path as on the
// receiver's: the call, the lease and the finish, each a step that starts its span itself,
// allocate exactly what their work allocates without them (the executor's call, the claim's
// write: the baseline); no span name or attribute is built for a span that is never started.
// The intent's own span, started whatever, allocates at most the no-op provider's context.
func TestWithTracingOffAnIntentsStepsAllocateNothingMore(t *testing.T) {
	w := &Worker{api: failingAPI{}, cfg: Config{Table: "oncehook", Now: time.Now, Backoff: func(int) time.Duration { return time.Second }},
		limits: newLimiter(failingAPI{}, "oncehook", time.Now, nil),
		claims: &dedup.Claims{API: failingAPI{}, Table: "oncehook", Now: time.Now}, tracer: newTracer(nil)}
	ctx := context.Background()
	x := ExecutorFunc(func(context.Context, Task) error { return nil })
	task := Task{Source: "shop", EventID: "e", Intent: "email.send", Target: "email", IdempotencyKey: "shop:e:email.send", Attempt: 1}
	claim := &dedup.Claim{PK: "c#shop#e", CommitToken: "tok", ExpiresAt: time.Now().Add(time.Hour).Unix()}
	l := &lease{Lease: &dedup.Lease{Intent: "email.send", Attempt: 1, Claim: claim}}
	next := time.Now().Add(time.Second)

	for _, c := range []struct {
		name           string
		baseline, step func()
	}{
		{"call", func() { _, _ = execute(ctx, x, task) }, func() { _, _ = w.call(ctx, x, task) }},
		{"lease", func() {
			_, _ = w.claims.Lease(ctx, claim, "email.send", dedup.LeaseOptions{For: w.leaseFor(""), StrandedAfter: w.cfg.Margin})
		}, func() { _, _ = w.lease(ctx, claim, "email.send", false) }},
		{"finish", func() { _ = w.claims.Done(ctx, l.Lease, "") }, func() { _ = w.finish(ctx, l, dedup.IntentDone, "", time.Time{}) }},
		{"retry", func() { _ = w.claims.Retry(ctx, l.Lease, next, "down") }, func() { _, _, _ = w.retry(ctx, l, "down") }},
	} {
		baseline, off := testing.AllocsPerRun(200, c.baseline), testing.AllocsPerRun(200, c.step)
		if off != baseline {
			t.Errorf("%s: %v allocations with tracing off, %v for its work alone", c.name, off, baseline)
		}
	}
	claim.Intents = map[string]dedup.ClaimIntent{"email.send": {Target: "email"}}
	if n := testing.AllocsPerRun(200, func() {
		_, span := w.startIntent(ctx, claim, "email.send")
		endIntent(span, OutcomeDone, nil)
	}); n > 1 {
		t.Errorf("the intent's span with tracing off: %v allocations, want at most the no-op provider's context", n)
	}
}
