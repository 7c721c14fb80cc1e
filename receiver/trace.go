package receiver

import (
	"context"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/dedup"
)

// TracerName is the instrumentation scope of the receiver's spans.
const TracerName = "github.com/oncehook/oncehook/receiver"

// The receiver's span names: a delivery is a server span named by OpenTelemetry's HTTP
// conventions (SpanDelivery for a POST), with a child for each step it took.
const (
	SpanDelivery = "POST " + Route
	SpanVerify   = "verify"
	SpanPlan     = "plan"
	SpanCommit   = "commit"
)

// Attributes of the receiver's spans that no OpenTelemetry convention names. Those it shares
// with the outbox's are dedup's (AttrSource, AttrEventID, AttrOutcome, and AttrLink: a
// delivery span's link is "provider" for the provider's traceparent, "caller" for a span the
// handler's context already had).
const (
	AttrEventType     = attribute.Key("oncehook.event_type")
	AttrDeliveryID    = attribute.Key("oncehook.delivery_id")
	AttrDynamoDBCalls = attribute.Key("oncehook.dynamodb.calls")
	AttrErrorKind     = attribute.Key("oncehook.error_kind")
	AttrEffects       = attribute.Key("oncehook.plan.effects")
	AttrIntents       = attribute.Key("oncehook.plan.intents")
	AttrEvents        = attribute.Key("oncehook.batch.events")
)

// Route is the receiver's route in a stack: the construct serves each source at Path(source),
// and the delivery span is named by Route.
const Route = "/hooks/{source}"

// Path is the path of source's route in a stack (Route, its name in place of {source}).
func Path(source string) string { return "/hooks/" + source }

// maxTraceparent bounds the traceparent read (a version-00 value is 55 characters): anything
// longer is ignored unread.
const maxTraceparent = 256

// startDelivery starts the delivery's server span, a root of its own trace: a provider's
// traceparent says where its trace is, not which of ours this is, so it is a link (as is a
// span the context held). Links and attributes are built only when the span records.
func (h *Handler) startDelivery(ctx context.Context, req *request) (context.Context, trace.Span) {
	caller := trace.SpanContextFromContext(ctx)
	name, method := "HTTP "+Route, semconv.HTTPRequestMethodOther
	switch m := req.method; m {
	case http.MethodPost:
		name, method = SpanDelivery, semconv.HTTPRequestMethodPost
	case http.MethodHead, http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		name, method = m+" "+Route, semconv.HTTPRequestMethodKey.String(m)
	case "":
		method = attribute.KeyValue{}
	}
	if caller.IsValid() {
		// Not only a new root: a provider that ignores WithNewRoot (the noop one) hands back the
		// caller's span (a middleware's), and the commit would store it on the claim.
		ctx = trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	}
	ctx, s := h.tracer.Start(ctx, name, deliveryStart...)
	if !s.IsRecording() {
		return ctx, s
	}
	if caller.IsValid() {
		s.AddLink(trace.Link{SpanContext: caller, Attributes: []attribute.KeyValue{dedup.AttrLink.String("caller")}})
	}
	if sc, ok := parseTraceparent(req.header.Get("Traceparent")); ok {
		s.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{dedup.AttrLink.String("provider")}})
	}
	attrs := []attribute.KeyValue{semconv.FaaSTriggerHTTP, semconv.HTTPRoute(Route), semconv.URLScheme("https")}
	if method.Valid() { // another method is the sender's text: named only by kind (HTTP conventions)
		attrs = append(attrs, method)
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		attrs = append(attrs, semconv.FaaSInvocationID(lc.AwsRequestID))
	}
	s.SetAttributes(attrs...)
	return ctx, s
}

// deliveryStart is how every delivery span starts, built once.
var deliveryStart = []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer)}

// endDelivery records on the delivery span what the delivery did, and ends it.
func endDelivery(s trace.Span, d *delivery) {
	if !s.IsRecording() {
		s.End()
		return
	}
	attrs := []attribute.KeyValue{semconv.HTTPResponseStatusCode(d.resp.status), dedup.AttrSource.String(d.source)}
	if d.event.ID != "" {
		attrs = append(attrs, dedup.AttrEventID.String(d.event.ID), AttrEventType.String(d.event.Type))
		if d.event.DeliveryID != "" {
			attrs = append(attrs, AttrDeliveryID.String(d.event.DeliveryID))
		}
	}
	if d.committed && !d.batch {
		attrs = append(attrs, dedup.AttrOutcome.String(d.one[0].result.Outcome.String()), AttrDynamoDBCalls.Int(d.one[0].result.Calls))
	}
	if d.batch {
		attrs = append(attrs, AttrEvents.Int(len(d.evs.events)), AttrDynamoDBCalls.Int(d.evs.calls))
	}
	if d.errKind != "" {
		attrs = append(attrs, AttrErrorKind.String(d.errKind))
	}
	if d.resp.status >= 500 {
		// A server span is in error for 5xx only: a 4xx is the sender's (HTTP conventions).
		attrs = append(attrs, semconv.ErrorTypeKey.String(strconv.Itoa(d.resp.status)))
		s.SetStatus(codes.Error, http.StatusText(d.resp.status))
	}
	s.SetAttributes(attrs...)
	s.End()
}

// endPanicked, deferred, ends s in error when its function panics, and panics on: a
// planner's panic still ends (and so exports) the spans of the delivery it broke, and the
// runtime sees the panic as before.
func endPanicked(s trace.Span) {
	if !s.IsRecording() {
		return // no recover: the panic goes on as it is
	}
	if r := recover(); r != nil {
		s.SetStatus(codes.Error, "panic")
		s.SetAttributes(semconv.ErrorTypeKey.String("panic"))
		s.End()
		panic(r)
	}
}

// startStep starts a step's span (verify, plan, commit) under the delivery span in ctx when
// that span records; otherwise the step is that span, recording nothing, and ending it is left
// to the delivery.
func (h *Handler) startStep(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if s := trace.SpanFromContext(ctx); !s.IsRecording() {
		return ctx, s
	}
	return h.tracer.Start(ctx, name, trace.WithSpanKind(kind))
}

// endStep ends a recording step, in error when err is set.
func endStep(s trace.Span, err error, attrs ...attribute.KeyValue) {
	if !s.IsRecording() {
		return
	}
	if err != nil {
		s.SetStatus(codes.Error, err.Error())
		attrs = append(attrs, errorType(err))
	}
	s.SetAttributes(attrs...)
	s.End()
}

// errorType is an error's kind as error.type: dedup's kinds by name, any other _OTHER.
func errorType(err error) attribute.KeyValue {
	switch err.(type) {
	case *dedup.InvalidError:
		return semconv.ErrorTypeKey.String("invalid")
	case *dedup.LimitError:
		return semconv.ErrorTypeKey.String("limit")
	case *dedup.UnavailableError:
		return semconv.ErrorTypeKey.String("unavailable")
	}
	return semconv.ErrorTypeOther
}

// planAttrs describe the plan of n events on its span: a batch's count, a single event's plan.
func (d *delivery) planAttrs(n int) []attribute.KeyValue {
	if d.batch {
		return []attribute.KeyValue{AttrEvents.Int(n)}
	}
	e := &d.one[0]
	return []attribute.KeyValue{AttrEventType.String(e.ev.Type), AttrEffects.Int(len(e.plan.Effects)), AttrIntents.Int(len(e.plan.Intents))}
}

// commitAttrs describe a commit of n events on its span: a batch's count, a single event's result.
func (d *delivery) commitAttrs(n int) []attribute.KeyValue {
	if d.batch {
		return []attribute.KeyValue{AttrEvents.Int(n), AttrDynamoDBCalls.Int(d.evs.calls)}
	}
	e := &d.one[0]
	attrs := []attribute.KeyValue{AttrDynamoDBCalls.Int(e.result.Calls), AttrEffects.Int(len(e.plan.Effects)), AttrIntents.Int(len(e.plan.Intents))}
	if res := e.result; res.Outcome != 0 {
		attrs = append(attrs, dedup.AttrOutcome.String(res.Outcome.String()))
	}
	return attrs
}

// parseTraceparent reads a W3C traceparent as OpenTelemetry's propagator does (strictly: lower-
// case hex, ids not zero, a later version read by its first fields), without its tracestate,
// and only up to maxTraceparent characters: a malformed, hostile or oversized value is no
// context, never an error.
func parseTraceparent(h string) (trace.SpanContext, bool) {
	if len(h) > maxTraceparent {
		return trace.SpanContext{}, false
	}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": h}))
	return sc, sc.IsValid()
}
