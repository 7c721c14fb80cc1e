package outbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/dedup"
)

// failingAPI answers every write at once with an error, so that a write costs only what the
// worker builds around it.
type failingAPI struct{ API }

var errDown = errors.New("down")

func (failingAPI) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, errDown
}

// TestWithTracingOffAnIntentsStepsAllocateNothingMore: tracing off (no TracerProvider) is free
// on the outbox's hot path as on the receiver's: the call, the lease and the finish, wrapped as
// the worker runs them, allocate exactly what they allocate unwrapped; no span name or
// attribute is built for a span that is never started.
func TestWithTracingOffAnIntentsStepsAllocateNothingMore(t *testing.T) {
	w := &Worker{api: failingAPI{}, cfg: Config{Table: "oncehook", Now: time.Now}, limits: newLimiter(failingAPI{}, "oncehook", time.Now, nil),
		claims: &dedup.Claims{API: failingAPI{}, Table: "oncehook", Now: time.Now}}
	ctx := context.Background()
	x := ExecutorFunc(func(context.Context, Task) error { return nil })
	task := Task{Source: "shop", EventID: "e", Intent: "email.send", Target: "email", IdempotencyKey: "shop:e:email.send", Attempt: 1}
	claim := &dedup.Claim{PK: "c#shop#e", CommitToken: "tok"}
	l := &lease{Lease: &dedup.Lease{Intent: "email.send", Attempt: 1, Claim: claim}}

	for _, c := range []struct {
		name       string
		plain, off func()
	}{
		{"call", func() { _, _ = execute(ctx, x, task) }, func() { _, _ = w.traceCall(ctx, x, task) }},
		{"lease", func() { _, _ = w.lease(ctx, claim, "email.send", false) }, func() { _, _ = w.traceLease(ctx, claim, "email.send", false) }},
		{"finish", func() { _ = w.finish(ctx, l, dedup.IntentDone, "") }, func() { _ = w.traceFinish(ctx, l, dedup.IntentDone, "") }},
	} {
		plain, off := testing.AllocsPerRun(200, c.plain), testing.AllocsPerRun(200, c.off)
		if off != plain {
			t.Errorf("%s: %v allocations with tracing off, %v without its wrapper", c.name, off, plain)
		}
	}
}
