package dedup_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/dedup"
)

// spanCtx is ctx under a span context, as the receiver's commit span puts it there (no SDK
// needed: the store reads the context, never the span).
func spanCtx(trace0 byte, sampled bool) (context.Context, trace.SpanContext) {
	var tid trace.TraceID
	var sid trace.SpanID
	for i := range tid {
		tid[i] = trace0 + byte(i)
	}
	for i := range sid {
		sid[i] = 0xa0 + byte(i)
	}
	flags := trace.TraceFlags(0)
	if sampled {
		flags = trace.FlagsSampled
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags})
	return trace.ContextWithSpanContext(context.Background(), sc), sc
}

// TestACommitUnderASpanStoresItsContextOnTheClaim: both write paths store the span context the
// commit ran under on a claim with intents (trace id, span id, the sampled flag), read back
// from the table as the outbox reads it; a claim without intents, which nothing continues,
// stores none.
func TestACommitUnderASpanStoresItsContextOnTheClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for i, p := range paths {
		ctx, sc := spanCtx(byte(0x10*i+1), i == 0)
		if _, err := e.store.Commit(ctx, orderEvent(i), p.plan(i)); err != nil {
			t.Fatal(err)
		}
		got := e.claim(t, "shop", orderEvent(i).ID).TraceContext()
		if !got.IsValid() || !got.IsRemote() || got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || got.IsSampled() != sc.IsSampled() {
			t.Fatalf("%s: stored %v, want %v (remote)", p.name, got, sc)
		}
	}
	ctx, _ := spanCtx(0x40, true)
	plain := orderEvent(9)
	if _, err := e.store.Commit(ctx, plain, dedup.Plan{}); err != nil {
		t.Fatal(err)
	}
	if c := e.claim(t, "shop", plain.ID); c.Trace != nil || c.TraceContext().IsValid() {
		t.Fatalf("a claim without intents stored %x", c.Trace)
	}
}

// TestAClaimWithAndWithoutATraceContextIsTheSameEvent: tracing never changes what is claimed.
// The same event committed under a span and without one is one event (the second is its
// duplicate, with the same payload hash, whichever comes first), and the two claims differ in
// nothing but the trace attribute and what every commit makes its own (the token, the times).
func TestAClaimWithAndWithoutATraceContextIsTheSameEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	traced, _ := spanCtx(0x01, true)
	for i, order := range [][]context.Context{{traced, context.Background()}, {context.Background(), traced}} {
		ev, plan := orderEvent(100+i), orderPlan(100+i)
		first, err := e.store.Commit(order[0], ev, plan)
		if err != nil || first.Outcome != dedup.OutcomeAccepted {
			t.Fatalf("first: %+v %v", first, err)
		}
		again := ev
		again.DeliveryID += "_retry"
		second, err := e.store.Commit(order[1], again, plan)
		if err != nil || second.Outcome != dedup.OutcomeDuplicate || second.PayloadMismatch {
			t.Fatalf("the same event with the trace context %s: %+v %v, want a duplicate without a mismatch",
				map[bool]string{true: "added", false: "dropped"}[i == 1], second, err)
		}
	}
	// Two claims of two events with the same plan, one traced: the same attributes but trace.
	withCtx, without := orderEvent(110), orderEvent(111)
	without.ID, without.DeliveryID = withCtx.ID+"_b", withCtx.DeliveryID
	without.Payload = withCtx.Payload
	if _, err := e.store.Commit(traced, withCtx, claimOnly(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Commit(context.Background(), without, claimOnly(0)); err != nil {
		t.Fatal(err)
	}
	a, b := e.claim(t, "shop", withCtx.ID), e.claim(t, "shop", without.ID)
	if a.Trace == nil || b.Trace != nil {
		t.Fatalf("trace %x and %x, want one stored and one not", a.Trace, b.Trace)
	}
	attrs := func(id string) []string {
		item := findItem(t, e, dedup.ClaimKey("shop", id), dedup.ClaimSK)
		delete(item, "trace")
		return slices.Sorted(maps.Keys(item))
	}
	if x, y := attrs(withCtx.ID), attrs(without.ID); !slices.Equal(x, y) {
		t.Fatalf("attributes %v and %v: want the same but trace", x, y)
	}
	if a.PayloadSHA256 != b.PayloadSHA256 || !maps.EqualFunc(a.Intents, b.Intents, func(x, y dedup.ClaimIntent) bool {
		return x.Target == y.Target && string(x.Payload) == string(y.Payload) && x.Status == y.Status && x.Attempts == y.Attempts
	}) {
		t.Fatalf("claims differ beyond their trace: %+v\n%+v", a, b)
	}
}

// TestTracingNeverChangesWhatIsAccepted: the largest intent Check accepts (no span: a test
// kit's answer) is accepted by Commit under a span, and one byte more is refused by both, with
// the same figures: the trace context's room is counted whether or not it is stored.
func TestTracingNeverChangesWhatIsAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	plan := func(n int) dedup.Plan {
		return dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(strings.Repeat("p", n))}}}
	}
	ev := orderEvent(200)
	var le *dedup.LimitError
	largest := dedup.MaxItemBytes
	for {
		err := e.store.Check(ev, plan(largest))
		if err == nil {
			break
		}
		if !errors.As(err, &le) {
			t.Fatal(err)
		}
		largest -= le.Got - le.Max
	}
	traced, _ := spanCtx(0x01, true)
	if _, err := e.store.Commit(traced, ev, plan(largest)); err != nil {
		t.Fatalf("the largest plan Check accepts, committed under a span: %v", err)
	}
	var checked, committed *dedup.LimitError
	over := ev // the same id: its pending shard's number (1 or 2 digits) is part of the size; refused before any write
	if err := e.store.Check(over, plan(largest+1)); !errors.As(err, &checked) {
		t.Fatalf("one byte more, checked: %v", err)
	}
	if _, err := e.store.Commit(traced, over, plan(largest+1)); !errors.As(err, &committed) || *committed != *checked {
		t.Fatalf("one byte more, committed under a span: %v, want %v", err, checked)
	}
	if _, err := e.store.Commit(context.Background(), over, plan(largest+1)); !errors.As(err, &committed) || *committed != *checked {
		t.Fatalf("one byte more, committed without a span: %v, want %v", err, checked)
	}
}

// TestAStoredTraceContextThatCannotBeReadIsIgnored: what a claim holds under trace is read
// strictly (version 00, 26 bytes, ids not zero); anything else is no context at all.
func TestAStoredTraceContextThatCannotBeReadIsIgnored(t *testing.T) {
	t.Parallel()
	good := make([]byte, 26)
	for i := 1; i < 26; i++ {
		good[i] = byte(i)
	}
	good[25] = 0xff // flags beyond sampled are dropped
	if sc := (&dedup.Claim{Trace: good}).TraceContext(); !sc.IsValid() || !sc.IsSampled() || sc.TraceFlags() != trace.FlagsSampled {
		t.Fatalf("a valid context read as %v", sc)
	}
	zeroTrace := slices.Clone(good)
	clear(zeroTrace[1:17])
	zeroSpan := slices.Clone(good)
	clear(zeroSpan[17:25])
	version := slices.Clone(good)
	version[0] = 1
	for name, b := range map[string][]byte{
		"empty": {}, "short": good[:25], "long": append(slices.Clone(good), 0), "huge": make([]byte, 1<<16),
		"another version": version, "a zero trace id": zeroTrace, "a zero span id": zeroSpan,
	} {
		if sc := (&dedup.Claim{Trace: b}).TraceContext(); sc.IsValid() {
			t.Errorf("%s: read as %v, want none", name, sc)
		}
	}
}

// TestATraceAttributeOfAnotherTypeNeverMakesAClaimUnreadable: a claim whose trace attribute is
// not binary (written by hand, by a tool, by a later release) is read with no context, as a
// malformed one is: a claim that could not be read would never run its intents.
func TestATraceAttributeOfAnotherTypeNeverMakesAClaimUnreadable(t *testing.T) {
	t.Parallel()
	for _, v := range []types.AttributeValue{
		&types.AttributeValueMemberS{Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		&types.AttributeValueMemberN{Value: "5"},
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
		&types.AttributeValueMemberBOOL{Value: true},
		&types.AttributeValueMemberL{},
		&types.AttributeValueMemberBS{Value: [][]byte{{1}}},
	} {
		c, err := dedup.UnmarshalClaim(map[string]types.AttributeValue{
			dedup.PartitionKey: &types.AttributeValueMemberS{Value: dedup.ClaimKey("shop", "evt_1")}, "trace": v,
			"intents": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"email.send": &types.AttributeValueMemberM{
				Value: map[string]types.AttributeValue{"status": &types.AttributeValueMemberS{Value: dedup.IntentPending}}}}},
		})
		if err != nil || c.TraceContext().IsValid() || c.Intents["email.send"].Status != dedup.IntentPending {
			t.Errorf("trace %T: %v, %v", v, c, err)
		}
	}
}

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
