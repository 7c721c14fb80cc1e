package launch

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/launch/tracing"
	"github.com/oncehook/oncehook/outbox"
)

// warm is set by the instance's first invocation.
var warm atomic.Bool

// invocation wraps a Lambda handler with a span per invocation (the FaaS conventions), under
// which the outbox's and the sweeper's work starts, and the flush. Off, it is the handler.
func invocation[In, Out any](t *tracing.Tracing, name string, trigger func(In) attribute.KeyValue, kind trace.SpanKind,
	handler func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	tp := t.TracerProvider()
	if tp == nil {
		return handler
	}
	tracer := tp.Tracer("github.com/oncehook/oncehook/launch", trace.WithSchemaURL(semconv.SchemaURL))
	return flushed(t, func(ctx context.Context, in In) (Out, error) {
		attrs := []attribute.KeyValue{trigger(in), semconv.FaaSColdstart(!warm.Swap(true))}
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			attrs = append(attrs, semconv.FaaSInvocationID(lc.AwsRequestID), semconv.CloudResourceID(lc.InvokedFunctionArn))
		}
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
		defer func() {
			// A panic too: the invocation an operator most needs to find.
			if r := recover(); r != nil {
				span.SetStatus(codes.Error, "panic")
				span.End()
				panic(r)
			}
		}()
		out, err := handler(ctx, in)
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		return out, err
	})
}

// flushed is a handler whose invocations export their spans at the end (the receiver's, whose
// deliveries are each their own trace).
func flushed[In, Out any](t *tracing.Tracing, handler func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	if t.TracerProvider() == nil {
		return handler
	}
	return func(ctx context.Context, in In) (Out, error) {
		defer func() {
			if r := recover(); r != nil {
				t.Flush(ctx) // a panicking delivery's spans (ended in error by the receiver) leave too
				panic(r)
			}
		}()
		out, err := handler(ctx, in)
		t.Flush(ctx)
		return out, err
	}
}

// outboxTrigger tells the outbox's two triggers apart (the stream, the retry queue) as the
// worker does: by the first record's eventSource, never by bytes a sender chose.
func outboxTrigger(raw json.RawMessage) attribute.KeyValue {
	if src, _ := outbox.EventSource(raw); src == "aws:sqs" {
		return semconv.FaaSTriggerPubSub
	}
	return semconv.FaaSTriggerDatasource
}

// TraceLogs wraps a log handler so that every line written under a span carries its trace_id
// and span_id (W3C hex), to go from a line to its trace and back.
func TraceLogs(h slog.Handler) slog.Handler { return traceLogs{Handler: h, root: h} }

// traceLogs is TraceLogs' handler. trace_id and span_id stay at the top level under groups
// too (where Logs Insights looks): root is the handler before its first group, and ops what
// was added since, replayed after the trace's attributes.
type traceLogs struct {
	slog.Handler
	root slog.Handler
	ops  []func(slog.Handler) slog.Handler
}

func (t traceLogs) Handle(ctx context.Context, r slog.Record) error {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return t.Handler.Handle(ctx, r)
	}
	ids := []slog.Attr{slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String())}
	if len(t.ops) == 0 {
		r.AddAttrs(ids...)
		return t.Handler.Handle(ctx, r)
	}
	h := t.root.WithAttrs(ids)
	for _, op := range t.ops {
		h = op(h)
	}
	return h.Handle(ctx, r)
}

func (t traceLogs) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(t.ops) == 0 {
		h := t.Handler.WithAttrs(attrs)
		return traceLogs{Handler: h, root: h}
	}
	return t.with(func(h slog.Handler) slog.Handler { return h.WithAttrs(attrs) })
}

func (t traceLogs) WithGroup(name string) slog.Handler {
	if name == "" {
		return t // slog: an empty group is none
	}
	return t.with(func(h slog.Handler) slog.Handler { return h.WithGroup(name) })
}

// with is t with op applied, and kept for the replay.
func (t traceLogs) with(op func(slog.Handler) slog.Handler) traceLogs {
	return traceLogs{Handler: op(t.Handler), root: t.root, ops: append(t.ops[:len(t.ops):len(t.ops)], op)}
}
