// Package tracing is the OpenTelemetry tracing of oncehook's functions: FromEnv builds it from
// the environment at a function's start (launch.Load does), Flush exports each invocation's
// spans before Lambda freezes the environment, and CheckEnv runs the same start without
// starting it. It is apart from launch so that the CDK construct (package infra), which runs
// CheckEnv at synth, links no AWS client the functions call but the outbox's: launch reads the
// exporter's stored headers (OTLPHeadersSecret) and hands them to FromEnv.
//
// The tracing is set by OpenTelemetry's own variables, which the SDK and its OTLP/HTTP exporter
// (otlptracehttp) read themselves:
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
// A value the SDK reports it cannot parse while it starts is refused at start, where the SDK
// would carry on with a default. The default exporter is none (OpenTelemetry's is otlp), so a
// function without a collector never pays for a failing export. Built with
// -tags oncehook_notrace_export, a binary links no exporter (11-16 MB) and refuses otlp.
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

// The OTLP exporter's headers (a vendor's key) can be read at start from a secret store, so the
// key is never in a function's environment or template: a Secrets Manager secret
// (ONCEHOOK_OTLP_HEADERS_SECRET) or an SSM SecureString (ONCEHOOK_OTLP_HEADERS_PARAMETER)
// holding OTEL_EXPORTER_OTLP_HEADERS' form (api-key=<key>,x-team=payments) or a JSON object of
// strings. It replaces the OTEL_EXPORTER_OTLP_HEADERS variables, which may then not be set, and
// is never logged nor quoted in an error.
const (
	OTLPHeadersSecret    = "ONCEHOOK_OTLP_HEADERS_SECRET"
	OTLPHeadersParameter = "ONCEHOOK_OTLP_HEADERS_PARAMETER"
)

// flushTimeout bounds the export at the end of each invocation (a collector layer on localhost
// takes a millisecond or two): the answer waits for it.
const flushTimeout = 500 * time.Millisecond

// Tracing is the functions' OpenTelemetry tracing, built from the environment by FromEnv.
// Provider is nil when tracing is off.
type Tracing struct {
	Provider *sdktrace.TracerProvider

	// spans counts the sampled spans ended and those handed to the exporter, so that Flush
	// reports the drops the SDK only writes to its debug log (nil for a Tracing built by hand).
	spans  *spanCounts
	logger *slog.Logger
}

// spanCounts are Tracing.spans.
type spanCounts struct {
	ended, handed, reported atomic.Int64
	queue                   string // the batcher's queue size, for the drop message
}

// countEnded is the batcher counting the sampled spans ended (what it queues).
type countEnded struct {
	sdktrace.SpanProcessor
	c *spanCounts
}

func (p countEnded) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.SpanContext().IsSampled() {
		p.c.ended.Add(1)
	}
	p.SpanProcessor.OnEnd(s)
}

// countHanded is an exporter counting the spans it is handed, exported or not.
type countHanded struct {
	sdktrace.SpanExporter
	c *spanCounts
}

func (x countHanded) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	x.c.handed.Add(int64(len(spans)))
	return x.SpanExporter.ExportSpans(ctx, spans)
}

// defaultQueueSize is the batcher's queue unless OTEL_BSP_MAX_QUEUE_SIZE says otherwise: a
// stream batch of 1,000 records ends about 5,000 spans, over the SDK's default (2,048).
const defaultQueueSize = 8192

// FromEnv builds the tracing the environment asks for: off, or an SDK tracer provider exporting
// through otlptracehttp in batches, set as OpenTelemetry's global provider and propagator so an
// application's planners and executors trace into the same traces. stored, when not nil and
// tracing is on, reads the exporter's headers (launch.StoredOTLPHeaders). Its errors name the
// variable and never quote a value.
func FromEnv(ctx context.Context, logger *slog.Logger, stored func(context.Context) (map[string]string, error)) (*Tracing, error) {
	prop, on, err := tracingOn(os.Getenv)
	if err != nil || !on {
		return &Tracing{}, err
	}
	sdk := &sdkLog{logger: logger, shown: shownEndpoint(os.Getenv), starting: true}
	// Ours, so that nothing the SDK quotes (a header's value, the endpoint's path) is logged.
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
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(countEnded{bsp, counts}), sdktrace.WithResource(res))
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
// protocol (OTLP over HTTP) and the propagators. (Not contrib's autoexport: it links the gRPC
// exporters and Prometheus.)
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
	// The exporter takes a URL without a host ("localhost:4318") and fails every export.
	if name, v := otlpSetting(getenv, "ENDPOINT"); v != "" {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, false, fmt.Errorf("%s: not an http(s) URL", name)
		}
	}
	// Not contrib's autoprop: it links X-Ray's deprecated module, B3, Jaeger and OT.
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

// CheckEnv reports what FromEnv would refuse in env, a function's environment, by the same
// start, less the TLS files (the function's) and the stored headers (a synth reads no secret).
// infra runs it at synth, so that functions that would refuse to start are never deployed. It
// sets OpenTelemetry's global logger and error handler, as FromEnv does, and leaves the process's
// environment as it was.
func CheckEnv(env map[string]string) error {
	checkMu.Lock()
	defer checkMu.Unlock()
	saved := unsetOTEL()
	defer func() { // the process's own OTEL_ variables back, and nothing else touched
		unsetOTEL()
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

// unsetOTEL unsets the process's OTEL_ variables, and returns them.
func unsetOTEL() map[string]string {
	unset := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			unset[k] = v
			os.Unsetenv(k)
		}
	}
	return unset
}

// sdkLog is OpenTelemetry's global logger and error handler: while the SDK starts, its errors
// are collected (by what failed, never the value) and refuse the start; afterwards, a failed
// export is logged as exportFailure describes it.
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

// sdkSetting names the variable an error the SDK reports at start is about.
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

// The logr sink: the SDK's errors only, by message, without the values logged with them.
func (s *sdkLog) Init(logr.RuntimeInfo)          {}
func (s *sdkLog) Enabled(int) bool               { return false }
func (s *sdkLog) Info(int, string, ...any)       {}
func (s *sdkLog) WithValues(...any) logr.LogSink { return s }
func (s *sdkLog) WithName(string) logr.LogSink   { return s }
func (s *sdkLog) Error(_ error, msg string, kv ...any) {
	what := msg
	if v, ok := exporterVariables[msg]; ok {
		// A general value the SDK cannot parse under a traces' one (which wins) is not used.
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

// otlpSetting is the exporter's setting (ENDPOINT, PROTOCOL) and its variable: the traces' own
// wins over the general one.
func otlpSetting(getenv func(string) string, setting string) (variable, value string) {
	for _, variable := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + setting, "OTEL_EXPORTER_OTLP_" + setting} {
		if v := strings.TrimSpace(getenv(variable)); v != "" {
			return variable, v
		}
	}
	return "", ""
}

// shownEndpoint is the traces' endpoint by scheme, host and the standard path only: an
// intake's key can be its path, query or password.
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

// The exporter's errors for an answer it does not retry, and for spans the collector refused.
var (
	failedSend     = regexp.MustCompile(`failed to send to \S+: (\d{3})`)
	partialSuccess = regexp.MustCompile(`OTLP partial success: .*\((\d+) spans? rejected\)`)
)

// exportFailure is a failed export as the log says it: by what failed, since the exporter's
// errors quote the URL and the collector's answer, which may hold an intake's key.
func exportFailure(err error, shown string) string {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return "an OTLP export to " + shown + " failed: " + outbox.Unanswered(ue.Err)
	}
	switch msg := err.Error(); {
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

// lambdaResource describes the function from Lambda's environment; OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES win. (Not contrib's detectors/aws/lambda: it has no owner and is to
// be removed (opentelemetry-go-contrib#9216), has no release beside otel v1.47.0's (v0.72.0),
// and leaves out cloud.platform and service.name.)
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

// Flush exports the invocation's spans before Lambda freezes the environment: for at most
// flushTimeout, and never past the deadline less flushReserve (a late answer is a timed-out
// invocation). A failed export and dropped spans are logged, never failing the invocation.
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

// reportDrops logs the spans dropped since the last report: after a whole flush, a sampled
// span ended and not handed to the exporter was dropped.
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
	t.logger.Warn(fmt.Sprintf("opentelemetry: %d spans dropped: the batch span processor's queue (%s spans) was full; raise OTEL_BSP_MAX_QUEUE_SIZE, or export to a collector layer on localhost", dropped, c.queue),
		"setting", "OTEL_BSP_MAX_QUEUE_SIZE", "dropped_spans", dropped)
}

// TracerProvider is the provider for receiver.Config and outbox.Config: nil when off.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t == nil || t.Provider == nil {
		return nil
	}
	return t.Provider
}

// Shutdown exports what is left and stops the provider, for a program that serves the
// functions itself and exits.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.Provider == nil {
		return nil
	}
	return t.Provider.Shutdown(ctx)
}
