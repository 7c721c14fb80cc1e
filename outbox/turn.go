package outbox

// One intent's turn: admitted by its target's limits, leased, called, recorded. The writes
// are dedup.Claims'; what is decided here is the policy: how long a lease lasts, when a call
// must end, what a failure means, and when a slot is kept.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/dedup"
)

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
// downstream: it was written and no answer came back (a timeout, a connection that broke), or
// the answer came from an intermediary that gave up on its backend (intermediaryGaveUp). Its
// max_in_flight slot stays held until it ends by itself, rather than let the next call start
// beside it.
func mayStillRun(err error) bool {
	if err == nil || IsNotSent(err) {
		return false
	}
	if code := answerStatus(err); code != 0 {
		return intermediaryGaveUp(code)
	}
	// No answer: a timeout or a broken connection after the request was written, even where
	// a retry is safe (Deduplicated: a standard workflow's start). It may still be running.
	return true
}

// answerStatus is the status code of the answer a call failed with: an HTTP downstream's
// (StatusError), an AWS service's (smithy's ResponseError); 0 when no answer came back (a call
// cut off by its timeout, a broken connection) or err is nil.
func answerStatus(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.StatusCode
	}
	var answer interface{ HTTPStatusCode() int }
	if errors.As(err, &answer) {
		return answer.HTTPStatusCode()
	}
	return 0
}

// intermediaryGaveUp reports whether status is an answer a gateway or proxy gives when it
// stopped waiting for its backend, or lost it, while the backend may still be running the
// call: 502 and 504 (API Gateway after 29 s, an ALB, nginx), 503 (Heroku's router after 30 s,
// a CDN's first-byte timeout; and an overloaded downstream, which a held slot spares too),
// Cloudflare's 520 and 524, and the 598 and 599 some proxies give for a read timeout. Like a
// timeout, such a call keeps its slot.
func intermediaryGaveUp(status int) bool {
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, 520, 524, 598, 599:
		return true
	}
	return false
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
// what its lease allows is given back, so it spends no attempt.
func (w *Worker) takeWindow(ctx context.Context, l *lease, target string) error {
	if !w.limits.rated(target) || l.Stranded {
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
		if uerr := w.claims.GiveBack(context.WithoutCancel(ctx), l.Lease); uerr != nil {
			// Not given back: the lease ends by itself and the attempt counts (at most once, the
			// intent parks as may-have-been-sent, though it was not).
			return fmt.Errorf("%w; and the lease could not be given back: %w", err, uerr)
		}
	}
	return err
}

// lease is one attempt we hold: the claim's lease, and when our call must end.
type lease struct {
	*dedup.Lease
	// ends is when we must be done calling, on the real clock: the lease as written, less
	// the margin. It is computed from before the lease request was sent, so a slow lease
	// write (SDK retries) shortens the call rather than letting it outlive the lease.
	ends time.Time
	// sent is what the call produced, recorded with done.
	sent string
}

// lease takes the intent (dedup.Claims.Lease) for the lease its target gets; nil when another
// worker has it or it is no longer due.
// It is the lease span, under a recording intent's span; the attempt it took is set on the
// intent's span too.
func (w *Worker) lease(ctx context.Context, claim *dedup.Claim, name string, amo bool) (l *lease, err error) {
	if ctx2, span, traced := w.step(ctx, SpanLease, trace.SpanKindClient, w.dynamoDB); traced {
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
	return &lease{Lease: dl, ends: start.Add(d - w.cfg.Margin)}, nil
}

// finish records the attempt's end: done, with what it sent, or parked, with why, as the finish
// span.
func (w *Worker) finish(ctx context.Context, l *lease, status, msg string) (err error) {
	if ctx2, span, traced := w.step(ctx, SpanFinish, trace.SpanKindClient, w.finishAttrs(status)); traced {
		ctx = ctx2
		defer func() { w.endFinish(span, err) }()
	}
	if status == dedup.IntentDone {
		return w.claims.Done(ctx, l.Lease, l.sent)
	}
	return w.claims.Park(ctx, l.Lease, msg)
}

// retry puts the intent back to pending, not before its backoff, and returns when it is due: the
// finish span of a retried attempt (pending again).
func (w *Worker) retry(ctx context.Context, l *lease, msg string) (next time.Time, err error) {
	if ctx2, span, traced := w.step(ctx, SpanFinish, trace.SpanKindClient, w.finishAttrs(dedup.IntentPending)); traced {
		ctx = ctx2
		defer func() {
			span.SetAttributes(attribute.String("oncehook.next_attempt_at", next.UTC().Format(time.RFC3339Nano)))
			w.endFinish(span, err)
		}()
	}
	next = w.cfg.Now().Add(w.cfg.Backoff(l.Attempt))
	return next, w.claims.Retry(ctx, l.Lease, next, msg)
}

// paused reports whether target is paused (Targets), counting the intent it holds; read as
// limiter.paused.
func (w *Worker) paused(ctx context.Context, target string, read bool) (bool, error) {
	paused, err := w.limits.paused(ctx, target, read)
	if paused {
		w.cfg.Metrics.Intent(target, OutcomePaused, 0)
	}
	return paused, err
}

// run takes one intent through lease, execution and record, as the intent's span.
func (w *Worker) run(ctx context.Context, claim *dedup.Claim, name string) (outcome string, err error) {
	ctx, span := w.startIntent(ctx, claim, name)
	defer func() { endIntent(span, outcome, err) }()
	amo := IsAtMostOnce(w.cfg.Executors[claim.Intents[name].Target])
	// A paused target's intent is not leased (Targets): it spends no attempt and stays due.
	if paused, err := w.paused(ctx, claim.Intents[name].Target, true); paused || err != nil {
		return OutcomePaused, err
	}
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
	if paused, _ := w.paused(ctx, claim.Intents[name].Target, false); paused { // paused while its limits held it
		return OutcomePaused, nil
	}
	l, err := w.lease(ctx, claim, name, amo)
	if err != nil || l == nil {
		return OutcomeBusy, err
	}
	if !l.Stranded && !adm.until.IsZero() && l.ends.After(adm.until) {
		// The slot's write took longer than the margin: the call could outlive its slot. No
		// call was made: the lease is given back and the intent tried again soon. (A stranded
		// lease makes no call, and is never given back: its attempt may have been sent.)
		if uerr := w.claims.GiveBack(context.WithoutCancel(ctx), l.Lease); uerr != nil {
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
	in := l.Claim.Intents[name]
	exec, ok := w.cfg.Executors[in.Target]
	start := time.Now()
	var execErr error
	var sent string // what the executor says it sent, when it is a Reporter
	switch {
	case !ok:
		execErr = Permanent(fmt.Errorf("no executor for target %q", in.Target))
	case l.Stranded:
		execErr = Permanent(fmt.Errorf("at-most-once: attempt %d was under way when its worker stopped, and may have been sent; "+
			"not sent again (check the downstream, then redrive if it was not)", l.Attempt))
	default:
		// The call must end before the lease does (or another worker could take it meanwhile),
		// before the invocation does (or nothing could record it), and within its executor's
		// bound (DefaultMaxDuration for one that is not Bounded).
		ends := minTime(l.ends, time.Now().Add(w.callBudget(in.Target)))
		if d, ok := ctx.Deadline(); ok && d.Add(-w.cfg.Margin).Before(ends) {
			ends = d.Add(-w.cfg.Margin)
		}
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
		execErr = Permanent(fmt.Errorf("at-most-once: %w (it may have reached the downstream: not sent again)", execErr))
	}

	outcome = OutcomeDone
	var next time.Time
	l.Code = answerStatus(execErr) // for the intent's history
	switch {
	case execErr == nil:
		l.sent = sent
		err = w.finish(ctx, l, dedup.IntentDone, "")
	case IsPermanent(execErr) || in.Spent() >= w.cfg.MaxAttempts:
		outcome = OutcomeParked
		err = w.finish(ctx, l, dedup.IntentParked, execErr.Error())
	default:
		outcome = OutcomeRetry
		next, err = w.retry(ctx, l, execErr.Error())
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
