package outbox

// One intent's turn: admitted by its target's limits, leased, called, recorded. The writes are
// dedup.Claims'; the policy is here: how long a lease lasts, when a call must end, what a
// failure means, and when a slot is kept.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/dedup"
)

// maxHold is the longest a worker waits in its invocation for a target's limit to admit a
// call; past it the intent is handed back with a wake-up near its turn.
const maxHold = 30 * time.Second

// startBy is t, or earlier when the invocation ends too soon after it for a call to target and
// the writes that record it.
func (w *Worker) startBy(ctx context.Context, target string, t time.Time) time.Time {
	return endBy(ctx, t, w.callBudget(target)+w.cfg.Margin)
}

// endBy is t, or earlier when ctx's deadline is less than keep after it.
func endBy(ctx context.Context, t time.Time, keep time.Duration) time.Time {
	if d, ok := ctx.Deadline(); ok && d.Add(-keep).Before(t) {
		return d.Add(-keep)
	}
	return t
}

// mayStillRun reports whether a call that failed with err may still be under way at the
// downstream: written with no answer back, or answered by an intermediary that gave up on its
// backend. Its max_in_flight slot then stays held until it ends by itself, rather than let the
// next call start beside it.
func mayStillRun(err error) bool {
	if err == nil || IsNotSent(err) {
		return false
	}
	if code := answerStatus(err); code != 0 {
		return intermediaryGaveUp(code)
	}
	return true // no answer after the request was written, even where a retry is safe (Deduplicated)
}

// answerStatus is the status code of the answer a call failed with (an HTTP downstream's
// StatusError, an AWS service's ResponseError); 0 when no answer came back.
func answerStatus(err error) int {
	if se, ok := errors.AsType[*StatusError](err); ok {
		return se.StatusCode
	}
	var answer interface{ HTTPStatusCode() int }
	if errors.As(err, &answer) {
		return answer.HTTPStatusCode()
	}
	return 0
}

// intermediaryGaveUp reports whether status is what a gateway or proxy answers when it stopped
// waiting for its backend, which may still be running the call: 502 and 504 (API Gateway, an
// ALB, nginx), 503 (Heroku's router, a CDN; and an overloaded downstream, which a held slot
// spares too), Cloudflare's 520 and 524, and some proxies' 598 and 599.
func intermediaryGaveUp(status int) bool {
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, 520, 524, 598, 599:
		return true
	}
	return false
}

// leaseFor is the lease written for an intent of target: Lease, plus rateHold for a target with
// a rate, so that the wait for its window never shortens the call.
func (w *Worker) leaseFor(target string) time.Duration {
	if w.limits.rated(target) {
		return w.cfg.Lease + rateHold
	}
	return w.cfg.Lease
}

// takeWindow takes the rate window for a leased call, right before it, so that the window the
// downstream sees the call in is the one that counted it. A call held back past what its lease
// allows, or whose window could not be read, was not made: its lease is given back.
func (w *Worker) takeWindow(ctx context.Context, l *lease, target string) error {
	if !w.limits.rated(target) || l.noCall() {
		return nil
	}
	err := w.limits.takeWindow(ctx, target, w.startBy(ctx, target, l.ends.Add(-w.callBudget(target))))
	if err != nil {
		if uerr := w.giveBack(ctx, l); uerr != nil {
			// The lease ends by itself and the attempt counts (at most once, it parks).
			return fmt.Errorf("%w; and the lease could not be given back: %w", err, uerr)
		}
	}
	return err
}

// giveBack gives back a lease whose call was not made (dedup.Claims.GiveBack, whatever ctx's
// cancellation), through a short failure as record does: left to run out, the attempt would
// count, and at most once park as may have been sent. A refusal is a give-back already made.
func (w *Worker) giveBack(ctx context.Context, l *lease) error {
	return w.record(ctx, l, func() error { return w.claims.GiveBack(context.WithoutCancel(ctx), l.Lease) })
}

// lease is one attempt we hold: the claim's lease, and when our call must end.
type lease struct {
	*dedup.Lease
	// ends is when the call must be done, on the real clock: the lease less the margin, counted
	// from before the lease request, so a slow write shortens the call, not outlives the lease.
	ends time.Time
	// overBudget: the attempts that spent the intent's budget recorded no outcome (their
	// workers stopped mid-call); this one is parked without a call.
	overBudget bool
}

// noCall reports whether the lease is only to park the intent: stranded, or over its budget.
// It is never given back: its attempt may have been sent, or the budget is spent.
func (l *lease) noCall() bool { return l.Stranded || l.overBudget }

// lease takes the intent (dedup.Claims.Lease) as the lease span; nil when another worker has
// it or it is no longer due.
func (w *Worker) lease(ctx context.Context, claim *dedup.Claim, name string, amo bool) (l *lease, err error) {
	if ctx2, span := startChild(ctx, SpanLease, trace.SpanKindClient, w.dynamoDB); span != nil {
		intent := trace.SpanFromContext(ctx)
		ctx = ctx2
		defer func() { endLease(intent, span, l, err) }()
	}
	start := time.Now() // before the request: the lease as written never ends before start + its length
	d := w.leaseFor(claim.Intents[name].Target)
	dl, err := w.claims.Lease(ctx, claim, name, dedup.LeaseOptions{For: d, AtMostOnce: amo, StrandedAfter: w.cfg.Margin})
	if err != nil || dl == nil {
		return nil, err
	}
	// A recorded failure parks at the budget's last attempt: one past it follows attempts that
	// recorded nothing, each a takeover of an expired lease.
	over := !dl.Stranded && dl.Claim.Intents[name].Spent() > w.cfg.MaxAttempts
	return &lease{Lease: dl, ends: start.Add(d - w.cfg.Margin), overBudget: over}, nil
}

// finish records the attempt's end as status, as the finish span: done, with what it sent
// (note); parked, with why (note); or pending again, due at next, with the failure (note).
func (w *Worker) finish(ctx context.Context, l *lease, status, note string, next time.Time) (err error) {
	attrs := func() []attribute.KeyValue { return append(w.dynamoDB(), AttrStatus.String(status)) }
	if ctx2, span := startChild(ctx, SpanFinish, trace.SpanKindClient, attrs); span != nil {
		ctx = ctx2
		defer func() {
			if status == dedup.IntentPending {
				span.SetAttributes(attribute.String("oncehook.next_attempt_at", next.UTC().Format(time.RFC3339Nano)))
			}
			if errors.Is(err, dedup.ErrLeaseLost) {
				// Not a failed write: a newer attempt owns the intent and records it.
				EndCall(span, nil, "", AttrLease.String("lost"))
			} else {
				EndCall(span, err, "dynamodb")
			}
		}()
	}
	return w.record(ctx, l, func() error {
		switch status {
		case dedup.IntentDone:
			return w.claims.Done(ctx, l.Lease, note)
		case dedup.IntentPending:
			return w.claims.Retry(ctx, l.Lease, next, note)
		}
		return w.claims.Park(ctx, l.Lease, note)
	})
}

// retry puts the intent back to pending after its backoff, and returns when it is due. The
// backoff counts the attempts spent since the budget was renewed (a redrive, a lease given
// back), not the fencing token. A retry that would be due at or after its claim's expiry parks
// instead: DynamoDB's TTL would delete the claim, the intent pending in it, never run and never
// parked.
func (w *Worker) retry(ctx context.Context, l *lease, msg string) (outcome string, next time.Time, err error) {
	next = w.cfg.Now().Add(w.cfg.Backoff(l.Claim.Intents[l.Intent].Spent()))
	if expires := time.Unix(l.Claim.ExpiresAt, 0); !next.Before(expires) {
		why := fmt.Sprintf("%s; not retried: the claim expires (%s) before the next attempt (%s)",
			msg, expires.UTC().Format(time.RFC3339), next.UTC().Format(time.RFC3339))
		return OutcomeParked, next, w.finish(ctx, l, dedup.IntentParked, why, time.Time{})
	}
	return OutcomeRetry, next, w.finish(ctx, l, dedup.IntentPending, msg, next)
}

// record makes write, the fenced write that records the attempt's end (or gives its lease
// back, giveBack), and makes it again (with backoff) while it fails for a reason that passes
// (DynamoDB's 5xx, throttling, a lost connection, after the SDK's own attempts) and time is
// left before the lease ends (the margin kept back from the call is the record's) or the
// invocation does: an outcome known and not recorded is the next attempt's call again (at most
// once, a park as may have been sent). Sending it again is safe: the fence refuses it once the
// lease is another's (ErrLeaseLost), and a write that landed unanswered is recognised as ours.
func (w *Worker) record(ctx context.Context, l *lease, write func() error) error {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err := write()
		if err == nil || !time.Now().Add(wait).Before(endBy(ctx, l.ends.Add(w.cfg.Margin), 0)) || !transient(err) {
			return err
		}
		if sleep(ctx, wait/2+rand.N(wait/2)) != nil {
			return err
		}
	}
}

// transient reports whether a write that failed with err may succeed when sent again: the
// SDK's own judgement of a failure (a 5xx, throttling, a connection or timeout), or a
// transaction conflict (a duplicate delivery's transaction holding the claim).
func transient(err error) bool {
	return retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary ||
		is[*types.TransactionConflictException](err)
}

// maySent starts the reason of an at-most-once intent parked because its call may have been
// sent (MayHaveBeenSent).
const maySent = "at-most-once: "

// MayHaveBeenSent reports whether the outbox parked in because its at-most-once call may have
// reached the downstream (its answer lost, its worker stopped mid-call): re-driving it is a
// person's call, after checking the downstream, never part of a redrive of many.
func MayHaveBeenSent(in dedup.ClaimIntent) bool {
	return in.Status == dedup.IntentParked && strings.HasPrefix(strings.TrimPrefix(in.LastError, "permanent: "), maySent)
}

// run takes one intent through lease, execution and record, as the intent's span.
func (w *Worker) run(ctx context.Context, claim *dedup.Claim, name string) (outcome string, err error) {
	ctx, span := w.startIntent(ctx, claim, name)
	target := claim.Intents[name].Target
	defer func() {
		// Paused or held back: not leased, so no attempt spent (the lease counts one), and due.
		if is[*heldError](err) || (outcome == OutcomePaused && err == nil) {
			w.cfg.Metrics.Intent(target, outcome, 0)
		}
		endIntent(span, outcome, err)
	}()
	amo := IsAtMostOnce(w.cfg.Executors[target])
	if paused, err := w.limits.paused(ctx, target); paused || err != nil {
		return OutcomePaused, err
	}
	// The limits are waited for as long as the invocation leaves room for the call after the
	// wait (maxHold at most); a slot is held for the lease the call runs under, plus the margin.
	slotEnds, release, err := w.limits.admit(ctx, target, w.leaseFor(target)+w.cfg.Margin, w.startBy(ctx, target, time.Now().Add(maxHold)))
	if err != nil {
		return OutcomeHeld, err
	}
	keepSlot := false // the call may still be running at the downstream: its slot ends by itself
	defer func() { release(keepSlot) }()
	// Paused while its limits held it: the copy read before is read again if the wait outlasted
	// it (pauseRead), so that no call is leased more than about a second after Pause returned.
	if paused, err := w.limits.paused(ctx, target); paused || err != nil {
		return OutcomePaused, err
	}
	l, err := w.lease(ctx, claim, name, amo)
	if err != nil || l == nil {
		return OutcomeBusy, err
	}
	if !l.noCall() && !slotEnds.IsZero() && l.ends.After(slotEnds) {
		// The slot's write took longer than the margin: the call could outlive its slot. No
		// call was made: the lease is given back. (A stranded lease makes no call, and is never
		// given back: its attempt may have been sent; nor is one over its budget.)
		if uerr := w.giveBack(ctx, l); uerr != nil {
			return OutcomeBusy, fmt.Errorf("the lease outlasts its max_in_flight slot, and could not be given back: %w", uerr)
		}
		return OutcomeHeld, &heldError{target: target, wait: 200 * time.Millisecond, why: "its max_in_flight slot was taken too slowly to cover the lease"}
	}
	if err := w.takeWindow(ctx, l, target); err != nil {
		if is[*heldError](err) {
			return OutcomeHeld, err
		}
		return OutcomeBusy, err
	}
	in := l.Claim.Intents[name]
	exec, ok := w.cfg.Executors[in.Target]
	start := time.Now()
	var execErr error
	var sent string // what the executor says it sent, when it is a Reporter
	switch {
	case !ok:
		execErr = Permanent(fmt.Errorf("no executor for target %q", in.Target))
	case l.Stranded:
		execErr = Permanent(fmt.Errorf(maySent+"attempt %d was under way when its worker stopped, and may have been sent; "+
			"not sent again (check the downstream, then redrive if it was not)", l.Attempt))
	case l.overBudget:
		execErr = Permanent(fmt.Errorf("attempt %d is past the budget of %d attempts, spent by attempts that recorded no outcome "+
			"(their workers stopped mid-call); not called again (check the downstream, then redrive)", l.Attempt, w.cfg.MaxAttempts))
	default:
		// The call ends before the lease (or another worker could take it meanwhile), before the
		// invocation (or nothing could record it), and within its executor's bound.
		ends := endBy(ctx, minTime(l.ends, time.Now().Add(w.callBudget(in.Target))), w.cfg.Margin)
		callCtx, cancel := context.WithDeadline(ctx, ends)
		sent, execErr = w.call(callCtx, exec, Task{
			Source: claim.Source, EventID: claim.EventID, EventType: claim.EventType,
			Intent: name, Target: in.Target, Payload: in.Payload,
			IdempotencyKey: dedup.IdempotencyKey(claim.Source, claim.EventID, name),
			Attempt:        l.Attempt,
			AtMostOnce:     amo,
		})
		cancel()
		keepSlot = mayStillRun(execErr)
	}
	latency := time.Since(start)
	if amo && execErr != nil && !IsNotSent(execErr) && !IsDeduplicated(execErr) && !IsPermanent(execErr) {
		// The call may have reached the downstream: an at-most-once intent is not sent again.
		execErr = Permanent(fmt.Errorf(maySent+"%w (it may have reached the downstream: not sent again)", execErr))
	}

	outcome = OutcomeDone
	var next time.Time
	l.Code = answerStatus(execErr) // for the intent's history
	switch {
	case execErr == nil:
		err = w.finish(ctx, l, dedup.IntentDone, sent, time.Time{})
	case IsPermanent(execErr) || in.Spent() >= w.cfg.MaxAttempts:
		outcome = OutcomeParked
		err = w.finish(ctx, l, dedup.IntentParked, execErr.Error(), time.Time{})
	default:
		outcome, next, err = w.retry(ctx, l, execErr.Error())
	}
	if errors.Is(err, dedup.ErrLeaseLost) {
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
		slog.String("intent", name), slog.String("target", in.Target), slog.Int("attempt", l.Attempt),
		slog.String("outcome", outcome), slog.Float64("latency_ms", float64(latency.Microseconds())/1000),
	}
	if execErr != nil {
		attrs = append(attrs, slog.String("error", redact(execErr).Error())) // as its span says it
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
