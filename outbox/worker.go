// Package outbox executes the intents a claim carries: the external effects of an event (an
// email, a payment call), each exactly once as far as the downstream can tell.
//
// A Worker takes one intent at a time under a lease: a conditional UpdateItem moves it from
// pending (and due) to running and increments its attempt count, the lease's fencing token. It
// runs the intent through the executor of its target, with <source>:<event_id>:<intent> as the
// idempotency key, and records the result conditionally on its token and the claim's commit
// token:
//
//	success            -> done
//	retryable failure  -> pending again after a backoff (the Scheduler, if any, wakes it)
//	permanent failure  -> parked, for an operator
//	attempts exhausted -> parked
//
// The write that finishes an event's last open intent also moves the claim in the pending
// index, so an event with one intent costs three writes of its claim: commit, lease, finish.
//
// A worker that crashes between the call and its record leaves a running intent whose lease
// expires; the next attempt calls again with the same key, and the downstream's dedup answers.
// A worker whose lease expired cannot overwrite the newer attempt's result. A worker never
// takes a lease it could not finish before its invocation's deadline.
//
// Every write of a claim is dedup.Claims'; this package keeps the policy: which executor, when,
// for how long, how to back off, and what a failure means. The stream handler (stream.go), the
// retry queue's wake-ups (retries.go) and the Sweeper (sweeper.go) all come through Process;
// one intent's turn is turn.go; a target's limits are limits.go.
package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/dedup"
)

// API is the part of the DynamoDB client the worker and the sweeper use.
type API interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Config configures a Worker.
type Config struct {
	Table string
	// Executors maps an intent's target to what runs it.
	Executors map[string]Executor
	// Lease is how long a worker may hold an intent: at least any Bounded executor's
	// MaxDuration plus Margin. Default DefaultLease.
	Lease time.Duration
	// Margin is kept back at the end of a lease and of an invocation for the writes that record
	// a call. Default DefaultMargin.
	Margin time.Duration
	// MaxAttempts parks an intent after this many failed attempts; attempts that recorded
	// nothing (their workers stopped mid-call) count too: a lease past them parks it without a
	// call. Default DefaultMaxAttempts.
	MaxAttempts int
	// Backoff is the wait before attempt n+1 after n attempts spent since the budget was last
	// renewed (dedup.ClaimIntent.Spent). Default: 5 s doubling per attempt, capped at 15 min,
	// with jitter (10 attempts span about 40 minutes). A retry that would be due at or after
	// its claim's expiry parks instead.
	Backoff func(attempts int) time.Duration
	// Concurrency bounds the records of one batch processed at once. Default 0: the whole
	// batch, up to DefaultConcurrency, so a slow downstream costs a batch one call's time.
	Concurrency int
	// Limits are the targets' limits across every worker: a call a limit holds back waits, or is
	// handed back with a wake-up near its turn, unleased: it spends no attempt. See Limit.
	Limits map[string]Limit
	// Scheduler wakes a retried intent at its due time (SQSScheduler). Without one, retries
	// wait for the Sweeper.
	Scheduler Scheduler
	// PendingShards is the pending index's shard count (dedup.Config.PendingShards). Default
	// dedup.PendingShards.
	PendingShards int
	// WriteRetries bounds the retries of a write refused with TransactionConflict (a duplicate
	// delivery's transaction holds the claim for a moment). Default 3 (dedup.Claims').
	WriteRetries int
	Now          func() time.Time
	Logger       *slog.Logger
	// Metrics receives EMF documents (stdout in Lambda); none when nil.
	Metrics Metrics
	// TracerProvider, when set, traces each intent's turn as a child of its claim's commit, and
	// each sweep; nil is tracing off, at no cost.
	TracerProvider trace.TracerProvider
}

// Defaults of Config.
const (
	DefaultLease       = time.Minute
	DefaultMargin      = 5 * time.Second
	DefaultMaxAttempts = 10
)

// Bounded is an Executor that knows the longest one Execute call can take: the worker takes no
// lease it could not finish, and New refuses a lease shorter than it plus the margin. A
// deployment refuses an executor that is not Bounded (Bounds); a Worker built directly gives
// one DefaultMaxDuration (or the lease less the margin, when shorter).
type Bounded interface {
	MaxDuration() time.Duration
}

// DefaultMaxDuration bounds a call to an executor that is not Bounded, in a Worker built
// directly; PlanTimings assumes it for a call with no bound given.
const DefaultMaxDuration = DefaultHTTPTimeout

// Metrics is where the worker and the sweeper count what they did. See NewEMFMetrics.
type Metrics interface {
	Intent(target, outcome string, latency time.Duration)
	Sweep(r SweepReport)
}

type nopMetrics struct{}

func (nopMetrics) Intent(string, string, time.Duration) {}
func (nopMetrics) Sweep(SweepReport)                    {}

// Worker runs intents.
type Worker struct {
	api    API
	cfg    Config
	tracer trace.Tracer // newTracer
	limits *limiter
	claims *dedup.Claims // every write of a claim
}

// ConfigError names the setting of a Worker that cannot work.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string { return "outbox: " + e.Field + " " + e.Reason }

// New validates cfg and returns a Worker.
func New(api API, cfg Config) (*Worker, error) {
	if api == nil {
		return nil, &ConfigError{Field: "api", Reason: "is nil"}
	}
	if cfg.Table == "" {
		return nil, &ConfigError{Field: "Table", Reason: "is empty"}
	}
	cfg.Lease = cmp.Or(cfg.Lease, DefaultLease)
	cfg.Margin = cmp.Or(cfg.Margin, DefaultMargin)
	if cfg.Margin < 0 || cfg.Lease <= cfg.Margin {
		return nil, &ConfigError{Field: "Lease", Reason: fmt.Sprintf("%s must be longer than the margin %s", cfg.Lease, cfg.Margin)}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Executors)) {
		x := cfg.Executors[name]
		if x == nil {
			return nil, &ConfigError{Field: "Executors", Reason: fmt.Sprintf("has no executor for target %q (nil)", name)}
		}
		inner := x
		if u, ok := x.(interface{ unwrap() Executor }); ok {
			inner = u.unwrap()
		}
		if c, ok := inner.(Checker); ok {
			if err := c.Check(IsAtMostOnce(x)); err != nil {
				return nil, &ConfigError{Field: "Executors", Reason: fmt.Sprintf("target %q: %v", name, err)}
			}
		}
		if b, ok := x.(Bounded); ok && cfg.Lease < MinLease(b.MaxDuration(), cfg.Margin) {
			return nil, &ConfigError{Field: "Lease", Reason: fmt.Sprintf("%s is shorter than target %q's timeout %s plus the %s margin: "+
				"a call could outlive its lease and run twice at once", cfg.Lease, name, b.MaxDuration(), cfg.Margin)}
		}
	}
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, DefaultMaxAttempts)
	if cfg.MaxAttempts < 0 {
		return nil, &ConfigError{Field: "MaxAttempts", Reason: "must not be negative"}
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Concurrency < 0 {
		return nil, &ConfigError{Field: "Concurrency", Reason: "must not be negative (0: the whole batch)"}
	}
	for _, target := range slices.Sorted(maps.Keys(cfg.Limits)) {
		if err := cfg.Limits[target].Validate(); err != nil {
			ce, _ := errors.AsType[*ConfigError](err)
			return nil, &ConfigError{Field: fmt.Sprintf("Limits[%q].%s", target, ce.Field), Reason: ce.Reason}
		}
	}
	cfg.PendingShards = cmp.Or(cfg.PendingShards, dedup.PendingShards)
	if cfg.PendingShards < 1 || cfg.PendingShards > dedup.MaxPendingShards {
		return nil, &ConfigError{Field: "PendingShards", Reason: fmt.Sprintf("must be between 1 and %d", dedup.MaxPendingShards)}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	return &Worker{api: api, cfg: cfg, tracer: newTracer(cfg.TracerProvider),
		limits: newLimiter(api, cfg.Table, cfg.Now, cfg.Limits),
		claims: &dedup.Claims{API: api, Table: cfg.Table, Now: cfg.Now, WriteRetries: cfg.WriteRetries}}, nil
}

// DefaultBackoff is 5 s doubling per failed attempt, capped at 15 minutes, less up to a fifth at
// random so that intents failed together do not retry together.
func DefaultBackoff(attempts int) time.Duration {
	d := 5 * time.Second << min(max(attempts-1, 0), 8)
	d = min(d, 15*time.Minute)
	return d - rand.N(d/5+1)
}

// Outcomes of one intent's turn, as counted in Summary and metrics.
const (
	OutcomeDone      = "done"
	OutcomeRetry     = "retry"
	OutcomeParked    = "parked"
	OutcomeLeaseLost = "lease_lost"
	OutcomeBusy      = "busy"     // another worker holds it, or it is not due: nothing to do
	OutcomeDeferred  = "deferred" // not leased: the invocation had no time left to run it
	OutcomeHeld      = "held"     // not leased: the target's limit held it back; woken near its turn
	OutcomePaused    = "paused"   // not leased: its target is paused (Targets); the sweeper runs it after resume
)

// Summary counts the outcomes of a Process call.
type Summary map[string]int

// ErrNoTime is joined in Process's error for an intent the invocation had no time left to run:
// the caller delivers the claim again.
var ErrNoTime = errors.New("outbox: not enough time left in this invocation to run the intent")

// Process runs every intent of claim that is due: pending with its backoff passed, or running
// under an expired lease. It returns an error only when a step could not be recorded or an
// intent could not run now (ErrNoTime, a limit without a Scheduler): the caller delivers the
// claim again. Downstream failures are recorded in the claim, not returned. A claim with
// nothing due is settled in the pending index (dedup.Claims.Settle).
func (w *Worker) Process(ctx context.Context, claim *dedup.Claim) (Summary, error) {
	sum := Summary{}
	now := w.cfg.Now()
	names := make([]string, 0, len(claim.Intents))
	for name, in := range claim.Intents {
		if due(in, now) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return sum, w.claims.Settle(ctx, claim)
	}
	slices.Sort(names)
	var errs []error
	var heldFor time.Duration // the longest wait a limit named, for the wake-up
	for _, name := range names {
		if !w.hasTime(ctx, claim.Intents[name].Target) {
			sum[OutcomeDeferred]++
			errs = append(errs, fmt.Errorf("intent %s: %w", name, ErrNoTime))
			continue
		}
		outcome, err := w.run(ctx, claim, name)
		if held, ok := errors.AsType[*heldError](err); ok {
			sum[OutcomeHeld]++
			heldFor = max(heldFor, held.wait)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("intent %s: %w", name, err))
			continue
		}
		sum[outcome]++
	}
	if sum[OutcomeHeld] > 0 {
		// Held back, still due: woken near its turn, else delivered again by the caller.
		if w.cfg.Scheduler == nil {
			errs = append(errs, fmt.Errorf("%d intents held back by their target's limit: %w", sum[OutcomeHeld], errHeld))
		} else if err := w.cfg.Scheduler.Schedule(ctx, claim.PK, w.cfg.Now().Add(max(heldFor, time.Second))); err != nil {
			errs = append(errs, fmt.Errorf("%d intents held back by their target's limit, and no wake-up: %w", sum[OutcomeHeld], err))
		}
	}
	return sum, errors.Join(errs...)
}

// DefaultConcurrency is the most records of a batch processed at once when Config.Concurrency
// is 0: Lambda gives a function 1,024 open files, and each record in flight holds a connection
// to its downstream and one to DynamoDB, with room left for the SDK's pools.
const DefaultConcurrency = 256

// concurrency is how many of a batch's n records run at once.
func (w *Worker) concurrency(n int) int {
	return min(cmp.Or(max(w.cfg.Concurrency, 0), DefaultConcurrency), max(n, 1))
}

// each runs f(i) for each of a batch's n records, w.concurrency(n) at a time, and returns the
// records f failed, in order: the batch's item failures.
func (w *Worker) each(n int, f func(i int) (failed bool)) []int {
	sem := make(chan struct{}, w.concurrency(n))
	failed := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			failed[i] = f(i)
		})
	}
	wg.Wait()
	var out []int
	for i, f := range failed {
		if f {
			out = append(out, i)
		}
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// due reports whether an intent may be leased now.
func due(in dedup.ClaimIntent, now time.Time) bool {
	ms := now.UnixMilli()
	switch in.Status {
	case dedup.IntentPending:
		return in.NextAttemptAt <= ms
	case dedup.IntentRunning:
		return in.LeaseUntil < ms
	}
	return false
}

// callBudget is the longest a call to target's executor may take (Bounded).
func (w *Worker) callBudget(target string) time.Duration {
	if b, ok := w.cfg.Executors[target].(Bounded); ok {
		return b.MaxDuration()
	}
	return min(DefaultMaxDuration, w.cfg.Lease-w.cfg.Margin)
}

// hasTime reports whether the invocation leaves room for a call to target and its record.
func (w *Worker) hasTime(ctx context.Context, target string) bool {
	now := time.Now()
	return !w.startBy(ctx, target, now).Before(now)
}
