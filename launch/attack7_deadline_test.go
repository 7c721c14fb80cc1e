package launch

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/otel/trace"
)

// TestTheFlushNeverHoldsAnAnswerPastItsInvocationsDeadline: Flush gives the export 500 ms
// from context.WithoutCancel(ctx): the invocation's own deadline is dropped. A handler that
// answers with less than 500 ms left (a receiver whose commit took its SDK retries, an outbox
// batch that ran to its margin) and a collector that does not answer (a collector layer
// restarting, a remote endpoint that is slow) has its answer held past the deadline: Lambda
// ends the invocation as timed out and the answer it had is lost (the receiver's 200 becomes
// the provider's 5xx and a redelivery; the outbox's partial batch response is lost and the
// whole batch is delivered again). Tracing, which must change nothing of what a function does,
// turns an answered invocation into a timed-out one. The invariant checked: an invocation
// whose handler returned before its deadline answers before it, whatever the collector does.
//
// The space: each of launch's wrappers; the handler returns at once, 300 ms before the
// deadline; the collector never answers.
func TestTheFlushNeverHoldsAnAnswerPastItsInvocationsDeadline(t *testing.T) {
	hang := make(chan struct{})
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer col.Close()
	defer close(hang)
	for _, wrapper := range []string{"outbox", "sweeper", "receiver"} {
		t.Run(wrapper, func(t *testing.T) {
			resetOtel(t)
			t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
			tr, err := TracingFromEnv(context.Background(), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				defer cancel()
				_ = tr.Shutdown(ctx)
			}()
			body := func(ctx context.Context, _ json.RawMessage) (string, error) {
				_, s := tr.Provider.Tracer("app").Start(ctx, "work")
				s.End()
				return "ok", nil
			}
			var h func(context.Context, json.RawMessage) (string, error)
			switch wrapper {
			case "outbox":
				h = invocation(tr, "outbox", outboxTrigger, trace.SpanKindConsumer, body)
			case "sweeper":
				h = invocation(tr, "sweeper", outboxTrigger, trace.SpanKindServer, body)
			default:
				h = flushed(tr, body)
			}
			deadline := time.Now().Add(300 * time.Millisecond)
			ctx, cancel := context.WithDeadline(lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-deadline"}), deadline)
			defer cancel()
			if _, err := h(ctx, json.RawMessage(`{"Records":[{"eventSource":"aws:dynamodb"}]}`)); err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Errorf("the handler returned at once, 300 ms before the invocation's deadline; the flush held the answer %s past it (Lambda: Task timed out, the answer lost)",
					time.Since(deadline).Round(time.Millisecond))
			}
		})
	}
}
