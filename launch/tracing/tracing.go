// Package tracing is the OpenTelemetry tracing of oncehook's functions: FromEnv builds it from
// the process environment at a function's start (launch.Load does), Flush exports each
// invocation's spans before Lambda freezes the environment, and CheckEnv runs the same start on
// a function's environment without starting it.
//
// It is a package apart from launch so that the CDK construct (package infra), which runs
// CheckEnv on the functions' tracing settings at synth, links OpenTelemetry's SDK and, of the
// AWS service clients the functions call, only the outbox's (whose description of a failed HTTP
// call it shares; the construct links the outbox anyway): a team's first synth compiles every
// package its CDK app imports. What needs another client stays in launch: it reads the
// exporter's stored headers (OTLPHeadersSecret) and hands that reading to FromEnv.
//
// The functions' tracing is OpenTelemetry's, set by its own variables, which the SDK and its
// OTLP/HTTP exporter (otlptracehttp) read themselves:
//
//	OTEL_TRACES_EXPORTER         otlp turns it on; unset or none is off (at no cost: no span is
//	                             started). Anything else is refused at start, naming it.
//	OTEL_SDK_DISABLED            true (in any case) turns it off whatever the exporter says
//	OTEL_EXPORTER_OTLP_*         the exporter's (ENDPOINT, default http://localhost:4318, where a
//	                             collector layer listens; HEADERS (or, holding a key, from a
//	                             secret store: OTLPHeadersSecret), TIMEOUT, COMPRESSION,
//	                             CERTIFICATE, CLIENT_CERTIFICATE, CLIENT_KEY and their _TRACES_
//	                             forms), as OpenTelemetry's exporter reads them; the PROTOCOL is
//	                             http/protobuf or http/json: no gRPC exporter is linked
//	OTEL_PROPAGATORS             tracecontext, baggage (the default, both) or none: what the
//	                             calls carry beside X-Ray's header; others are refused
//	OTEL_TRACES_SAMPLER (_ARG)   the SDK's sampler; default parentbased_always_on
//	OTEL_SERVICE_NAME            default the function's name; OTEL_RESOURCE_ATTRIBUTES adds more
//	OTEL_BSP_*                   the SDK's batch span processor
//
// A value the SDK reports it cannot parse while it starts (a header, a timeout, a certificate,
// a sampler, resource attributes) is refused at start: the SDK would otherwise carry on with a
// default. OpenTelemetry's own default exporter is otlp; here it is none, so a function
// without a collector never pays for a failing export.
// Built with -tags oncehook_notrace_export, a binary links no exporter (nor the gRPC packages
// it brings, about 11-16 MB) and refuses otlp at start.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/outbox"
)

// The OTLP exporter's headers (a vendor's intake key) are read at start from a secret store, as
// the sources' secrets are, so that the key is never in a function's environment or the
// template that sets it (launch reads them, and passes the reading to FromEnv):
//
//	ONCEHOOK_OTLP_HEADERS_SECRET     a Secrets Manager secret (name or ARN) whose SecretString is
//	                                 the headers; or
//	ONCEHOOK_OTLP_HEADERS_PARAMETER  an SSM parameter (a SecureString, decrypted) holding them
//
// The value is either OTEL_EXPORTER_OTLP_HEADERS' form (api-key=<key>,x-team=payments; values
// URL-encoded) or a JSON object of strings (Secrets Manager's key/value secret). It replaces the
// OTEL_EXPORTER_OTLP_HEADERS variables, which may then not be set. It is never logged, nor
// quoted in an error.
const (
	OTLPHeadersSecret    = "ONCEHOOK_OTLP_HEADERS_SECRET"
	OTLPHeadersParameter = "ONCEHOOK_OTLP_HEADERS_PARAMETER"
)

// flushTimeout bounds the export at the end of each invocation (a collector layer on
// localhost takes a millisecond or two): spans must leave before Lambda freezes the
// environment, and the receiver's answer waits for them.
const flushTimeout = 500 * time.Millisecond

// Tracing is the functions' OpenTelemetry tracing, built from the environment by FromEnv.
// Provider is nil when tracing is off.
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
	queue                   string // the batcher's queue size, for the drop message
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

// FromEnv builds the tracing the environment asks for (the OTEL_ variables above): off, or an
// SDK tracer provider exporting through otlptracehttp in batches, set as OpenTelemetry's global
// provider with the propagators as the global propagator, so that an application's planners
// and executors trace into the same traces. stored, when not nil, reads the exporter's headers
// from where the environment stores them (launch's reads the store OTLPHeadersSecret or
// OTLPHeadersParameter names), and is called only when tracing is on; the headers it returns,
// if any, are the exporter's. Its errors name the variable, and never quote a value (a
// header's is a vendor's key).
func FromEnv(ctx context.Context, logger *slog.Logger, stored func(context.Context) (map[string]string, error)) (*Tracing, error) {
	prop, on, err := tracingOn(os.Getenv)
	if err != nil || !on {
		return &Tracing{}, err
	}
	sdk := &sdkLog{logger: logger, shown: shownEndpoint(os.Getenv), starting: true}
	// The SDK reports what it cannot parse, and later failed exports, to these: ours, so that
	// nothing it quotes (a header's value, the endpoint's path) is logged.
	otel.SetLogger(logr.New(sdk))
	otel.SetErrorHandler(sdk)
	if !exportLinked {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=otlp: this binary is built without OpenTelemetry's exporter (-tags oncehook_notrace_export): set none, or build without the tag")
	}
	var headers map[string]string
	if stored != nil {
		if headers, err = stored(ctx); err != nil {
			return nil, err
		}
	}
	exp, err := newExporter(ctx, headers)
	if err != nil {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_*: %w", err)
	}
	res, err := lambdaResource(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	counts := &spanCounts{queue: os.Getenv("OTEL_BSP_MAX_QUEUE_SIZE")} // the SDK reads it itself
	var batcher []sdktrace.BatchSpanProcessorOption
	if strings.TrimSpace(counts.queue) == "" {
		counts.queue = strconv.Itoa(defaultQueueSize)
		batcher = append(batcher, sdktrace.WithMaxQueueSize(defaultQueueSize))
	}
	bsp, err := newBatcher(countHanded{exp, counts}, batcher)
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(countEnded{counts}), sdktrace.WithSpanProcessor(bsp), sdktrace.WithResource(res))
	if err := sdk.started(); err != nil {
		_ = tp.Shutdown(ctx)
		return nil, err
	}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(prop)
	logger.Info("tracing on: OTLP over HTTP", "endpoint", sdk.shown)
	return &Tracing{Provider: tp, spans: counts, logger: logger}, nil
}

// newBatcher is the SDK's batch span processor; a setting it cannot take (a negative queue
// size panics in it) is refused naming its variables.
func newBatcher(exp sdktrace.SpanExporter, opts []sdktrace.BatchSpanProcessorOption) (bsp sdktrace.SpanProcessor, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE: the SDK's batch span processor cannot take them: %v", r)
		}
	}()
	return sdktrace.NewBatchSpanProcessor(exp, opts...), nil
}

// tracingOn reads what only this project decides: whether tracing is on, the exporter and
// protocol it links (OTLP over HTTP), and the propagators the calls carry. (Not contrib's
// autoexport, which reads OTEL_TRACES_EXPORTER too: it links the gRPC exporters and Prometheus.)
func tracingOn(getenv func(string) string) (propagation.TextMapPropagator, bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, false, nil
	}
	switch v := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); v {
	case "", "none":
		return nil, false, nil
	case "otlp":
	default:
		return nil, false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: want otlp or none (the functions link OpenTelemetry's OTLP/HTTP exporter alone)", v)
	}
	if name, v := otlpSetting(getenv, "PROTOCOL"); v != "" && v != "http/protobuf" && v != "http/json" {
		return nil, false, fmt.Errorf("%s=%q: want http/protobuf or http/json (no gRPC exporter is linked)", name, v)
	}
	// The exporter takes any URL it can parse, and one without a host ("localhost:4318") fails
	// every export: refused, never quoted (an intake's key can be its path).
	if name, v := otlpSetting(getenv, "ENDPOINT"); v != "" {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, false, fmt.Errorf("%s: not an http(s) URL", name)
		}
	}
	// Not contrib's autoprop: it links the deprecated X-Ray propagator module, and B3, Jaeger
	// and OT propagators no downstream of ours reads.
	var props []propagation.TextMapPropagator
	names := getenv("OTEL_PROPAGATORS")
	if strings.TrimSpace(names) == "" {
		names = "tracecontext,baggage" // OpenTelemetry's default
	}
	for _, n := range strings.Split(names, ",") {
		switch n = strings.ToLower(strings.TrimSpace(n)); n {
		case "tracecontext":
			props = append(props, propagation.TraceContext{})
		case "baggage":
			props = append(props, propagation.Baggage{})
		case "none", "":
		default:
			return nil, false, fmt.Errorf("OTEL_PROPAGATORS: %q: want tracecontext, baggage or none (the calls carry X-Ray's header in any case)", n)
		}
	}
	return propagation.NewCompositeTextMapPropagator(props...), true, nil
}

// checkMu serializes CheckEnv, which sets the process's OTEL_ variables for the SDK.
var checkMu sync.Mutex

// CheckEnv reports what FromEnv would refuse in env, a function's environment (the OTEL_
// variables above), by the same start: the SDK's own reading of them. The TLS files are left
// out (env names a function's files, read at its start), and so are the stored headers (a
// synth never reads a secret store). infra runs it at synth, so that a deployment whose
// functions would refuse to start fails before it is deployed. It sets OpenTelemetry's global
// logger and error handler, as FromEnv does.
func CheckEnv(env map[string]string) error {
	checkMu.Lock()
	defer checkMu.Unlock()
	saved := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			saved[k] = v
			os.Unsetenv(k)
		}
	}
	defer func() {
		for k := range env {
			os.Unsetenv(k)
		}
		for k, v := range saved {
			os.Setenv(k, v)
		}
	}()
	for k, v := range env {
		if strings.HasPrefix(k, "OTEL_") && !strings.Contains(k, "CERTIFICATE") && !strings.Contains(k, "CLIENT_KEY") {
			os.Setenv(k, v)
		}
	}
	_, on, err := tracingOn(os.Getenv)
	if err != nil || !on {
		return err
	}
	global := otel.GetTracerProvider()
	prop := otel.GetTextMapPropagator()
	defer func() {
		otel.SetTracerProvider(global)
		otel.SetTextMapPropagator(prop)
	}()
	t, err := FromEnv(context.Background(), slog.New(slog.DiscardHandler), nil)
	if err != nil {
		return err
	}
	return t.Shutdown(context.Background()) // nothing was traced: nothing is exported
}

// sdkLog is OpenTelemetry's global logger and error handler, as FromEnv sets them:
// while the SDK starts, its errors are collected (by what failed, never the value it quotes)
// and refuse the start; afterwards, a failed export is logged as exportFailure describes it.
type sdkLog struct {
	logger *slog.Logger
	shown  string // the endpoint, shown (shownEndpoint)

	mu       sync.Mutex
	starting bool
	failed   []string
}

// started ends the start: what the SDK could not parse while it read the variables.
func (s *sdkLog) started() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starting = false
	if len(s.failed) == 0 {
		return nil
	}
	return fmt.Errorf("OpenTelemetry's SDK cannot read its variables: %s", strings.Join(s.failed, "; "))
}

// Handle is the SDK's error handler: a failed export, or a setting it could not read at start.
func (s *sdkLog) Handle(err error) {
	if !s.collected(sdkSetting(err)) {
		s.logger.Warn("opentelemetry: "+exportFailure(err, s.shown), "setting", "OTEL_EXPORTER_OTLP_ENDPOINT")
	}
}

// collected keeps what failed while the SDK starts, and reports whether it is starting.
func (s *sdkLog) collected(what string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.starting {
		s.failed = append(s.failed, what)
	}
	return s.starting
}

// sdkSetting names the variable an error the SDK reports at start is about (its sampler's
// errors; the others come through Error with the exporter's message).
func sdkSetting(err error) string {
	if strings.Contains(err.Error(), "sampler") {
		return "OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG: " + err.Error() // the sampler's name, or its ratio: no secret
	}
	return "an OTEL_ variable"
}

// exporterVariables are the variables each of the OTLP exporter's parse errors is about.
var exporterVariables = map[string]string{
	"parse duration": "OTEL_EXPORTER_OTLP_TIMEOUT", "parse url": "OTEL_EXPORTER_OTLP_ENDPOINT",
	"read tls ca cert file": "OTEL_EXPORTER_OTLP_CERTIFICATE", "create tls cert pool": "OTEL_EXPORTER_OTLP_CERTIFICATE",
	"read tls client cert": "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "read tls client key": "OTEL_EXPORTER_OTLP_CLIENT_KEY",
	"create tls client key pair": "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "parse headers": "OTEL_EXPORTER_OTLP_HEADERS",
	"escape header value": "OTEL_EXPORTER_OTLP_HEADERS",
}

// The logr sink: the SDK's errors only (its info is debugging), by message, without the values
// it logs with them (a header's, the endpoint's).
func (s *sdkLog) Init(logr.RuntimeInfo)          {}
func (s *sdkLog) Enabled(int) bool               { return false }
func (s *sdkLog) Info(int, string, ...any)       {}
func (s *sdkLog) WithValues(...any) logr.LogSink { return s }
func (s *sdkLog) WithName(string) logr.LogSink   { return s }
func (s *sdkLog) Error(_ error, msg string, kv ...any) {
	what := msg
	if v, ok := exporterVariables[msg]; ok {
		// The SDK reads the general variable and then the traces' own, which wins: a general
		// value it cannot parse under a traces' one is not what the traces use.
		traces := os.Getenv(strings.Replace(v, "OTEL_EXPORTER_OTLP_", "OTEL_EXPORTER_OTLP_TRACES_", 1))
		if len(kv) >= 2 && traces != "" && fmt.Sprint(kv[1]) != traces {
			return
		}
		what = v + " (or its _TRACES_ form): the exporter cannot " + msg
	}
	if !s.collected(what) {
		s.logger.Warn("opentelemetry: " + what)
	}
}

// otlpSetting is the exporter's setting of the name given (ENDPOINT, PROTOCOL) and the variable
// it is read from: the traces' own (OTEL_EXPORTER_OTLP_TRACES_<name>) wins over the general one.
func otlpSetting(getenv func(string) string, setting string) (variable, value string) {
	for _, variable := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + setting, "OTEL_EXPORTER_OTLP_" + setting} {
		if v := strings.TrimSpace(getenv(variable)); v != "" {
			return variable, v
		}
	}
	return "", ""
}

// shownEndpoint is the traces' endpoint as the exporter reads it, by scheme, host and the
// standard path only: an intake's key can be its path, query or password.
func shownEndpoint(getenv func(string) string) string {
	variable, raw := otlpSetting(getenv, "ENDPOINT")
	base := variable != "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" // the exporter adds the standard path
	if raw == "" {
		raw = "http://localhost:4318"
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(an endpoint)"
	}
	path := u.Path
	if base {
		path = strings.TrimSuffix(path, "/") + "/v1/traces"
	}
	if path == "/v1/traces" && u.RawQuery == "" {
		return u.Scheme + "://" + u.Host + path
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// failedSend is the exporter's error for an answer it does not retry: "failed to send to
// <URL>: <status line> (body: ...)"; partialSuccess its error for spans the collector refused.
var (
	failedSend     = regexp.MustCompile(`failed to send to \S+: (\d{3})`)
	partialSuccess = regexp.MustCompile(`OTLP partial success: .*\((\d+) spans? rejected\)`)
)

// exportFailure is a failed export as the log says it: the exporter's errors quote the URL it
// posted to (an intake's key can be its path or query) and the collector's answer (which may
// echo it), so they are described by what failed, as the outbox describes a webhook's.
func exportFailure(err error, shown string) string {
	var ue *url.Error
	switch msg := err.Error(); {
	case errors.As(err, &ue):
		return "an OTLP export to " + shown + " failed: " + outbox.Unanswered(ue.Err)
	case strings.Contains(msg, "retry-able request failure"):
		return "an OTLP export to " + shown + " failed: the collector asked for a retry (429, 502, 503 or 504) until the export's time ran out"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "an OTLP export to " + shown + " failed: no answer within the flush"
	case failedSend.MatchString(msg):
		code, _ := strconv.Atoi(failedSend.FindStringSubmatch(msg)[1])
		return "an OTLP export to " + shown + " failed: " + strconv.Itoa(code) + " " + http.StatusText(code)
	case partialSuccess.MatchString(msg):
		return "an OTLP export to " + shown + ": the collector rejected " + partialSuccess.FindStringSubmatch(msg)[1] + " spans (a partial success)"
	}
	return "an OTLP export to " + shown + " failed (the error is not shown: it may quote the endpoint or the collector's answer)"
}

// lambdaResource describes the function (the FaaS and cloud conventions), from what Lambda
// sets in its environment; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES come last, and win.
// (Not contrib's detectors/aws/lambda: its last release, v0.53.0, leaves out cloud.platform and
// service.name, gives faas.max_memory in MiB, and its schema URL conflicts with this one's.)
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
	msg := fmt.Sprintf("opentelemetry: %d spans dropped: the batch span processor's queue (%s spans) was full; raise OTEL_BSP_MAX_QUEUE_SIZE, or export to a collector layer on localhost", dropped, c.queue)
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

// Shutdown exports what is left and stops the provider, for a program that serves the
// functions itself (launch.NewHTTPReceiver) and exits; nothing when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.Provider == nil {
		return nil
	}
	return t.Provider.Shutdown(ctx)
}
