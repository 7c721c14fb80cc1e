package outbox

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Task is one intent to execute, with everything an executor needs and nothing else.
type Task struct {
	Source, EventID, EventType string
	Intent                     string // the intent's name, e.g. "email.send"
	Target                     string
	Payload                    []byte
	// IdempotencyKey is <source>:<event_id>:<intent>, the same on every attempt: the
	// downstream's own dedup is what makes a retry after a lost "done" harmless.
	IdempotencyKey string
	Attempt        int
	// AtMostOnce is set when the target is at-most-once (AtMostOnce): the executor must send
	// the call once, with no retry of its own (no transport replay, no SDK retry), so that a
	// failure it reports is the only attempt there was.
	AtMostOnce bool
}

// Executor runs intents for one target. An error is retried (with backoff, up to the worker's
// attempt limit) unless marked Permanent: then the intent parks for an operator. The error is
// recorded whole in the claim's last_error; a span's status and the log line describe it by the
// SpanDescription() string of an error in its chain that has one (for an error quoting what a
// downstream answered: spans and logs leave for places the console's redaction does not
// guard), else by its Error.
type Executor interface {
	Execute(ctx context.Context, t Task) error
}

// Reporter is an Executor that says what its call produced (a message id, an execution ARN):
// the worker calls ExecuteReport instead of Execute and records sent on the intent.
type Reporter interface {
	Executor
	ExecuteReport(ctx context.Context, t Task) (sent string, err error)
}

// execute runs x, with what it reports when it is a Reporter.
func execute(ctx context.Context, x Executor, t Task) (string, error) {
	if r, ok := x.(Reporter); ok {
		return r.ExecuteReport(ctx, t)
	}
	return "", x.Execute(ctx, t)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, t Task) error

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, t Task) error { return f(ctx, t) }

// BoundedFunc adapts a function whose calls take at most max to a Bounded Executor: the worker
// ends each call's context then, and a deployment sizes its lease and timeouts from it.
func BoundedFunc(max time.Duration, f func(ctx context.Context, t Task) error) Executor {
	return boundedFunc{ExecutorFunc(f), max}
}

type boundedFunc struct {
	ExecutorFunc
	max time.Duration
}

func (b boundedFunc) MaxDuration() time.Duration { return b.max }

// PermanentError marks a failure that no retry can fix (a 4xx from the downstream).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as not worth retrying.
func Permanent(err error) error { return &PermanentError{Err: err} }

// IsPermanent reports whether err was marked Permanent.
func IsPermanent(err error) bool { return is[*PermanentError](err) }

// is reports whether err's chain holds an error of type E.
func is[E error](err error) bool {
	_, ok := errors.AsType[E](err)
	return ok
}

// NotSentError marks a failure the downstream cannot have acted on (a refused connection, a
// request throttled unprocessed): an at-most-once intent may be tried again after one.
type NotSentError struct{ Err error }

func (e *NotSentError) Error() string { return e.Err.Error() }
func (e *NotSentError) Unwrap() error { return e.Err }

// NotSent marks err as one the downstream cannot have acted on.
func NotSent(err error) error { return &NotSentError{Err: err} }

// IsNotSent reports whether err was marked NotSent.
func IsNotSent(err error) bool { return is[*NotSentError](err) }

// DeduplicatedError marks a failure that may have reached the downstream, after which a retry
// still cannot act twice: the downstream refuses a second effect for the key (a Step Functions
// standard workflow starts one execution per name). An at-most-once intent is retried after one.
type DeduplicatedError struct{ Err error }

func (e *DeduplicatedError) Error() string { return e.Err.Error() }
func (e *DeduplicatedError) Unwrap() error { return e.Err }

// Deduplicated marks err as one after which the downstream's own deduplication makes a retry safe.
func Deduplicated(err error) error { return &DeduplicatedError{Err: err} }

// IsDeduplicated reports whether err was marked Deduplicated.
func IsDeduplicated(err error) bool { return is[*DeduplicatedError](err) }

// Checker is an Executor that knows configurations it cannot serve: New calls Check with
// whether the target is at-most-once (AtMostOnce) and refuses the target with its error.
type Checker interface {
	Check(atMostOnce bool) error
}

// AtMostOnce wraps an executor whose downstream has no idempotency key of its own (SMTP, a
// legacy API): its intents are called at most once. An attempt that never recorded its outcome
// (its worker stopped mid-call), or failed in a way that may have reached the downstream (any
// error but NotSent or Deduplicated), parks for a person's decision instead of being called
// again. Use at-least-once, the default, wherever the downstream deduplicates.
func AtMostOnce(x Executor) Executor {
	if b, ok := x.(Bounded); ok {
		return &atMostOnceBounded{atMostOnce{x}, b}
	}
	return &atMostOnce{x}
}

type atMostOnce struct{ Executor }

func (atMostOnce) deliversAtMostOnce() {}

func (x atMostOnce) unwrap() Executor { return x.Executor }

// ExecuteReport passes the wrapped executor's report on.
func (x atMostOnce) ExecuteReport(ctx context.Context, t Task) (string, error) {
	return execute(ctx, x.Executor, t)
}

type atMostOnceBounded struct {
	atMostOnce
	Bounded
}

// IsAtMostOnce reports whether x was wrapped by AtMostOnce.
func IsAtMostOnce(x Executor) bool {
	_, ok := x.(interface{ deliversAtMostOnce() })
	return ok
}

// HTTPExecutor POSTs the intent's payload as JSON to URL with the Idempotency-Key header, and
// classifies the answer:
//
//   - 2xx: done.
//   - 408, 425, 5xx, timeouts, transport errors: retried (slow, overloaded or failing for now).
//   - 409: retried: Stripe and the IETF Idempotency-Key draft answer 409 while a request with the
//     same key is in flight (our earlier attempt that timed out).
//   - 429, and a failure before any of the request was written (WriteTrace): retried and NotSent,
//     so an at-most-once intent is retried after them too; after any other failure it parks.
//   - 3xx: permanent, never followed: a followed 301/302/303 turns the POST into a bodiless GET
//     whose 2xx would record an effect that never happened; 307/308 would send the effect to a
//     URL nobody configured.
//   - other 4xx: permanent: the request itself is wrong.
//
// Every non-2xx answer is a *StatusError. An at-most-once task's request is sent once (see
// Execute); the caller's transport must not retry either.
type HTTPExecutor struct {
	URL     string
	Client  *http.Client  // http.DefaultClient's transport when nil; its redirect policy is never used
	Timeout time.Duration // per call; default DefaultHTTPTimeout
	// Headers are static headers sent with every call. They cannot replace Idempotency-Key or
	// Content-Type, which the executor sets last.
	Headers map[string]string
}

// DefaultHTTPTimeout bounds one HTTP call when HTTPExecutor.Timeout is not set.
const DefaultHTTPTimeout = 10 * time.Second

// StatusError is a downstream's non-2xx answer.
type StatusError struct {
	URL        string
	StatusCode int
	Status     string
	Location   string // for a 3xx
	Body       string // the first bytes of the answer, for last_error
}

func (e *StatusError) Error() string {
	if e.Location != "" {
		return fmt.Sprintf("POST %s: %s to %s (redirects are not followed: fix the target's url)", e.URL, e.Status, e.Location)
	}
	return fmt.Sprintf("POST %s: %s: %q", e.URL, e.Status, e.Body)
}

// transportError is a call that got no answer: its URL as configured, and net/http's error.
type transportError struct {
	URL string
	Err error
}

func (e *transportError) Error() string { return "POST " + e.URL + ": " + e.Err.Error() }
func (e *transportError) Unwrap() error { return e.Err }

// MaxDuration is the longest one Execute call takes (Bounded).
func (x *HTTPExecutor) MaxDuration() time.Duration {
	return cmp.Or(max(x.Timeout, 0), DefaultHTTPTimeout)
}

// Execute sends one request. With tracing on, it is a client span of its own, and carries its
// trace context in the headers the global propagator writes, never over a static header.
func (x *HTTPExecutor) Execute(ctx context.Context, t Task) (err error) {
	ctx, span := startHTTPCall(ctx, x.URL)
	if span != nil {
		defer func() { EndCall(span, redact(err), "") }()
	}
	ctx, cancel := context.WithTimeout(ctx, x.MaxDuration())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.URL, bytes.NewReader(t.Payload))
	if err != nil {
		return Permanent(err)
	}
	for k, v := range x.Headers {
		req.Header.Set(k, v)
	}
	injectHeaders(ctx, req.Header)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", t.IdempotencyKey)
	if t.AtMostOnce {
		// net/http replays a request with an Idempotency-Key on a reused connection that broke
		// after it was written, when it can rewind the body or there is none: a body it can do
		// neither with is sent once (an empty payload goes out as an empty chunked body).
		req.Body, req.GetBody, req.ContentLength = onceBody{bytes.NewReader(t.Payload)}, nil, int64(len(t.Payload))
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "oncehook-outbox")
	}
	client := http.Client{}
	if x.Client != nil {
		client = *x.Client // a copy: the caller's client keeps its own redirect policy
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse } // a 3xx handed back as it is
	traced, writes := TraceWrites(ctx)
	resp, err := client.Do(req.WithContext(traced))
	if err != nil {
		// Where it failed decides, not what the error says (a refused dial may be a replay).
		return writes.NotSentUnlessWritten(&transportError{URL: x.URL, Err: err})
	}
	defer resp.Body.Close()
	if s := trace.SpanFromContext(ctx); s.IsRecording() {
		s.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // let the connection be reused
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return nil
	}
	se := &StatusError{URL: x.URL, StatusCode: code, Status: resp.Status, Body: string(snippet)}
	switch {
	case code >= 300 && code < 400:
		se.Location = resp.Header.Get("Location")
		if se.Location == "" {
			se.Location = "(no Location)"
		}
		return Permanent(se)
	case code == http.StatusTooManyRequests:
		return NotSent(se) // rate limited: turned away before it was processed
	case code == http.StatusRequestTimeout, code == http.StatusConflict, code == http.StatusTooEarly, code >= 500:
		return se
	default:
		return Permanent(se)
	}
}

// onceBody is a request body net/http can neither rewind nor take for empty, so it never
// replays the request (see HTTPExecutor.Execute).
type onceBody struct{ *bytes.Reader }

func (onceBody) Close() error { return nil }

// WriteTrace records whether an HTTP request made under its context (TraceWrites) wrote any of
// itself to a connection: until one did, a failure cannot have reached the downstream; once one
// did, it may have, whatever error comes back. Executors classify by it where a call failed
// rather than by what the error says.
type WriteTrace struct{ wrote atomic.Bool }

// TraceWrites returns ctx with a net/http client trace (composed with any ctx has) that records
// whether a request made under it, on any attempt, wrote its first header (even only
// buffered: erring on the side of "may have been sent"). Every client built on net/http
// honours it, the AWS SDK's included, across its retries.
func TraceWrites(ctx context.Context) (context.Context, *WriteTrace) {
	w := &WriteTrace{}
	mark := func() { w.wrote.Store(true) }
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteHeaderField: func(string, []string) { mark() },
		WroteHeaders:     mark,
		WroteRequest:     func(httptrace.WroteRequestInfo) { mark() },
	}), w
}

// Wrote reports whether any request under the trace's context wrote anything. A nil trace
// knows nothing, and answers true: "may have been sent".
func (w *WriteTrace) Wrote() bool { return w == nil || w.wrote.Load() }

// NotSentUnlessWritten marks err NotSent when no request under the trace wrote anything, and
// returns it as it is otherwise (nil stays nil).
func (w *WriteTrace) NotSentUnlessWritten(err error) error {
	if err == nil || w.Wrote() || IsNotSent(err) {
		return err
	}
	return NotSent(err)
}
