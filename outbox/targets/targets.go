// Package targets is the outbox's built-in executors for AWS services: SQS, SNS, EventBridge,
// Step Functions and Lambda. Each passes the intent's idempotency key the way its service
// understands it, and classifies the service's errors as the worker needs them: throttling,
// server faults, timeouts and transport failures are retried; validation, access denied and
// not-found are permanent (the intent parks for an operator).
//
//	service          the idempotency key                                  a second attempt
//	SQS FIFO         MessageDeduplicationId = sha256(key), 5-minute window  dropped by SQS
//	SQS standard     message attribute idempotency_key                     the consumer's dedup
//	SNS FIFO         MessageDeduplicationId = sha256(key)                  dropped by SNS
//	SNS standard     message attribute idempotency_key                     the subscriber's dedup
//	EventBridge      detail.idempotency_key, with the event id             the rule target's dedup
//	Step Functions   execution name = sha256(key)[:32] in hex              ExecutionAlreadyExists:
//	                                                                       done if same input
//	Lambda           the envelope's idempotency_key (Powertools can key on it) the function's dedup
//
// For an at-most-once target (Task.AtMostOnce) each call is sent once, without the SDK's
// retries; a failure is NotSent only when none of the request was written (outbox.TraceWrites).
// A standard Step Functions workflow starts one execution per name, so a failure after the
// start may have been sent is still safe to retry (outbox.Deduplicated); an express one runs
// every start. An asynchronous Lambda invocation cannot be at-most-once (Lambda's own queue
// retries it): outbox.New refuses the pair.
//
// EventBridge and Lambda receive the intent wrapped in an Envelope, so the function or rule
// sees the key and the event it came from; SQS and SNS carry the payload as the message body
// and the rest as message attributes; Step Functions gets the payload as the execution input.
package targets

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/oncehook/oncehook/outbox"
)

// Envelope is what EventBridge rules and Lambda functions receive: the intent's payload with
// the key to deduplicate on and the event it came from.
type Envelope struct {
	IdempotencyKey string          `json:"idempotency_key"`
	Source         string          `json:"source"`
	EventID        string          `json:"event_id"`
	EventType      string          `json:"event_type"`
	Intent         string          `json:"intent"`
	Payload        json.RawMessage `json:"payload"`
	// Traceparent and Tracestate are the call's W3C trace context, with tracing on (absent
	// otherwise): a function or a rule's target continues the intent's trace from them. They
	// change from attempt to attempt; deduplicate on IdempotencyKey, never on the envelope.
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`
}

// envelope wraps t, refusing (permanently) a payload that is not JSON. The trace context goes in
// only while the envelope stays within room bytes: the trace is the first thing given up.
func envelope(ctx context.Context, t outbox.Task, room int) ([]byte, error) {
	if !json.Valid(t.Payload) {
		return nil, outbox.Permanent(errors.New("the intent's payload is not JSON"))
	}
	env := Envelope{IdempotencyKey: t.IdempotencyKey, Source: t.Source, EventID: t.EventID,
		EventType: t.EventType, Intent: t.Intent, Payload: t.Payload}
	if tc := outbox.TraceFields(ctx); tc["traceparent"] != "" {
		env.Traceparent, env.Tracestate = tc["traceparent"], tc["tracestate"]
		if b, err := json.Marshal(env); err == nil && len(b) <= room {
			return b, nil
		}
		env.Traceparent, env.Tracestate = "", ""
	}
	b, err := json.Marshal(env)
	if err != nil {
		return nil, outbox.Permanent(err)
	}
	return b, nil
}

// hashedKey is the key's SHA-256 in hex: what fits the services' id fields (deduplication ids,
// execution names), whatever the event id holds.
func hashedKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// throttleCodes are the services' errors for a call turned away unprocessed that the SDK's list
// (retry.DefaultThrottleErrorCodes) lacks: client faults in its models, they would park the
// intent. A 429 is one whatever its code.
var throttleCodes = map[string]bool{
	"Throttled":              true, // SNS Publish (429)
	"KMSThrottling":          true, // SNS: the topic's key could not be used for now
	"KmsThrottled":           true, // SQS: the queue's key could not be used for now
	"KmsThrottlingException": true, // Step Functions: the machine's key could not be used for now
	"ExecutionLimitExceeded": true, // Step Functions: too many running executions; none started
}

// classify turns a service call's error into the worker's terms: nil, retried, NotSent or
// Permanent. A transport failure is NotSent only when none of the request was written
// (writes), whatever the error says.
func classify(op string, err error, writes *outbox.WriteTrace) error {
	if err == nil {
		return nil
	}
	err = fmt.Errorf("%s: %w", op, err)
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		// A timeout or a transport failure: the call may have happened unless nothing was written.
		return writes.NotSentUnlessWritten(err)
	}
	code, status := ae.ErrorCode(), 0
	if re, ok := errors.AsType[*awshttp.ResponseError](err); ok {
		status = re.HTTPStatusCode()
	}
	_, throttled := retry.DefaultThrottleErrorCodes[code]
	if throttled || throttleCodes[code] || status == http.StatusTooManyRequests {
		return outbox.NotSent(err) // turned away before it was processed
	}
	if _, ok := retry.DefaultRetryableErrorCodes[code]; ok {
		return err
	}
	switch {
	case ae.ErrorFault() == smithy.FaultServer || status >= 500:
		return err
	case ae.ErrorFault() == smithy.FaultClient || status >= 400:
		return outbox.Permanent(err) // validation, access denied, not found: no retry fixes it
	}
	return err
}

// sameJSON reports whether a and b are the same JSON value (Step Functions may store the input
// re-serialized).
func sameJSON(a, b string) bool {
	if a == b {
		return true
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}
