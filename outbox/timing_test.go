package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox"
)

// TestPlannedTimingsAreAcceptedByTheWorkerTheyAreFor: for generated sets of targets (timeouts
// from 1 s to 10 min, batch sizes and concurrencies), PlanTimings either refuses, naming the
// slowest target, or gives timings CheckTimings accepts, a lease New accepts for executors
// with those calls, an outbox function that runs a whole batch, and a sweeper that can run the
// slowest target's intent with the margins its run needs. The stack's synth and the functions'
// start share this one computation.
func TestPlannedTimingsAreAcceptedByTheWorkerTheyAreFor(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(21, 21))
	timeouts := []time.Duration{0, time.Second, 10 * time.Second, 27 * time.Second, 28 * time.Second, 30 * time.Second,
		55 * time.Second, time.Minute, 64 * time.Second, 5 * time.Minute, 10 * time.Minute}
	for i := range 300 {
		calls := map[string]time.Duration{}
		executors := map[string]outbox.Executor{}
		for j := range 1 + r.IntN(4) {
			d := timeouts[r.IntN(len(timeouts))]
			if r.IntN(3) == 0 {
				d = time.Duration(r.Int64N(int64(10 * time.Minute))).Round(time.Second)
			}
			name := fmt.Sprintf("t%d", j)
			calls[name] = d
			executors[name] = &outbox.HTTPExecutor{URL: "http://127.0.0.1:1", Timeout: d}
		}
		batch, conc := []int{1, 10, 100}[r.IntN(3)], []int{1, 8}[r.IntN(2)]
		tm, err := outbox.PlanTimings(batch, conc, calls)
		slowest, longest := "", time.Duration(0)
		for name, d := range calls {
			if d == 0 {
				d = outbox.DefaultHTTPTimeout
			}
			if d > longest || d == longest && name < slowest {
				slowest, longest = name, d
			}
		}
		if err != nil {
			var ce *outbox.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), fmt.Sprintf("%q", slowest)) {
				t.Fatalf("case %d %v: %v: want a *ConfigError naming the slowest target %q", i, calls, err, slowest)
			}
			if tm.NeededFunctionTimeout() <= 15*time.Minute && tm.NeededSweeperTimeout() <= 15*time.Minute {
				t.Fatalf("case %d %v: refused (%v), though both functions fit Lambda's 15 minutes", i, calls, err)
			}
			continue
		}
		if tm.MaxCall != longest || tm.Slowest != slowest {
			t.Fatalf("case %d: MaxCall %s (%s), want %s (%s)", i, tm.MaxCall, tm.Slowest, longest, slowest)
		}
		if err := outbox.CheckTimings(tm); err != nil {
			t.Fatalf("case %d %v: the plan %+v fails its own check: %v", i, calls, tm, err)
		}
		if tm.FunctionTimeout > 15*time.Minute || tm.SweeperTimeout > 15*time.Minute {
			t.Fatalf("case %d: %+v: over Lambda's 15 minutes", i, tm)
		}
		if tm.SweeperTimeout < longest+3*outbox.DefaultMargin || tm.SweeperTimeout < 5*time.Minute {
			t.Fatalf("case %d: sweeper timeout %s cannot run a %s call with its margins", i, tm.SweeperTimeout, longest)
		}
		if _, err := outbox.New(awstest.Client(t), outbox.Config{Table: "t", Lease: tm.Lease, Executors: executors}); err != nil {
			t.Fatalf("case %d %v: the worker refuses the planned lease %s: %v", i, calls, tm.Lease, err)
		}
	}
}

// TestCheckTimingsRefusesASweeperThatCannotRunTheSlowestTarget: a sweeper whose timeout cannot
// fit the slowest call and the margins around it would defer that target's intents on every
// run: refused, naming the setting.
func TestCheckTimingsRefusesASweeperThatCannotRunTheSlowestTarget(t *testing.T) {
	t.Parallel()
	tm, err := outbox.PlanTimings(1, 8, map[string]time.Duration{"slow": 6 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tm.SweeperTimeout = 5 * time.Minute
	var ce *outbox.ConfigError
	if err := outbox.CheckTimings(tm); !errors.As(err, &ce) || ce.Field != "SweeperTimeout" {
		t.Fatalf("%v: want a *ConfigError on SweeperTimeout", err)
	}
}

// TestBoundsRefusesAnExecutorWithoutOneNamingIt: a deployment sizes its lease from its
// executors' bounds, so one that declares none, or none that is positive, is refused, naming
// its target and its type; a bounded one gives its MaxDuration.
func TestBoundsRefusesAnExecutorWithoutOneNamingIt(t *testing.T) {
	noop := func(context.Context, outbox.Task) error { return nil }
	for _, c := range []struct {
		name string
		x    outbox.Executor
		want string
	}{
		{"nil", nil, `outbox: Executors["crm"] is nil`},
		{"a function", outbox.ExecutorFunc(noop), `outbox: Executors["crm"] (outbox.ExecutorFunc) declares no bound: give it a MaxDuration() method`},
		{"a zero bound", outbox.BoundedFunc(0, noop), `Executors["crm"] (outbox.boundedFunc) MaxDuration 0s: must be positive`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := outbox.Bounds(map[string]outbox.Executor{"crm": c.x, "email": &outbox.HTTPExecutor{}})
			var ce *outbox.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a *ConfigError containing %q", err, c.want)
			}
		})
	}
	got, err := outbox.Bounds(map[string]outbox.Executor{"crm": outbox.BoundedFunc(70*time.Second, noop), "email": &outbox.HTTPExecutor{}})
	if err != nil || got["crm"] != 70*time.Second || got["email"] != outbox.DefaultHTTPTimeout {
		t.Fatalf("got %v, %v", got, err)
	}
}
