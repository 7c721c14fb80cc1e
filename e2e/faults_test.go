package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/internal/faults"
	"github.com/oncehook/oncehook/internal/harness"
)

// functionFaults are the deployed functions' DynamoDB faults for the run: a share of every
// call throttled, failed or applied with its answer lost, and the receiver's transactions hit
// hard enough that some deliveries exhaust the SDK's retries and are answered 503.
const functionFaults = "dynamodb.throttle=0.05,dynamodb.error=0.03,dynamodb.lose=0.03," +
	"dynamodb.TransactWriteItems.throttle=0.3,dynamodb.TransactWriteItems.error=0.1,dynamodb.TransactWriteItems.lose=0.1"

// TestAStormUnderFaultsLosesNothingAndRunsNothingTwice: 100 events x 3 concurrent copies
// while the functions' DynamoDB client throttles, fails and loses answers, and the downstream
// answers 500, 429, times out, applies and then answers 500, or refuses with a 422. Every event
// ends with one claim and one shipment, every intent done, or parked by an injected refusal
// (and saying so); every done intent applied, and no call repeated that a lost answer or an
// injected fault does not explain. Every kind of fault asked of the functions was injected,
// as their logs count.
func TestAStormUnderFaultsLosesNothingAndRunsNothingTwice(t *testing.T) {
	s := deployed(t)
	ctx := context.Background()
	dep, err := harness.FindDeployment(ctx, lambda.NewFromConfig(awstest.Config(t)), s.table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := faults.Parse(functionFaults); err != nil {
		t.Fatal(err)
	}
	worker := map[string]string{faults.Env: functionFaults, "LEASE_SECONDS": "10"}
	restore, err := dep.SetEnv(ctx, map[string]map[string]string{
		"receiver": {faults.Env: functionFaults},
		"outbox":   worker,
		"sweeper":  {faults.Env: functionFaults, "LEASE_SECONDS": "10", "SWEEP_MIN_AGE_SECONDS": "2"},
	})
	t.Cleanup(func() {
		if err := restore(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	down := faults.Rates{Error: 0.1, Throttle: 0.05, Timeout: 0.03, Lose: 0.05, Reject: 0.02}
	s.down.SetFaults(down, faults.NewDice(6).Float64)
	started := time.Now()
	t.Cleanup(func() { s.down.SetFaults(faults.Rates{}, nil) })

	const events, copies = 100, 3
	run := runID(3)
	all := make([]int, events)
	for i := range all {
		all[i] = i
	}
	rep := harness.Storm(ctx, s.sender, harness.StormConfig{Run: run, Events: all, Copies: copies, Concurrency: 16, Retries: 10})
	t.Logf("%d deliveries in %s: accepted %d, duplicates %d, 503s retried %d, final statuses %v, errors %d",
		rep.Sent, rep.Elapsed.Round(time.Millisecond), rep.Accepted, rep.Duplicates, rep.Retried, rep.Statuses, rep.Errors)
	if p := harness.AnswerProblems(rep, events, events*copies); len(p) > 0 {
		t.Fatalf("answers do not add up: %v\n%+v", p, rep)
	}
	if rep.Retried == 0 {
		t.Fatal("no delivery was answered 503: the functions' faults are not in force")
	}
	if n := s.count(t, "ORDER#ord_"+run+"_"); n != events {
		t.Fatalf("%d shipments, want %d", n, events)
	}

	// The outbox settles: retries of failed downstream calls come from the sweeper, invoked
	// here instead of waiting for its 2-minute schedule.
	prefix := harness.ClaimPrefix("shop", run)
	last := time.Now()
	unfinished, err := harness.WaitFinished(ctx, s.db, s.table, prefix, 4*time.Minute, func() {
		if time.Since(last) > 2*time.Second {
			_ = dep.Sweep(ctx) // a sweep failing under the injected faults is retried on the next tick
			last = time.Now()
		}
	})
	if err != nil || unfinished > 0 {
		t.Fatalf("%d claims with unfinished intents (%v)", unfinished, err)
	}
	tally, err := harness.TallyClaims(ctx, s.db, s.table, prefix)
	if err != nil {
		t.Fatal(err)
	}
	injected, err := dep.InjectedFaults(ctx, cloudwatchlogs.NewFromConfig(awstest.Config(t)), started)
	if err != nil {
		t.Fatal(err)
	}
	st := s.down.Stats("shop:msg_" + run + "_")
	t.Logf("claims %d, intents %v, attempts %d; downstream: %d applied, %d calls, %d repeats answered by its idempotency, injected %v; the functions injected %v",
		tally.Claims, tally.Intents, tally.Attempts, st.Applied, st.Calls, st.Repeats, st.Injected, injected)
	spec, _ := faults.Parse(functionFaults)
	for _, p := range append(harness.MissingFaults(spec, injected),
		harness.CheckOutbox(harness.Expect{Events: events, Downstream: down, DynamoDB: injected}, tally, s.down, "shop:msg_"+run+"_")...) {
		t.Error(p)
	}
	if len(st.Injected) == 0 {
		t.Fatal("the downstream injected no fault")
	}
}
