package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncehook/oncehook/dedup"
)

// TestABatchNamesEveryRefusedEventAsCheckWould: generated batches, each event valid or
// broken one of several ways: CommitBatch (and CheckBatch, identically) refuses with one
// *EventError per broken event, in order, each carrying exactly what Check refuses the event
// with alone, named under events[i]; a single one is not joined; nothing is written, no call.
func TestABatchNamesEveryRefusedEventAsCheckWould(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	breakers := []func(ev *dedup.Event, p *dedup.Plan){
		func(ev *dedup.Event, p *dedup.Plan) { ev.ID = "" },
		func(ev *dedup.Event, p *dedup.Plan) { ev.Source = "nope" },
		func(ev *dedup.Event, p *dedup.Plan) {
			p.Effects = append(p.Effects, dedup.PutEffect(map[string]types.AttributeValue{"pk": s(dedup.ClaimPrefix + "x"), "sk": s("X")}))
		},
		func(ev *dedup.Event, p *dedup.Plan) {
			p.Effects = append(p.Effects, dedup.PutEffect(map[string]types.AttributeValue{"pk": s("BIG#1"), "sk": s("X"), "blob": s(strings.Repeat("y", 401*1024))}))
		},
		func(ev *dedup.Event, p *dedup.Plan) {
			p.Effects = append(p.Effects, dedup.PutEffect(map[string]types.AttributeValue{"pk": s("N#1"), "sk": s("X"), "n": &types.AttributeValueMemberN{Value: "1e200"}}))
		},
		func(ev *dedup.Event, p *dedup.Plan) {
			p.Intents = append(p.Intents, dedup.Intent{Name: "", Target: "t"})
		},
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for round := range 60 {
		n := 1 + rng.IntN(8)
		evs, plans := batchOf(round*10, round*10+n, orderPlan)
		var broken []int
		for i := range evs {
			if rng.IntN(3) == 0 {
				breakers[rng.IntN(len(breakers))](&evs[i], &plans[i])
				broken = append(broken, i)
			}
		}
		before := len(e.items(t))
		_, calls, err := e.store.CommitBatch(context.Background(), evs, plans)
		if len(broken) > 0 && len(e.items(t)) != before {
			t.Fatalf("round %d: a refused batch wrote something", round)
		}
		if len(broken) == 0 {
			if err != nil {
				t.Fatalf("round %d: a valid batch refused: %v", round, err)
			}
			continue
		}
		if calls != 0 || err == nil {
			t.Fatalf("round %d: %d calls, %v; want a refusal before any call", round, calls, err)
		}
		if cerr := e.store.CheckBatch(evs, plans); cerr == nil || cerr.Error() != err.Error() {
			t.Fatalf("round %d: CheckBatch %v, CommitBatch %v", round, cerr, err)
		}
		errs := []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			if len(broken) == 1 {
				t.Fatalf("round %d: one refusal joined: %v", round, err)
			}
			errs = j.Unwrap()
		}
		if len(errs) != len(broken) {
			t.Fatalf("round %d: %d refusals for broken events %v: %v", round, len(errs), broken, err)
		}
		for k, one := range errs {
			ee, ok := one.(*dedup.EventError)
			i := broken[k]
			if !ok || ee.Index != i {
				t.Fatalf("round %d: refusal %d is %#v, want the *EventError of event %d", round, k, one, i)
			}
			alone := e.store.Check(evs[i], plans[i])
			if ie, ok := errors.AsType[*dedup.InvalidError](alone); ok {
				got, ok := ee.Err.(*dedup.InvalidError)
				if !ok || got.Field != fmt.Sprintf("events[%d].%s", i, ie.Field) || got.Reason != ie.Reason {
					t.Fatalf("round %d event %d: %v, want %v under events[%d]", round, i, ee.Err, alone, i)
				}
			} else if ee.Err.Error() != fmt.Sprintf("events[%d]: %v", i, alone) || !errors.Is(ee, dedup.ErrLimit) != !errors.Is(alone, dedup.ErrLimit) {
				t.Fatalf("round %d event %d: %v, want %v under events[%d]", round, i, ee.Err, alone, i)
			}
		}
		if first, ok := errors.AsType[*dedup.EventError](err); !ok || first.Index != broken[0] {
			t.Fatalf("round %d: errors.As finds %v, want event %d", round, first, broken[0])
		}
	}
}
