package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"

	"github.com/oncehook/oncehook/outbox"
)

// An executor of the team's own classifies a failure by where it happened: before any of the
// request was written (NotSent: safe to send again, even at most once) or after (it may have
// reached the downstream).
func ExampleTraceWrites() {
	call := func(ctx context.Context, url string) error {
		ctx, trace := outbox.TraceWrites(ctx)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(`{}`)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if !trace.Wrote() {
				return outbox.NotSent(err)
			}
			return err // may have been sent
		}
		resp.Body.Close()
		return nil
	}

	// A port nothing listens on: the dial is refused, nothing was written.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	refused := "http://" + l.Addr().String()
	l.Close()
	err := call(context.Background(), refused)
	fmt.Println("refused, not sent:", outbox.IsNotSent(err))

	// A downstream that reads the request and drops the connection: it may have acted.
	drop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}))
	defer drop.Close()
	err = call(context.Background(), drop.URL)
	fmt.Println("dropped after the request, not sent:", err != nil && outbox.IsNotSent(err))
	// Output:
	// refused, not sent: true
	// dropped after the request, not sent: false
}

// A downstream that refuses a second effect for one name (a job runner keyed by the
// idempotency key): a timeout after the request went out is still safe to retry, so the
// executor marks it Deduplicated, and even an at-most-once intent is retried after it.
func ExampleDeduplicated() {
	errTimeout := errors.New("job runner: timeout awaiting the answer")
	runJob := outbox.ExecutorFunc(func(ctx context.Context, t outbox.Task) error {
		// ... submit the job named t.IdempotencyKey; the answer is lost:
		return outbox.Deduplicated(errTimeout)
	})
	err := runJob.Execute(context.Background(), outbox.Task{IdempotencyKey: "shop:evt_1:report.build"})
	fmt.Println(outbox.IsDeduplicated(err), outbox.IsNotSent(err), errors.Is(err, errTimeout))
	// Output: true false true
}

// fireAndForget is an executor whose transport retries on its own (an asynchronous queue), so
// it cannot promise a single call: it refuses to serve an at-most-once target, and outbox.New
// refuses the configuration at start instead of sending twice later.
type fireAndForget struct{}

func (fireAndForget) Execute(context.Context, outbox.Task) error { return nil }

func (fireAndForget) Check(atMostOnce bool) error {
	if atMostOnce {
		return errors.New("an asynchronous send is retried by its queue: it cannot be at-most-once")
	}
	return nil
}

func ExampleChecker() {
	var x outbox.Executor = fireAndForget{}
	if c, ok := x.(outbox.Checker); ok {
		fmt.Println(c.Check(false))
		fmt.Println(c.Check(true))
	}
	// Output:
	// <nil>
	// an asynchronous send is retried by its queue: it cannot be at-most-once
}

// chargeError is a payment service's refusal: its message quotes the card, which belongs in
// the claim's last_error for an operator and not in a trace backend.
type chargeError struct{ code, message string }

func (e *chargeError) Error() string           { return "charge refused: " + e.code + ": " + e.message }
func (e *chargeError) SpanDescription() string { return "charge refused: " + e.code }

// An executor of the team's own whose errors quote the downstream's answer gives them a
// SpanDescription: a span's status says what kind of failure it was, without the answer.
func ExampleExecutor_spanDescription() {
	charge := outbox.ExecutorFunc(func(ctx context.Context, t outbox.Task) error {
		// ... the payment service answers:
		return outbox.Permanent(&chargeError{code: "card_declined", message: "card 4242 4242 4242 4242 declined"})
	})
	err := charge.Execute(context.Background(), outbox.Task{IdempotencyKey: "shop:evt_1:charge"})
	var d interface{ SpanDescription() string }
	if errors.As(err, &d) {
		fmt.Println("last_error:", err)
		fmt.Println("span:", d.SpanDescription())
	}
	// Output:
	// last_error: permanent: charge refused: card_declined: card 4242 4242 4242 4242 declined
	// span: charge refused: card_declined
}
