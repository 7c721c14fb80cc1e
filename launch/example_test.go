package launch_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/launch"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
)

// An application's receiver function: its main.go is this call, with its planners.
func ExampleReceiver() {
	launch.Receiver(func(p *receiver.Planners) {
		p.Handle("stripe", "checkout.session.completed", func(ctx context.Context, ev dedup.Event) (dedup.Plan, error) {
			return dedup.Plan{Intents: []dedup.Intent{{Name: "fulfil", Target: "fulfilment", Payload: ev.Payload}}}, nil
		})
	})
}

// An application's outbox function, with an executor of its own for the "crm" target (the
// sources file's HTTP targets are built in). The stack lists "crm" in ONCEHOOK_TARGETS, so a
// function started without an executor for it refuses to start.
func ExampleOutbox() {
	launch.Outbox(map[string]outbox.Executor{
		// Its bound (10 s) is the longest one call takes: the stack sizes the lease from it.
		"crm": outbox.BoundedFunc(10*time.Second, func(ctx context.Context, t outbox.Task) error {
			// Call the CRM with t.IdempotencyKey as its idempotency key; an error is retried,
			// outbox.Permanent(err) parks the intent.
			return nil
		}),
	})
}

// The receiver outside Lambda: the same handler, served by net/http in a container
// (ONCEHOOK_TRUSTED_HOSTS names the public host a Twilio or Square source is called at).
func ExampleNewHTTPReceiver() {
	env, err := launch.Load(context.Background(), launch.Needs{Secrets: true})
	if err != nil {
		os.Exit(1)
	}
	h, err := launch.NewHTTPReceiver(env, nil)
	if err != nil {
		os.Exit(1)
	}
	http.Handle("/hooks/", h)
	_ = http.ListenAndServe(":8080", nil)
}

// The intent targets a receiver accepts: the sources file's and the application's own
// executors'. receivertest.NewHandler takes its targets from the same function.
func ExampleKnownTargets() {
	f, err := sources.Parse([]byte(`{"sources": {"stripe": {"scheme": "stripe", "secrets": [{"env": "S"}], "retry_horizon": "3d", "redrive_window": "30d"}},
	  "targets": {"fulfilment": {"url": "https://fulfilment.example.com/ship"}}}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(launch.KnownTargets(f, []string{"email"}))
	// Output: [email fulfilment]
}

// Every line a function logs under a span names it, so a line leads to its trace and a
// trace to its lines: here a planner's line, written under the delivery's span.
func ExampleTraceLogs() {
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	log := slog.New(launch.TraceLogs(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime})))
	span := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}})
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), span), "order planned", "order_id", "ord_42")
	log.InfoContext(context.Background(), "no span, no ids")
	// Output:
	// {"level":"INFO","msg":"order planned","order_id":"ord_42","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"}
	// {"level":"INFO","msg":"no span, no ids"}
}
