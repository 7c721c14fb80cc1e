package dedup_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/dedup"
)

// reads keeps the GetItem requests a Store sends.
type reads struct {
	dedup.API
	ins []*dynamodb.GetItemInput
}

func (r *reads) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.ins = append(r.ins, in)
	return r.API.GetItem(ctx, in, optFns...)
}

// TestProbeAnswersAHeldClaimAsCommitsDuplicate: a claim that holds the id is answered with the
// Result Commit gives that duplicate, from one eventually consistent read of a projection of the
// claim, and nothing written.
func TestProbeAnswersAHeldClaimAsCommitsDuplicate(t *testing.T) {
	t.Parallel()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			ctx := context.Background()
			if _, err := e.store.Commit(ctx, orderEvent(1), p.plan(1)); err != nil {
				t.Fatal(err)
			}
			again := orderEvent(1)
			again.DeliveryID, again.Payload = "dlv_again", []byte(`{"changed":true}`)
			e.counter.Reset()
			r := &reads{API: e.counter}
			store, err := dedup.New(r, dedup.Config{Table: e.table, Sources: map[string]dedup.Retention{"shop": testRetention}, Now: e.clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			probed, err := store.Probe(ctx, again)
			if err != nil || e.counter.Total() != 1 || len(r.ins) != 1 || aws.ToBool(r.ins[0].ConsistentRead) || r.ins[0].ProjectionExpression == nil {
				t.Fatalf("probe: %v in %d calls (%d reads, consistent or unprojected); want one eventually consistent read of a projection", err, e.counter.Total(), len(r.ins))
			}
			committed, err := e.store.Commit(ctx, again, p.plan(1))
			if err != nil {
				t.Fatal(err)
			}
			if probed.Outcome != dedup.OutcomeDuplicate || probed.FirstDeliveryID != "dlv_000001_a" || !probed.PayloadMismatch ||
				probed.Outcome != committed.Outcome || probed.FirstDeliveryID != committed.FirstDeliveryID ||
				!probed.FirstReceivedAt.Equal(committed.FirstReceivedAt) || probed.PayloadMismatch != committed.PayloadMismatch || probed.Calls != 1 {
				t.Fatalf("probe %+v, Commit %+v: want Commit's duplicate, in 1 call", probed, committed)
			}
		})
	}
}

// TestProbeLeavesToCommitWhatItCannotAnswer: no claim, a forged id under a body guard (whose
// guard the write then refuses), and an event Commit would refuse, which the probe refuses
// alike before any call.
func TestProbeLeavesToCommitWhatItCannotAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	if res, err := e.store.Probe(ctx, orderEvent(1)); err != nil || res.Outcome != 0 || res.Calls != 1 {
		t.Fatalf("no claim: %+v, %v; want no outcome in 1 call", res, err)
	}

	guarded := orderEvent(2)
	guarded.GuardBody = true
	if _, err := e.store.Commit(ctx, guarded, orderPlan(2)); err != nil {
		t.Fatal(err)
	}
	if res, err := e.store.Probe(ctx, guarded); err != nil || res.Outcome != dedup.OutcomeDuplicate {
		t.Fatalf("the guarded event again: %+v, %v; want duplicate", res, err)
	}
	forged := guarded
	forged.ID = "evt_forged"
	if res, err := e.store.Probe(ctx, forged); err != nil || res.Outcome != 0 {
		t.Fatalf("a forged id: %+v, %v; want no outcome", res, err)
	}
	if res, err := e.store.Commit(ctx, forged, orderPlan(2)); err != nil || res.Outcome != dedup.OutcomeReplay {
		t.Fatalf("Commit of the forged id: %+v, %v; want its guard's refusal (replay)", res, err)
	}

	e.counter.Reset()
	for _, ev := range []dedup.Event{{Source: "shop", Type: "order.paid"}, {Source: "paypal", ID: "evt_1", Type: "order.paid"}} {
		_, err := e.store.Probe(ctx, ev)
		want := e.store.Check(ev, dedup.Plan{})
		if ie := (*dedup.InvalidError)(nil); !errors.As(err, &ie) || err.Error() != want.Error() {
			t.Errorf("probe of %+v: %v, want Commit's refusal %v", ev, err, want)
		}
	}
	if e.counter.Total() != 0 {
		t.Fatalf("%d calls for events Commit refuses, want none", e.counter.Total())
	}
}
