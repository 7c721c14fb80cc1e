package dedup_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/dedup"
)

// TestAnAbsorbedClaimStoresNoTrace: the commit's span context is stored "only on a claim
// with intents (nothing continues one without)" (docs/operations.md, Traces; "trace").
// An event whose business condition fails is absorbed: claimed alone, its intents and effects
// dropped. The absorbed claim keeps the trace attribute all the same, so what is stored for
// an absorbed event differs with tracing on and off, for a context nothing will ever read.
//
// The space: the claim absorbed alone by a PutItem (no body guard) and by a transaction with
// its body guard, sampled and unsampled contexts, beside the same commit untraced.
func TestAnAbsorbedClaimStoresNoTrace(t *testing.T) {
	t.Parallel()
	for _, guarded := range []bool{false, true} {
		for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled} {
			e := newEnv(t, nil)
			if res, err := e.store.Commit(context.Background(), orderEvent(1), orderPlan(1)); err != nil || res.Outcome != dedup.OutcomeAccepted {
				t.Fatalf("first event: %+v, %v", res, err)
			}
			sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0x4b, 1}, SpanID: trace.SpanID{0x0f, 2}, TraceFlags: flags})
			for i, ctx := range []context.Context{context.Background(), trace.ContextWithSpanContext(context.Background(), sc)} {
				ev := orderEvent(2 + i)
				ev.GuardBody = guarded
				ev.Payload = append(ev.Payload, byte(' '+i))      // a body of its own: the guard must not take it for a replay
				res, err := e.store.Commit(ctx, ev, orderPlan(1)) // the same order: its shipment's condition fails
				if err != nil || res.Outcome != dedup.OutcomeAbsorbed {
					t.Fatalf("guarded %v, traced %d: %+v, %v: want absorbed", guarded, i, res, err)
				}
				c := e.claim(t, "shop", ev.ID)
				if len(c.Intents) != 0 {
					t.Fatalf("absorbed claim with intents %v", c.Intents)
				}
				if c.Trace != nil {
					t.Errorf("guarded %v, flags %v, traced %d: the absorbed claim (no intents) stores a trace context %x", guarded, flags, i, []byte(c.Trace))
				}
			}
		}
	}
}
