package dedup

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
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
// intents and an operator's actions. It is the one writer of a committed claim item; each
// transition is one conditional UpdateItem whose condition is written here once, and each
// recognises its own write after a lost answer the same way (ownWrite: the item DynamoDB
// returns with a refusal, ALL_OLD, already shows it).
//
//	transition  from                          fence                             to                                a lost answer, sent again, finds
//	Lease       pending and due, or running   commit token; status (and due)    running, attempts+1 (the token)   running under our lease owner
//	            past its lease (at least
//	            once only)
//	GiveBack    running, leased by us         token, attempt, lease owner       pending, the same attempts;       pending at our attempt
//	                                                                            attempts_base+1 (none spent)
//	Done        running at our attempt        token, attempt                    done (+ sent); the claim settles  done under our lease owner
//	Park        running at our attempt        token, attempt                    parked, with why; settles         parked under our lease owner
//	Retry       running at our attempt        token, attempt                    pending, not before next          pending at our attempt, due at next
//	Settle      nothing open, under a due     token; every intent's status      out of the index, or under its    (nothing to recognise: idempotent)
//	            shard                         as seen                           parked shard
//	Redrive     parked at the attempts seen   token (when seen); attempts       pending, due now, fresh budget;   our nonce on the intent
//	                                                                            under its due shard, woken
//	Resolve     parked at the attempts seen   token (when seen); attempts       resolved, with why; then Settle   our nonce on the intent
//
// A fence is never reused: attempts (the token a lease's writes are fenced on) only grows. A
// lease that wrote nothing (Stranded) is never given back, and a given-back lease keeps its
// attempt count and moves the budget's base instead.
//
// Done, Park, Retry, Redrive and Resolve each add an entry to the intent's history
// (ClaimIntent.History, the last HistoryLength) in their own write: the history cannot say what
// did not happen, nor miss what did. Their write sent again after a lost answer is refused by
// its fence (the intent has moved on), so it never adds an entry twice.
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

// Lease takes the intent if it is still due in the stored claim (not only as the caller saw
// it) and belongs to the same claim (commit token: a claim re-admitted after expiry is a new
// claim). It removes the claim's wake marker, so that this write's stream record does not
// invoke the worker again. It returns nil, and no error, when another worker has the intent
// or it is no longer due.
//
// An at-most-once intent is leased only while pending: one running under a lease over for
// StrandedAfter too had its call under way when its worker stopped, so it comes back Stranded,
// under the attempt it was leased at (its park is fenced on it, so one worker does it).
func (c *Claims) Lease(ctx context.Context, claim *Claim, intent string, o LeaseOptions) (*Lease, error) {
	now := c.now()
	owner := strconv.FormatUint(rand.Uint64(), 36)
	pending := "(intents.#n.#st = :pending AND (attribute_not_exists(intents.#n.next_attempt_at) OR intents.#n.next_attempt_at <= :now))"
	cond := "commit_token = :commit AND (" + pending + " OR (intents.#n.#st = :running AND intents.#n.lease_until < :now))"
	if o.AtMostOnce {
		cond = "commit_token = :commit AND " + pending // DynamoDB refuses redundant parentheses
	}
	out, err := c.update(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(c.Table),
		Key:       ClaimItemKey(claim.PK),
		UpdateExpression: aws.String("SET intents.#n.#st = :running, intents.#n.lease_until = :until, " +
			"intents.#n.lease_owner = :owner, intents.#n.attempts = intents.#n.attempts + :one REMOVE " + attrWake),
		ConditionExpression:      aws.String(cond),
		ExpressionAttributeNames: intentNames(intent),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":running": str(IntentRunning),
			":pending": str(IntentPending),
			":until":   num(now.Add(o.For).UnixMilli()),
			":now":     num(now.UnixMilli()),
			":one":     num(1),
			":commit":  str(claim.CommitToken),
			":owner":   str(owner),
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	l := &Lease{Intent: intent, owner: owner}
	held, refused, own := ownWrite(err, func(h *Claim) bool {
		in := h.Intents[intent]
		return in.Status == IntentRunning && in.LeaseOwner == owner
	})
	switch {
	case own:
		l.Attempt, l.Claim = held.Intents[intent].Attempts, held
		return l, nil
	case refused && held != nil && o.AtMostOnce:
		// Stranded only once the lease has been over for StrandedAfter too: until then its
		// worker may still be recording what its call got, and a clock a little ahead must
		// not park what is about to be done.
		in := held.Intents[intent]
		if in.Status == IntentRunning && in.LeaseUntil+o.StrandedAfter.Milliseconds() < now.UnixMilli() && held.CommitToken == claim.CommitToken {
			l.Attempt, l.owner, l.Claim, l.Stranded = in.Attempts, in.LeaseOwner, held, true
			return l, nil
		}
		return nil, nil
	case refused:
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("lease: %w", err)
	}
	if l.Claim, err = UnmarshalClaim(out.Attributes); err != nil {
		return nil, fmt.Errorf("lease: decode claim: %w", err)
	}
	l.Attempt = l.Claim.Intents[intent].Attempts
	return l, nil
}

// GiveBack returns a lease whose call was never made (its target's limit held it back): the
// intent is pending again and due, its attempt count kept (the fence is never reused) and the
// budget's base moved past it (no attempt spent). A stranded lease is never given back
// (ErrStranded). A lease already given back, or taken over since, is left as it is.
func (c *Claims) GiveBack(ctx context.Context, l *Lease) error {
	if l.Stranded {
		return ErrStranded
	}
	vals := fenceValues(l)
	vals[":owner"] = str(l.owner)
	vals[":pending"] = str(IntentPending)
	vals[":one"] = num(1)
	vals[":zero"] = num(0)
	_, err := c.update(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(c.Table),
		Key:       ClaimItemKey(l.Claim.PK),
		UpdateExpression: aws.String("SET intents.#n.#st = :pending, intents.#n.attempts_base = if_not_exists(intents.#n.attempts_base, :zero) + :one " +
			"REMOVE intents.#n.lease_until, intents.#n.lease_owner"),
		ConditionExpression:       aws.String(fence + " AND intents.#n.lease_owner = :owner"),
		ExpressionAttributeNames:  intentNames(l.Intent),
		ExpressionAttributeValues: vals,
	})
	if _, refused, _ := ownWrite(err, nil); refused {
		return nil // already given back (a retried write whose first answer was lost), or taken over
	}
	return err
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
	values := fenceValues(l)
	values[":pending"] = str(IntentPending)
	values[":next"] = num(next.UnixMilli())
	values[":err"] = str(Truncate(why))
	values[":history"] = c.history(l.Claim.Intents[l.Intent], Attempt{Attempt: l.Attempt, Outcome: AttemptRetried, Code: l.Code, Error: why})
	_, err := c.update(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(c.Table),
		Key:       ClaimItemKey(l.Claim.PK),
		// lease_owner stays, to recognise this write if the SDK has to send it again.
		UpdateExpression: aws.String("SET intents.#n.#st = :pending, intents.#n.next_attempt_at = :next, intents.#n.last_error = :err, " +
			historySet + " REMOVE intents.#n.lease_until"),
		ConditionExpression:                 aws.String(fence),
		ExpressionAttributeNames:            intentNames(l.Intent),
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	// Ours whatever has happened since: the next attempt's lease keeps the due time and the
	// error our retry wrote (to the millisecond, with the backoff's jitter: no other write's).
	_, refused, own := ownWrite(err, func(h *Claim) bool {
		in := h.Intents[l.Intent]
		return in.Attempts >= l.Attempt && in.NextAttemptAt == next.UnixMilli() && in.LastError == Truncate(why) && h.CommitToken == l.Claim.CommitToken
	})
	switch {
	case own:
		return nil
	case refused:
		return ErrLeaseLost
	}
	return err
}

// finish records a terminal status (done or parked) for the attempt we leased. When, in the
// claim as our lease returned it, every other intent is already done or parked, the same write
// takes the claim out of the due index (into its parked part when any intent is parked), on
// condition that those intents are still as we saw them. When two last intents finish at
// once, neither write knows it is last; the one that sees every intent finished afterwards
// settles the claim with one more write.
func (c *Claims) finish(ctx context.Context, l *Lease, status, why, sent string) error {
	for range 3 { // the others' statuses can change under us only by an operator's redrive
		out, err := c.update(ctx, c.finishInput(l, status, why, sent))
		held, refused, own := ownWrite(err, func(h *Claim) bool {
			in := h.Intents[l.Intent]
			// A park is ours only with our why: another worker's stranded park of our attempt
			// carries our owner too.
			return in.Status == status && in.Attempts == l.Attempt && in.LeaseOwner == l.owner && h.CommitToken == l.Claim.CommitToken &&
				(status != IntentParked || in.LastError == Truncate(why))
		})
		var after *Claim
		switch {
		case own:
			after = held
		case refused && held == nil:
			return ErrLeaseLost
		case refused:
			h := held.Intents[l.Intent]
			ours := h.Attempts == l.Attempt && h.LeaseOwner == l.owner && held.CommitToken == l.Claim.CommitToken
			switch {
			case ours && h.Status == IntentRunning:
				// Our lease holds; another intent changed since we saw it. Again, as it is now.
				l.Claim = held
			case ours && status == IntentDone && !l.Stranded && !l.overStranded && h.Status == IntentParked:
				// Another worker parked our attempt as stranded ("may have been sent") while our
				// call outlived the lease (only a stranded park leaves our owner and attempt on a
				// park). It was sent, and succeeded: done is the truth, and keeps an operator from
				// redriving it into a second send. Again, fenced on that park.
				l.Claim, l.overStranded = held, true
			default:
				return ErrLeaseLost
			}
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

func (c *Claims) finishInput(l *Lease, status, why, sent string) *dynamodb.UpdateItemInput {
	names := intentNames(l.Intent)
	values := fenceValues(l)
	values[":status"] = str(status)
	values[":at"] = str(c.now().UTC().Format(time.RFC3339Nano))
	// lease_owner stays: it is how we recognise this write if the SDK has to send it again.
	set := []string{"intents.#n.#st = :status", "intents.#n.finished_at = :at", historySet}
	remove := []string{"intents.#n.lease_until", "intents.#n.next_attempt_at"}
	if why != "" {
		set = append(set, "intents.#n.last_error = :err")
		values[":err"] = str(Truncate(why))
	}
	if sent != "" && status == IntentDone {
		set = append(set, "intents.#n.sent = :sent")
		values[":sent"] = str(Truncate(sent))
	}
	cond := fence
	values[":history"] = c.history(l.Claim.Intents[l.Intent], Attempt{Attempt: l.Attempt, Outcome: status, Code: l.Code, Error: why})
	if l.overStranded {
		cond = strandedFence
		values[":parked"] = str(IntentParked)
		values[":owner"] = str(l.owner)
		delete(values, ":running")
		set = append(set, "intents.#n.last_error = :err")
		values[":err"] = str("parked as stranded while its call was under way; its worker then recorded it done")
	}
	if others, shard, leaves := indexAfter(l.Claim, l.Intent, status); leaves {
		cond += othersAsSeen(others, names, values)
		if shard == "" {
			remove = append(remove, IndexPartitionKey, IndexSortKey)
		} else {
			set = append(set, IndexPartitionKey+" = :shard", IndexSortKey+" = :since")
			values[":shard"] = str(shard)
			values[":since"] = num(c.now().UnixMilli())
		}
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(c.Table),
		Key:                                 ClaimItemKey(l.Claim.PK),
		UpdateExpression:                    aws.String("SET " + strings.Join(set, ", ") + " REMOVE " + strings.Join(remove, ", ")),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// Settle takes a claim with nothing open out of the due part of the pending index: out of the
// index when every intent is done, into its parked part when any is parked (where the sweeper
// counts it without reading it). Whoever notices such a claim calls it: the worker after a
// finish that could not know it was last, the sweeper for a claim left behind (a lost
// answer, a claim written before this rule). Conditional on every intent's status as seen,
// so an intent re-driven meanwhile keeps the claim where the sweeper looks.
func (c *Claims) Settle(ctx context.Context, claim *Claim) error {
	if claim == nil || claim.Open() || claim.PendingShard == "" {
		return nil
	}
	parked := false
	for _, in := range claim.Intents {
		parked = parked || in.Status == IntentParked
	}
	if parked && IsParkedShard(claim.PendingShard) {
		return nil // already where it belongs
	}
	names := map[string]string{"#st": attrIntentStatus}
	values := map[string]types.AttributeValue{":commit": str(claim.CommitToken)}
	cond := "commit_token = :commit"
	intents := make([]string, 0, len(claim.Intents))
	for n := range claim.Intents {
		intents = append(intents, n)
	}
	sort.Strings(intents)
	for i, n := range intents {
		ph := "#i" + strconv.Itoa(i)
		names[ph] = n
		cond += " AND intents." + ph + ".#st = " + statusValue(claim.Intents[n].Status, values)
	}
	update := "REMOVE " + IndexPartitionKey + ", " + IndexSortKey
	if parked {
		update = "SET " + IndexPartitionKey + " = :shard, " + IndexSortKey + " = :since"
		values[":shard"] = str(ParkedShardFor(claim.PendingShard))
		values[":since"] = num(c.now().UnixMilli())
	}
	_, err := c.update(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(c.Table),
		Key:                       ClaimItemKey(claim.PK),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if _, refused, _ := ownWrite(err, nil); refused {
		return nil // something changed: whoever changed it keeps the claim where it belongs
	}
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	return nil
}

// Redrive is the operator's action on a parked intent: back to pending, due now, with a fresh
// attempt budget (counted from its current attempts, which as the fencing token never go
// back). It puts the claim back among the due work and sets its wake marker, so the claim's
// MODIFY record brings it to the worker; the sweeper would too.
//
// The write is conditional on the intent being parked as claim shows it: at claim's attempt
// count for it and, when claim has one, in claim's incarnation (its commit token). A claim read
// earlier (the page an operator confirmed) re-drives nothing, ErrNotParked, once the intent has
// run again since or the event has been claimed again.
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
	in, ok := claim.Intents[intent]
	if !ok {
		return fmt.Errorf("dedup: claim %s has no intent %q", claim.PK, intent)
	}
	now := c.now()
	// Back under the due shard of the claim's number. A claim with a parked intent is under
	// its parked shard (or, written by an older release, still under its due shard).
	shard := claim.PendingShard
	switch {
	case IsParkedShard(shard):
		shard = DueShardFor(shard)
	case shard == "":
		shard = PendingShard(claim.PK)
	}
	// The nonce is how this call recognises its own write after a lost answer: the time
	// cannot tell it from another redrive made in the same millisecond.
	nonce := fmt.Sprintf("%016x", rand.Uint64())
	set := "SET intents.#n.#st = :pending, intents.#n.next_attempt_at = :now, intents.#n.attempts_base = intents.#n.attempts, " +
		"intents.#n." + attrIntentRedriveID + " = :rid, pending_shard = :shard, pending_since = :since, " + attrWake + " = :now"
	values := map[string]types.AttributeValue{
		":rid":     str(nonce),
		":pending": str(IntentPending),
		":now":     num(now.UnixMilli()),
		":shard":   str(shard),
		":since":   num(now.UnixMilli()),
	}
	if by != "" {
		set += ", intents.#n." + attrIntentRedrivenBy + " = :by, intents.#n." + attrIntentRedrivenAt + " = :at"
		values[":by"] = str(by)
		values[":at"] = str(now.UTC().Format(time.RFC3339))
	}
	set += ", " + historySet
	values[":history"] = c.history(in, Attempt{Attempt: in.Attempts, Outcome: AttemptRedriven, By: by})
	cond := parkedAsSeen(claim, in, values)
	_, err := c.update(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(c.Table),
		Key:                                 ClaimItemKey(claim.PK),
		UpdateExpression:                    aws.String(set + " REMOVE intents.#n.finished_at"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            intentNames(intent),
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	// Another's redrive (same attempts, maybe the same millisecond) has its own nonce; ours
	// stays on the intent until the next redrive, whatever a worker has done with it since.
	_, refused, own := ownWrite(err, func(h *Claim) bool {
		in := h.Intents[intent]
		return in.RedriveID == nonce
	})
	switch {
	case own:
		return nil
	case refused:
		return ErrNotParked
	}
	return err
}

// Resolve is the operator's other action on a parked intent: closed, with why (1 to
// MaxResolution bytes of printable UTF-8) and who (by, as RedriveBy), never run again. A
// resolved intent is finished, like a done one: once no intent of the claim is parked or open,
// the claim then leaves the pending index (Settle: out of the parked view, and the count the
// parked alarm reads). As
// Redrive, it is conditional on the intent being parked as claim shows it (ErrNotParked), and
// recognises its own write after a lost answer by a nonce. Invalid input is an *InvalidError
// naming the field, and nothing is written.
func (c *Claims) Resolve(ctx context.Context, claim *Claim, intent, by, why string) error {
	if err := Printable(by, MaxRedrivenBy); err != nil {
		return &InvalidError{Field: "resolved_by", Reason: err.Error()}
	}
	if err := Printable(why, MaxResolution); err != nil {
		return &InvalidError{Field: "resolution", Reason: err.Error()}
	}
	in, ok := claim.Intents[intent]
	if !ok {
		return fmt.Errorf("dedup: claim %s has no intent %q", claim.PK, intent)
	}
	now := c.now()
	nonce := fmt.Sprintf("%016x", rand.Uint64())
	values := map[string]types.AttributeValue{
		":resolved": str(IntentResolved),
		":why":      str(why), ":by": str(by), ":at": str(now.UTC().Format(time.RFC3339)), ":rid": str(nonce),
		":history": c.history(in, Attempt{Attempt: in.Attempts, Outcome: IntentResolved, By: by}),
	}
	cond := parkedAsSeen(claim, in, values)
	out, err := c.update(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(c.Table),
		Key:       ClaimItemKey(claim.PK),
		UpdateExpression: aws.String("SET intents.#n.#st = :resolved, intents.#n.resolution = :why, intents.#n.resolved_by = :by, " +
			"intents.#n.resolved_at = :at, intents.#n." + attrIntentRedriveID + " = :rid, " + historySet),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            intentNames(intent),
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	held, refused, own := ownWrite(err, func(h *Claim) bool { return h.Intents[intent].RedriveID == nonce })
	var after *Claim
	switch {
	case own:
		after = held
	case refused:
		return ErrNotParked
	case err != nil:
		return err
	default:
		if after, err = UnmarshalClaim(out.Attributes); err != nil {
			return fmt.Errorf("resolve: decode claim: %w", err)
		}
	}
	// Out of the parked view once nothing of the claim is parked or open: Settle decides from
	// the claim as this write left it (a page read before another intent was resolved cannot).
	return c.Settle(ctx, after)
}

// Printable reports whether s is 1 to max bytes of printable UTF-8: what an operator's record
// (who acted, why) may hold, here and on a paused target (outbox.Targets).
func Printable(s string, max int) error {
	if s == "" || len(s) > max || !utf8.ValidString(s) {
		return fmt.Errorf("must be 1 to %d bytes of UTF-8", max)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return errors.New("must not contain control characters")
		}
	}
	return nil
}

// ValidRedrivenBy reports whether by can be recorded as who re-drove an intent: 1 to
// MaxRedrivenBy bytes of printable UTF-8.
func ValidRedrivenBy(by string) error {
	if err := Printable(by, MaxRedrivenBy); err != nil {
		return &InvalidError{Field: "redriven_by", Reason: err.Error()}
	}
	return nil
}

// ownWrite reads a conditional write's refusal: refused is true when DynamoDB refused the
// condition, held is the item it returned (ALL_OLD; nil when there is none or it cannot be
// decoded), and own is whether held already shows the write (mine): our own, sent again by the
// SDK after its first answer was lost.
func ownWrite(err error, mine func(held *Claim) bool) (held *Claim, refused, own bool) {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return nil, false, false
	}
	if ccf.Item == nil {
		return nil, true, false
	}
	held, derr := UnmarshalClaim(ccf.Item)
	if derr != nil {
		return nil, true, false
	}
	return held, true, mine != nil && mine(held)
}

// update is UpdateItem, tried again (up to WriteRetries times, with full jitter) when DynamoDB
// refuses it with TransactionConflict: a duplicate delivery's transaction holds the claim for a
// moment, and the SDK does not retry that error. Without this, a finish refused this way
// would leave the intent running until its lease expired, and the next attempt would call the
// downstream again.
func (c *Claims) update(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	retries := c.WriteRetries
	if retries == 0 {
		retries = 3
	}
	for attempt := 1; ; attempt++ {
		out, err := c.API.UpdateItem(ctx, in)
		var tce *types.TransactionConflictException
		if !errors.As(err, &tce) || attempt > retries {
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
		":running": str(IntentRunning),
		":attempt": num(int64(l.Attempt)),
	}
}

// intentNames are the expression names for one intent: #n is its map key, #st "status".
func intentNames(name string) map[string]string {
	return map[string]string{"#n": name, "#st": attrIntentStatus}
}

// ClaimItemKey is the key of the claim item whose partition key is pk (ClaimKey), for reads.
func ClaimItemKey(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{PartitionKey: str(pk), SortKey: str(ClaimSK)}
}

// othersAsSeen is the condition that the intents others are still in the statuses seen, as a
// write that moves the claim in the pending index must hold them (an intent re-driven meanwhile
// keeps the claim where the sweeper looks); it adds their names and values.
func othersAsSeen(others []namedStatus, names map[string]string, values map[string]types.AttributeValue) string {
	cond := ""
	for i, other := range others {
		ph := "#o" + strconv.Itoa(i)
		names[ph] = other.name
		cond += " AND intents." + ph + ".#st = " + statusValue(other.status, values)
	}
	return cond
}

// parkedAsSeen is the condition of an operator's action on the intent #n: still parked at the
// attempt count claim shows for it (in) and, when claim has one, in claim's incarnation (its commit
// token): a page read earlier acts on nothing once the intent has run again or the event has
// been claimed again. It adds its values (the intent's count is :attempts).
func parkedAsSeen(claim *Claim, in ClaimIntent, values map[string]types.AttributeValue) string {
	cond := "intents.#n.#st = :parked AND intents.#n.attempts = :attempts"
	values[":parked"], values[":attempts"] = str(IntentParked), num(int64(in.Attempts))
	if claim.CommitToken != "" {
		cond += " AND " + attrCommitToken + " = :commit"
		values[":commit"] = str(claim.CommitToken)
	}
	return cond
}

// statusValue is the placeholder for a finished status, added to values (DynamoDB refuses
// placeholders an expression does not use, so only those used are added).
func statusValue(s string, values map[string]types.AttributeValue) string {
	ph := ":" + s // done, parked, resolved: the statuses of a finished intent
	values[ph] = str(s)
	return ph
}

type namedStatus struct{ name, status string }

// othersFinished returns the intents of c other than name, in name order, if all of them are
// finished: done, parked or resolved (nil otherwise), and whether any is parked.
func othersFinished(c *Claim, name string) (others []namedStatus, parked bool) {
	for n, in := range c.Intents {
		if n == name {
			continue
		}
		if in.Status != IntentDone && in.Status != IntentParked && in.Status != IntentResolved {
			return nil, false
		}
		parked = parked || in.Status == IntentParked
		others = append(others, namedStatus{n, in.Status})
	}
	sort.Slice(others, func(i, j int) bool { return others[i].name < others[j].name })
	return others, parked
}

// indexAfter says where the claim belongs in the pending index once intent name has status,
// if that moves it: leaves is true when the claim is under a due shard and every other intent
// (listed in others) is finished; shard is then its parked shard when any intent is parked,
// "" to leave the index.
func indexAfter(c *Claim, name, status string) (others []namedStatus, shard string, leaves bool) {
	if c.PendingShard == "" || IsParkedShard(c.PendingShard) {
		return nil, "", false
	}
	others, parked := othersFinished(c, name)
	if others == nil && len(c.Intents) > 1 {
		return nil, "", false // another intent is still open
	}
	if parked || status == IntentParked {
		return others, ParkedShardFor(c.PendingShard), true
	}
	return others, "", true
}

// historySet writes an intent's history whole (:history, from Claims.history): DynamoDB cannot
// append to a list and drop its head in one expression (the two paths overlap). Whole is safe:
// every write that carries it is fenced on the intent as the history was read (the attempt
// leased, or parked at the attempts seen), and no other write changes the history.
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
// IntentBookkeepingBytes counts on, valid UTF-8, marked with an ellipsis when cut.
func Truncate(s string) string { return truncate(s, 512) }

func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
