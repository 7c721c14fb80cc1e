// Package tracecontext is what the outbox's executors need to carry an intent's trace context
// to a downstream: the W3C fields the global propagator writes, bounded, the X-Ray trace
// header derived from them (AWS's own carrier for SQS, SNS, EventBridge, Step Functions and
// Lambda), and the call's client span.
//
// Tracing off (launch sets no propagator, and a library user none) writes nothing: Fields
// is empty, and no carrier is added to a call.
package tracecontext

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/url"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of the executors' spans.
const Scope = "github.com/oncehook/oncehook/outbox"

// MaxValue bounds a propagated field's value: W3C lets a tracestate be discarded past 512
// characters, and a field this long is none of ours.
const MaxValue = 512

// Fields is the trace context of ctx as the global propagator writes it (traceparent and
// tracestate for W3C Trace Context), each value at most MaxValue bytes of printable ASCII;
// nil when the propagator writes nothing (tracing off, or no span context in ctx).
func Fields(ctx context.Context) map[string]string {
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
		if v == "" || len(v) > MaxValue || !printable(v) {
			delete(carrier, k)
		}
	}
	if len(carrier) == 0 {
		return nil
	}
	return carrier
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// XRay is the X-Ray trace header of ctx's span context, "" without one or when the calls carry
// no trace (no propagator: tracing off, or OTEL_PROPAGATORS=none): Root=1-<the trace id's first
// 8 hex digits>-<its other 24>;Parent=<span id>;Sampled=<0|1>. X-Ray reads an OpenTelemetry
// trace id so (its first 8 digits need not be a time). It follows the span, not the W3C
// fields: a propagator of baggage alone still gets the AWS targets X-Ray's header.
func XRay(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() { // tracing off: no allocation for it
		return ""
	}
	if len(otel.GetTextMapPropagator().Fields()) == 0 {
		return ""
	}
	tid, sampled := sc.TraceID().String(), "0"
	if sc.IsSampled() {
		sampled = "1"
	}
	return "Root=1-" + tid[:8] + "-" + tid[8:] + ";Parent=" + sc.SpanID().String() + ";Sampled=" + sampled
}

// XRayHeader is the HTTP header the X-Ray trace header travels in on an AWS API request
// (SNS and Lambda read it from Publish and Invoke).
const XRayHeader = "X-Amzn-Trace-Id"

// Start starts a call's span (a client or a producer) under the span in ctx, with that
// span's provider, when that span is recording; otherwise it returns ctx as it is and a nil
// span, which End ignores.
func Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, nil
	}
	return parent.TracerProvider().Tracer(Scope, trace.WithSchemaURL(semconv.SchemaURL)).Start(ctx, name,
		trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// Described is an error that a span describes otherwise than its Error: one that quotes what a
// downstream answered (a function's error payload, a status line), which the claim's
// last_error keeps and a span, bound for a tracing backend, does not.
type Described interface {
	error
	SpanDescription() string
}

// Describe is err as a span's status gives it: the SpanDescription of the first Described
// error in its chain, or its Error.
func Describe(err error) string {
	var d Described
	if errors.As(err, &d) {
		return d.SpanDescription()
	}
	return err.Error()
}

// End ends s with attrs, in error when err is set (error.type: the error's kind, errType).
func End(s trace.Span, err error, errType string, attrs ...attribute.KeyValue) {
	if s == nil {
		return
	}
	if err != nil {
		s.SetStatus(codes.Error, Describe(err))
		attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
	}
	s.SetAttributes(attrs...)
	s.End()
}

// AWS is the attributes of an AWS SDK call (the AWS SDK conventions: rpc.system aws-api, the
// method as Service/Operation).
func AWS(service, operation string) []attribute.KeyValue {
	return []attribute.KeyValue{semconv.RPCSystemNameKey.String("aws-api"), semconv.RPCMethod(service + "/" + operation)}
}

// Unanswered is how a span or a log may describe an HTTP call that got no answer it could
// read: desc, by its kind; and whether err's own text may be shown too, when it names nothing
// but addresses (a network error, a timeout, a cancellation, a certificate's refusal). Any
// other (net/http's refusal of a malformed answer quotes the answer's bytes, which may echo
// the request's path: a webhook's secret, an intake's key) is described by desc alone.
func Unanswered(err error) (desc string, shown bool) {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne *net.OpError
	var ce *tls.CertificateVerificationError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within the call's timeout", true
	case errors.Is(err, context.Canceled):
		return "canceled", true
	case errors.As(err, &ne):
		return ne.Error(), true
	case errors.As(err, &ce):
		return ce.Error(), true // the certificate's names, the host's
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection closed before a whole answer", false
	}
	return "an answer that is not HTTP, or an HTTP failure (its text is not shown: it may quote the answer)", false
}
