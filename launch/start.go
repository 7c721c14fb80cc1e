package launch

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/receiver"
)

// Receiver starts the receiver Lambda with the planners register adds. It does not return; a
// configuration that cannot work is logged, naming the setting, and exits 1.
func Receiver(register func(*receiver.Planners)) {
	env := mustLoad("receiver", Needs{Secrets: true})
	h, err := NewReceiver(env, register)
	exitOn("receiver", err)
	lambda.Start(flushed(env.Tracing, h.Handle))
}

// Outbox starts the outbox Lambda with the built-in executors and executors (NewWorker). It
// does not return.
func Outbox(executors map[string]outbox.Executor) {
	env := mustLoad("outbox", Needs{})
	w, err := NewWorker(env, executors)
	exitOn("outbox", err)
	lambda.Start(invocation(env.Tracing, "outbox", outboxTrigger, trace.SpanKindConsumer, w.Handle))
}

// Sweeper starts the scheduled sweeper Lambda, with the same executors as Outbox. It does not
// return.
func Sweeper(executors map[string]outbox.Executor) {
	env := mustLoad("sweeper", Needs{})
	s, err := NewSweeper(env, executors)
	exitOn("sweeper", err)
	run := func(ctx context.Context, _ json.RawMessage) (outbox.SweepReport, error) { return s.Run(ctx) }
	lambda.Start(invocation(env.Tracing, "sweeper", func(json.RawMessage) attribute.KeyValue { return semconv.FaaSTriggerTimer }, trace.SpanKindServer, run))
}

func mustLoad(function string, needs Needs) *Env {
	env, err := Load(context.Background(), needs)
	exitOn(function, err)
	return env
}

func exitOn(function string, err error) {
	if err != nil {
		slog.Error(function+" cannot start", "error", err)
		os.Exit(1)
	}
}
