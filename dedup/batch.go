package dedup

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CommitBatch commits events delivered together (SendGrid posts an array of events): each is
// claimed under its own id with its own plan, exactly as Commit would, so a redelivered batch
// that overlaps an earlier one runs only the events not seen. The events are written in as few
// TransactWriteItems as DynamoDB's limits allow (MaxTransactionActions, MaxTransactionBytes per
// call), each call all-or-nothing; an event whose claim is taken is answered from the
// cancellation (a duplicate, a replay, or its effects absorbed) and the call is retried without
// it. Two events of one batch with the same id are one event: the later is a duplicate.
//
// results[i] is evs[i]'s, for every event that is durably claimed; err is as Commit's, and
// when it is set, some events may be claimed and others not: the provider's redelivery of the
// batch finds the claimed ones duplicates. Calls in each result counts the calls made for that
// event alone; calls is every DynamoDB request the batch issued. Nothing is written when an
// event or plan is invalid: an *EventError, with its index, for each event refused (joined by
// errors.Join when there are several; errors.As finds the first).
func (s *Store) CommitBatch(ctx context.Context, evs []Event, plans []Plan) (results []Result, calls int, err error) {
	start, now := time.Now(), s.cfg.Now()
	reqs, err := s.prepareBatch(evs, plans, now, traceValue(ctx)) // one span committed them all
	if err != nil {
		return nil, 0, err
	}
	firstOf := make([]int, len(evs)) // the index of the batch's first event with the same claim key
	first := map[string]int{}
	var pending []int
	for i := range evs {
		key := attrString(reqs[i].claim, PartitionKey)
		if _, seen := first[key]; !seen {
			first[key] = i
			pending = append(pending, i)
		}
		firstOf[i] = first[key]
	}
	results = make([]Result, len(evs))
	probed := false
	for len(pending) > 0 && err == nil {
		chunk := pack(reqs, pending)
		pending = pending[len(chunk):]
		var n int
		n, err = s.commitChunk(ctx, reqs, chunk, results)
		calls += n
		if err == nil && !probed && len(pending) > 0 && slices.ContainsFunc(chunk, func(i int) bool { return results[i].Outcome == OutcomeDuplicate }) {
			// A redelivery: read what is claimed already rather than write it again (probe.go).
			probed = true
			pending, n, err = s.skipClaimed(ctx, reqs, pending, results, now.Unix())
			calls += n
		}
	}
	for i := range evs {
		if j := firstOf[i]; j != i && results[j].Outcome != 0 {
			results[i] = Result{Outcome: OutcomeDuplicate, FirstDeliveryID: evs[j].DeliveryID}
		}
		s.observe(ctx, &evs[i], results[i], start, errIfUnset(results[i], err))
	}
	return results, calls, err
}

// CheckBatch returns the refusal CommitBatch would give evs and plans before any call (an
// *EventError naming each event refused, joined when there are several, or an *InvalidError
// when they do not pair up), or nil when it would send the writes. It makes no call: a test
// kit (receivertest) refuses with it exactly what the store refuses.
func (s *Store) CheckBatch(evs []Event, plans []Plan) error {
	_, err := s.prepareBatch(evs, plans, s.cfg.Now(), nil)
	return err
}

// prepareBatch validates a batch and builds each event's write as prepare does, all at now,
// with the trace context tc on the claims.
func (s *Store) prepareBatch(evs []Event, plans []Plan, now time.Time, tc []byte) ([]*request, error) {
	if len(evs) != len(plans) {
		return nil, &InvalidError{Field: "plans", Reason: fmt.Sprintf("has %d plans for %d events", len(plans), len(evs))}
	}
	reqs := make([]*request, len(evs))
	var refused []error // every event's, so that a receiver answers them all from one read
	for i := range evs {
		keep, err := s.admit(&evs[i])
		if err == nil {
			reqs[i], err = s.buildRequest(&evs[i], &plans[i], keep, now, tc)
		}
		if err != nil {
			refused = append(refused, &EventError{Index: i, Err: under(fmt.Sprintf("events[%d]", i), err)})
		}
	}
	switch len(refused) {
	case 0:
		return reqs, nil
	case 1:
		return nil, refused[0]
	}
	return nil, errors.Join(refused...)
}

// EventError is CommitBatch's refusal of one event's input before any write: Err (an
// *InvalidError naming events[Index]'s field, or a *LimitError) is about evs[Index] and
// plans[Index] alone.
type EventError struct {
	Index int
	Err   error
}

func (e *EventError) Error() string { return e.Err.Error() }
func (e *EventError) Unwrap() error { return e.Err }

// under names err as one of what's: an *InvalidError's field ("source" under "events[2]" is
// "events[2].source"), or else in its message.
func under(what string, err error) error {
	if ie, ok := errors.AsType[*InvalidError](err); ok {
		return &InvalidError{Field: what + "." + ie.Field, Reason: ie.Reason}
	}
	return fmt.Errorf("%s: %w", what, err)
}

func errIfUnset(r Result, err error) error {
	if r.Outcome != 0 {
		return nil
	}
	return cmp.Or(err, errors.New("dedup: not committed"))
}

// pack returns the longest prefix of pending whose actions fit one transaction: within its
// limits, and touching no item twice (DynamoDB refuses that outright: two events updating one
// counter go in turn, each seeing the other's write, as Commit would write them).
func pack(reqs []*request, pending []int) []int {
	actions, bytes := 0, 0
	seen := map[string]bool{}
	for n, i := range pending {
		a, touched := actionsOf(reqs[i]), touches(reqs[i])
		clash := slices.ContainsFunc(touched, func(k string) bool { return seen[k] })
		if n > 0 && (clash || actions+a > MaxTransactionActions || bytes+reqs[i].bytes > MaxTransactionBytes) {
			return pending[:n]
		}
		for _, k := range touched {
			seen[k] = true
		}
		actions, bytes = actions+a, bytes+reqs[i].bytes
	}
	return pending
}

// touches lists the items a request writes or checks: its claim, its body guard and its
// effects (each as itemID names it: one item however its key is written, whatever its
// table's name).
func touches(r *request) []string {
	out := []string{"\x00claim\x00" + attrString(r.claim, PartitionKey)}
	if r.guard != nil {
		out = append(out, "\x00guard\x00"+attrString(r.guard.Item, PartitionKey))
	}
	return append(out, r.touched...)
}

func actionsOf(r *request) int {
	n := 1 + len(r.effects)
	if r.guard != nil {
		n++
	}
	return n
}

// commitChunk writes the events of chunk in one transaction, retried without the events the
// cancellation settles, until every one is settled or an error stops it. A chunk of one is
// committed as Commit would (a plan without effects is then one PutItem).
func (s *Store) commitChunk(ctx context.Context, reqs []*request, chunk []int, results []Result) (calls int, err error) {
	for attempt := 1; len(chunk) > 0; {
		if len(chunk) == 1 {
			i := chunk[0]
			results[i], err = s.write(ctx, reqs[i])
			return calls + results[i].Calls, err
		}
		calls++
		_, err := s.api.TransactWriteItems(ctx, batchInput(reqs, chunk, s.tablePtr, attempt))
		if err == nil {
			for _, i := range chunk {
				results[i] = Result{Outcome: OutcomeAccepted, ExpiresAt: reqs[i].expires}
			}
			return calls, nil
		}
		tce, ok := errors.AsType[*types.TransactionCanceledException](err)
		if !ok {
			return calls, classify("TransactWriteItems", err)
		}
		reasons := tce.CancellationReasons
		if len(reasons) != batchActions(reqs, chunk) {
			return calls, fmt.Errorf("dedup: %d cancellation reasons for %d actions: %w", len(reasons), batchActions(reqs, chunk), err)
		}
		var retry []int
		conflict := false
		for _, i := range chunk {
			req := reqs[i]
			mine := reasons[:actionsOf(req)]
			reasons = reasons[actionsOf(req):]
			if !slices.ContainsFunc(mine, func(r types.CancellationReason) bool { return code(r) != "None" && code(r) != "" }) {
				retry = append(retry, i) // cancelled for another event's sake
				continue
			}
			res, again, err := s.cancelled(ctx, req, mine, Result{}, tce)
			if again {
				conflict = true
				retry = append(retry, i)
				continue
			}
			calls += res.Calls
			if err != nil {
				return calls, err
			}
			results[i] = res
		}
		if len(retry) == len(chunk) && !conflict {
			return calls, fmt.Errorf("dedup: transaction cancelled with no reason for any event: %w", tce)
		}
		if conflict {
			if err := s.conflictWait(ctx, attempt, tce); err != nil {
				return calls, err
			}
			attempt++
		}
		chunk = retry
	}
	return calls, nil
}

func batchActions(reqs []*request, chunk []int) int {
	n := 0
	for _, i := range chunk {
		n += actionsOf(reqs[i])
	}
	return n
}

// batchInput is the transaction of chunk's events, each one's actions as transactInput lays
// them out. Its token is derived from the events' own: an SDK retry of a call that landed is
// answered as the call was (DynamoDB's idempotency window), and another chunk or attempt gets
// another token.
func batchInput(reqs []*request, chunk []int, table *string, attempt int) *dynamodb.TransactWriteItemsInput {
	items := make([]types.TransactWriteItem, 0, batchActions(reqs, chunk))
	h := sha256.New()
	for _, i := range chunk {
		items = append(items, reqs[i].transactInput(table, attempt).TransactItems...)
		h.Write([]byte(reqs[i].token))
	}
	return &dynamodb.TransactWriteItemsInput{
		TransactItems:      items,
		ClientRequestToken: aws.String(requestToken(hex.EncodeToString(h.Sum(nil)[:16]), attempt)), // at most 36 characters
	}
}
