package dedup

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Commit claims ev's id and applies plan with it, in one DynamoDB round trip except on rare
// paths: a transaction conflict retried (a concurrent double was committing), an absorbed
// business condition, and an engine that does not return the old item on a failed condition.
//
// It returns a Result for every delivery that leaves the event durably claimed (accepted,
// duplicate or absorbed) and an error otherwise: *InvalidError or *LimitError before any call
// (nothing written), *UnavailableError when DynamoDB throttled or failed (answer 503; the
// redelivery is safe), or another error for a misconfiguration such as a missing table.
func (s *Store) Commit(ctx context.Context, ev Event, plan Plan) (Result, error) {
	start := time.Now()
	var res Result
	req, err := s.prepare(&ev, &plan, traceValue(ctx))
	if err == nil {
		res, err = s.write(ctx, req)
	}
	s.observe(ctx, &ev, res, start, err)
	return res, err
}

// observe tells the Observer how the commit of ev that began at start ended.
func (s *Store) observe(ctx context.Context, ev *Event, res Result, start time.Time, err error) {
	s.cfg.Observer.ObserveCommit(ctx, Report{Source: ev.Source, EventType: ev.Type, EventID: ev.ID, DeliveryID: ev.DeliveryID,
		Result: res, Latency: time.Since(start), Err: err})
}

// write commits one request: a plan without effects or body guard is one PutItem, anything
// else a transaction.
func (s *Store) write(ctx context.Context, req *request) (Result, error) {
	if req.effects == nil && req.guard == nil {
		return s.put(ctx, req)
	}
	return s.transact(ctx, req)
}

// Check returns the refusal Commit would give ev and plan before any call (an *InvalidError or
// a *LimitError, naming the field or the limit), or nil when Commit would send the write. It
// makes no call: a test kit (receivertest) refuses with it exactly what the store refuses.
func (s *Store) Check(ev Event, plan Plan) error {
	_, err := s.prepare(&ev, &plan, nil)
	return err
}

// prepare validates ev and plan and builds their write, with the trace context tc on the
// claim: every refusal that costs no call.
func (s *Store) prepare(ev *Event, plan *Plan, tc []byte) (*request, error) {
	keep, err := s.admit(ev)
	if err != nil {
		return nil, err
	}
	return s.buildRequest(ev, plan, keep, s.cfg.Now(), tc)
}

// admit checks ev as every Commit does before any call, and returns its source's retention.
func (s *Store) admit(ev *Event) (time.Duration, error) {
	if err := ev.Validate(); err != nil {
		return 0, err
	}
	ret, ok := s.cfg.Sources[ev.Source]
	if !ok {
		return 0, &InvalidError{Field: "source", Reason: fmt.Sprintf("%q is not configured", ev.Source)}
	}
	return ret.Effective(), nil
}

// put is the fast path: a plan with no effect records is one conditional PutItem of the claim,
// which carries the outbox. It costs one write unit per KB instead of a transaction's two.
func (s *Store) put(ctx context.Context, req *request) (Result, error) {
	res := Result{Calls: 1}
	_, err := s.api.PutItem(ctx, req.putInput(s.tablePtr))
	if err == nil {
		res.Outcome, res.ExpiresAt = OutcomeAccepted, req.expires
		return res, nil
	}
	if ccf, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok {
		return s.taken(ctx, req, ccf.Item, res)
	}
	return res, classify("PutItem", err)
}

// transact writes [claim, body guard?, effects...] and reads a cancellation reason by reason.
func (s *Store) transact(ctx context.Context, req *request) (Result, error) {
	res := Result{}
	for attempt := 1; ; attempt++ {
		res.Calls++
		_, err := s.api.TransactWriteItems(ctx, req.transactInput(s.tablePtr, attempt))
		if err == nil {
			res.Outcome, res.ExpiresAt = OutcomeAccepted, req.expires
			return res, nil
		}
		tce, ok := errors.AsType[*types.TransactionCanceledException](err)
		if !ok {
			return res, classify("TransactWriteItems", err)
		}
		r, conflict, err := s.cancelled(ctx, req, tce.CancellationReasons, res, err)
		if !conflict {
			return r, err
		}
		if err := s.conflictWait(ctx, attempt, err); err != nil {
			return res, err
		}
	}
}

// cancelled answers req from its transaction's cancellation reasons (cause: the error to wrap),
// as readCancellation reads them; conflict says, with nothing answered, to try it again.
func (s *Store) cancelled(ctx context.Context, req *request, reasons []types.CancellationReason, res Result, cause error) (_ Result, conflict bool, err error) {
	c := readCancellation(reasons, len(req.effects), req.guard != nil)
	switch c.kind {
	case claimTaken:
		res, err = s.taken(ctx, req, c.old, res)
	case bodyTaken:
		res = replay(c.old, res)
	case effectRefused:
		res, err = s.absorb(ctx, req, c.refused, res)
	case conflicted:
		return res, true, nil
	case throttled:
		return res, false, &UnavailableError{Reason: "throttled", RetryAfter: retryLater, Err: cause}
	default:
		return res, false, fmt.Errorf("dedup: transaction cancelled: %s: %w", c.detail, cause)
	}
	return res, false, err
}

// conflictWait waits before trying a conflicted transaction again: full jitter over an
// exponential base, so concurrent doubles do not retry in lockstep. Past the retries it
// allows, the conflict is an *UnavailableError wrapping cause.
func (s *Store) conflictWait(ctx context.Context, attempt int, cause error) error {
	if attempt > s.cfg.ConflictRetries {
		return &UnavailableError{Reason: "transaction conflict persisted", RetryAfter: time.Second, Err: cause}
	}
	if s.cfg.ConflictBackoff == 0 {
		return nil
	}
	if err := jitterWait(ctx, s.cfg.ConflictBackoff<<min(attempt-1, MaxConflictRetries)); err != nil {
		return classify("TransactWriteItems", err)
	}
	return nil
}

// jitterWait waits a random time below d (full jitter), or until ctx ends: its error.
func jitterWait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(rand.N(d))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// taken handles a failed claim condition. old is the claim that holds the event id, as
// returned by ReturnValuesOnConditionCheckFailure=ALL_OLD.
//
// When old carries this delivery's own commit token, the "duplicate" is our own write whose
// response was lost before an SDK retry: the outcome is the one that write had. Otherwise it
// is a duplicate, and a payload hash that differs from the first delivery's is flagged.
func (s *Store) taken(ctx context.Context, req *request, old map[string]types.AttributeValue, res Result) (Result, error) {
	if old == nil {
		// Real DynamoDB returns the item; this read is for engines that do not.
		// On a failed read (nil) the condition has still told us the id is claimed.
		res.Calls++
		old, _ = s.readClaim(ctx, attrString(req.claim, PartitionKey), true, nil)
	}
	res.Outcome = OutcomeDuplicate
	if old == nil {
		return res, nil
	}
	// Compared raw, so that recognising our own write never depends on decoding the rest of
	// the claim (which the outbox worker keeps writing to).
	if attrString(old, attrCommitToken) == attrString(req.claim, attrCommitToken) {
		res.Recovered, res.ExpiresAt = true, req.expires
		res.Outcome = OutcomeAccepted
		if attrString(old, attrOutcome) == OutcomeAbsorbed.String() {
			res.Outcome = OutcomeAbsorbed
			if prev, err := UnmarshalClaim(old); err == nil {
				res.Absorbed = prev.Absorbed
			}
		}
		return res, nil
	}
	return duplicate(old, attrString(req.claim, attrPayloadSHA256), res), nil
}

// duplicate is a duplicate's Result, old the claim that holds the id and sha the delivery's
// payload hash: the first delivery's id and time, and whether its payload differed.
func duplicate(old map[string]types.AttributeValue, sha string, res Result) Result {
	res.Outcome = OutcomeDuplicate
	if prev, err := UnmarshalClaim(old); err == nil {
		res.PayloadMismatch = prev.PayloadSHA256 != sha
		res.FirstDeliveryID, res.FirstReceivedAt = prev.DeliveryID, prev.ReceivedAt
	}
	return res
}

// replay is the result of a refused replay: old is the body guard that holds the body.
func replay(old map[string]types.AttributeValue, res Result) Result {
	res.Outcome = OutcomeReplay
	res.FirstEventID = attrString(old, attrEventID)
	return res
}

// absorb applies the backstop rule (see OutcomeAbsorbed): the claim was free, but effects
// refused their own conditions. The event is claimed alone, with no effects and no intents
// (and its body guard, when it has one), and the claim records which effects were refused.
func (s *Store) absorb(ctx context.Context, req *request, refused []int, res Result) (Result, error) {
	claim := maps.Clone(req.claim)
	for _, k := range []string{attrIntents, IndexPartitionKey, IndexSortKey, attrWake, attrEffects, attrTrace} {
		delete(claim, k) // the trace too: only a claim with intents has anything to continue it
	}
	claim[attrOutcome] = str(OutcomeAbsorbed.String())
	claim[attrAbsorbed], _ = attributevalue.Marshal(refused) // cannot fail: a list of numbers
	absorbed := *req
	absorbed.claim = claim
	absorbed.effects = nil
	// The first transaction's tokens are taken: a transaction of the claim alone (with its
	// body guard) gets tokens of its own.
	absorbed.token = requestToken(req.token, 1+MaxConflictRetries+1)
	// Written as Commit writes a claim: a concurrent double that claimed the event (or the
	// body) between our two calls makes it a duplicate (a replay), our own write sent again is
	// recognised by its commit token, and a conflict is tried again.
	r, err := s.write(ctx, &absorbed)
	r.Calls += res.Calls
	if r.Outcome == OutcomeAccepted && !r.Recovered {
		r.Outcome, r.Absorbed = OutcomeAbsorbed, refused
	}
	return r, err
}

func attrString(item map[string]types.AttributeValue, name string) string {
	s, _ := keyString(item, name)
	return s
}
