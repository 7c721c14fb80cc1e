package outbox

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/oncehook/oncehook/dedup"
)

// TracerName is the instrumentation scope of the outbox's spans, its executors' included.
const TracerName = "github.com/oncehook/oncehook/outbox"

// The outbox's spans. An intent's turn ("intent email.send") is a child of its claim's commit,
// however long after; under it the lease, the call ("call email", the executor's client span
// under it) and the finish. A sweep is SpanSweep; each claim it re-drives is SpanSweepClaim, in
// the claim's trace.
const (
	SpanIntent     = "intent"
	SpanLease      = "lease"
	SpanCall       = "call"
	SpanFinish     = "finish"
	SpanSweep      = "sweep"
	SpanSweepClaim = "sweep claim"
)

// Attributes of the outbox's spans that no OpenTelemetry convention names. Those it shares
// with the receiver's are dedup's (AttrSource, AttrEventID, AttrOutcome, and AttrLink: a
// link is "invocation" for the span that ran the intent, a stream batch's, a wake-up's or a
// sweep's, when the intent's own parent is its claim's commit).
const (
	AttrIntent     = attribute.Key("oncehook.intent")
	AttrTarget     = attribute.Key("oncehook.target")
	AttrAttempt    = attribute.Key("oncehook.attempt")
	AttrLease      = attribute.Key("oncehook.lease")  // taken, busy or stranded
	AttrStatus     = attribute.Key("oncehook.status") // what a finish recorded: done, pending or parked
	AttrAtMostOnce = attribute.Key("oncehook.at_most_once")
	AttrSent       = attribute.Key("oncehook.sent")
	AttrHeld       = attribute.Key("oncehook.held") // why a target's limit held the intent back
)

// newTracer is the worker's one tracer: the provider's, or a no-op one's (tracing off). Names
// and attributes are built only for a recording span, so tracing off costs nothing.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(TracerName, trace.WithSchemaURL(semconv.SchemaURL))
}

// The steps' span options, built once so that a step allocates nothing for them.
var (
	consumerSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	internalSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
)

// claimContext is ctx with the claim's trace context as the parent, and a link to the
// invocation that runs it. The claim is the parent so that one trace tells the delivery's story
// from the provider to the downstream, retries hours later included; the invocation (a batch of
// many claims, a sweep) is only linked. A context already in the claim's trace is kept; a claim
// committed with tracing off leaves ctx's span the parent.
func claimContext(ctx context.Context, claim *dedup.Claim) (context.Context, []trace.Link) {
	stored := claim.TraceContext()
	cur := trace.SpanContextFromContext(ctx)
	if !stored.IsValid() || cur.TraceID() == stored.TraceID() {
		return ctx, nil
	}
	var links []trace.Link
	if cur.IsValid() {
		links = []trace.Link{{SpanContext: cur, Attributes: []attribute.KeyValue{dedup.AttrLink.String("invocation")}}}
	}
	return trace.ContextWithRemoteSpanContext(ctx, stored), links
}

// startIntent starts the intent's span (SpanIntent) in its claim's trace.
func (w *Worker) startIntent(ctx context.Context, claim *dedup.Claim, name string) (context.Context, trace.Span) {
	ctx, span := w.startInClaim(ctx, claim, SpanIntent, consumerSpan)
	if span.IsRecording() {
		span.SetName(SpanIntent + " " + name)
		span.SetAttributes(AttrIntent.String(name), AttrTarget.String(claim.Intents[name].Target), semconv.MessagingOperationTypeProcess,
			semconv.MessagingMessageID(dedup.IdempotencyKey(claim.Source, claim.EventID, name)))
	}
	return ctx, span
}

// startInClaim starts a span in the claim's trace (claimContext), with its links and the
// claim's attributes when it records. A provider that starts no span (tracing off) hands the
// claim's context back as the span's: the turn then runs under ctx as it was, so that no trace
// context of the claim's is carried to the downstream.
func (w *Worker) startInClaim(ctx context.Context, claim *dedup.Claim, name string, opts []trace.SpanStartOption) (context.Context, trace.Span) {
	parent, links := claimContext(ctx, claim)
	sctx, span := w.tracer.Start(parent, name, opts...)
	if !span.IsRecording() {
		if span.SpanContext().Equal(trace.SpanContextFromContext(parent)) {
			return ctx, span
		}
		return sctx, span
	}
	for _, l := range links {
		span.AddLink(l)
	}
	span.SetAttributes(dedup.AttrSource.String(claim.Source), dedup.AttrEventID.String(claim.EventID))
	return sctx, span
}

// endIntent records the turn's outcome on the intent's span and ends it.
func endIntent(span trace.Span, outcome string, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(dedup.AttrOutcome.String(outcome))
	if held, ok := errors.AsType[*heldError](err); ok {
		// Not a failure: held back unleased, no attempt spent, as a busy intent is not one.
		span.SetAttributes(AttrHeld.String(held.Error()))
	} else if err != nil {
		span.SetStatus(codes.Error, describe(redact(err)))
	} else if outcome == OutcomeParked {
		span.SetStatus(codes.Error, "parked")
	}
	span.End()
}

// dynamoDB is the attributes of the worker's UpdateItem.
func (w *Worker) dynamoDB() []attribute.KeyValue {
	return []attribute.KeyValue{semconv.RPCSystemNameKey.String("aws-api"), semconv.RPCMethod("DynamoDB/UpdateItem"), semconv.AWSDynamoDBTableNames(w.cfg.Table)}
}

// endLease records what the lease did on its span (and the attempt on the intent's) and ends it.
func endLease(intent, span trace.Span, l *lease, err error) {
	switch {
	case l == nil:
		span.SetAttributes(AttrLease.String("busy"))
	case l.Stranded:
		span.SetAttributes(AttrLease.String("stranded"), AttrAttempt.Int(l.Attempt))
	default:
		span.SetAttributes(AttrLease.String("taken"), AttrAttempt.Int(l.Attempt))
	}
	if l != nil {
		intent.SetAttributes(AttrAttempt.Int(l.Attempt))
	}
	EndCall(span, err, "dynamodb")
}

// call is one call of the intent's target, as the call span (the executor's client span, and
// the trace context it carries downstream, are its child's).
func (w *Worker) call(ctx context.Context, x Executor, t Task) (sent string, err error) {
	ctx, span := startChild(ctx, SpanCall, trace.SpanKindInternal, func() []attribute.KeyValue {
		return []attribute.KeyValue{AttrTarget.String(t.Target), AttrAttempt.Int(t.Attempt), AttrAtMostOnce.Bool(t.AtMostOnce)}
	})
	if span != nil {
		span.SetName(SpanCall + " " + t.Target)
		defer func() {
			if sent != "" {
				span.SetAttributes(AttrSent.String(dedup.Truncate(sent)))
			}
			EndCall(span, redact(err), "")
		}()
	}
	return execute(ctx, x, t)
}

// callErrorType is a failed call's kind (a span's error.type): an HTTP answer's status code, or
// how the executor marked it.
func callErrorType(err error) string {
	var se *StatusError
	switch {
	case errors.As(err, &se):
		return strconv.Itoa(se.StatusCode)
	case IsPermanent(err):
		return "permanent"
	case IsNotSent(err):
		return "not_sent"
	case IsDeduplicated(err):
		return "deduplicated"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "_OTHER"
}

// endSweep records the run's report on the sweep's span and ends it.
func endSweep(span trace.Span, rep *SweepReport, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("oncehook.sweep.claims", rep.Claims), attribute.Int("oncehook.sweep.parked", rep.Parked),
			attribute.Int("oncehook.sweep.settled", rep.Settled), attribute.Int("oncehook.sweep.failures", rep.Failures),
			attribute.Int("oncehook.sweep.deferred", rep.Deferred), attribute.Bool("oncehook.sweep.incomplete", rep.Incomplete),
			attribute.Bool("oncehook.sweep.skipped", rep.Skipped))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// endSweepClaim records what Process did with the claim on its span and ends it.
func endSweepClaim(span trace.Span, sum Summary, err error) {
	if span.IsRecording() {
		for outcome, n := range sum {
			span.SetAttributes(attribute.Int("oncehook.outcomes."+outcome, n))
		}
		switch {
		case postponed(err):
			// Not a failure: nothing was leased, and the sweep hands the claim on.
			span.SetAttributes(attribute.Bool("oncehook.postponed", true))
		case err != nil:
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// postponed says whether each of the errors Process joined is an intent left for later, not
// run (ErrNoTime, or held back by its target's limit).
func postponed(err error) bool {
	if err == nil {
		return false
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !postponed(e) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, ErrNoTime) || errors.Is(err, errHeld)
}

// startHTTPCall starts an HTTP executor's client span, recording where the call went by scheme,
// host and port only: a webhook URL's path is often its secret (Slack's, Discord's). Not
// otelhttp's transport: it records url.full, and its injection replaces a target's own static
// trace headers.
func startHTTPCall(ctx context.Context, rawURL string) (context.Context, trace.Span) {
	return startChild(ctx, http.MethodPost, trace.SpanKindClient, func() []attribute.KeyValue {
		attrs := []attribute.KeyValue{semconv.HTTPRequestMethodPost}
		if u, err := url.Parse(rawURL); err == nil {
			port, _ := strconv.Atoi(u.Port())
			if port == 0 && u.Scheme == "https" {
				port = 443
			} else if port == 0 {
				port = 80
			}
			attrs = append(attrs, semconv.URLScheme(u.Scheme), semconv.ServerAddress(u.Hostname()), semconv.ServerPort(port))
		}
		return attrs
	})
}

// redact is err as a span or a log line may describe it, the one redaction of a call's failure:
// spans and logs leave for places the console's redaction does not guard, and a webhook URL's
// path and query are often its secret. An HTTP call's error names its URL (and a redirect's
// Location) by scheme and host only, and a non-2xx answer by its status alone: the body may
// quote the path ("Cannot POST /hooks/<token>") or echo the request. Error is err's text with
// the call's part so described (the log line's); SpanDescription is that part alone (a span's
// status). The claim's last_error keeps the whole error.
func redact(err error) error {
	if err == nil {
		return nil
	}
	var part error
	var desc string
	var se *StatusError
	var te *transportError
	var ue *url.Error
	var d described
	switch {
	case errors.As(err, &se):
		// The status by its code and the standard text for it: the reason phrase is the
		// downstream's own words ("404 Cannot POST /hooks/<token>"), as much as its body is.
		part, desc = se, "POST "+shownURL(se.URL)+": "+strconv.Itoa(se.StatusCode)
		if text := http.StatusText(se.StatusCode); text != "" {
			desc += " " + text
		}
		if se.Location != "" {
			desc += " to " + shownURL(se.Location)
		}
	case errors.As(err, &te):
		// Rebuilt from its parts rather than edited: net/http names the URL as it re-wrote it
		// (the password as ***, the scheme lower-cased, a space escaped), so the configured
		// URL and net/http's form of it can differ in every byte that is a secret.
		part, desc = te, "POST "+shownURL(te.URL)+": "+Unanswered(te.Err)
	case errors.As(err, &ue):
		part, desc = ue, ue.Op+" "+shownURL(ue.URL)+": "+Unanswered(ue.Err)
	case errors.As(err, &d):
		part, desc = d, d.SpanDescription() // an executor's own (a function's error answer)
	default:
		return err
	}
	full, own := err.Error(), part.Error()
	if i := strings.Index(full, own); own != "" && i >= 0 {
		full = full[:i] + desc + full[i+len(own):]
	} else {
		full = desc // wrapped in a way that re-wrote its text: the description alone is safe
	}
	return describedError{full, desc, err}
}

// Unanswered describes an HTTP call that got no answer it could read, by its kind: net/http's
// text is shown only when it names nothing but addresses (a network error, a certificate's
// refusal); any other may quote the answer's bytes, which may echo the request's secret path.
func Unanswered(err error) string {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	var ne *net.OpError
	var ce *tls.CertificateVerificationError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within the call's timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &ne):
		return ne.Error()
	case errors.As(err, &ce):
		return ce.Error() // the certificate's names, the host's
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection closed before a whole answer"
	}
	return "an answer that is not HTTP, or an HTTP failure (its text is not shown: it may quote the answer)"
}

// describedError is an error redacted (redact): msg for a log line, desc for a span's status.
type describedError struct {
	msg, desc string
	err       error
}

func (e describedError) Error() string           { return e.msg }
func (e describedError) SpanDescription() string { return e.desc }
func (e describedError) Unwrap() error           { return e.err }

// shownURL is a URL by its scheme and host, with "/…" for a path or query left out.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(a URL)"
	}
	shown := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Opaque != "" {
		shown += "/…"
	}
	return shown
}

// injectHeaders adds ctx's trace context to h (TraceFields), never over a header h has (a
// target's own static traceparent).
func injectHeaders(ctx context.Context, h http.Header) {
	for k, v := range TraceFields(ctx) {
		if k = textproto.CanonicalMIMEHeaderKey(k); len(h.Values(k)) == 0 && k != "Idempotency-Key" && k != "Content-Type" {
			h.Set(k, v)
		}
	}
}

// maxTraceField bounds a propagated field's value: W3C lets a tracestate past 512 characters be
// discarded.
const maxTraceField = 512

// TraceFields is the trace context of ctx as the global propagator writes it (traceparent and
// tracestate for W3C Trace Context), for an executor to carry to its downstream: each value at
// most 512 bytes of printable ASCII; nil when the propagator writes nothing (tracing off, or no
// span context in ctx).
func TraceFields(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() { // tracing off: no span, and nothing more asked
		return nil
	}
	prop := otel.GetTextMapPropagator()
	if len(prop.Fields()) == 0 {
		return nil
	}
	carrier := propagation.MapCarrier{}
	prop.Inject(ctx, carrier)
	for k, v := range carrier {
		if v == "" || len(v) > maxTraceField || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
			delete(carrier, k)
		}
	}
	if len(carrier) == 0 {
		return nil
	}
	return carrier
}

// StartCall starts an executor's span for its call (a client or a producer) under the span in
// ctx, with that span's provider, when that span is recording; otherwise it returns ctx as it
// is and a nil span, which EndCall ignores.
func StartCall(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return startChild(ctx, name, kind, func() []attribute.KeyValue { return attrs })
}

// startChild starts a span under the recording span in ctx, with that span's provider, and
// builds attrs only then; otherwise it returns ctx as it is and a nil span: a step of a turn
// with tracing off costs nothing.
func startChild(ctx context.Context, name string, kind trace.SpanKind, attrs func() []attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, nil
	}
	return newTracer(parent.TracerProvider()).Start(ctx, name,
		trace.WithSpanKind(kind), trace.WithAttributes(attrs()...))
}

// EndCall ends a span StartCall started, with attrs; in error when err is set: its status is
// err as a span describes it (see Executor), its error.type errType, or when errType is empty
// the worker's reading of err (an HTTP status code, permanent, not_sent, deduplicated, timeout
// or _OTHER).
func EndCall(s trace.Span, err error, errType string, attrs ...attribute.KeyValue) {
	if s == nil {
		return
	}
	if err != nil {
		if errType == "" {
			errType = callErrorType(err)
		}
		s.SetStatus(codes.Error, describe(err))
		attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
	}
	s.SetAttributes(attrs...)
	s.End()
}

// described is an error that a span describes otherwise than its Error (see Executor).
type described interface {
	error
	SpanDescription() string
}

// describe is err as a span's status gives it: the SpanDescription of the first described
// error in its chain, or its Error.
func describe(err error) string {
	if d, ok := errors.AsType[described](err); ok {
		return d.SpanDescription()
	}
	return err.Error()
}
