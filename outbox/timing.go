package outbox

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/oncehook/oncehook/dedup"
)

// Timings are the settings of a deployment that bound each other: batch size and concurrency,
// the longest call, the lease, and the outbox and sweeper functions' timeouts. PlanTimings
// derives them from the targets' calls and CheckTimings is the rule they obey; the CDK stack
// applies both at synth, and New checks the lease with the same MinLease.
type Timings struct {
	BatchSize       int           // stream records per invocation
	Concurrency     int           // records run at once (Config.Concurrency)
	MaxCall         time.Duration // the slowest target's longest call (its executor's MaxDuration)
	Slowest         string        // that target, for the errors that name it
	Lease           time.Duration
	Margin          time.Duration // Config.Margin; DefaultMargin when zero
	FunctionTimeout time.Duration // the outbox function's
	// SweeperTimeout is the sweeper function's: it must run the slowest target's intent, as the
	// safety net of every target (zero: no sweeper to check).
	SweeperTimeout time.Duration
}

// DefaultSweeperTimeout is the sweeper function's timeout unless a target needs longer: long
// enough to drain a backlog (docs/capacity.md), short against its 2-minute schedule.
const DefaultSweeperTimeout = 5 * time.Minute

// MaxFunctionTimeout is Lambda's longest function timeout.
const MaxFunctionTimeout = 15 * time.Minute

// NeededFunctionTimeout is the shortest function timeout that runs a whole batch of
// single-intent records, each call taking MaxCall, within one invocation.
func (t Timings) NeededFunctionTimeout() time.Duration {
	margin := t.margin()
	rounds := (t.BatchSize + t.Concurrency - 1) / max(t.Concurrency, 1)
	return time.Duration(rounds)*(t.MaxCall+margin) + margin
}

// NeededSweeperTimeout is the shortest sweeper timeout that can run the slowest target's intent:
// its call, the margin for its record, and two margins for what a run does first (its lock,
// the parked count, the first index page, the claim's read).
func (t Timings) NeededSweeperTimeout() time.Duration {
	return t.MaxCall + 3*t.margin()
}

func (t Timings) margin() time.Duration { return cmp.Or(t.Margin, DefaultMargin) }

// MinLease is the shortest lease that covers a call of up to call plus margin: a call that
// could outlive its lease could run twice at once. New and CheckTimings both apply it.
func MinLease(call, margin time.Duration) time.Duration { return call + margin }

// Bounds is the bound of each of an application's executors (Bounded's MaxDuration), by target,
// for PlanTimings. An executor that declares none, or one that is not positive, is refused with
// a *ConfigError naming its target and type: its calls would get a default it never agreed to.
func Bounds(executors map[string]Executor) (map[string]time.Duration, error) {
	bounds := make(map[string]time.Duration, len(executors))
	for _, name := range slices.Sorted(maps.Keys(executors)) {
		field := fmt.Sprintf("Executors[%q]", name)
		x := executors[name]
		if x == nil {
			return nil, &ConfigError{Field: field, Reason: "is nil"}
		}
		b, ok := x.(Bounded)
		if !ok {
			return nil, &ConfigError{Field: field, Reason: fmt.Sprintf("(%T) declares no bound: give it a MaxDuration() method "+
				"(outbox.Bounded), the longest one call takes, which the lease and the functions' timeouts are sized from", x)}
		}
		if bounds[name] = b.MaxDuration(); bounds[name] <= 0 {
			return nil, &ConfigError{Field: field, Reason: fmt.Sprintf("(%T) MaxDuration %s: must be positive", x, bounds[name])}
		}
	}
	return bounds, nil
}

// PlanTimings derives a deployment's timings from the longest call of each of its targets (by
// name; zero means DefaultHTTPTimeout, every built-in executor's), for a stream batch of
// batchSize records run concurrency at a time, with DefaultMargin: the lease (DefaultLease, or
// the slowest call plus the margin), the outbox function's timeout (at least a minute, or what
// a batch needs) and the sweeper's (DefaultSweeperTimeout, or what the slowest call needs).
// Timings that would need a function over Lambda's 15 minutes are refused with a *ConfigError
// naming the slowest target; the result passes CheckTimings.
func PlanTimings(batchSize, concurrency int, calls map[string]time.Duration) (Timings, error) {
	t := Timings{BatchSize: batchSize, Concurrency: concurrency, Margin: DefaultMargin}
	for _, name := range slices.Sorted(maps.Keys(calls)) {
		if d := cmp.Or(calls[name], DefaultHTTPTimeout); d > t.MaxCall {
			t.MaxCall, t.Slowest = d, name
		}
	}
	if t.MaxCall == 0 {
		t.MaxCall = DefaultHTTPTimeout // no targets yet: what the first one gets by default
	}
	if batchSize <= 0 || concurrency <= 0 {
		return t, &ConfigError{Field: "BatchSize", Reason: "and Concurrency must be positive"}
	}
	// Whole seconds, rounded up: what LEASE_SECONDS and a function's Timeout can say.
	t.Lease = ceilSecond(max(DefaultLease, MinLease(t.MaxCall, t.Margin)))
	t.FunctionTimeout = ceilSecond(max(time.Minute, t.NeededFunctionTimeout()))
	t.SweeperTimeout = ceilSecond(max(DefaultSweeperTimeout, t.NeededSweeperTimeout()))
	field := "targets"
	if t.Slowest != "" {
		field = fmt.Sprintf("target %q's timeout", t.Slowest)
	}
	switch {
	case t.FunctionTimeout > MaxFunctionTimeout:
		return t, &ConfigError{Field: field, Reason: fmt.Sprintf("%s: a batch of %d records %d at a time would need a %s outbox function, over Lambda's 15 minutes; lower the batch size or the timeout",
			t.MaxCall, t.BatchSize, t.Concurrency, t.NeededFunctionTimeout())}
	case t.SweeperTimeout > MaxFunctionTimeout:
		return t, &ConfigError{Field: field, Reason: fmt.Sprintf("%s: the sweeper, every target's safety net, would need %s to run it, over Lambda's 15 minutes",
			t.MaxCall, t.NeededSweeperTimeout())}
	}
	return t, CheckTimings(t)
}

func ceilSecond(d time.Duration) time.Duration { return (d + time.Second - 1).Truncate(time.Second) }

// CheckTimings reports, as a *ConfigError naming the setting, timings that cannot work: a lease
// shorter than a call plus the margin (the call could outlive it and run twice at once); an
// outbox function timeout shorter than a batch needs (records would be handed back every time);
// a sweeper timeout too short for the slowest call (its intents would be deferred on every
// run). A short timeout is not unsafe, only stuck: the worker never takes a lease it cannot
// finish.
func CheckTimings(t Timings) error {
	margin := t.margin()
	switch {
	case t.BatchSize <= 0 || t.Concurrency <= 0:
		return &ConfigError{Field: "BatchSize", Reason: "and Concurrency must be positive"}
	case t.Lease < MinLease(t.MaxCall, margin):
		return &ConfigError{Field: "Lease", Reason: fmt.Sprintf("%s is shorter than the slowest target's timeout %s plus the %s margin", t.Lease, t.MaxCall, margin)}
	case t.FunctionTimeout < t.NeededFunctionTimeout():
		return &ConfigError{Field: "FunctionTimeout", Reason: fmt.Sprintf("%s cannot run a batch of %d records %d at a time with calls of up to %s: it needs %s; lower the batch size or the targets' timeouts",
			t.FunctionTimeout, t.BatchSize, t.Concurrency, t.MaxCall, t.NeededFunctionTimeout())}
	case t.SweeperTimeout != 0 && t.SweeperTimeout < t.NeededSweeperTimeout():
		return &ConfigError{Field: "SweeperTimeout", Reason: fmt.Sprintf("%s cannot run the slowest target's call of up to %s with its margins: it needs %s",
			t.SweeperTimeout, t.MaxCall, t.NeededSweeperTimeout())}
	}
	return nil
}

// StreamFilterPatterns are the event filter patterns of the outbox's stream mapping (OR'ed):
// the writes of a claim that hand the worker due work (dedup.WakeFilterPatterns).
func StreamFilterPatterns() []map[string]any { return dedup.WakeFilterPatterns() }
