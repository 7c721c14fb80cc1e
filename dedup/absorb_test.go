package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

// absorbCase is one event whose shipment exists already (its effect is refused): unguarded
// (the absorbing write is a PutItem) or guarded (a transaction of the claim and its body guard).
func absorbEvent(guard bool, i int, delivery string) dedup.Event {
	ev := orderEvent(i)
	if guard {
		ev = guarded(fmt.Sprintf("g_%d", i), fmt.Sprintf(`{"order":%d}`, i))
	}
	ev.DeliveryID = delivery
	return ev
}

// TestTheAbsorbingWriteUnderEveryFailure drives the absorbing write through
// lost answers, injected throttles and conflicts, guarded or not: every delivery is either
// answered absorbed (effects[0] refused, the claim absorbed with no intents) or refused with
// nothing written, in which case the redelivery is absorbed; a delivery after an absorbed one is
// a duplicate; the shipment is never written twice.
func TestTheAbsorbingWriteUnderEveryFailure(t *testing.T) {
	t.Parallel()
	type fault struct {
		name     string
		rt       func(op string) http.RoundTripper
		mayError bool
	}
	inject := func(n, status int, body string) func(op string) http.RoundTripper {
		return func(op string) http.RoundTripper {
			return &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: op, N: n, Status: status, Body: body, Match: `"absorbed"`}
		}
	}
	lose := func(n int) func(op string) http.RoundTripper {
		return func(op string) http.RoundTripper {
			return &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: op, N: n, Match: `"absorbed"`}
		}
	}
	faults := []fault{
		{"none", func(string) http.RoundTripper { return awstest.BaseTransport() }, false},
		{"lost once", lose(1), false},
		{"lost twice", lose(2), false},
		{"throttled once", inject(1, 400, throttling), false},
		{"throttled for good", inject(-1, 400, throttling), true},
		{"server error once", inject(1, 500, internalError), false},
	}
	guardedFaults := []fault{
		{"conflict once", inject(1, 400, conflictCancel), false},
		{"conflict thrice", inject(3, 400, conflictCancel), false},
		{"conflict for good", inject(-1, 400, conflictCancel), true},
		{"throttle-cancelled once", inject(1, 400, throttleCancel), true},
	}
	i := 0
	for _, guard := range []bool{false, true} {
		fs := faults
		op := "PutItem"
		if guard {
			fs, op = append(slices.Clone(faults), guardedFaults...), "TransactWriteItems"
		}
		for _, f := range fs {
			i++
			n := 800 + i
			t.Run(fmt.Sprintf("guard=%v/%s", guard, f.name), func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, nil)
				ctx := context.Background()
				if res, err := e.store.Commit(ctx, orderEvent(n+1000), orderPlan(n)); err != nil || res.Outcome != dedup.OutcomeAccepted {
					t.Fatalf("the shipment's first event: %+v, %v", res, err)
				}
				newEnvWithClient(t, e, f.rt(op), nil)
				ev := absorbEvent(guard, n, "dlv_1")
				res, err := e.store.Commit(ctx, ev, orderPlan(n))
				switch {
				case err != nil && !f.mayError:
					t.Fatalf("%+v, %v; want absorbed", res, err)
				case err != nil:
					if !errors.Is(err, dedup.ErrUnavailable) {
						t.Errorf("%v: want ErrUnavailable (the redelivery is safe)", err)
					}
					if c := e.claim(t, ev.Source, ev.ID); c != nil {
						t.Fatalf("refused with %v, but the claim %+v was written", err, c)
					}
					newEnvWithClient(t, e, awstest.BaseTransport(), nil)
					ev.DeliveryID = "dlv_1b"
					if res, err = e.store.Commit(ctx, ev, orderPlan(n)); err != nil {
						t.Fatalf("the redelivery: %+v, %v", res, err)
					}
				}
				if res.Outcome != dedup.OutcomeAbsorbed || !slices.Equal(res.Absorbed, []int{0}) {
					t.Fatalf("%+v: want absorbed, effects[0] refused", res)
				}
				c := e.claim(t, ev.Source, ev.ID)
				if c == nil || c.Outcome != "absorbed" || len(c.Intents) != 0 || c.PendingShard != "" || !slices.Equal(c.Absorbed, []int{0}) {
					t.Fatalf("claim %+v: want absorbed, no intents, effects[0] listed", c)
				}
				if e.count(t, "ORDER#") != 1 {
					t.Fatal("the shipment was written again")
				}
				newEnvWithClient(t, e, awstest.BaseTransport(), nil)
				ev.DeliveryID = "dlv_2"
				if res, err := e.store.Commit(ctx, ev, orderPlan(n)); err != nil || res.Outcome != dedup.OutcomeDuplicate {
					t.Fatalf("a later delivery: %+v, %v; want duplicate", res, err)
				}
			})
		}
	}
}

// TestConcurrentDeliveriesOfAnAbsorbedEvent: many deliveries of one event whose effect is
// refused race (guarded or not; for guarded ones also several ids of one body): exactly one is
// absorbed, every other is a duplicate (or a replay, for another id of the body), none errs.
func TestConcurrentDeliveriesOfAnAbsorbedEvent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		guard bool
		ids   int
	}{{"unguarded", false, 1}, {"guarded", true, 1}, {"guarded, three ids of one body", true, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			ctx := context.Background()
			const rounds, copies = 6, 6
			for r := range rounds {
				n := 900 + r
				if res, err := e.store.Commit(ctx, orderEvent(n+1000), orderPlan(n)); err != nil || res.Outcome != dedup.OutcomeAccepted {
					t.Fatal(res, err)
				}
				var mu sync.Mutex
				outcomes := map[string]int{}
				var wg sync.WaitGroup
				for c := range copies {
					wg.Go(func() {
						ev := absorbEvent(tc.guard, n, fmt.Sprintf("dlv_%d", c))
						if tc.ids > 1 {
							ev.ID = fmt.Sprintf("g_%d_%d", n, c%tc.ids)
						}
						res, err := e.store.Commit(ctx, ev, orderPlan(n))
						mu.Lock()
						defer mu.Unlock()
						if err != nil {
							outcomes["error: "+err.Error()]++
							return
						}
						outcomes[res.Outcome.String()]++
					})
				}
				wg.Wait()
				if outcomes["absorbed"] != 1 || outcomes["duplicate"]+outcomes["replay"] != copies-1 {
					t.Fatalf("round %d: %v; want one absorbed and the rest duplicates or replays", r, outcomes)
				}
			}
		})
	}
}

// TestAnUnguardedAbsorbingPutRefusedByAConflict: DynamoDB refuses a PutItem on an item an
// ongoing transaction holds with TransactionConflictException (a concurrent double's first
// transaction on the claim). The absorbing write of an unguarded event is a PutItem: it is
// tried again, or answered ErrUnavailable (the redelivery is safe), never a configuration error.
func TestAnUnguardedAbsorbingPutRefusedByAConflict(t *testing.T) {
	t.Parallel()
	const putConflict = `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionConflictException","message":"Transaction is ongoing for the item"}`
	e := newEnv(t, nil)
	ctx := context.Background()
	if res, err := e.store.Commit(ctx, orderEvent(1950), orderPlan(950)); err != nil || res.Outcome != dedup.OutcomeAccepted {
		t.Fatal(res, err)
	}
	newEnvWithClient(t, e, &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "PutItem", N: 1, Status: 400, Body: putConflict, Match: `"absorbed"`}, nil)
	res, err := e.store.Commit(ctx, absorbEvent(false, 950, "dlv_1"), orderPlan(950))
	if err != nil && !errors.Is(err, dedup.ErrUnavailable) {
		t.Fatalf("%+v, %v: a conflict on the absorbing PutItem is neither retried nor ErrUnavailable", res, err)
	}
	if err == nil && res.Outcome != dedup.OutcomeAbsorbed {
		t.Fatalf("%+v: want absorbed", res)
	}
}
