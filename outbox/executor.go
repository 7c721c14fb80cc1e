package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
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
}

// Executor runs intents for one target. An error is retried (with backoff, up to the
// worker's attempt limit) unless it is marked Permanent, in which case the intent is parked
// for an operator.
type Executor interface {
	Execute(ctx context.Context, t Task) error
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, t Task) error

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, t Task) error { return f(ctx, t) }

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

// HTTPExecutor POSTs the intent's payload as JSON to URL with the Idempotency-Key header.
// 2xx is done; 429, 5xx, timeouts and transport errors are retried; other statuses are
// permanent.
type HTTPExecutor struct {
	URL     string
	Client  *http.Client  // http.DefaultClient when nil
	Timeout time.Duration // per call; default 10 s
	Headers map[string]string
}

// Execute sends one request.
func (x *HTTPExecutor) Execute(ctx context.Context, t Task) error {
	timeout := x.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.URL, bytes.NewReader(t.Payload))
	if err != nil {
		return Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", t.IdempotencyKey)
	req.Header.Set("User-Agent", "oncehook-outbox")
	for k, v := range x.Headers {
		req.Header.Set(k, v)
	}
	client := x.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", x.URL, err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // let the connection be reused
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout:
		return fmt.Errorf("POST %s: %s: %q", x.URL, resp.Status, snippet)
	default:
		return Permanent(fmt.Errorf("POST %s: %s: %q", x.URL, resp.Status, snippet))
	}
}
