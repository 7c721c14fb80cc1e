package dedup_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

// TestABatchOfAbsorbedEventsUnderFaults: generated batches mixing accepted events, events
// whose shipment exists (absorbed; guarded or not) and claim-only events, their absorbing
// writes losing answers or conflicting: every event is answered as Commit would answer it alone,
// the batch does not err, and a redelivery of the batch is all duplicates.
func TestABatchOfAbsorbedEventsUnderFaults(t *testing.T) {
	t.Parallel()
	faults := []struct {
		name string
		rt   func() http.RoundTripper
	}{
		{"none", func() http.RoundTripper { return awstest.BaseTransport() }},
		{"absorbing transactions lost", func() http.RoundTripper {
			return &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: "TransactWriteItems", N: 2, Match: `"absorbed"`}
		}},
		{"absorbing puts lost", func() http.RoundTripper {
			return &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: "PutItem", N: 2, Match: `"absorbed"`}
		}},
		{"absorbing transactions conflict", func() http.RoundTripper {
			return &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "TransactWriteItems", N: 2, Status: 400, Body: conflictCancel, Match: `"absorbed"`}
		}},
	}
	for seed := range 4 {
		for fi, f := range faults {
			t.Run(fmt.Sprintf("seed=%d/%s", seed, f.name), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(uint64(seed), uint64(fi)))
				e := newEnv(t, nil)
				ctx := context.Background()
				base := 3000 + 100*seed + 10*fi
				var evs []dedup.Event
				var plans []dedup.Plan
				var want []dedup.Outcome
				for k := range 8 {
					n := base*10 + k
					switch rng.IntN(4) {
					case 0: // accepted
						evs, plans, want = append(evs, orderEvent(n)), append(plans, orderPlan(n)), append(want, dedup.OutcomeAccepted)
					case 1, 2: // absorbed: its shipment exists
						if res, err := e.store.Commit(ctx, orderEvent(n+500000), orderPlan(n)); err != nil || res.Outcome != dedup.OutcomeAccepted {
							t.Fatal(res, err)
						}
						evs, plans, want = append(evs, absorbEvent(rng.IntN(2) == 0, n, fmt.Sprintf("dlv_%d", k))), append(plans, orderPlan(n)), append(want, dedup.OutcomeAbsorbed)
					default:
						evs, plans, want = append(evs, orderEvent(n)), append(plans, claimOnly(n)), append(want, dedup.OutcomeAccepted)
					}
				}
				newEnvWithClient(t, e, f.rt(), nil)
				results, _, err := e.store.CommitBatch(ctx, evs, plans)
				if err != nil {
					t.Fatalf("%v", err)
				}
				for i, r := range results {
					if r.Outcome != want[i] || (want[i] == dedup.OutcomeAbsorbed && !slices.Equal(r.Absorbed, []int{0})) {
						t.Errorf("event %d: %+v, want %v", i, r, want[i])
					}
				}
				newEnvWithClient(t, e, awstest.BaseTransport(), nil)
				for i := range evs {
					evs[i].DeliveryID += "_again"
				}
				results, _, err = e.store.CommitBatch(ctx, evs, plans)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range results {
					if r.Outcome != dedup.OutcomeDuplicate {
						t.Errorf("redelivered event %d: %+v, want duplicate", i, r)
					}
				}
			})
		}
	}
}

// TestARedeliveredBatchWhoseProbeFails: the probe of a redelivered batch (skipClaimed,
// now through getClaims) failing or throttled leaves every event to the transactions: each is
// still answered right (the claimed ones duplicates, the others accepted), with no error.
func TestARedeliveredBatchWhoseProbeFails(t *testing.T) {
	t.Parallel()
	for _, f := range []struct {
		name   string
		status int
		body   string
	}{{"throttled", 400, throttling}, {"server error", 500, internalError}} {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			none := func(int) dedup.Plan { return dedup.Plan{} }
			evs, plans := batchOf(1, 201, none)
			if _, _, err := e.store.CommitBatch(context.Background(), evs, plans); err != nil {
				t.Fatal(err)
			}
			inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "BatchGetItem", N: -1, Status: f.status, Body: f.body}
			newEnvWithClient(t, e, inject, nil)
			evs, plans = batchOf(1, 351, none)
			rs, _, err := e.store.CommitBatch(context.Background(), evs, plans)
			if err != nil {
				t.Fatal(err)
			}
			if inject.Injected() == 0 {
				t.Fatal("the probe was not made")
			}
			for i, r := range rs {
				want := dedup.OutcomeAccepted
				if i < 200 {
					want = dedup.OutcomeDuplicate
				}
				if r.Outcome != want {
					t.Fatalf("event %d: %v, want %v", i+1, r.Outcome, want)
				}
			}
		})
	}
}
