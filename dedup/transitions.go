package dedup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Claims writes every change a claim goes through after its commit: the outbox's turns on its
// intents and an operator's actions. Each transition is one conditional UpdateItem whose
// condition is written here once, and recognises its own write after a lost answer by the item
// DynamoDB returns with the refusal (ownWrite).
//
//	transition  from                          fence                             to                                a lost answer, sent again, finds
//	Lease       pending and due, or running   commit token; status (and due)    running, attempts+1 (the token)   running under our lease owner
//	            past its lease (at least
//	            once only)
//	GiveBack    running, leased by us (a      token, lease owner                pending, the same attempts;       pending at our attempt
//	            lease whose answer was lost)                                    attempts_base+1 (none spent)
//	Done        running at our attempt        token, attempt                    done (+ sent); the claim settles  done under our lease owner
//	Park        running at our attempt        token, attempt                    parked, with why; settles         parked under our lease owner
//	Retry       running at our attempt        token, attempt                    pending, not before next          pending at our attempt, due at next
//	Settle      under another place than its  token; the others that make       where its statuses say            (nothing to recognise: idempotent)
//	            statuses say                  its place (placeAfter)
//	Redrive     parked at the attempts seen   token (when seen); attempts;      pending, due now, fresh budget;   our nonce on the intent
//	                                          the others for its place          its place, woken
//	Resolve     parked at the attempts seen   token (when seen); attempts;      resolved, with why; its place     our nonce on the intent
//	                                          the others for its place
//
// A claim's place in the pending index follows from its intents' statuses (placeAfter), and only
// these transitions write it: each that changes an intent's class writes the new place in the
// same write, conditional on the other intents that decide it; Done and Park, which cannot know
// they are last when two intents finish at once, end with a Settle.
//
// A fence is never reused: attempts only grows, a stranded lease (it wrote nothing) is never
// given back, and a given-back lease moves the budget's base instead.
//
// Done, Park, Retry, Redrive and Resolve each add an entry to the intent's history in their own
// write, so it cannot say what did not happen. A leased attempt's write refused because its
// lease was taken over (ErrLeaseLost) still records its entry, Late, in a write of its own (its
// call was made), and not when the history holds it already (a lost answer): never twice.
type Claims struct {
	API   UpdateAPI
	Table string
	// Now is the clock leases and due times are read against. Default time.Now.
	Now func() time.Time
	// WriteRetries bounds how often a write DynamoDB refused with TransactionConflict (a
	// duplicate delivery's transaction holds the claim for a moment) is tried again, with
	// jitter. Default 3.
	WriteRetries int
}

// UpdateAPI is the part of the DynamoDB client Claims uses.
type UpdateAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Errors of the transitions.
var (
	// ErrLeaseLost is a write of a leased attempt refused because a newer attempt (or an
	// operator) owns the intent now.
	ErrLeaseLost = errors.New("dedup: lease lost")
	// ErrNotParked is returned by Redrive for an intent that is not parked as the claim showed.
	ErrNotParked = errors.New("dedup: intent is not parked")
	// ErrStranded is returned by GiveBack for a stranded lease: it wrote nothing, and the
	// attempt it found may have been sent, so it is never given back.
	ErrStranded = errors.New("dedup: a stranded lease is never given back")
)

// Lease is one attempt at an intent, held under its fencing token.
type Lease struct {
	Intent string
	// Attempt is the fencing token: the intent's attempt count as the lease wrote it.
	Attempt int
	// Claim is the claim as the lease left it.
	Claim *Claim
	// Stranded is an at-most-once intent found running past its lease and its margin: its
	// earlier attempt's worker stopped mid-call. The lease wrote nothing; it is to be parked
	// under that attempt, as the call may have been sent.
	Stranded bool
	// Code is the status code of the answer the attempt's call got, when the caller knows it:
	// the write that ends the attempt records it in the intent's history (Attempt.Code).
	Code int

	owner string // recognises our own writes after a lost answer
	// history is the intent's history as Claim's item held it (nil: none), when seen: the
	// writes that rewrite it whole are fenced on it (a late attempt's entry may come between).
	history     types.AttributeValue
	historySeen bool
	// overStranded: our done replaces another worker's stranded park of our own attempt (the
	// fence is then that park).
	overStranded bool
}

// LeaseOptions says how to take a lease.
type LeaseOptions struct {
	// For is how long the lease lasts.
	For time.Duration
	// AtMostOnce leases only a pending intent: one running past its lease comes back as a
	// Stranded lease once StrandedAfter has passed too.
	AtMostOnce    bool
	StrandedAfter time.Duration
}

func (c *Claims) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// Lease takes the intent if it is still due in the stored claim, in the same incarnation (a claim
// re-admitted after expiry is a new claim), and removes the wake marker so this write's stream
// record does not invoke the worker again. It returns nil, and no error, when another worker has
// the intent or it is no longer due. An at-most-once intent is leased only while pending: one
// running past its lease and StrandedAfter comes back Stranded, under its attempt. A lease
// whose answer was lost (an error: it may have landed) is given back if it landed.
func (c *Claims) Lease(ctx context.Context, claim *Claim, intent string, o LeaseOptions) (*Lease, error) {
	now := c.now()
	owner := strconv.FormatUint(rand.Uint64(), 36)
	pending := "(intents.#n.#st = :pending AND (attribute_not_exists(intents.#n.next_attempt_at) OR intents.#n.next_attempt_at <= :now))"
	cond := "commit_token = :commit AND (" + pending + " OR (intents.#n.#st = :running AND intents.#n.lease_until < :now))"
	if o.AtMostOnce {
		cond = "commit_token = :commit AND " + pending // DynamoDB refuses redundant parentheses
	}
	in := c.conditional(claim.PK, "SET intents.#n.#st = :running, intents.#n.lease_until = :until, "+
		"intents.#n.lease_owner = :owner, intents.#n.attempts = intents.#n.attempts + :one REMOVE "+attrWake,
		cond, intentNames(intent), map[string]types.AttributeValue{
			":until": num(now.Add(o.For).UnixMilli()), ":now": num(now.UnixMilli()), ":commit": str(claim.CommitToken), ":owner": str(owner),
		})
	in.ReturnValues = types.ReturnValueAllNew
	sent := time.Now() // the lease, if it landed, lasts at least For from here
	out, err := c.update(ctx, in)
	l := &Lease{Intent: intent, owner: owner}
	held, refused, own := ownWrite(err, func(h *Claim) bool {
		in := h.Intents[intent]
		return in.Status == IntentRunning && in.LeaseOwner == owner
	})
	switch {
	case own:
		l.Attempt = held.Intents[intent].Attempts
		l.again(held, err)
		return l, nil
	case refused && held != nil && o.AtMostOnce:
		// Stranded only once the lease has been over for StrandedAfter too: until then its
		// worker may still be recording what its call got, and a clock a little ahead must
		// not park what is about to be done.
		in := held.Intents[intent]
		if in.Status == IntentRunning && in.LeaseUntil+o.StrandedAfter.Milliseconds() < now.UnixMilli() && held.CommitToken == claim.CommitToken {
			l.Attempt, l.owner, l.Stranded = in.Attempts, in.LeaseOwner, true
			l.again(held, err)
			return l, nil
		}
		return nil, nil
	case refused:
		return nil, nil
	case err != nil:
		// Unanswered, it may have landed: a lease its worker does not know it holds makes no
		// call, so it is given back if it is ours, rather than left to run out as a spent
		// attempt (at most once: stranded, parked as may have been sent, though nothing was).
		if gerr := c.giveBackUntil(ctx, &Lease{Intent: intent, Claim: claim, owner: owner}, sent.Add(o.For)); gerr != nil {
			return nil, fmt.Errorf("lease: %w; and the lease, if it landed, could not be given back: %w", err, gerr)
		}
		return nil, fmt.Errorf("lease: %w", err)
	}
	if l.Claim, err = UnmarshalClaim(out.Attributes); err != nil {
		return nil, fmt.Errorf("lease: decode claim: %w", err)
	}
	l.Attempt = l.Claim.Intents[intent].Attempts
	l.seen(out.Attributes)
	return l, nil
}

// seen takes the intent's history as item (the claim the lease holds) has it.
func (l *Lease) seen(item map[string]types.AttributeValue) {
	l.history, l.historySeen = seenHistory(item, l.Intent), item != nil
}

// historyFence is cond with the history as the lease saw it (historyAsSeen), when it saw it.
func (l *Lease) historyFence(cond string, values map[string]types.AttributeValue) string {
	if !l.historySeen {
		return cond
	}
	return cond + " AND " + historyAsSeen(l.history, values)
}

// GiveBack returns a lease whose call was never made (its target's limit held it back, or its
// answer was lost): the intent is pending again and due, its attempt count kept (the fence is
// never reused) and the budget's base moved past it (no attempt spent). A stranded lease is
// never given back (ErrStranded). A lease already given back, or taken over since, is left as
// it is. Its fence is the lease's owner, which no other lease writes: a lease whose answer was
// lost knows no attempt.
func (c *Claims) GiveBack(ctx context.Context, l *Lease) error {
	if l.Stranded {
		return ErrStranded
	}
	vals := map[string]types.AttributeValue{":commit": str(l.Claim.CommitToken), ":owner": str(l.owner)}
	_, err := c.update(ctx, c.conditional(l.Claim.PK, "SET intents.#n.#st = :pending, intents.#n.attempts_base = if_not_exists(intents.#n.attempts_base, :zero) + :one "+
		"REMOVE intents.#n.lease_until, intents.#n.lease_owner", "commit_token = :commit AND intents.#n.#st = :running AND intents.#n.lease_owner = :owner",
		intentNames(l.Intent), vals))
	if _, refused, _ := ownWrite(err, nil); refused {
		return nil // already given back (a retried write whose first answer was lost), or taken over
	}
	return err
}

// giveBackUntil is GiveBack (whatever ctx's cancellation), sent again with backoff while it
// fails for a reason that passes (throttling, a 5xx, the transport, after the SDK's own
// attempts) and the lease lasts (until, and ctx's deadline). Sending it again is safe: a
// refusal is a give-back already made, or a lease taken over.
func (c *Claims) giveBackUntil(ctx context.Context, l *Lease, until time.Time) error {
	if d, ok := ctx.Deadline(); ok && d.Before(until) {
		until = d
	}
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err := c.GiveBack(context.WithoutCancel(ctx), l)
		if err == nil || !errors.Is(classify("give back", err), ErrUnavailable) || !time.Now().Add(wait).Before(until) {
			return err
		}
		_ = jitterWait(context.WithoutCancel(ctx), wait)
	}
}

// Done records that the leased attempt's call succeeded, with what it sent (a message id, an
// execution ARN), and settles the claim when no intent is left open.
func (c *Claims) Done(ctx context.Context, l *Lease, sent string) error {
	return c.finish(ctx, l, IntentDone, "", sent)
}

// Park records that the leased attempt failed for good (or spent the budget), with why, for
// an operator; it settles the claim into its parked shard when no intent is left open.
func (c *Claims) Park(ctx context.Context, l *Lease, why string) error {
	return c.finish(ctx, l, IntentParked, why, "")
}

// Retry puts the leased attempt's intent back to pending, not before next, with why.
func (c *Claims) Retry(ctx context.Context, l *Lease, next time.Time, why string) error {
	for range 3 {
		values := fenceValues(l)
		values[":next"] = num(next.UnixMilli())
		values[":err"] = str(Truncate(why))
		values[":history"] = c.history(l.Claim.Intents[l.Intent], l.entry(AttemptRetried, why))
		// lease_owner stays, to recognise this write if the SDK has to send it again.
		_, err := c.update(ctx, c.conditional(l.Claim.PK, "SET intents.#n.#st = :pending, intents.#n.next_attempt_at = :next, intents.#n.last_error = :err, "+
			historySet+" REMOVE intents.#n.lease_until", l.historyFence(fence, values), intentNames(l.Intent), values))
		// Ours whatever has happened since: the next attempt's lease keeps the due time and the
		// error our retry wrote (to the millisecond, with the backoff's jitter: no other write's).
		held, refused, own := ownWrite(err, func(h *Claim) bool {
			in := h.Intents[l.Intent]
			return in.Attempts >= l.Attempt && in.NextAttemptAt == next.UnixMilli() && in.LastError == Truncate(why) && h.CommitToken == l.Claim.CommitToken &&
				slices.ContainsFunc(in.History, func(a Attempt) bool { // and our entry: not the next attempt's retry alike
					return a.Attempt == l.Attempt && a.Outcome == AttemptRetried && !a.Late
				})
		})
		switch {
		case own:
			return nil
		case refused && held != nil && l.ours(held) && held.Intents[l.Intent].Status == IntentRunning:
			// Our lease holds: a late attempt's entry came into the history. Again, with it.
			l.again(held, err)
			continue
		case refused:
			c.recordLate(ctx, l, l.entry(AttemptRetried, why), err)
			return ErrLeaseLost
		}
		return err
	}
	return errors.New("dedup: retry: the history kept changing under the write")
}

// ours reports whether h (a claim a write returned) shows the intent at this lease's attempt,
// under its owner, in its incarnation: whatever its status, no newer lease has taken it.
func (l *Lease) ours(h *Claim) bool {
	in := h.Intents[l.Intent]
	return in.Attempts == l.Attempt && in.LeaseOwner == l.owner && h.CommitToken == l.Claim.CommitToken
}

// again takes held, the claim a refused write (err) returned, as the one the next try fences on.
func (l *Lease) again(held *Claim, err error) {
	l.Claim = held
	l.seen(refusedItem(err))
}

// entry is the history entry of the leased attempt ending with outcome, why.
func (l *Lease) entry(outcome, why string) Attempt {
	return Attempt{Attempt: l.Attempt, Outcome: outcome, Code: l.Code, Error: why}
}

// finish records a terminal status (done or parked) for the attempt we leased, moving the claim
// in the pending index in the same write when its place changes (on condition that the other
// intents still make it so), and ends with a Settle: when two last intents finish at once,
// neither write knows it is last.
func (c *Claims) finish(ctx context.Context, l *Lease, status, why, sent string) error {
	for try := range 4 {
		// The others' classes change under us when they finish, or by an operator's action:
		// after three refusals the write leaves the place to the Settle after it. Never from a
		// parked shard: the sweeper does not read those, so a claim left there would stay.
		placed := try < 3 || IsParkedShard(l.Claim.PendingShard)
		out, err := c.update(ctx, c.finishInput(l, status, why, sent, placed))
		held, refused, own := ownWrite(err, func(h *Claim) bool {
			in := h.Intents[l.Intent]
			// A park is ours only with our why: another worker's stranded park of our attempt
			// carries our owner too.
			return in.Status == status && l.ours(h) && (status != IntentParked || in.LastError == Truncate(why))
		})
		var after *Claim
		switch {
		case own:
			after = held
		case refused && held == nil:
			return ErrLeaseLost
		case refused:
			switch st := held.Intents[l.Intent].Status; {
			case l.ours(held) && st == IntentRunning:
				// Our lease holds; another intent, or the history (a late attempt's entry),
				// changed since we saw it. Again, as it is now.
			case l.ours(held) && st == IntentParked && (l.overStranded || status == IntentDone && !l.Stranded):
				// Another worker parked our attempt as stranded ("may have been sent") while our
				// call outlived the lease (only a stranded park leaves our owner and attempt on a
				// park). It was sent, and succeeded: done is the truth, and keeps an operator from
				// redriving it into a second send. Again, fenced on that park (which, once we
				// fence on it, holds while another intent changes).
				l.overStranded = true
			default:
				if !l.Stranded { // a stranded lease made no call: nothing to record
					c.recordLate(ctx, l, l.entry(status, why), err)
				}
				return ErrLeaseLost
			}
			l.again(held, err)
			continue
		case err != nil:
			return err
		default:
			if after, err = UnmarshalClaim(out.Attributes); err != nil {
				return fmt.Errorf("finish: decode claim: %w", err)
			}
		}
		return c.Settle(ctx, after)
	}
	return errors.New("dedup: finish: the claim kept changing under the write")
}

func (c *Claims) finishInput(l *Lease, status, why, sent string, placed bool) *dynamodb.UpdateItemInput {
	names := intentNames(l.Intent)
	values := fenceValues(l)
	values[":status"] = str(status)
	values[":at"] = str(c.now().UTC().Format(time.RFC3339Nano))
	// lease_owner stays: it is how we recognise this write if the SDK has to send it again.
	set := []string{"intents.#n.#st = :status", "intents.#n.finished_at = :at", historySet}
	remove := []string{"intents.#n.lease_until", "intents.#n.next_attempt_at"}
	if why != "" || status == IntentParked { // a park's reason, even none, replaces an earlier attempt's
		set = append(set, "intents.#n.last_error = :err")
		values[":err"] = str(Truncate(why))
	}
	if sent != "" && status == IntentDone {
		set = append(set, "intents.#n.sent = :sent")
		values[":sent"] = str(Truncate(sent))
	}
	cond := fence
	values[":history"] = c.history(l.Claim.Intents[l.Intent], l.entry(status, why))
	if l.overStranded {
		cond = strandedFence
		values[":owner"] = str(l.owner)
		set = append(set, "intents.#n.last_error = :err")
		values[":err"] = str("parked as stranded while its call was under way; its worker then recorded it done")
	}
	cond = l.historyFence(cond, values)
	from := l.Claim.PendingShard
	p := placeAfter(l.Claim, l.Intent, status)
	switch moves := placed && (p.shard != from || IsParkedShard(from)); {
	case moves:
		cond += p.use(names)
		set, remove = c.place(from, p.shard, status == IntentParked, set, remove, values)
	case placed:
		// It stays where the read found it, on condition that it is still there: a claim an
		// operator moved since (a redrive of another intent) is read again and placed anew.
		cond += shardAsSeen(from, values)
		fallthrough
	default:
		if status == IntentParked && from != "" {
			set, remove = c.place(from, from, true, set, remove, values) // where it is; a park moves its time
		}
	}
	in := c.conditional(l.Claim.PK, updateExpression(set, remove), cond, names, values)
	in.ReturnValues = types.ReturnValueAllNew
	return in
}

// Settle puts a claim where its intents' statuses say it belongs in the pending index
// (placeAfter; see ClaimSK), when it is not there, on condition that the other intents still
// make it so: an intent re-driven meanwhile keeps the claim where the sweeper looks. Whoever
// notices a claim out of place calls it: the worker after a finish, the sweeper for a claim
// left behind.
func (c *Claims) Settle(ctx context.Context, claim *Claim) error {
	if claim == nil || len(claim.Intents) == 0 {
		return nil
	}
	p := placeAfter(claim, "", "")
	if p.shard == claim.PendingShard {
		return nil // already where it belongs
	}
	names := map[string]string{"#st": attrIntentStatus}
	values := map[string]types.AttributeValue{":commit": str(claim.CommitToken)}
	cond := "commit_token = :commit" + p.use(names)
	set, remove := c.place(claim.PendingShard, p.shard, false, nil, nil, values)
	_, err := c.update(ctx, c.conditional(claim.PK, updateExpression(set, remove), cond, names, values))
	if _, refused, _ := ownWrite(err, nil); refused {
		return nil // something changed: whoever changed it keeps the claim where it belongs
	}
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	return nil
}

// Redrive is the operator's action on a parked intent: back to pending, due now, with a fresh
// attempt budget, and in the same write the claim back among the due work with its wake marker
// set, so its stream record brings it to the worker. It is conditional on the intent being
// parked as claim shows it (its attempts, and its commit token when claim has one): a page read
// earlier re-drives nothing, ErrNotParked, once the intent has run again or the event has been
// claimed again.
func (c *Claims) Redrive(ctx context.Context, claim *Claim, intent string) error {
	return c.redrive(ctx, claim, intent, "")
}

// RedriveBy is Redrive that also records on the intent who re-drove it (redriven_by: by,
// ValidRedrivenBy) and when (redriven_at), in the same write: an operator's tool names the
// person or the credentials acting. An invalid by is an *InvalidError and nothing is written.
func (c *Claims) RedriveBy(ctx context.Context, claim *Claim, intent, by string) error {
	if err := ValidRedrivenBy(by); err != nil {
		return err
	}
	return c.redrive(ctx, claim, intent, by)
}

func (c *Claims) redrive(ctx context.Context, claim *Claim, intent, by string) error {
	now := c.now()
	set := []string{"intents.#n.#st = :pending", "intents.#n.next_attempt_at = :now", "intents.#n.attempts_base = intents.#n.attempts",
		"intents.#n." + attrIntentRedriveID + " = :rid", attrWake + " = :now"}
	values := map[string]types.AttributeValue{":now": num(now.UnixMilli())}
	if by != "" {
		set = append(set, "intents.#n."+attrIntentRedrivenBy+" = :by", "intents.#n."+attrIntentRedrivenAt+" = :at")
		values[":by"] = str(by)
		values[":at"] = str(now.UTC().Format(time.RFC3339))
	}
	return c.actOnParked(ctx, claim, intent, IntentPending, Attempt{Outcome: AttemptRedriven, By: by},
		set, []string{"intents.#n.finished_at"}, values)
}

// Resolve is the operator's other action on a parked intent: finished without running again,
// with why (1 to MaxResolution bytes of printable UTF-8) and who (by, as RedriveBy). The same
// write puts the claim where its intents then say (placeAfter), so nothing of a resolve can be
// left half done. As Redrive, it is conditional on the intent being parked as claim shows it
// (ErrNotParked). Invalid input is an *InvalidError naming the field, and nothing is written.
func (c *Claims) Resolve(ctx context.Context, claim *Claim, intent, by, why string) error {
	if err := printableField("resolved_by", by, MaxRedrivenBy); err != nil {
		return err
	}
	if err := printableField("resolution", why, MaxResolution); err != nil {
		return err
	}
	now := c.now()
	set := []string{"intents.#n.#st = :resolved", "intents.#n.resolution = :why", "intents.#n.resolved_by = :by", "intents.#n.resolved_at = :at",
		"intents.#n." + attrIntentRedriveID + " = :rid"}
	values := map[string]types.AttributeValue{":why": str(why), ":by": str(by), ":at": str(now.UTC().Format(time.RFC3339))}
	return c.actOnParked(ctx, claim, intent, IntentResolved, Attempt{Outcome: IntentResolved, By: by}, set, nil, values)
}

// actOnParked is an operator's action on a parked intent (Redrive, Resolve) as one write: the
// intent's new status (set, remove, values; :rid is the nonce), its history entry and the
// claim's new place, on condition that the intent is still parked as claim shows it
// (parkedAsSeen) and the other intents still make that place right; when only the others
// changed, it tries again on the claim DynamoDB returned. The nonce recognises its own write
// after a lost answer: a time cannot tell it from another's in the same millisecond.
func (c *Claims) actOnParked(ctx context.Context, claim *Claim, intent, status string, entry Attempt, set, remove []string, values map[string]types.AttributeValue) error {
	shown, ok := claim.Intents[intent]
	if !ok {
		return fmt.Errorf("dedup: claim %s has no intent %q", claim.PK, intent)
	}
	nonce, commit := fmt.Sprintf("%016x", rand.Uint64()), claim.CommitToken
	values[":rid"] = str(nonce)
	// The history as claim shows it, in DynamoDB's form; after a refusal, as the item held it.
	seen, _ := attributevalue.Marshal(shown.History)
	if shown.History == nil {
		seen = nil
	}
	for range 3 {
		in := claim.Intents[intent]
		names := intentNames(intent)
		vals := maps.Clone(values)
		entry.Attempt = in.Attempts
		vals[":history"] = c.history(in, entry)
		cond := parkedAsSeen(claim, shown, vals) + " AND " + historyAsSeen(seen, vals)
		p := placeAfter(claim, intent, status)
		// The place is written from this read: on condition that the claim is still where it
		// showed, as a finish may have moved it since (to parked, with nothing open).
		cond += p.use(names) + shardAsSeen(claim.PendingShard, vals)
		s, r := c.place(claim.PendingShard, p.shard, false, append(slices.Clone(set), historySet), slices.Clone(remove), vals)
		_, err := c.update(ctx, c.conditional(claim.PK, updateExpression(s, r), cond, names, vals))
		held, refused, own := ownWrite(err, func(h *Claim) bool { return h.Intents[intent].RedriveID == nonce })
		switch {
		case own:
			return nil
		case refused && held != nil && held.Intents[intent].Status == IntentParked && held.Intents[intent].Attempts == shown.Attempts &&
			(commit == "" || held.CommitToken == commit):
			// Still parked as shown: another intent, or the history (a late attempt's entry),
			// changed. Again, as it is now.
			claim, seen = held, seenHistory(refusedItem(err), intent)
			continue
		case refused:
			return ErrNotParked
		}
		return err
	}
	return errors.New("dedup: the claim kept changing under the operator's write")
}

// shardAsSeen is the condition that the claim is in the pending index where a read showed it
// (shard; "" for out of it).
func shardAsSeen(shard string, values map[string]types.AttributeValue) string {
	if shard == "" {
		return " AND attribute_not_exists(" + IndexPartitionKey + ")"
	}
	values[":seen_shard"] = str(shard)
	return " AND " + IndexPartitionKey + " = :seen_shard"
}

// Printable reports whether s is 1 to max bytes of printable UTF-8: what an operator's record
// (who acted, why) may hold, here and on a paused target (outbox.Targets).
func Printable(s string, max int) error {
	if s == "" || len(s) > max || !utf8.ValidString(s) {
		return fmt.Errorf("must be 1 to %d bytes of UTF-8", max)
	}
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return errors.New("must not contain control characters")
	}
	return nil
}

// ValidRedrivenBy reports whether by can be recorded as who re-drove an intent: 1 to
// MaxRedrivenBy bytes of printable UTF-8.
func ValidRedrivenBy(by string) error { return printableField("redriven_by", by, MaxRedrivenBy) }

// printableField is Printable as an *InvalidError naming field.
func printableField(field, s string, max int) error {
	if err := Printable(s, max); err != nil {
		return &InvalidError{Field: field, Reason: err.Error()}
	}
	return nil
}

// ownWrite reads a conditional write's refusal: refused is true when DynamoDB refused the
// condition, held is the item it returned (ALL_OLD; nil when there is none or it cannot be
// decoded), and own is whether held already shows the write (mine): our own, sent again by the
// SDK after its first answer was lost.
func ownWrite(err error, mine func(held *Claim) bool) (held *Claim, refused, own bool) {
	ccf, refused := errors.AsType[*types.ConditionalCheckFailedException](err)
	if !refused || ccf.Item == nil {
		return nil, refused, false
	}
	held, _ = UnmarshalClaim(ccf.Item) // nil when it cannot be decoded
	return held, true, held != nil && mine != nil && mine(held)
}

// update is UpdateItem, tried again (up to WriteRetries times, with full jitter) when DynamoDB
// refuses it with TransactionConflict: a duplicate delivery's transaction holds the claim for a
// moment, and the SDK does not retry that error. Without this, a finish refused this way
// would leave the intent running until its lease expired, and the next attempt would call the
// downstream again.
func (c *Claims) update(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	retries := cmp.Or(c.WriteRetries, 3)
	for attempt := 1; ; attempt++ {
		out, err := c.API.UpdateItem(ctx, in)
		if _, conflict := errors.AsType[*types.TransactionConflictException](err); !conflict || attempt > retries {
			return out, err
		}
		if jitterWait(ctx, 20*time.Millisecond<<attempt) != nil {
			return out, err
		}
	}
}

// fence is the condition every write of a leased attempt carries: the same claim incarnation
// (an older worker cannot finish a re-admitted claim's intent), the intent still running, and
// still at the attempt we leased (a newer lease has incremented it).
const fence = "commit_token = :commit AND intents.#n.#st = :running AND intents.#n.attempts = :attempt"

// strandedFence is the condition of a done that replaces a stranded park of the attempt we
// leased: the same incarnation, parked at our attempt, our owner still on it (see finish).
const strandedFence = "commit_token = :commit AND intents.#n.#st = :parked AND intents.#n.attempts = :attempt AND intents.#n.lease_owner = :owner"

func fenceValues(l *Lease) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		":commit":  str(l.Claim.CommitToken),
		":attempt": num(int64(l.Attempt)),
	}
}

// intentNames are the expression names for one intent: #n is its map key, #st "status".
func intentNames(name string) map[string]string {
	return map[string]string{"#n": name, "#st": attrIntentStatus}
}

// parkedAsSeen is the condition of an operator's action on the intent #n: still parked at the
// attempt count claim shows for it (in) and, when claim has one, in claim's incarnation (its commit
// token): a page read earlier acts on nothing once the intent has run again or the event has
// been claimed again. It adds its values (the intent's count is :attempts).
func parkedAsSeen(claim *Claim, in ClaimIntent, values map[string]types.AttributeValue) string {
	cond := "intents.#n.#st = :parked AND intents.#n.attempts = :attempts"
	values[":attempts"] = num(int64(in.Attempts))
	if claim.CommitToken != "" {
		cond += " AND " + attrCommitToken + " = :commit"
		values[":commit"] = str(claim.CommitToken)
	}
	return cond
}

// The pending index's place of a claim follows from its intents' statuses alone: whether any
// is open (pending or running) and whether any is parked (see ClaimSK). A transition that
// changes an intent's class moves the claim in its own write when its place changes, on
// condition that the other intents still make the new place right: one of them still open
// (or parked) where the place needs one, every one not open (or not parked) where it needs
// none. Witnesses rather than every status as seen: an open intent leased or retried
// meanwhile (pending, running) changes nothing of the place, and refuses nothing.
type placement struct {
	shard string // "": out of the index
	// conds are the conditions on the other intents, by name; used by use.
	conds map[string]string
}

// placeAfter is where claim c belongs once its intent name has status (name "": as it is),
// keeping its shard number, and the condition on its other intents that place rests on.
func placeAfter(c *Claim, name, status string) placement {
	mine := ""
	if name != "" {
		mine = class(status)
	}
	var others []string
	openW, parkedW := "", ""
	for _, n := range slices.Sorted(maps.Keys(c.Intents)) {
		if n == name {
			continue
		}
		others = append(others, n)
		switch class(c.Intents[n].Status) {
		case classOpen: // the first in name order: the same witness on a retry
			openW = cmp.Or(openW, n)
		case classParked:
			parkedW = cmp.Or(parkedW, n)
		}
	}
	open, parked := mine == classOpen || openW != "", mine == classParked || parkedW != ""
	p := placement{conds: map[string]string{}}
	due := PendingShard(c.PK)
	if c.PendingShard != "" {
		due = DueShardFor(c.PendingShard)
	}
	switch {
	case open && parked:
		p.shard = DueParkedShardFor(due)
	case open:
		p.shard = due
	case parked:
		p.shard = ParkedShardFor(due)
	}
	for _, n := range others {
		switch {
		case !open && !parked:
			p.conds[n] = "IN (:done, :resolved)"
		case !open:
			p.conds[n] = "IN (:done, :parked, :resolved)"
		case !parked:
			p.conds[n] = "<> :parked"
		}
	}
	if open && mine != classOpen {
		p.conds[openW] = "IN (:pending, :running)"
	}
	if parked && mine != classParked {
		p.conds[parkedW] = "= :parked"
	}
	return p
}

// use returns p's condition (" AND ..." on each other intent it names, in name order), adding
// its names.
func (p placement) use(names map[string]string) string {
	cond := ""
	for i, n := range slices.Sorted(maps.Keys(p.conds)) {
		ph := "#p" + strconv.Itoa(i)
		names[ph] = n
		cond += " AND intents." + ph + ".#st " + p.conds[n]
	}
	return cond
}

// place adds to set and remove the writes that move the claim from the index's hash key from
// to to ("": out of the index), and values their values. The sort key (when the claim entered
// its place) is now, except between the parked view's two shards (parked, due-parked) when no
// intent parks: the Parked page lists a claim from its last park, and a redrive by query's
// window must keep a parked intent whose sibling was resolved or re-driven meanwhile. A park
// moves it even when the claim stays where it is: an intent parked again after a redrive
// enters the view anew, after the window that re-drove it.
func (c *Claims) place(from, to string, parks bool, set, remove []string, values map[string]types.AttributeValue) ([]string, []string) {
	if to == "" {
		if from != "" {
			remove = append(remove, IndexPartitionKey, IndexSortKey)
		}
		return set, remove
	}
	if to != from {
		set = append(set, IndexPartitionKey+" = :shard")
		values[":shard"] = str(to)
	}
	if parks || (to != from && !(InParkedView(from) && InParkedView(to))) {
		set = append(set, IndexSortKey+" = :since")
		values[":since"] = num(c.now().UnixMilli())
	}
	return set, remove
}

// An intent's class, as its claim's place reads it.
const (
	classOpen   = "open"
	classParked = "parked"
	classClosed = "closed" // done or resolved
)

func class(status string) string {
	switch status {
	case IntentPending, IntentRunning:
		return classOpen
	case IntentParked:
		return classParked
	}
	return classClosed
}

// conditional is the conditional UpdateItem of the claim pk, whose refusal returns the item
// (ALL_OLD: what ownWrite reads). It adds to values the constants update and cond use.
func (c *Claims) conditional(pk, update, cond string, names map[string]string, values map[string]types.AttributeValue) *dynamodb.UpdateItemInput {
	for ph, v := range constants {
		if strings.Contains(update, ph) || strings.Contains(cond, ph) {
			values[ph] = v
		}
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(c.Table),
		Key:                                 ClaimItemKey(pk),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// constants are the values any transition's expressions may use by these names: the intent
// statuses, one and zero. conditional adds those an update uses, and no other: DynamoDB refuses
// a value no expression uses. (Shared by every update: the SDK only reads them.)
var constants = map[string]types.AttributeValue{
	":pending": str(IntentPending), ":running": str(IntentRunning), ":done": str(IntentDone),
	":parked": str(IntentParked), ":resolved": str(IntentResolved), ":one": num(1), ":zero": num(0),
}

// updateExpression joins an update's SET and REMOVE clauses, either of which may be empty.
func updateExpression(set, remove []string) string {
	var parts []string
	if len(set) > 0 {
		parts = append(parts, "SET "+strings.Join(set, ", "))
	}
	if len(remove) > 0 {
		parts = append(parts, "REMOVE "+strings.Join(remove, ", "))
	}
	return strings.Join(parts, " ")
}

// recordLate adds to the intent's history the entry of an attempt whose write was refused
// (refusal: that write's error) because its lease had been taken over: its call was made (the
// downstream may have applied it), so the history, which never misses what happened, keeps
// it, marked Late. Written whole, as every history write is, on condition that the history is
// still the one the refusal returned, in the same incarnation: a write of the history in
// between refuses it, and it tries again on what that write left, twice more. Best effort:
// the caller's answer is the lost lease whatever this does.
func (c *Claims) recordLate(ctx context.Context, l *Lease, a Attempt, refusal error) {
	a.Late = true
	for range 3 {
		held, _, _ := ownWrite(refusal, nil)
		if held == nil || held.CommitToken != l.Claim.CommitToken {
			return // gone, or claimed again: another incarnation's history
		}
		in, ok := held.Intents[l.Intent]
		if !ok || slices.ContainsFunc(in.History, func(h Attempt) bool {
			return h.Attempt == a.Attempt && h.Outcome == a.Outcome && h.Code == a.Code && h.Error == truncate(a.Error, HistoryErrorBytes)
		}) {
			return // no such intent; or our own write, made before its answer was lost, holds it already
		}
		values := map[string]types.AttributeValue{":commit": str(l.Claim.CommitToken), ":history": c.history(in, a)}
		cond := "commit_token = :commit AND attribute_exists(intents.#n.#st) AND " + historyAsSeen(seenHistory(refusedItem(refusal), l.Intent), values)
		_, refusal = c.update(ctx, c.conditional(l.Claim.PK, "SET "+historySet, cond, intentNames(l.Intent), values))
		if refusal == nil {
			return
		}
	}
}

// refusedItem is the item a refused conditional write returned (ALL_OLD), or nil.
func refusedItem(err error) map[string]types.AttributeValue {
	if ccf, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok {
		return ccf.Item
	}
	return nil
}

// seenHistory is the history of intent as item (a claim as DynamoDB returned it) holds it, nil
// when it has none.
func seenHistory(item map[string]types.AttributeValue, intent string) types.AttributeValue {
	if m, ok := item[attrIntents].(*types.AttributeValueMemberM); ok {
		if in, ok := m.Value[intent].(*types.AttributeValueMemberM); ok {
			return in.Value["history"]
		}
	}
	return nil
}

// historyAsSeen is the condition that the intent #n's history is still seen (DynamoDB compares
// lists whole, entry by entry), adding its value: the fence of a write that rewrites the
// history whole, against an entry written in between (a late attempt's).
func historyAsSeen(seen types.AttributeValue, values map[string]types.AttributeValue) string {
	if seen == nil {
		return "attribute_not_exists(intents.#n.history)"
	}
	values[":seen_history"] = seen
	return "intents.#n.history = :seen_history"
}

// historySet writes an intent's history whole (:history, from Claims.history): DynamoDB cannot
// append to a list and drop its head in one expression (the two paths overlap). Whole is safe:
// every write that carries it is fenced on the history as it was read (historyAsSeen), besides
// the intent's own fence (the attempt leased, parked at the attempts seen): a late attempt's
// entry, which changes nothing else of the intent, can come between a read and the write.
const historySet = "intents.#n.history = :history"

// history is in's history with entry a appended (written now, its error cut to
// HistoryErrorBytes), keeping the last HistoryLength entries.
func (c *Claims) history(in ClaimIntent, a Attempt) types.AttributeValue {
	a.At, a.Error = c.now().UnixMilli(), truncate(a.Error, HistoryErrorBytes)
	h := append(in.History[max(0, len(in.History)-HistoryLength+1):len(in.History):len(in.History)], a)
	v, _ := attributevalue.Marshal(h) // cannot fail: a slice of a struct of strings and numbers
	return v
}

// Truncate keeps what an intent records (its last error, what its call sent) to the 512 bytes
// IntentBookkeepingBytes counts on, marked with an ellipsis when cut: the text as stored, each
// byte that is not UTF-8 a U+FFFD as the SDK's JSON writes it, so that a write sent again
// recognises its own text in what the table holds.
func Truncate(s string) string { return truncate(s, 512) }

func truncate(s string, max int) string {
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // each invalid byte is one U+FFFD, as in the SDK's encoder
	}
	if len(s) <= max {
		return s
	}
	for !utf8.RuneStart(s[max]) { // cut before the rune the bound splits
		max--
	}
	return s[:max] + "…"
}
