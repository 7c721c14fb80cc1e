package outbox

import (
	"fmt"
	"time"

	"github.com/oncehook/oncehook/dedup"
)

// Timings are the settings of a deployment that bound each other: how many stream records one
// invocation gets and runs at once, how long one call may take, how long a lease lasts, and how
// long the function may run. CheckTimings is the one rule; the CDK stack applies it at synth.
type Timings struct {
	BatchSize       int           // stream records per invocation
	Concurrency     int           // records run at once (Config.Concurrency)
	MaxCall         time.Duration // the slowest target's timeout
	Lease           time.Duration
	Margin          time.Duration // Config.Margin; DefaultMargin when zero
	FunctionTimeout time.Duration
}

// NeededFunctionTimeout is the shortest function timeout that runs a whole batch of
// single-intent records, each call taking MaxCall, within one invocation.
func (t Timings) NeededFunctionTimeout() time.Duration {
	margin := t.margin()
	rounds := (t.BatchSize + t.Concurrency - 1) / max(t.Concurrency, 1)
	return time.Duration(rounds)*(t.MaxCall+margin) + margin
}

func (t Timings) margin() time.Duration {
	if t.Margin == 0 {
		return DefaultMargin
	}
	return t.Margin
}

// CheckTimings reports, as a *ConfigError naming the setting, timings that cannot work: a lease
// shorter than a call plus the margin (the call could outlive it, and a second worker run the
// intent at the same time), or a function timeout shorter than a batch needs (the invocation
// would hand back records every time, and they would reach the on-failure queue instead of
// running). The worker never takes a lease it cannot finish, so a short timeout is not unsafe,
// only stuck.
func CheckTimings(t Timings) error {
	margin := t.margin()
	switch {
	case t.BatchSize <= 0 || t.Concurrency <= 0:
		return &ConfigError{Field: "BatchSize", Reason: "and Concurrency must be positive"}
	case t.Lease < t.MaxCall+margin:
		return &ConfigError{Field: "Lease", Reason: fmt.Sprintf("%s is shorter than the slowest target's timeout %s plus the %s margin", t.Lease, t.MaxCall, margin)}
	case t.FunctionTimeout < t.NeededFunctionTimeout():
		return &ConfigError{Field: "FunctionTimeout", Reason: fmt.Sprintf("%s cannot run a batch of %d records %d at a time with calls of up to %s: it needs %s; lower the batch size or the targets' timeouts",
			t.FunctionTimeout, t.BatchSize, t.Concurrency, t.MaxCall, t.NeededFunctionTimeout())}
	}
	return nil
}

// StreamFilterPatterns are the event filter patterns of the outbox's stream mapping (OR'ed):
// a claim's INSERT that carries intents, and a MODIFY whose new image has the wake marker (a
// claim re-admitted after expiry, an operator's redrive). The worker's own lease, retry and
// finish writes carry no marker, so they never invoke it; neither do effect records, TTL
// deletions and claims without intents.
func StreamFilterPatterns() []map[string]any {
	exists := []any{map[string]any{"exists": true}}
	return []map[string]any{
		{"eventName": []any{"INSERT"}, "dynamodb": map[string]any{"NewImage": map[string]any{dedup.AttrPendingShard: map[string]any{"S": exists}}}},
		{"eventName": []any{"MODIFY"}, "dynamodb": map[string]any{"NewImage": map[string]any{dedup.AttrWake: map[string]any{"N": exists}}}},
	}
}
