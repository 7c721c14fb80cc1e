package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/internal/otelenv"
)

// The functions' tracing is OpenTelemetry's, set by its own variables:
//
//	OTEL_TRACES_EXPORTER         otlp turns it on; unset or none is off (at no cost: no span is
//	                             started). Anything else is refused at start, naming it.
//	OTEL_SDK_DISABLED            true (in any case) turns it off whatever the exporter says
//	OTEL_EXPORTER_OTLP_ENDPOINT  where to export (OTLP over HTTP, protobuf, to <it>/v1/traces);
//	                             default http://localhost:4318, where a collector layer (ADOT's,
//	                             or OpenTelemetry's own) listens. OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
//	                             (the URL as it is), _HEADERS, _TIMEOUT, _COMPRESSION (gzip),
//	                             _CERTIFICATE, _CLIENT_CERTIFICATE and _CLIENT_KEY are honoured
//	                             too, the _TRACES_ ones first (the traces' headers replace the
//	                             general ones)
//	OTEL_EXPORTER_OTLP_PROTOCOL  http/protobuf (the default) only: no gRPC exporter is linked
//	OTEL_PROPAGATORS             tracecontext, baggage (the default, both) or none: what the
//	                             calls carry beside X-Ray's header; others are refused
//	OTEL_TRACES_SAMPLER (_ARG)   the sampler; default parentbased_always_on: every delivery
//	OTEL_SERVICE_NAME            default the function's name; OTEL_RESOURCE_ATTRIBUTES adds more
//	OTEL_BSP_*                   the batch span processor's queue and batch sizes
//
// OpenTelemetry's own default exporter is otlp; here it is none, so a function without a
// collector never pays for a failing export. internal/otelenv reads them (and infra checks a
// deployment's with it at synth).

// flushTimeout bounds the export at the end of each invocation (a collector layer on
// localhost takes a millisecond or two): spans must leave before Lambda freezes the
// environment, and the receiver's answer waits for them.
const flushTimeout = 500 * time.Millisecond

// Tracing is the functions' OpenTelemetry tracing, built from the environment by Load (see
// TracingFromEnv). Provider is nil when tracing is off.
type Tracing struct {
	Provider *sdktrace.TracerProvider

	// spans counts the sampled spans ended and those the batcher handed its exporter, so that
	// Flush reports spans the batcher dropped for a full queue, which OpenTelemetry's SDK
	// only writes to its debug log (nil for a Tracing built by hand).
	spans  *spanCounts
	logger *slog.Logger
}

// spanCounts are Tracing.spans.
type spanCounts struct {
	ended, handed, reported atomic.Int64
	queue                   int // the batcher's queue size
}

// countEnded is a span processor counting the sampled spans ended (what the batcher queues).
type countEnded struct{ c *spanCounts }

func (p countEnded) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (p countEnded) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.SpanContext().IsSampled() {
		p.c.ended.Add(1)
	}
}
func (countEnded) Shutdown(context.Context) error   { return nil }
func (countEnded) ForceFlush(context.Context) error { return nil }

// countHanded is an exporter counting the spans it is handed, exported or not.
type countHanded struct {
	sdktrace.SpanExporter
	c *spanCounts
}

func (x countHanded) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	x.c.handed.Add(int64(len(spans)))
	return x.SpanExporter.ExportSpans(ctx, spans)
}

// defaultQueueSize is the batcher's span queue unless OTEL_BSP_MAX_QUEUE_SIZE says otherwise:
// a stream batch of 1,000 records ends about 5,000 spans before its flush, and the SDK's
// default (2,048) would drop the rest when the collector is slower than the invocation.
const defaultQueueSize = 8192

// TracingFromEnv builds the tracing the environment asks for (the OTEL_ variables above): off,
// or an SDK tracer provider exporting OTLP over HTTP in batches, set as OpenTelemetry's global
// provider with W3C Trace Context as the global propagator, so that an application's planners
// and executors trace into the same traces. Its errors name the variable.
func TracingFromEnv(ctx context.Context, logger *slog.Logger) (*Tracing, error) {
	s, err := otelenv.Read(os.Getenv)
	if err != nil {
		return nil, err
	}
	if !s.On {
		return &Tracing{}, nil
	}
	exp, err := newOTLPExporter(s)
	if err != nil {
		return nil, err
	}
	res, err := lambdaResource(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	counts := &spanCounts{queue: s.QueueSize} // the SDK reads OTEL_BSP_MAX_QUEUE_SIZE itself
	var batcher []sdktrace.BatchSpanProcessorOption
	if s.QueueSize == 0 {
		counts.queue = defaultQueueSize
		batcher = append(batcher, sdktrace.WithMaxQueueSize(defaultQueueSize))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(countEnded{counts}),
		sdktrace.WithBatcher(countHanded{exp, counts}, batcher...), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(textMapPropagator(s.Propagators))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("opentelemetry: "+err.Error(), "setting", "OTEL_EXPORTER_OTLP_ENDPOINT")
	}))
	logger.Info("tracing on: OTLP over HTTP", "endpoint", exp.shown)
	return &Tracing{Provider: tp, spans: counts, logger: logger}, nil
}

// textMapPropagator is the propagator OTEL_PROPAGATORS names (otelenv has checked the names).
func textMapPropagator(names []string) propagation.TextMapPropagator {
	var ps []propagation.TextMapPropagator
	for _, n := range names {
		switch n {
		case "tracecontext":
			ps = append(ps, propagation.TraceContext{})
		case "baggage":
			ps = append(ps, propagation.Baggage{})
		}
	}
	return propagation.NewCompositeTextMapPropagator(ps...)
}

// CheckTracingEnv reports what TracingFromEnv would refuse in env, a function's environment
// (the OTEL_ variables above): an exporter, protocol, sampler or propagator it does not take,
// an endpoint that is not an http(s) URL, a header it cannot send, a timeout or compression it
// does not know, malformed resource attributes. The error names the variable. The TLS files
// are read at start only: env names a function's files. infra runs it at synth, so that a deployment whose
// functions would refuse to start fails before it is deployed.
func CheckTracingEnv(env map[string]string) error {
	_, err := otelenv.Read(func(k string) string { return env[k] })
	return err
}

// lambdaResource describes the function (the FaaS and cloud conventions), from what Lambda
// sets in its environment; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES come last, and win.
func lambdaResource(ctx context.Context) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{semconv.CloudProviderAWS, semconv.CloudPlatformAWSLambda}
	if name := os.Getenv("AWS_LAMBDA_FUNCTION_NAME"); name != "" {
		attrs = append(attrs, semconv.ServiceName(name), semconv.FaaSName(name))
	}
	if v := os.Getenv("AWS_LAMBDA_FUNCTION_VERSION"); v != "" {
		attrs = append(attrs, semconv.FaaSVersion(v))
	}
	if v := os.Getenv("AWS_LAMBDA_LOG_STREAM_NAME"); v != "" {
		attrs = append(attrs, semconv.FaaSInstance(v))
	}
	if mb, err := strconv.Atoi(os.Getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")); err == nil {
		attrs = append(attrs, semconv.FaaSMaxMemory(mb<<20))
	}
	if v := os.Getenv("AWS_REGION"); v != "" {
		attrs = append(attrs, semconv.CloudRegion(v))
	}
	base := resource.NewWithAttributes(semconv.SchemaURL, attrs...)
	env, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, err
	}
	return resource.Merge(base, env)
}

// Flush exports what the invocation's spans left in the batch, before Lambda freezes the
// environment (nothing when tracing is off): for at most flushTimeout, and never past the
// invocation's deadline (less flushReserve for the answer), since a late answer is a timed-out
// invocation. A failed export, and spans the batcher dropped, are logged; neither fails the
// invocation.
func (t *Tracing) Flush(ctx context.Context) {
	if t == nil || t.Provider == nil {
		return
	}
	timeout := flushTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline)-flushReserve)
	}
	if timeout <= 0 {
		return // no time left: the spans stay queued for a later invocation's flush
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	// The SDK returns a flush's export error to its caller, not to the error handler.
	if err := t.Provider.ForceFlush(fctx); err != nil {
		otel.Handle(err)
		if fctx.Err() != nil {
			return // cut short: what is still queued is not lost yet
		}
	}
	t.reportDrops()
}

// flushReserve is the time an invocation keeps, after its flush, to answer before its deadline.
const flushReserve = 50 * time.Millisecond

// reportDrops logs the spans the batcher dropped since the last report: after a whole flush,
// every sampled span ended was handed to the exporter unless it was dropped.
func (t *Tracing) reportDrops() {
	c := t.spans
	if c == nil {
		return
	}
	dropped := c.ended.Load() - c.handed.Load() - c.reported.Load()
	if dropped <= 0 {
		return
	}
	c.reported.Add(dropped)
	msg := fmt.Sprintf("opentelemetry: %d spans dropped: the batch span processor's queue (%d spans) was full; raise OTEL_BSP_MAX_QUEUE_SIZE, or export to a collector layer on localhost", dropped, c.queue)
	if t.logger != nil {
		t.logger.Warn(msg, "setting", "OTEL_BSP_MAX_QUEUE_SIZE", "dropped_spans", dropped)
		return
	}
	otel.Handle(errors.New(msg))
}

// TracerProvider is the provider for receiver.Config and outbox.Config: nil when tracing is
// off, which those take as off.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t == nil || t.Provider == nil {
		return nil
	}
	return t.Provider
}

var coldStart atomic.Bool

func init() { coldStart.Store(true) }

// invocation wraps a Lambda handler with a span for each invocation (the FaaS conventions:
// its trigger, its request id), under which the outbox's and the sweeper's work starts, and
// the flush that exports it. Off, it is the handler as it is.
func invocation[In, Out any](t *Tracing, name string, trigger func(In) attribute.KeyValue, kind trace.SpanKind,
	handler func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	if t == nil || t.Provider == nil {
		return handler
	}
	tracer := t.Provider.Tracer("github.com/oncehook/oncehook/launch", trace.WithSchemaURL(semconv.SchemaURL))
	return func(ctx context.Context, in In) (Out, error) {
		attrs := []attribute.KeyValue{trigger(in), semconv.FaaSColdstart(coldStart.Swap(false))}
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			attrs = append(attrs, semconv.FaaSInvocationID(lc.AwsRequestID), semconv.CloudResourceID(lc.InvokedFunctionArn))
		}
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
		defer func() {
			// A panic too: its invocation is the one an operator most needs to find, and
			// Lambda's runtime stops the process after it, with every span not yet exported.
			if r := recover(); r != nil {
				span.SetStatus(codes.Error, "panic")
				span.End()
				t.Flush(ctx)
				panic(r)
			}
		}()
		out, err := handler(ctx, in)
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		t.Flush(ctx)
		return out, err
	}
}

// flushed is a handler whose invocations export their spans at the end (the receiver's: each
// delivery is its own trace, so no invocation span is added).
func flushed[In, Out any](t *Tracing, handler func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	if t == nil || t.Provider == nil {
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

// outboxTrigger tells the outbox's two triggers apart (the table's stream, a data source; the
// retry queue, pub/sub) as the worker does: by the first record's eventSource, never by bytes
// anywhere in the event (a sender chooses event ids and types).
func outboxTrigger(raw json.RawMessage) attribute.KeyValue {
	if firstEventSource(raw) == "aws:sqs" {
		return semconv.FaaSTriggerPubSub
	}
	return semconv.FaaSTriggerDatasource
}

// firstEventSource is the eventSource of an event's first record, read that far and no
// further (a stream batch is up to 6 MB); "" when it has none.
func firstEventSource(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return ""
		}
		if key != "Records" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return ""
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') || !dec.More() {
			return ""
		}
		var first struct {
			EventSource string `json:"eventSource"`
		}
		if dec.Decode(&first) != nil {
			return ""
		}
		return first.EventSource
	}
	return ""
}

// TraceLogs wraps a log handler so that every line written under a span (a context holding a
// valid span context: a delivery's, an intent's) carries the span's trace_id and span_id, W3C
// hex, to find the line's trace from the line and the lines of a trace from the trace.
func TraceLogs(h slog.Handler) slog.Handler { return traceLogs{Handler: h, root: h} }

// traceLogs is TraceLogs' handler. trace_id and span_id stay at the line's top level under a
// logger's groups too (where the Logs Insights query looks): root is the handler before its
// first group, and ops what was added since, replayed after the trace's attributes for a line
// written under a span.
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

// Shutdown exports what is left and stops the provider, for a program that serves the
// functions itself (NewHTTPReceiver) and exits; nothing when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.Provider == nil {
		return nil
	}
	return t.Provider.Shutdown(ctx)
}
