package dedup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// retryLater is the Retry-After hint when DynamoDB throttled or failed: long enough for
// on-demand capacity to scale, short next to any provider's retry schedule.
const retryLater = 5 * time.Second

type cancelKind int

const (
	cancelOther   cancelKind = iota
	claimTaken               // reason 0 is ConditionalCheckFailed: the event id is claimed
	bodyTaken                // the claim was free; the body guard's condition failed: a replay
	effectRefused            // the claim was free; only effect conditions failed
	conflicted               // another transaction holds one of our items
	throttled                // capacity, not our data
)

type cancellation struct {
	kind    cancelKind
	old     map[string]types.AttributeValue // the existing claim, for claimTaken; the guard, for bodyTaken
	refused []int                           // effect indexes, for effectRefused
	detail  string
}

// readCancellation reads a TransactionCanceledException's reasons, which are positional: index
// 0 is the claim, then the body guard when guarded (index 1), then Plan.Effects in order. The
// order of the checks is the rule:
//  1. a failed claim condition means a duplicate, whatever else failed;
//  2. a TransactionConflict means a concurrent double is committing: retry, briefly;
//  3. throttling means try later;
//  4. any other reason (ValidationError, ItemCollectionSizeLimitExceeded) is an error;
//  5. a failed body guard condition means a replay, whatever the effects said;
//  6. failed effect conditions alone mean the event is absorbed.
func readCancellation(reasons []types.CancellationReason, effects int, guarded bool) cancellation {
	first := 1 // index of the first effect
	if guarded {
		first = 2
	}
	if len(reasons) != first+effects {
		return cancellation{detail: fmt.Sprintf("%d cancellation reasons for %d actions", len(reasons), first+effects)}
	}
	if code(reasons[0]) == "ConditionalCheckFailed" {
		return cancellation{kind: claimTaken, old: reasons[0].Item}
	}
	var refused []int
	var other []string
	kind := cancelOther
	for i, r := range reasons {
		switch c := code(r); c {
		case "None", "":
		case "TransactionConflict":
			kind = conflicted
		case "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
			if kind != conflicted {
				kind = throttled
			}
		case "ConditionalCheckFailed":
			if i >= first {
				refused = append(refused, i-first)
			}
		default:
			other = append(other, fmt.Sprintf("%s: %s %s", action(i, first), c, aws.ToString(r.Message)))
		}
	}
	switch {
	case kind == conflicted || kind == throttled:
		return cancellation{kind: kind}
	case len(other) > 0:
		return cancellation{detail: strings.Join(other, "; ")}
	case guarded && code(reasons[1]) == "ConditionalCheckFailed":
		return cancellation{kind: bodyTaken, old: reasons[1].Item}
	case len(refused) > 0:
		return cancellation{kind: effectRefused, refused: refused}
	}
	return cancellation{detail: "no reason given"}
}

func code(r types.CancellationReason) string { return aws.ToString(r.Code) }

func action(i, first int) string {
	switch {
	case i == 0:
		return "claim"
	case i < first:
		return "body guard"
	}
	return fmt.Sprintf("effects[%d]", i-first)
}

// classify maps a failed call to the error Commit returns. Throttling, server faults and
// transport failures that outlasted the SDK's own retries become *UnavailableError: whether or
// not the write landed, the provider's redelivery will be either accepted or a duplicate, so
// asking for it (503) is safe. Client faults (missing table, access denied, validation) are
// configuration errors and are returned wrapped as they are.
func classify(op string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &UnavailableError{Reason: op + " did not finish", RetryAfter: retryLater, Err: err}
	}
	if ae, ok := errors.AsType[smithy.APIError](err); ok {
		switch ae.ErrorCode() {
		case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
			"TransactionInProgressException":
			return &UnavailableError{Reason: "throttled", RetryAfter: retryLater, Err: err}
		case "TransactionConflictException": // a single write on an item a transaction holds
			return &UnavailableError{Reason: "transaction conflict", RetryAfter: retryLater, Err: err}
		}
		re, answered := errors.AsType[*awshttp.ResponseError](err)
		if ae.ErrorFault() == smithy.FaultServer || answered && re.HTTPStatusCode() >= 500 {
			return &UnavailableError{Reason: "server error", RetryAfter: retryLater, Err: err}
		}
		return fmt.Errorf("dedup: %s: %w", op, err)
	}
	return &UnavailableError{Reason: op + " failed in transport", RetryAfter: retryLater, Err: err}
}
