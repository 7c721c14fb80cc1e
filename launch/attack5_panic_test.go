package launch

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestAPanickingHandlersSpansStillLeave: each invocation's spans are exported before it
// answers. A handler that panics (an application's planner or executor) is answered by
// Lambda's runtime, which recovers the panic and then stops the process: what the wrappers
// launch puts around the functions' handlers must end the invocation span (in error) and
// flush on the way out, or the spans of the one invocation that failed are lost with the
// process. Today the invocation span is never ended and nothing is flushed.
//
// The space: the outbox's and the sweeper's wrapper (invocation) and the receiver's (flushed),
// each with a handler that ended a span of its own before panicking.
func TestAPanickingHandlersSpansStillLeave(t *testing.T) {
	resetOtel(t)
	exp := tracetest.NewInMemoryExporter()
	tr := &Tracing{Provider: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Hour)))} // only a flush exports
	defer func() { _ = tr.Shutdown(context.Background()) }()

	body := func(ctx context.Context, _ json.RawMessage) (string, error) {
		_, s := tr.Provider.Tracer("app").Start(ctx, "work before the panic")
		s.End()
		panic("an application's bug")
	}
	for _, c := range []struct {
		name    string
		handler func(context.Context, json.RawMessage) (string, error)
		want    []string
	}{
		{"outbox", invocation(tr, "outbox", outboxTrigger, trace.SpanKindConsumer, body), []string{"outbox", "work before the panic"}},
		{"receiver", flushed(tr, body), []string{"work before the panic"}},
	} {
		exp.Reset()
		func() {
			defer func() { _ = recover() }() // as Lambda's runtime does, before it stops the process
			_, _ = c.handler(context.Background(), json.RawMessage(`{"Records":[{"eventSource":"aws:dynamodb"}]}`))
		}()
		got := map[string]bool{}
		for _, s := range exp.GetSpans() { // exported by now, or lost with the process
			got[s.Name] = true
		}
		for _, name := range c.want {
			if !got[name] {
				t.Errorf("%s: a panicking handler's invocation left span %q unexported (exported: %v)", c.name, name, got)
			}
		}
	}
}
