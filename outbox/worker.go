// Package outbox executes the intents a claim carries: the external effects of an event (an
// email, a payment call), each exactly once as far as the downstream can tell.
//
// A Worker takes one intent at a time under a lease: a conditional UpdateItem moves it from
// pending (and due) to running and increments its attempt count, which is the lease's fencing
// token; a worker may only finish the attempt it leased. It then runs the intent through the
// executor chosen by its target, passing <source>:<event_id>:<intent> as the idempotency key,
// and records the result conditionally on its token:
//
//	success            -> done
//	retryable failure  -> pending again, not before a backoff, with the error (attempts+1)
//	permanent failure  -> parked, with the error, for an operator
//	attempts exhausted -> parked
//
// A worker that crashes after the downstream call but before recording it leaves a running
// intent whose lease expires; the next attempt calls the downstream again with the same key,
// and the downstream's dedup answers. A worker whose lease expired cannot overwrite the newer
// attempt's result (its token no longer matches): it counts a lost lease and moves on.
//
// The stream handler (HandleStream) and the Sweeper both come here, through Process.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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
	// Lease is how long a worker may hold an intent; it must exceed the slowest executor's
	// timeout. Default 60 s.
	Lease time.Duration
	// MaxAttempts parks an intent after this many failed attempts. Default 10.
	MaxAttempts int
	// Backoff is the wait before attempt n+1 after n failures. Default: 5 s doubling per
	// attempt, capped at 15 min, with jitter (10 attempts span about 40 minutes).
	Backoff func(attempts int) time.Duration
	// Concurrency bounds the records of one stream batch processed at once. Default 8.
	Concurrency int
	Now         func() time.Time
	Logger      *slog.Logger
	// Metrics receives EMF documents (stdout in Lambda); none when nil.
	Metrics Metrics
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
	api API
	cfg Config
}

// New validates cfg and returns a Worker.
func New(api API, cfg Config) (*Worker, error) {
	if api == nil || cfg.Table == "" {
		return nil, errors.New("outbox: a DynamoDB API and a table are required")
	}
	if cfg.Lease == 0 {
		cfg.Lease = time.Minute
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
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
	return &Worker{api: api, cfg: cfg}, nil
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
	OutcomeBusy      = "busy" // another worker holds it, or it is not due: nothing to do
)

// Summary counts the outcomes of a Process call.
type Summary map[string]int

// Process runs every intent of claim that is due: pending with its backoff passed, or running
// under an expired lease. It returns an error only when DynamoDB could not record a step, so
// the caller should deliver the claim again (a stream batch item failure); downstream failures
// are recorded in the claim and are not errors here.
func (w *Worker) Process(ctx context.Context, claim *dedup.Claim) (Summary, error) {
	sum := Summary{}
	now := w.cfg.Now()
	names := make([]string, 0, len(claim.Intents))
	for name, in := range claim.Intents {
		if due(in, now) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		outcome, err := w.run(ctx, claim, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("intent %s: %w", name, err))
			continue
		}
		sum[outcome]++
	}
	return sum, errors.Join(errs...)
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

// run takes one intent through lease, execution and record.
func (w *Worker) run(ctx context.Context, claim *dedup.Claim, name string) (string, error) {
	attempt, leased, err := w.lease(ctx, claim, name)
	if err != nil || leased == nil {
		return OutcomeBusy, err
	}
	in := leased.Intents[name]
	exec, ok := w.cfg.Executors[in.Target]
	start := time.Now()
	var execErr error
	if !ok {
		execErr = Permanent(fmt.Errorf("no executor for target %q", in.Target))
	} else {
		// The call must end before the lease does, or another worker could take it meanwhile.
		callCtx, cancel := context.WithTimeout(ctx, w.cfg.Lease)
		execErr = exec.Execute(callCtx, Task{
			Source: claim.Source, EventID: claim.EventID, EventType: claim.EventType,
			Intent: name, Target: in.Target, Payload: in.Payload,
			IdempotencyKey: dedup.IdempotencyKey(claim.Source, claim.EventID, name),
			Attempt:        attempt,
		})
		cancel()
	}
	latency := time.Since(start)

	outcome := OutcomeDone
	switch {
	case execErr == nil:
		err = w.finish(ctx, claim, name, attempt, dedup.IntentDone, "")
	case IsPermanent(execErr) || attempt-in.AttemptsBase >= w.cfg.MaxAttempts:
		outcome = OutcomeParked
		err = w.finish(ctx, claim, name, attempt, dedup.IntentParked, execErr.Error())
	default:
		outcome = OutcomeRetry
		err = w.retry(ctx, claim, name, attempt, execErr.Error())
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Our lease expired and a newer attempt owns the intent now; it records the result.
		outcome, err = OutcomeLeaseLost, nil
	}
	level := slog.LevelInfo
	if outcome != OutcomeDone {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.String("source", claim.Source), slog.String("event_id", claim.EventID),
		slog.String("intent", name), slog.String("target", in.Target), slog.Int("attempt", attempt),
		slog.String("outcome", outcome), slog.Float64("latency_ms", float64(latency.Microseconds())/1000),
	}
	if execErr != nil {
		attrs = append(attrs, slog.String("error", execErr.Error()))
	}
	if err != nil {
		attrs = append(attrs, slog.String("record_error", err.Error()))
	}
	w.cfg.Logger.LogAttrs(ctx, level, "intent", attrs...)
	w.cfg.Metrics.Intent(in.Target, outcome, latency)
	return outcome, err
}

// intentNames are the expression names for one intent: #n is its map key, #st "status".
func intentNames(name string) map[string]string {
	return map[string]string{"#n": name, "#st": dedup.AttrIntentStatus}
}

func (w *Worker) key(claim *dedup.Claim) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		dedup.AttrPK: &types.AttributeValueMemberS{Value: claim.PK},
		dedup.AttrSK: &types.AttributeValueMemberS{Value: dedup.ClaimSK},
	}
}

// lease takes the intent if it is still due in the stored claim (not only in the record the
// caller saw) and belongs to the same claim (commit token: a claim re-admitted after expiry is
// a new claim). It returns the attempt number, which is the fencing token, and the claim as
// stored after the lease; nil when another worker has it or it is no longer due.
func (w *Worker) lease(ctx context.Context, claim *dedup.Claim, name string) (int, *dedup.Claim, error) {
	now := w.cfg.Now()
	owner := strconv.FormatUint(rand.Uint64(), 36) // recognises our own lease after a lost response
	out, err := w.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(w.cfg.Table),
		Key:       w.key(claim),
		UpdateExpression: aws.String("SET intents.#n.#st = :running, intents.#n.lease_until = :until, " +
			"intents.#n.lease_owner = :owner, intents.#n.attempts = intents.#n.attempts + :one"),
		ConditionExpression: aws.String("commit_token = :commit AND (" +
			"(intents.#n.#st = :pending AND (attribute_not_exists(intents.#n.next_attempt_at) OR intents.#n.next_attempt_at <= :now)) OR " +
			"(intents.#n.#st = :running AND intents.#n.lease_until < :now))"),
		ExpressionAttributeNames: intentNames(name),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":running": str(dedup.IntentRunning),
			":pending": str(dedup.IntentPending),
			":until":   num(now.Add(w.cfg.Lease).UnixMilli()),
			":now":     num(now.UnixMilli()),
			":one":     num(1),
			":commit":  str(claim.CommitToken),
			":owner":   str(owner),
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Either another worker holds it, or the SDK retried our own lease whose answer was
		// lost: then the stored intent is running under our owner token, and it is ours.
		if held, derr := dedup.UnmarshalClaim(ccf.Item); derr == nil {
			if in := held.Intents[name]; in.Status == dedup.IntentRunning && in.LeaseOwner == owner {
				return in.Attempts, held, nil
			}
		}
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("lease: %w", err)
	}
	leased, err := dedup.UnmarshalClaim(out.Attributes)
	if err != nil {
		return 0, nil, fmt.Errorf("lease: decode claim: %w", err)
	}
	return leased.Intents[name].Attempts, leased, nil
}

// finish records a terminal status (done or parked) for the attempt we leased. When that
// leaves every intent done, the claim leaves the sparse pending index; parked intents keep it
// there, so the sweeper keeps counting them for the alarm.
func (w *Worker) finish(ctx context.Context, claim *dedup.Claim, name string, attempt int, status, msg string) error {
	values := map[string]types.AttributeValue{
		":status":  str(status),
		":running": str(dedup.IntentRunning),
		":attempt": num(int64(attempt)),
		":at":      str(w.cfg.Now().UTC().Format(time.RFC3339Nano)),
	}
	update := "SET intents.#n.#st = :status, intents.#n.finished_at = :at REMOVE intents.#n.lease_until, intents.#n.lease_owner, intents.#n.next_attempt_at"
	if msg != "" {
		update = "SET intents.#n.#st = :status, intents.#n.finished_at = :at, intents.#n.last_error = :err REMOVE intents.#n.lease_until, intents.#n.lease_owner, intents.#n.next_attempt_at"
		values[":err"] = str(truncate(msg))
	}
	out, err := w.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(w.cfg.Table),
		Key:                       w.key(claim),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("intents.#n.#st = :running AND intents.#n.attempts = :attempt"),
		ExpressionAttributeNames:  intentNames(name),
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return err
	}
	after, err := dedup.UnmarshalClaim(out.Attributes)
	if err != nil || status != dedup.IntentDone {
		return err
	}
	return w.leaveIndexIfAllDone(ctx, after)
}

// leaveIndexIfAllDone removes the sparse GSI keys once every intent is done, conditionally on
// exactly that, so a concurrent retry of another intent cannot be hidden from the sweeper.
func (w *Worker) leaveIndexIfAllDone(ctx context.Context, c *dedup.Claim) error {
	if c.PendingShard == "" {
		return nil
	}
	names := map[string]string{"#st": dedup.AttrIntentStatus}
	cond := "commit_token = :commit"
	i := 0
	for name, in := range c.Intents {
		if in.Status != dedup.IntentDone {
			return nil
		}
		ph := "#i" + strconv.Itoa(i)
		names[ph] = name
		cond += " AND intents." + ph + ".#st = :done"
		i++
	}
	_, err := w.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(w.cfg.Table),
		Key:                       w.key(c),
		UpdateExpression:          aws.String("REMOVE pending_shard, pending_since"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: map[string]types.AttributeValue{":commit": str(c.CommitToken), ":done": str(dedup.IntentDone)},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // something is pending again; it stays visible to the sweeper
	}
	return err
}

// retry puts the intent back to pending, not before its backoff.
func (w *Worker) retry(ctx context.Context, claim *dedup.Claim, name string, attempt int, msg string) error {
	next := w.cfg.Now().Add(w.cfg.Backoff(attempt))
	_, err := w.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(w.cfg.Table),
		Key:                      w.key(claim),
		UpdateExpression:         aws.String("SET intents.#n.#st = :pending, intents.#n.next_attempt_at = :next, intents.#n.last_error = :err REMOVE intents.#n.lease_until, intents.#n.lease_owner"),
		ConditionExpression:      aws.String("intents.#n.#st = :running AND intents.#n.attempts = :attempt"),
		ExpressionAttributeNames: intentNames(name),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pending": str(dedup.IntentPending),
			":running": str(dedup.IntentRunning),
			":attempt": num(int64(attempt)),
			":next":    num(next.UnixMilli()),
			":err":     str(truncate(msg)),
		},
	})
	return err
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
// back). The claim's MODIFY record brings it to the worker; the sweeper would too.
func Redrive(ctx context.Context, api API, table string, claim *dedup.Claim, intent string, now time.Time) error {
	in, ok := claim.Intents[intent]
	if !ok {
		return fmt.Errorf("outbox: claim %s has no intent %q", claim.PK, intent)
	}
	_, err := api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table),
		Key: map[string]types.AttributeValue{
			dedup.AttrPK: str(claim.PK), dedup.AttrSK: str(dedup.ClaimSK),
		},
		UpdateExpression: aws.String("SET intents.#n.#st = :pending, intents.#n.next_attempt_at = :now, intents.#n.attempts_base = intents.#n.attempts, " +
			"pending_shard = if_not_exists(pending_shard, :shard), pending_since = if_not_exists(pending_since, :since) REMOVE intents.#n.finished_at"),
		ConditionExpression:      aws.String("intents.#n.#st = :parked AND intents.#n.attempts = :attempts"),
		ExpressionAttributeNames: intentNames(intent),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pending":  str(dedup.IntentPending),
			":parked":   str(dedup.IntentParked),
			":attempts": num(int64(in.Attempts)),
			":now":      num(now.UnixMilli()),
			":shard":    str(dedup.PendingShard(claim.PK)),
			":since":    num(now.UnixMilli()),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// A retry of our own redrive after a lost response finds it pending, due now, with
		// the budget reset at these attempts: done, not an error.
		if held, derr := dedup.UnmarshalClaim(ccf.Item); derr == nil {
			if h := held.Intents[intent]; h.Status == dedup.IntentPending && h.Attempts == in.Attempts &&
				h.AttemptsBase == in.Attempts && h.NextAttemptAt == now.UnixMilli() {
				return nil
			}
		}
		return ErrNotParked
	}
	return err
}
