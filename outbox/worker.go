// Package outbox executes the intents a claim carries: the external effects of an event (an
// email, a payment call), each exactly once as far as the downstream can tell.
//
// A Worker takes one intent at a time under a lease: a conditional UpdateItem moves it from
// pending (and due) to running and increments its attempt count, which is the lease's fencing
// token; a worker may only record the attempt it leased. It then runs the intent through the
// executor chosen by its target, passing <source>:<event_id>:<intent> as the idempotency key,
// and records the result conditionally on its token and on the claim's commit token:
//
//	success            -> done
//	retryable failure  -> pending again, not before a backoff, with the error (attempts+1);
//	                      the Scheduler, when there is one, wakes it at its due time
//	permanent failure  -> parked, with the error, for an operator
//	attempts exhausted -> parked
//
// The write that finishes an event's last open intent also takes the claim out of the due part
// of the pending index (or into its parked part), so an event with one intent costs three
// writes of its claim: the commit, the lease and the finish.
//
// A worker that crashes after the downstream call but before recording it leaves a running
// intent whose lease expires; the next attempt calls the downstream again with the same key,
// and the downstream's dedup answers. A worker whose lease expired cannot overwrite the newer
// attempt's result (its token no longer matches): it counts a lost lease and moves on. A
// worker never takes a lease it could not finish before its invocation's deadline.
//
// The stream handler (HandleStream), the retry handler (HandleRetries) and the Sweeper all
// come here, through Process.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
	// Lease is how long a worker may hold an intent. New refuses a lease shorter than any
	// Bounded executor's MaxDuration plus Margin. Default DefaultLease.
	Lease time.Duration
	// Margin is the time kept back, at the end of a lease and of an invocation, for the
	// DynamoDB writes that record a call. Default DefaultMargin.
	Margin time.Duration
	// MaxAttempts parks an intent after this many failed attempts. Default 10.
	MaxAttempts int
	// Backoff is the wait before attempt n+1 after n failures. Default: 5 s doubling per
	// attempt, capped at 15 min, with jitter (10 attempts span about 40 minutes).
	Backoff func(attempts int) time.Duration
	// Concurrency bounds the records of one batch (stream records, or wake-ups) processed at
	// once. Default 0: the whole batch at once, up to DefaultConcurrency, so a slow downstream
	// costs a batch one call's time, not a round per few records; Limits bound what a target
	// takes.
	Concurrency int
	// Limits are the targets' limits across every worker (the sources file's max_in_flight and
	// rate): a call a limit holds back waits, or is handed back with a wake-up near its turn,
	// without a lease, so it spends no attempt and never parks. See Limit.
	Limits map[string]Limit
	// Scheduler wakes a retried intent at its due time (SQSScheduler). Without one, retries
	// wait for the Sweeper.
	Scheduler Scheduler
	// PendingShards is the pending index's shard count, as the receiver's store writes it
	// (dedup.Config.PendingShards): the sweeper reads every shard. Default dedup.PendingShards.
	PendingShards int
	// WriteRetries bounds how often a write DynamoDB refused with TransactionConflict (a
	// duplicate delivery's transaction holds the claim for a moment) is tried again, with
	// jitter. Default 3.
	WriteRetries int
	Now          func() time.Time
	Logger       *slog.Logger
	// Metrics receives EMF documents (stdout in Lambda); none when nil.
	Metrics Metrics
	// TracerProvider, when set, traces each intent's turn (SpanIntent, with its lease, call and
	// finish) as a child of the span its claim was committed under, and each sweep; nil is
	// tracing off, at no cost. See trace.go.
	TracerProvider trace.TracerProvider
}

// Defaults of Config.
const (
	DefaultLease  = time.Minute
	DefaultMargin = 5 * time.Second
)

// Bounded is an Executor that knows the longest one Execute call can take. The worker takes no
// lease it could not finish before its invocation's deadline, and New refuses a lease shorter
// than MaxDuration plus the margin. An executor that is not Bounded gets the lease less the
// margin.
type Bounded interface {
	MaxDuration() time.Duration
}

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
	tracer trace.Tracer // nil: tracing off
	limits *limiter
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
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Margin == 0 {
		cfg.Margin = DefaultMargin
	}
	if cfg.Margin < 0 || cfg.Lease <= cfg.Margin {
		return nil, &ConfigError{Field: "Lease", Reason: fmt.Sprintf("%s must be longer than the margin %s", cfg.Lease, cfg.Margin)}
	}
	for _, name := range sortedTargets(cfg.Executors) {
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
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 10
	}
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
			var ce *ConfigError
			errors.As(err, &ce)
			return nil, &ConfigError{Field: fmt.Sprintf("Limits[%q].%s", target, ce.Field), Reason: ce.Reason}
		}
	}
	if cfg.WriteRetries == 0 {
		cfg.WriteRetries = 3
	}
	if cfg.PendingShards == 0 {
		cfg.PendingShards = dedup.PendingShards
	}
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
		limits: newLimiter(api, cfg.Table, cfg.Now, cfg.Limits)}, nil
}

func sortedTargets(m map[string]Executor) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DefaultBackoff is 5 s doubling per failed attempt, capped at 15 minutes, less up to a
// fifth at random so that intents failed together do not retry together.
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
)

// Summary counts the outcomes of a Process call.
type Summary map[string]int

// ErrNoTime is returned (joined) by Process for intents it did not lease because the
// invocation's deadline was too close to run them: the caller delivers the claim again.
var ErrNoTime = errors.New("outbox: not enough time left in this invocation to run the intent")

// errLeaseLost is a finish or retry refused because a newer attempt owns the intent.
var errLeaseLost = errors.New("outbox: lease lost")

// Process runs every intent of claim that is due: pending with its backoff passed, or running
// under an expired lease. It returns an error only when DynamoDB could not record a step or
// there was no time to run an intent (ErrNoTime), so the caller should deliver the claim
// again (a stream batch item failure); downstream failures are recorded in the claim and are
// not errors here. A claim with nothing open that is still among the due work leaves it.
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
		return sum, w.settle(ctx, claim)
	}
	sort.Strings(names)
	var errs []error
	var heldFor time.Duration // the longest wait a limit named, for the wake-up
	for _, name := range names {
		if !w.hasTime(ctx, claim.Intents[name].Target) {
			sum[OutcomeDeferred]++
			errs = append(errs, fmt.Errorf("intent %s: %w", name, ErrNoTime))
			continue
		}
		outcome, err := w.traceIntent(ctx, claim, name)
		var held *heldError
		if errors.As(err, &held) {
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
		// Held back, untouched and still due: woken near its turn, or, without a scheduler or
		// when the wake-up cannot be sent, delivered again by the caller (and the sweeper).
		if w.cfg.Scheduler == nil {
			errs = append(errs, fmt.Errorf("%d intents held back by their target's limit: %w", sum[OutcomeHeld], errHeld))
		} else if err := w.cfg.Scheduler.Schedule(ctx, claim.PK, w.cfg.Now().Add(max(heldFor, time.Second))); err != nil {
			errs = append(errs, fmt.Errorf("%d intents held back by their target's limit, and no wake-up: %w", sum[OutcomeHeld], err))
		}
	}
	return sum, errors.Join(errs...)
}

// maxHold is the longest a worker waits in its invocation for a target's limit to admit a
// call; past it the intent is handed back with a wake-up near its turn.
const maxHold = 30 * time.Second

// admit waits for the limits of the intent's target, if it has any: until its turn, for as long
// as the invocation leaves room for the call after the wait (and maxHold at most). The slot it
// takes is held from then for the lease the call will run under, plus the margin.
func (w *Worker) admit(ctx context.Context, target string) (*admission, error) {
	deadline := time.Now().Add(maxHold)
	if d, ok := ctx.Deadline(); ok {
		deadline = minTime(deadline, d.Add(-w.callBudget(target)-w.cfg.Margin))
	}
	return w.limits.admit(ctx, target, w.leaseFor(target)+w.cfg.Margin, deadline)
}

// mayStillRun reports whether a call that failed with err may still be under way at the
// downstream: it was written and no answer came back (a timeout, a connection that broke). Its
// max_in_flight slot stays held until it ends by itself, rather than let the next call start
// beside it.
func mayStillRun(err error) bool {
	if err == nil || IsNotSent(err) || IsDeduplicated(err) {
		return false
	}
	var se *StatusError
	var answer interface{ HTTPStatusCode() int } // an AWS service's answer (smithy's ResponseError)
	return !errors.As(err, &se) && !errors.As(err, &answer)
}

// leaseFor is the lease written for an intent of target: Lease, and for a target with a rate
// the time its call may wait for its window (rateHold) too, so the wait never shortens the
// call.
func (w *Worker) leaseFor(target string) time.Duration {
	if w.limits.rated(target) {
		return w.cfg.Lease + rateHold
	}
	return w.cfg.Lease
}

// takeWindow takes the rate window for a leased call, right before it: the window the
// downstream sees the call in is the one that counted it. A call the window holds back past
// what its lease allows is given back (unlease), so it spends no attempt.
func (w *Worker) takeWindow(ctx context.Context, l *lease, target string) error {
	if !w.limits.rated(target) || l.stranded {
		return nil
	}
	deadline := l.ends.Add(-w.callBudget(target))
	if d, ok := ctx.Deadline(); ok {
		deadline = minTime(deadline, d.Add(-w.callBudget(target)-w.cfg.Margin))
	}
	err := w.limits.takeWindow(ctx, target, deadline)
	if err != nil {
		// Held back, or the window could not be read: no call was made, so the lease is given
		// back either way.
		if uerr := w.unlease(context.WithoutCancel(ctx), l); uerr != nil {
			// Not given back: the lease ends by itself and the attempt counts (at most once, the
			// intent parks as may-have-been-sent, though it was not).
			return fmt.Errorf("%w; and the lease could not be given back: %w", err, uerr)
		}
	}
	return err
}

// unlease gives back a lease whose call was never made (its target's rate held it back): the
// intent is pending again, due, at the attempt count it had, fenced on our attempt and owner.
// A lost answer retried by the SDK finds the intent pending: the condition fails, and the
// intent is as we wanted it.
func (w *Worker) unlease(ctx context.Context, l *lease) error {
	vals := fenceValues(l)
	vals[":owner"] = str(l.owner)
	vals[":pending"] = str(dedup.IntentPending)
	vals[":one"] = num(1)
	_, err := w.update(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(w.cfg.Table),
		Key:                       claimKey(l.claim.PK),
		UpdateExpression:          aws.String("SET intents.#n.#st = :pending, intents.#n.attempts = intents.#n.attempts - :one REMOVE intents.#n.lease_until, intents.#n.lease_owner"),
		ConditionExpression:       aws.String(fence + " AND intents.#n.lease_owner = :owner"),
		ExpressionAttributeNames:  intentNames(l.name),
		ExpressionAttributeValues: vals,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // already given back (a retried write whose first answer was lost), or taken over
	}
	return err
}

// DefaultConcurrency is the most records of a batch processed at once when
// Config.Concurrency is 0. Lambda gives a function 1,024 open files, and each record in flight
// holds a connection to its downstream and one to DynamoDB: 256 leave room for both and for
// the SDK's pools. A stream batch of up to 256 records runs in one round.
const DefaultConcurrency = 256

// concurrency is how many of a batch's n records run at once: Config.Concurrency, or all of
// them up to DefaultConcurrency.
func (w *Worker) concurrency(n int) int {
	c := w.cfg.Concurrency
	if c <= 0 {
		c = DefaultConcurrency
	}
	return min(c, max(n, 1))
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

// callBudget is the longest a call to target's executor may take.
func (w *Worker) callBudget(target string) time.Duration {
	if b, ok := w.cfg.Executors[target].(Bounded); ok {
		return b.MaxDuration()
	}
	return w.cfg.Lease - w.cfg.Margin
}

// hasTime reports whether the invocation (ctx's deadline) leaves room for one call to target
// and the writes that record it.
func (w *Worker) hasTime(ctx context.Context, target string) bool {
	d, ok := ctx.Deadline()
	return !ok || time.Until(d) >= w.callBudget(target)+w.cfg.Margin
}

// lease is one attempt we hold.
type lease struct {
	name    string
	attempt int    // the fencing token
	owner   string // recognises our own writes after a lost response
	claim   *dedup.Claim
	// ends is when we must be done calling, on the real clock: the lease as written, less
	// the margin. It is computed from before the lease request was sent, so a slow lease
	// write (SDK retries) shortens the call rather than letting it outlive the lease.
	ends time.Time
	// sent is what the call produced, recorded with done.
	sent string
	// stranded is an at-most-once intent whose earlier attempt was leased and never recorded
	// (its worker stopped mid-call): not leased again, but to be parked, as it may be sent.
	stranded bool
	// overStranded is set when our done is to replace another worker's stranded park of our
	// own attempt (the fence is then the park, not our lease).
	overStranded bool
}

// run takes one intent through lease, execution and record.
func (w *Worker) run(ctx context.Context, claim *dedup.Claim, name string) (string, error) {
	amo := IsAtMostOnce(w.cfg.Executors[claim.Intents[name].Target])
	// The target's limits first: an intent they hold back is not leased, so it spends no
	// attempt (the lease is what counts one) and stays due.
	adm, err := w.admit(ctx, claim.Intents[name].Target)
	if err != nil {
		var held *heldError
		if errors.As(err, &held) {
			w.cfg.Metrics.Intent(claim.Intents[name].Target, OutcomeHeld, 0)
		}
		return OutcomeHeld, err
	}
	keepSlot := false // the call may still be running at the downstream: its slot ends by itself
	defer func() { adm.release(keepSlot) }()
	l, err := w.traceLease(ctx, claim, name, amo)
	if err != nil || l == nil {
		return OutcomeBusy, err
	}
	if !adm.until.IsZero() && l.ends.After(adm.until) {
		// The slot's write took longer than the margin: the call could outlive its slot. No
		// call was made: the lease is given back and the intent tried again soon.
		if uerr := w.unlease(context.WithoutCancel(ctx), l); uerr != nil {
			return OutcomeBusy, fmt.Errorf("the lease outlasts its max_in_flight slot, and could not be given back: %w", uerr)
		}
		w.cfg.Metrics.Intent(claim.Intents[name].Target, OutcomeHeld, 0)
		return OutcomeHeld, &heldError{target: claim.Intents[name].Target, wait: 200 * time.Millisecond, why: "its max_in_flight slot was taken too slowly to cover the lease"}
	}
	if err := w.takeWindow(ctx, l, claim.Intents[name].Target); err != nil {
		var held *heldError
		if errors.As(err, &held) {
			w.cfg.Metrics.Intent(claim.Intents[name].Target, OutcomeHeld, 0)
			return OutcomeHeld, err
		}
		return OutcomeBusy, err
	}
	in := l.claim.Intents[name]
	exec, ok := w.cfg.Executors[in.Target]
	start := time.Now()
	var execErr error
	var sent string // what the executor says it sent, when it is a Reporter
	switch {
	case !ok:
		execErr = Permanent(fmt.Errorf("no executor for target %q", in.Target))
	case l.stranded:
		execErr = Permanent(fmt.Errorf("at-most-once: attempt %d was under way when its worker stopped, and may have been sent; "+
			"not sent again (check the downstream, then redrive if it was not)", l.attempt))
	default:
		// The call must end before the lease does (or another worker could take it meanwhile)
		// and before the invocation does (or nothing could record it).
		ends := l.ends
		if d, ok := ctx.Deadline(); ok && d.Add(-w.cfg.Margin).Before(ends) {
			ends = d.Add(-w.cfg.Margin)
		}
		callCtx, cancel := context.WithDeadline(ctx, ends)
		sent, execErr = w.traceCall(callCtx, exec, Task{
			Source: claim.Source, EventID: claim.EventID, EventType: claim.EventType,
			Intent: name, Target: in.Target, Payload: in.Payload,
			IdempotencyKey: dedup.IdempotencyKey(claim.Source, claim.EventID, name),
			Attempt:        l.attempt,
			AtMostOnce:     amo,
		})
		cancel()
		keepSlot = mayStillRun(execErr)
	}
	latency := time.Since(start)
	if amo && execErr != nil && !IsNotSent(execErr) && !IsDeduplicated(execErr) && !IsPermanent(execErr) {
		// The call may have reached the downstream: an at-most-once intent is not sent again.
		execErr = Permanent(fmt.Errorf("at-most-once: %w (it may have reached the downstream: not sent again)", execErr))
	}

	outcome := OutcomeDone
	var next time.Time
	switch {
	case execErr == nil:
		l.sent = sent
		err = w.traceFinish(ctx, l, dedup.IntentDone, "")
	case IsPermanent(execErr) || l.attempt-in.AttemptsBase >= w.cfg.MaxAttempts:
		outcome = OutcomeParked
		err = w.traceFinish(ctx, l, dedup.IntentParked, execErr.Error())
	default:
		outcome = OutcomeRetry
		next, err = w.traceRetry(ctx, l, execErr.Error())
	}
	if errors.Is(err, errLeaseLost) {
		// Our lease expired and a newer attempt owns the intent now; it records the result.
		outcome, err = OutcomeLeaseLost, nil
	}
	var schedErr error
	if outcome == OutcomeRetry && err == nil && w.cfg.Scheduler != nil {
		// Best effort: if the wake-up cannot be scheduled, the sweeper still finds the intent.
		schedErr = w.cfg.Scheduler.Schedule(ctx, claim.PK, next)
	}
	level := slog.LevelInfo
	if outcome != OutcomeDone {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.String("source", claim.Source), slog.String("event_id", claim.EventID),
		slog.String("intent", name), slog.String("target", in.Target), slog.Int("attempt", l.attempt),
		slog.String("outcome", outcome), slog.Float64("latency_ms", float64(latency.Microseconds())/1000),
	}
	if execErr != nil {
		attrs = append(attrs, slog.String("error", execErr.Error()))
	}
	if err != nil {
		attrs = append(attrs, slog.String("record_error", err.Error()))
	}
	if schedErr != nil {
		attrs = append(attrs, slog.String("schedule_error", schedErr.Error()))
	}
	w.cfg.Logger.LogAttrs(ctx, level, "intent", attrs...)
	w.cfg.Metrics.Intent(in.Target, outcome, latency)
	if schedErr != nil {
		w.cfg.Metrics.Intent(in.Target, outcomeUnscheduled, 0)
	}
	return outcome, err
}

// outcomeUnscheduled counts retries whose wake-up could not be scheduled (RetryNotScheduled).
const outcomeUnscheduled = "unscheduled"

// intentNames are the expression names for one intent: #n is its map key, #st "status".
func intentNames(name string) map[string]string {
	return map[string]string{"#n": name, "#st": dedup.AttrIntentStatus}
}

func claimKey(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		dedup.AttrPK: &types.AttributeValueMemberS{Value: pk},
		dedup.AttrSK: &types.AttributeValueMemberS{Value: dedup.ClaimSK},
	}
}

// update is UpdateItem, tried again (up to WriteRetries times, with full jitter) when DynamoDB
// refuses it with TransactionConflict: a duplicate delivery's transaction holds the claim for a
// moment, and the SDK does not retry that error. Without this, a finish refused this way
// would leave the intent running until its lease expired, and the next attempt would call the
// downstream again.
func (w *Worker) update(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	for attempt := 1; ; attempt++ {
		out, err := w.api.UpdateItem(ctx, in)
		var tce *types.TransactionConflictException
		if !errors.As(err, &tce) || attempt > w.cfg.WriteRetries {
			return out, err
		}
		t := time.NewTimer(rand.N(20 * time.Millisecond << attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return out, err
		case <-t.C:
		}
	}
}

// lease takes the intent if it is still due in the stored claim (not only in the record the
// caller saw) and belongs to the same claim (commit token: a claim re-admitted after expiry is
// a new claim). It also removes the claim's wake marker, so that this write's stream record
// does not invoke the worker again. It returns nil when another worker has the intent or it
// is no longer due.
//
// An at-most-once intent (amo) is leased only while pending: one running under a lease that
// expired (a margin ago: its worker may still be recording) had its call under way when its
// worker stopped, so it comes back stranded, to be parked under the attempt it was leased at
// (the park is fenced on it, so one worker does it). Should that worker record done after all,
// its done replaces the stranded park (finish).
func (w *Worker) lease(ctx context.Context, claim *dedup.Claim, name string, amo bool) (*lease, error) {
	sent := time.Now() // before now: the lease as written never ends before sent + Lease
	now := w.cfg.Now()
	owner := strconv.FormatUint(rand.Uint64(), 36)
	pending := "(intents.#n.#st = :pending AND (attribute_not_exists(intents.#n.next_attempt_at) OR intents.#n.next_attempt_at <= :now))"
	cond := "commit_token = :commit AND (" + pending + " OR (intents.#n.#st = :running AND intents.#n.lease_until < :now))"
	if amo {
		cond = "commit_token = :commit AND " + pending // DynamoDB refuses redundant parentheses
	}
	out, err := w.update(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(w.cfg.Table),
		Key:       claimKey(claim.PK),
		UpdateExpression: aws.String("SET intents.#n.#st = :running, intents.#n.lease_until = :until, " +
			"intents.#n.lease_owner = :owner, intents.#n.attempts = intents.#n.attempts + :one REMOVE " + dedup.AttrWake),
		ConditionExpression:      aws.String(cond),
		ExpressionAttributeNames: intentNames(name),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":running": str(dedup.IntentRunning),
			":pending": str(dedup.IntentPending),
			":until":   num(now.Add(w.leaseFor(claim.Intents[name].Target)).UnixMilli()),
			":now":     num(now.UnixMilli()),
			":one":     num(1),
			":commit":  str(claim.CommitToken),
			":owner":   str(owner),
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	l := &lease{name: name, owner: owner, ends: sent.Add(w.leaseFor(claim.Intents[name].Target) - w.cfg.Margin)}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Either another worker holds it, or the SDK retried our own lease whose answer was
		// lost: then the stored intent is running under our owner token, and it is ours.
		if held, derr := dedup.UnmarshalClaim(ccf.Item); derr == nil {
			in := held.Intents[name]
			if in.Status == dedup.IntentRunning && in.LeaseOwner == owner {
				l.attempt, l.claim = in.Attempts, held
				return l, nil
			}
			// Stranded only once the lease has been over for a margin too: until then its worker
			// may still be recording what its call got (the call ended a margin before the
			// lease), and a clock a little ahead must not park what is about to be done.
			if amo && in.Status == dedup.IntentRunning && in.LeaseUntil+w.cfg.Margin.Milliseconds() < now.UnixMilli() && held.CommitToken == claim.CommitToken {
				l.attempt, l.owner, l.claim, l.stranded = in.Attempts, in.LeaseOwner, held, true
				return l, nil
			}
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	if l.claim, err = dedup.UnmarshalClaim(out.Attributes); err != nil {
		return nil, fmt.Errorf("lease: decode claim: %w", err)
	}
	l.attempt = l.claim.Intents[l.name].Attempts
	return l, nil
}

// fence is the condition every write of a leased attempt carries: the same claim incarnation
// (an older worker cannot finish a re-admitted claim's intent), the intent still running, and
// still at the attempt we leased (a newer lease has incremented it).
const fence = "commit_token = :commit AND intents.#n.#st = :running AND intents.#n.attempts = :attempt"

// strandedFence is the condition of a done that replaces a stranded park of the attempt we
// leased: the same incarnation, parked at our attempt, our owner still on it (see finish).
const strandedFence = "commit_token = :commit AND intents.#n.#st = :parked AND intents.#n.attempts = :attempt AND intents.#n.lease_owner = :owner"

func fenceValues(l *lease) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		":commit":  str(l.claim.CommitToken),
		":running": str(dedup.IntentRunning),
		":attempt": num(int64(l.attempt)),
	}
}

// finish records a terminal status (done or parked) for the attempt we leased. When, in the
// claim as our lease returned it, every other intent is already done or parked, the same write
// takes the claim out of the due index (into its parked part when any intent is parked), on
// condition that those intents are still as we saw them. When two last intents finish at
// once, neither write knows it is last; the one that sees every intent finished afterwards
// settles the claim with one more write.
func (w *Worker) finish(ctx context.Context, l *lease, status, msg string) error {
	for range 3 { // the others' statuses can change under us only by an operator's redrive
		in := w.finishInput(l, status, msg)
		out, err := w.update(ctx, in)
		var after *dedup.Claim
		var ccf *types.ConditionalCheckFailedException
		switch {
		case errors.As(err, &ccf):
			held, derr := dedup.UnmarshalClaim(ccf.Item)
			if derr != nil {
				return errLeaseLost
			}
			h := held.Intents[l.name]
			switch {
			case h.Status == status && h.Attempts == l.attempt && h.LeaseOwner == l.owner && held.CommitToken == l.claim.CommitToken:
				// Our own finish, sent again by the SDK after its answer was lost.
				after = held
			case h.Status == dedup.IntentRunning && h.Attempts == l.attempt && h.LeaseOwner == l.owner && held.CommitToken == l.claim.CommitToken:
				// Our lease holds; another intent changed since we saw it. Again, as it is now.
				l.claim = held
				continue
			case status == dedup.IntentDone && !l.stranded && !l.overStranded && h.Status == dedup.IntentParked &&
				h.Attempts == l.attempt && h.LeaseOwner == l.owner && held.CommitToken == l.claim.CommitToken:
				// Another worker parked our attempt as stranded ("may have been sent") while our
				// call outlived the lease (only a stranded park leaves our owner and attempt on a
				// park). It was sent, and succeeded: done is the truth, and keeps an operator from
				// redriving it into a second send. Again, fenced on that park.
				l.claim, l.overStranded = held, true
				continue
			default:
				return errLeaseLost
			}
		case err != nil:
			return err
		default:
			if after, err = dedup.UnmarshalClaim(out.Attributes); err != nil {
				return fmt.Errorf("finish: decode claim: %w", err)
			}
		}
		return w.settle(ctx, after)
	}
	return errors.New("outbox: finish: the claim kept changing under the write")
}

func (w *Worker) finishInput(l *lease, status, msg string) *dynamodb.UpdateItemInput {
	names := intentNames(l.name)
	values := fenceValues(l)
	values[":status"] = str(status)
	values[":at"] = str(w.cfg.Now().UTC().Format(time.RFC3339Nano))
	// lease_owner stays: it is how we recognise this write if the SDK has to send it again.
	set := []string{"intents.#n.#st = :status", "intents.#n.finished_at = :at"}
	remove := []string{"intents.#n.lease_until", "intents.#n.next_attempt_at"}
	if msg != "" {
		set = append(set, "intents.#n.last_error = :err")
		values[":err"] = str(truncate(msg))
	}
	if l.sent != "" && status == dedup.IntentDone {
		set = append(set, "intents.#n.sent = :sent")
		values[":sent"] = str(truncate(l.sent))
	}
	cond := fence
	if l.overStranded {
		cond = strandedFence
		values[":parked"] = str(dedup.IntentParked)
		values[":owner"] = str(l.owner)
		delete(values, ":running")
		set = append(set, "intents.#n.last_error = :err")
		values[":err"] = str("parked as stranded while its call was under way; its worker then recorded it done")
	}
	if others, shard, leaves := indexAfter(l.claim, l.name, status); leaves {
		for i, other := range others {
			ph := "#o" + strconv.Itoa(i)
			names[ph] = other.name
			cond += " AND intents." + ph + ".#st = " + statusValue(other.status, values)
		}
		if shard == "" {
			remove = append(remove, dedup.AttrPendingShard, dedup.AttrPendingSince)
		} else {
			set = append(set, dedup.AttrPendingShard+" = :shard", dedup.AttrPendingSince+" = :since")
			values[":shard"] = str(shard)
			values[":since"] = num(w.cfg.Now().UnixMilli())
		}
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(w.cfg.Table),
		Key:                                 claimKey(l.claim.PK),
		UpdateExpression:                    aws.String("SET " + strings.Join(set, ", ") + " REMOVE " + strings.Join(remove, ", ")),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// statusValue is the placeholder for a finished status, added to values (DynamoDB refuses
// placeholders an expression does not use, so only those used are added).
func statusValue(s string, values map[string]types.AttributeValue) string {
	ph := ":done"
	if s == dedup.IntentParked {
		ph = ":parked"
	}
	values[ph] = str(s)
	return ph
}

type namedStatus struct{ name, status string }

// othersFinished returns the intents of c other than name, in name order, if all of them are
// done or parked (nil otherwise), and whether any is parked.
func othersFinished(c *dedup.Claim, name string) (others []namedStatus, parked bool) {
	for n, in := range c.Intents {
		if n == name {
			continue
		}
		if in.Status != dedup.IntentDone && in.Status != dedup.IntentParked {
			return nil, false
		}
		parked = parked || in.Status == dedup.IntentParked
		others = append(others, namedStatus{n, in.Status})
	}
	sort.Slice(others, func(i, j int) bool { return others[i].name < others[j].name })
	return others, parked
}

// indexAfter says where the claim belongs in the pending index once intent name has status,
// if that moves it: leaves is true when the claim is under a due shard and every other intent
// (listed in others) is finished; shard is then its parked shard when any intent is parked,
// "" to leave the index.
func indexAfter(c *dedup.Claim, name, status string) (others []namedStatus, shard string, leaves bool) {
	if c.PendingShard == "" || dedup.IsParkedShard(c.PendingShard) {
		return nil, "", false
	}
	others, parked := othersFinished(c, name)
	if others == nil && len(c.Intents) > 1 {
		return nil, "", false // another intent is still open
	}
	if parked || status == dedup.IntentParked {
		return others, dedup.ParkedShardFor(c.PendingShard), true
	}
	return others, "", true
}

// settle takes a claim with nothing open out of the due part of the pending index: out of the
// index when every intent is done, into its parked part when any is parked (where the sweeper
// counts it without reading it). Whoever notices such a claim calls it: the worker after a
// finish that could not know it was last, the sweeper for a claim left behind (a lost
// answer, a claim written before this rule). Conditional on every intent's status as seen,
// so an intent re-driven meanwhile keeps the claim where the sweeper looks.
func (w *Worker) settle(ctx context.Context, c *dedup.Claim) error {
	if c == nil || c.Open() || c.PendingShard == "" {
		return nil
	}
	parked := false
	for _, in := range c.Intents {
		parked = parked || in.Status == dedup.IntentParked
	}
	if parked && dedup.IsParkedShard(c.PendingShard) {
		return nil // already where it belongs
	}
	names := map[string]string{"#st": dedup.AttrIntentStatus}
	values := map[string]types.AttributeValue{":commit": str(c.CommitToken)}
	cond := "commit_token = :commit"
	intents := make([]string, 0, len(c.Intents))
	for n := range c.Intents {
		intents = append(intents, n)
	}
	sort.Strings(intents)
	for i, n := range intents {
		ph := "#i" + strconv.Itoa(i)
		names[ph] = n
		cond += " AND intents." + ph + ".#st = " + statusValue(c.Intents[n].Status, values)
	}
	update := "REMOVE " + dedup.AttrPendingShard + ", " + dedup.AttrPendingSince
	if parked {
		update = "SET " + dedup.AttrPendingShard + " = :shard, " + dedup.AttrPendingSince + " = :since"
		values[":shard"] = str(dedup.ParkedShardFor(c.PendingShard))
		values[":since"] = num(w.cfg.Now().UnixMilli())
	}
	_, err := w.update(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(w.cfg.Table),
		Key:                       claimKey(c.PK),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // something changed: whoever changed it keeps the claim where it belongs
	}
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	return nil
}

// retry puts the intent back to pending, not before its backoff, and returns when it is due.
func (w *Worker) retry(ctx context.Context, l *lease, msg string) (time.Time, error) {
	next := w.cfg.Now().Add(w.cfg.Backoff(l.attempt))
	values := fenceValues(l)
	values[":pending"] = str(dedup.IntentPending)
	values[":next"] = num(next.UnixMilli())
	values[":err"] = str(truncate(msg))
	_, err := w.update(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(w.cfg.Table),
		Key:       claimKey(l.claim.PK),
		// lease_owner stays, to recognise this write if the SDK has to send it again.
		UpdateExpression:                    aws.String("SET intents.#n.#st = :pending, intents.#n.next_attempt_at = :next, intents.#n.last_error = :err REMOVE intents.#n.lease_until"),
		ConditionExpression:                 aws.String(fence),
		ExpressionAttributeNames:            intentNames(l.name),
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if held, derr := dedup.UnmarshalClaim(ccf.Item); derr == nil {
			h := held.Intents[l.name]
			if h.Status == dedup.IntentPending && h.Attempts == l.attempt && h.LeaseOwner == l.owner && h.NextAttemptAt == next.UnixMilli() {
				return next, nil // our own retry, sent again after its answer was lost
			}
		}
		return next, errLeaseLost
	}
	return next, err
}

// truncate keeps stored errors small and valid UTF-8; they may quote a downstream's body.
func truncate(s string) string {
	const max = 512
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// ErrNotParked is returned by Redrive for an intent that is not parked.
var ErrNotParked = errors.New("outbox: intent is not parked")

// Redrive is the operator's action on a parked intent: back to pending, due now, with a fresh
// attempt budget (counted from its current attempts, which as the fencing token never go
// back). It puts the claim back among the due work and sets its wake marker, so the claim's
// MODIFY record brings it to the worker; the sweeper would too. The write is conditional on
// the intent being parked as claim shows it: at claim's attempt count for it and, when claim
// has one, in claim's incarnation (its commit token). A claim read earlier (the page an
// operator confirmed) re-drives nothing, ErrNotParked, once the intent has run again since
// or the event has been claimed again.
func Redrive(ctx context.Context, api API, table string, claim *dedup.Claim, intent string, now time.Time) error {
	return redrive(ctx, api, table, claim, intent, now, "")
}

// RedriveBy is Redrive that also records on the intent who re-drove it (redriven_by: by,
// printable, 1 to dedup.MaxRedrivenBy bytes) and when (redriven_at, now), in the same write:
// an operator's tool names the person or the credentials acting. An invalid by is a
// *dedup.InvalidError and nothing is written.
func RedriveBy(ctx context.Context, api API, table string, claim *dedup.Claim, intent string, now time.Time, by string) error {
	if err := ValidRedrivenBy(by); err != nil {
		return err
	}
	return redrive(ctx, api, table, claim, intent, now, by)
}

// ValidRedrivenBy reports whether by can be recorded as who re-drove an intent: 1 to
// dedup.MaxRedrivenBy bytes of printable UTF-8.
func ValidRedrivenBy(by string) error {
	if by == "" || len(by) > dedup.MaxRedrivenBy || !utf8.ValidString(by) {
		return &dedup.InvalidError{Field: "redriven_by", Reason: fmt.Sprintf("must be 1 to %d bytes of UTF-8", dedup.MaxRedrivenBy)}
	}
	for _, r := range by {
		if !unicode.IsPrint(r) {
			return &dedup.InvalidError{Field: "redriven_by", Reason: "must not contain control characters"}
		}
	}
	return nil
}

func redrive(ctx context.Context, api API, table string, claim *dedup.Claim, intent string, now time.Time, by string) error {
	in, ok := claim.Intents[intent]
	if !ok {
		return fmt.Errorf("outbox: claim %s has no intent %q", claim.PK, intent)
	}
	// Back under the due shard of the claim's number. A claim with a parked intent is under
	// its parked shard (or, written by an older release, still under its due shard).
	shard := claim.PendingShard
	switch {
	case dedup.IsParkedShard(shard):
		shard = dedup.DueShardFor(shard)
	case shard == "":
		shard = dedup.PendingShard(claim.PK)
	}
	// The nonce is how this call recognises its own write after a lost answer (below): the
	// time cannot tell it from another redrive made in the same millisecond.
	nonce := fmt.Sprintf("%016x", rand.Uint64())
	set := "SET intents.#n.#st = :pending, intents.#n.next_attempt_at = :now, intents.#n.attempts_base = intents.#n.attempts, " +
		"intents.#n." + dedup.AttrIntentRedriveID + " = :rid, pending_shard = :shard, pending_since = :since, " + dedup.AttrWake + " = :now"
	values := map[string]types.AttributeValue{
		":rid":      str(nonce),
		":pending":  str(dedup.IntentPending),
		":parked":   str(dedup.IntentParked),
		":attempts": num(int64(in.Attempts)),
		":now":      num(now.UnixMilli()),
		":shard":    str(shard),
		":since":    num(now.UnixMilli()),
	}
	if by != "" {
		set += ", intents.#n." + dedup.AttrIntentRedrivenBy + " = :by, intents.#n." + dedup.AttrIntentRedrivenAt + " = :at"
		values[":by"] = str(by)
		values[":at"] = str(now.UTC().Format(time.RFC3339))
	}
	cond := "intents.#n.#st = :parked AND intents.#n.attempts = :attempts"
	if claim.CommitToken != "" {
		cond += " AND " + dedup.AttrCommitToken + " = :commit"
		values[":commit"] = str(claim.CommitToken)
	}
	_, err := api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(table),
		Key:                                 claimKey(claim.PK),
		UpdateExpression:                    aws.String(set + " REMOVE intents.#n.finished_at"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            intentNames(intent),
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// A retry of our own redrive after a lost response finds it pending with our nonce:
		// done, not an error. Another's redrive (same attempts, maybe the same millisecond)
		// has its own nonce: ErrNotParked.
		if held, derr := dedup.UnmarshalClaim(ccf.Item); derr == nil {
			if h := held.Intents[intent]; h.Status == dedup.IntentPending && h.RedriveID == nonce {
				return nil
			}
		}
		return ErrNotParked
	}
	return err
}
