package outbox

import (
	"bytes"
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

// Executor runs intents for one target. An error is retried (with backoff, up to the
// worker's attempt limit) unless it is marked Permanent, in which case the intent is parked
// for an operator. The error is recorded whole in the claim's last_error; a span's status and
// the worker's log line describe it by its Error too, unless an error in its chain has a
// SpanDescription() string method: then by that, for an error that quotes what a downstream
// answered (spans and logs leave for places which the claims table's readers and the
// console's redaction do not guard).
type Executor interface {
	Execute(ctx context.Context, t Task) error
}

// Reporter is an Executor that says what its call produced (a message id, an execution ARN):
// the worker calls ExecuteReport instead of Execute and records sent on the intent as it
// finishes it (hookctl inspect shows it).
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

// BoundedFunc adapts a function whose calls take at most max to a Bounded Executor: the
// worker ends each call's context then, and a deployment sizes its lease and timeouts from it
// (launch and the construct refuse an application's executor without a bound).
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
func IsPermanent(err error) bool {
	var pe *PermanentError
	return errors.As(err, &pe)
}

// NotSentError marks a failure the downstream cannot have acted on: the connection was refused,
// or the service turned the request away unprocessed (throttling). An at-most-once intent may
// be tried again after one; after any other failure it parks.
type NotSentError struct{ Err error }

func (e *NotSentError) Error() string { return e.Err.Error() }
func (e *NotSentError) Unwrap() error { return e.Err }

// NotSent marks err as one the downstream cannot have acted on.
func NotSent(err error) error { return &NotSentError{Err: err} }

// IsNotSent reports whether err was marked NotSent.
func IsNotSent(err error) bool {
	var ns *NotSentError
	return errors.As(err, &ns)
}

// DeduplicatedError marks a failure that may have reached the downstream, after which a retry
// still cannot act twice: the downstream itself refuses a second effect for the idempotency key
// (a Step Functions standard workflow starts one execution per name). An at-most-once intent
// is retried after one, as after NotSent.
type DeduplicatedError struct{ Err error }

func (e *DeduplicatedError) Error() string { return e.Err.Error() }
func (e *DeduplicatedError) Unwrap() error { return e.Err }

// Deduplicated marks err as one after which the downstream's own deduplication makes a retry safe.
func Deduplicated(err error) error { return &DeduplicatedError{Err: err} }

// IsDeduplicated reports whether err was marked Deduplicated.
func IsDeduplicated(err error) bool {
	var de *DeduplicatedError
	return errors.As(err, &de)
}

// Checker is an Executor that knows configurations it cannot serve. New calls Check with
// whether the target is at-most-once (AtMostOnce) and refuses the target with its error: an
// asynchronous Lambda invocation, which Lambda's own queue retries and may deliver twice,
// cannot be at-most-once.
type Checker interface {
	Check(atMostOnce bool) error
}

// AtMostOnce wraps an executor whose downstream has no idempotency key of its own (SMTP, a
// legacy API): its intents are called at most once. The lease before the call records the
// attempt as under way; an attempt that never recorded its outcome (its worker stopped
// mid-call) parks instead of being called again, and so does a failure that may have reached
// the downstream: only a NotSent or Deduplicated error is retried. A parked intent is a person's decision
// (check the downstream, then hookctl redrive if it was not sent). Use at-least-once, the
// default, wherever the downstream deduplicates: it never needs a person.
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

// HTTPExecutor POSTs the intent's payload as JSON to URL with the Idempotency-Key header.
//
// How it classifies the answer, and why:
//
//	2xx                       done
//	408, 425, 429, 5xx        retried: the downstream is slow, overloaded or failing for now
//	409                       retried: Stripe and the IETF Idempotency-Key draft answer 409 while a
//	                          request with the same key is still in flight (our earlier attempt
//	                          that timed out); the next attempt gets that request's answer
//	timeouts, transport errors retried
//	429, a failure before any retried, and marked NotSent: an at-most-once intent (AtMostOnce)
//	of the request was written is retried after them too, and parked after any other failure
//	(no connection, a refused (a reset after the request was written is "may have been sent",
//	or timed-out dial)        whatever error it surfaces as: see WriteTrace)
//	3xx                       permanent, never followed: a followed 301/302/303 turns the POST into
//	                          a GET without a body (an HTTP->HTTPS hop, a login page) whose 2xx
//	                          would record an effect that never happened; 307/308 would send the
//	                          effect to a URL nobody configured. The error names the Location.
//	other 4xx                 permanent: the request itself is wrong; parked for an operator
//
// Every non-2xx answer is a *StatusError (wrapped in a *PermanentError when permanent).
//
// For an at-most-once task the request is sent once: net/http does not replay it on a reused
// connection that broke (see Execute), and the caller's transport must not retry either.
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

// MaxDuration is the longest one Execute call takes: the worker takes no lease it could not
// finish (see Bounded).
func (x *HTTPExecutor) MaxDuration() time.Duration {
	if x.Timeout > 0 {
		return x.Timeout
	}
	return DefaultHTTPTimeout
}

// noRedirects makes a client hand back a 3xx as it is.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Execute sends one request. With tracing on (a recording span in ctx), the request is a client
// span of its own, and carries its trace context in the headers the global propagator writes
// (W3C traceparent and tracestate): added to the static Headers, never over one of them, nor
// over Idempotency-Key.
func (x *HTTPExecutor) Execute(ctx context.Context, t Task) error {
	ctx, span := startHTTPCall(ctx, x.URL)
	err := x.post(ctx, t)
	if span != nil {
		EndCall(span, redact(err), "")
	}
	return err
}

// post is Execute's request.
func (x *HTTPExecutor) post(ctx context.Context, t Task) error {
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
		// net/http replays a request that carries an Idempotency-Key on a reused connection that
		// broke after it was written, whenever it can rewind the body (GetBody) or there is no
		// body at all (http.NoBody, which an empty payload gets). A body it can neither rewind
		// nor take for empty is sent once. The price: an empty payload goes out as an empty
		// chunked body rather than Content-Length: 0.
		req.Body, req.GetBody, req.ContentLength = onceBody{bytes.NewReader(t.Payload)}, nil, int64(len(t.Payload))
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "oncehook-outbox")
	}
	client := http.Client{}
	if x.Client != nil {
		client = *x.Client // a copy: the caller's client keeps its own redirect policy
	}
	client.CheckRedirect = noRedirects
	traced, writes := TraceWrites(ctx)
	resp, err := client.Do(req.WithContext(traced))
	if err != nil {
		// Where it failed decides, not what the error says: a refused dial after a replay of a
		// request the server had read is still a request that was sent.
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
// itself to a connection. Until one did, a failure cannot have reached the downstream (no
// connection, a refused or timed-out dial, a TLS handshake that failed); once one did, the
// downstream may have read it, whatever error comes back: a reset, a dial refused for a replay
// of it, a timeout. Executors use it to classify by where a call failed rather than by what
// the error says.
type WriteTrace struct{ wrote atomic.Bool }

// TraceWrites returns ctx with a net/http client trace (composed with any ctx already has)
// that records in the WriteTrace whether a request made under it, on any attempt, wrote the
// first of its headers. Every client built on net/http honours it, the AWS SDK's included,
// across its own retries. The first header counts even while it is only buffered: erring on the
// side of "may have been sent".
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
