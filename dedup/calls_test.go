package dedup_test

import (
	"context"
	"testing"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
)

// TestDynamoDBCallsPerDelivery counts the requests each kind of delivery costs, through a
// counting wrapper around the real client (SDK retries below it are not counted; the
// lost-response case shows them as one call). Run with -v to print the table the README cites.
func TestDynamoDBCallsPerDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	absorbing := orderPlan(1) // order 1's shipment already exists once event 1 is in

	cases := []struct {
		name  string
		event int
		plan  dedup.Plan
		want  dedup.Outcome
		calls int
	}{
		{"new event, claim only (PutItem)", 100, claimOnly(100), dedup.OutcomeAccepted, 1},
		{"duplicate, claim only", 100, claimOnly(100), dedup.OutcomeDuplicate, 1},
		{"new event with effects (TransactWriteItems)", 1, orderPlan(1), dedup.OutcomeAccepted, 1},
		{"duplicate with effects", 1, orderPlan(1), dedup.OutcomeDuplicate, 1},
		{"new event whose business condition fails (absorbed)", 2, absorbing, dedup.OutcomeAbsorbed, 2},
	}
	for _, c := range cases {
		e.counter.Reset()
		res, err := e.store.Commit(ctx, orderEvent(c.event), c.plan)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.Outcome != c.want || e.counter.Total() != c.calls || res.Calls != c.calls {
			t.Fatalf("%s: %v in %d calls (Result.Calls %d), want %v in %d", c.name, res.Outcome, e.counter.Total(), res.Calls, c.want, c.calls)
		}
		t.Logf("%-55s %-9s %d call(s)", c.name, res.Outcome, c.calls)
	}

	lose := &awstest.LoseResponses{Next: awstest.BaseTransport(), Operation: "TransactWriteItems", N: 1}
	lost := newEnvWithClient(t, e, lose, nil)
	res, err := lost.store.Commit(ctx, orderEvent(3), orderPlan(3))
	if err != nil || res.Outcome != dedup.OutcomeAccepted || lost.counter.Total() != 1 || lose.Lost() != 1 {
		t.Fatalf("lost response: %+v, %v, %d calls", res, err, lost.counter.Total())
	}
	t.Logf("%-55s %-9s %d call(s), 2 HTTP requests", "new event whose first response is lost", res.Outcome, 1)
}
