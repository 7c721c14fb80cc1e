package dedup

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Attributes that both the receiver's spans and the outbox's record, named by no
// OpenTelemetry convention: the claim's source and event id, the outcome (the receiver's
// commit's, the outbox's turn's), and what a span's link is (the receiver's "provider" and
// "caller", the outbox's "invocation"). Each package's own are its own.
const (
	AttrSource  = attribute.Key("oncehook.source")
	AttrEventID = attribute.Key("oncehook.event_id")
	AttrOutcome = attribute.Key("oncehook.outcome")
	AttrLink    = attribute.Key("oncehook.link")
)

// attrTrace is the claim's trace context: the span that committed it, so that the outbox's
// spans, however late, belong to the same trace (outbox's tracing; docs/operations.md).
const attrTrace = "trace"

// traceVersion is the first byte of a stored trace context. It is W3C traceparent's version:
// the fields that follow are traceparent's, as bytes.
const traceVersion = 0

// traceLen is a stored trace context's length: the version, the trace id (16 bytes), the span
// id (8) and the trace flags (1).
const traceLen = 1 + 16 + 8 + 1

// TraceContextBytes is what a claim's trace context takes of the item (its attribute's name
// and value, by DynamoDB's sizing rules). Commit counts it in every claim that has intents,
// whether or not its context holds a span, so that tracing never changes what is accepted:
// a plan refused as too large is refused with tracing on and off, and a claim accepted near
// 400 KB keeps its IntentBookkeepingBytes with the trace context in it.
const TraceContextBytes = len(attrTrace) + traceLen

// traceValue is the stored form of the span context in ctx (nil when there is none): the
// fields of a W3C traceparent (version 00) as 26 bytes. The tracestate is not kept: the
// receiver's spans start a trace of their own, so it holds nothing a downstream needs, and
// an unbounded vendor string has no place in a claim.
func traceValue(ctx context.Context) []byte {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	b := make([]byte, traceLen)
	b[0] = traceVersion
	tid, sid := sc.TraceID(), sc.SpanID()
	copy(b[1:17], tid[:])
	copy(b[17:25], sid[:])
	b[25] = byte(sc.TraceFlags() & trace.FlagsSampled)
	return b
}

// StoredTrace is a claim's trace attribute as stored: 26 bytes, or nil. Only a binary value is
// read; any other (written by hand, by a tool) is read as none, never as an error: a claim
// that could not be read would never run its intents, and a trace context decides nothing.
type StoredTrace []byte

// UnmarshalDynamoDBAttributeValue reads a binary attribute, and anything else as nothing.
func (t *StoredTrace) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	*t = nil
	if b, ok := av.(*types.AttributeValueMemberB); ok && len(b.Value) > 0 {
		*t = append(StoredTrace(nil), b.Value...)
	}
	return nil
}

// TraceContext is the span context the claim was committed under, as a remote parent for the
// outbox's spans (trace.ContextWithRemoteSpanContext); an invalid one when the claim holds none
// (committed without a span, or by a release that did not store it) or holds one that cannot
// be read, which is then ignored: a trace context never changes what runs.
func (c *Claim) TraceContext() trace.SpanContext {
	b := c.Trace
	if len(b) != traceLen || b[0] != traceVersion {
		return trace.SpanContext{}
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID(b[1:17]), SpanID: trace.SpanID(b[17:25]),
		TraceFlags: trace.TraceFlags(b[25]) & trace.FlagsSampled, Remote: true})
	if !sc.IsValid() {
		return trace.SpanContext{}
	}
	return sc
}
