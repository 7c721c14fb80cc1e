package dedup

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalid is matched (errors.Is) by every *InvalidError.
var ErrInvalid = errors.New("dedup: invalid input")

// ErrLimit is matched (errors.Is) by every *LimitError.
var ErrLimit = errors.New("dedup: DynamoDB limit exceeded")

// ErrUnavailable is matched (errors.Is) by every *UnavailableError: DynamoDB throttled or
// failed and nothing is known to be committed. A receiver answers 503 with Retry-After so the
// provider delivers again later; the claim condition makes that redelivery safe.
var ErrUnavailable = errors.New("dedup: DynamoDB unavailable, retry later")

// InvalidError names the field of an event, plan or configuration that was refused. Nothing
// was written.
type InvalidError struct {
	Field  string // e.g. "event_id", "intents[2].name", "effects[0].pk"
	Reason string // e.g. "is empty"
}

func (e *InvalidError) Error() string { return "dedup: " + e.Field + " " + e.Reason }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// LimitError names the DynamoDB limit a write would exceed. It is returned before any call is
// made, so nothing was written.
type LimitError struct {
	Limit string // e.g. "transaction actions", "item size", "partition key size"
	What  string // which part of the write, e.g. "claim", "effects[3]"
	Got   int
	Max   int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("dedup: %s: %s is %d, limit is %d", e.What, e.Limit, e.Got, e.Max)
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// UnavailableError wraps a throttling, server or transport failure that outlasted the SDK's
// retries, or a transaction conflict that outlasted ours.
type UnavailableError struct {
	Reason     string        // e.g. "throttled", "transaction conflict"
	RetryAfter time.Duration // a hint for the Retry-After header
	Err        error
}

func (e *UnavailableError) Error() string {
	if e.Err == nil {
		return "dedup: DynamoDB unavailable: " + e.Reason
	}
	return "dedup: DynamoDB unavailable: " + e.Reason + ": " + e.Err.Error()
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// RetentionError reports a retention shorter than the provider's retry horizon plus redrive
// window: claims would expire while the provider can still deliver the event again.
type RetentionError struct {
	Source string
	Keep   time.Duration
	Needed time.Duration
}

func (e *RetentionError) Error() string {
	return fmt.Sprintf("dedup: source %q keeps claims %s, shorter than its retry horizon + redrive window (%s)",
		e.Source, e.Keep, e.Needed)
}
