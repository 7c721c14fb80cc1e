package targets

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/outbox"
)

// How each executor carries the intent's trace context (nothing with tracing off): AWS's own
// X-Ray trace header where the service has one, and W3C traceparent/tracestate beside it where
// the message has room:
//
//	SQS             the AWSTraceHeader system attribute; traceparent and tracestate message attributes
//	SNS             the X-Amzn-Trace-Id header of Publish; traceparent and tracestate message attributes
//	EventBridge     the entry's TraceHeader; traceparent and tracestate in the Envelope
//	Step Functions  StartExecution's TraceHeader (the input is the payload, as it is)
//	Lambda          the X-Amzn-Trace-Id header of Invoke; traceparent and tracestate in the Envelope
//
// A trace attribute never replaces one of the executor's own, nor goes past SQS's and SNS's 10.
// The trace is the first thing given up for size: it is left out of a message it would take
// past the service's limit, and an SQS message its queue refuses for its length (a queue's own
// MaximumMessageSize, as low as 1 KiB) is sent again without it (AWSTraceHeader, which counts
// against no size, stays).

// maxMessageAttributes is SQS's and SNS's limit on a message's attributes.
const maxMessageAttributes = 10

// startCall starts the call's span under a recording call span, building its name and
// attributes only then. (Not otelaws' middleware: the clients are the application's, and the
// span is one of the executor's steps, with its own end.)
func startCall(ctx context.Context, service, operation string, kind trace.SpanKind, attrs func() []attribute.KeyValue) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	aws := []attribute.KeyValue{semconv.RPCSystemNameKey.String("aws-api"), semconv.RPCMethod(service + "/" + operation)}
	return outbox.StartCall(ctx, service+"."+operation, kind, append(aws, attrs()...)...)
}

// endCall ends the call's span with what it sent, or its error's kind.
func endCall(span trace.Span, sent string, err error) {
	if span != nil && sent != "" {
		span.SetAttributes(outbox.AttrSent.String(sent))
	}
	outbox.EndCall(span, err, "")
}

// maxMessageBytes is SNS's limit on a message with its attributes, EventBridge's on an entry
// (less than it) and Lambda's on an asynchronous invocation's payload.
const maxMessageBytes = 256 << 10

// maxSQSMessageBytes is the most an SQS queue takes (its MaximumMessageSize may be lower).
const maxSQSMessageBytes = 1 << 20

// traceFields are the W3C fields a message may carry as attributes, in order of need.
var traceFields = []string{"traceparent", "tracestate", "baggage"}

// maxSyncInvokeBytes is Lambda's limit on a synchronous invocation's payload: 6 MB.
const maxSyncInvokeBytes = 6 << 20

// messageFields adds the W3C fields of ctx's trace context to a message's attributes own: those
// that fit under the attribute count, none over one of ours, and none that would take the
// message (body bytes and attributes, as SNS and SQS count them) past limit.
func messageFields(ctx context.Context, own map[string]string, body, limit int) map[string]string {
	fields := outbox.TraceFields(ctx)
	size := body
	for k, v := range own {
		size += attributeBytes(k, v)
	}
	for _, k := range traceFields {
		v, ok := fields[k]
		if _, mine := own[k]; ok && !mine && len(own) < maxMessageAttributes && size+attributeBytes(k, v) <= limit {
			own[k] = v
			size += attributeBytes(k, v)
		}
	}
	return own
}

// attributeBytes is what a String message attribute counts against a message's size.
func attributeBytes(name, value string) int { return len(name) + len("String") + len(value) }

// xrayHeader is the HTTP header SNS (Publish) and Lambda (Invoke) read X-Ray's trace header from.
const xrayHeader = "X-Amzn-Trace-Id"

// xray is the X-Ray trace header of ctx's span context; "" without one or with no propagator
// (OTEL_PROPAGATORS=none). It follows the span, not the W3C fields. (Not contrib's X-Ray
// propagator: that module is deprecated, and the header is one line of X-Ray's format.)
func xray(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || len(otel.GetTextMapPropagator().Fields()) == 0 {
		return ""
	}
	tid, sampled := sc.TraceID().String(), "0"
	if sc.IsSampled() {
		sampled = "1"
	}
	return "Root=1-" + tid[:8] + "-" + tid[8:] + ";Parent=" + sc.SpanID().String() + ";Sampled=" + sampled
}

// sqsSystemAttributes carries the X-Ray trace header as SQS's AWSTraceHeader (which counts
// against no message attribute limit); nil without one.
func sqsSystemAttributes(ctx context.Context) map[string]sqstypes.MessageSystemAttributeValue {
	h := xray(ctx)
	if h == "" {
		return nil
	}
	return map[string]sqstypes.MessageSystemAttributeValue{
		string(sqstypes.MessageSystemAttributeNameForSendsAWSTraceHeader): {DataType: aws.String("String"), StringValue: aws.String(h)},
	}
}

// withXRayHeader adds X-Ray's trace header to the request; with is the service's WithAPIOptions.
func withXRayHeader[O any](ctx context.Context, opts []func(*O), with func(...func(*middleware.Stack) error) func(*O)) []func(*O) {
	if h := xray(ctx); h != "" {
		opts = append(opts, with(smithyhttp.SetHeaderValue(xrayHeader, h)))
	}
	return opts
}

// snsAttributes converts message attributes for SNS.
func snsAttributes(m map[string]string) map[string]snstypes.MessageAttributeValue {
	attrs := make(map[string]snstypes.MessageAttributeValue, len(m))
	for k, v := range m {
		attrs[k] = snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	return attrs
}

// lastPart is what follows the last sep in s (a queue's name in its URL, a topic's in its ARN).
func lastPart(s string, sep byte) string {
	return s[strings.LastIndexByte(s, sep)+1:]
}

// The spans' attributes, per service (the messaging and FaaS conventions, and AWS's).
func sqsAttrs(queueURL string) []attribute.KeyValue {
	return sendAttrs(lastPart(queueURL, '/'), semconv.MessagingSystemAWSSQS, semconv.AWSSQSQueueURL(queueURL))
}

func snsAttrs(topicARN string) []attribute.KeyValue {
	return sendAttrs(lastPart(topicARN, ':'), semconv.MessagingSystemAWSSNS, semconv.AWSSNSTopicARN(topicARN))
}

func sendAttrs(destination string, more ...attribute.KeyValue) []attribute.KeyValue {
	return append([]attribute.KeyValue{semconv.MessagingOperationTypeSend, semconv.MessagingDestinationName(destination)}, more...)
}

func lambdaAttrs(function string) []attribute.KeyValue {
	name := function
	if p := strings.Split(function, ":"); len(p) >= 7 && p[0] == "arn" { // arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]
		name = p[6]
	}
	return []attribute.KeyValue{semconv.FaaSInvokedName(name), semconv.FaaSInvokedProviderAWS}
}

// sentMessage is what a message sent reports, with the id the service gave it, which it records
// on the call's span in ctx.
func sentMessage(ctx context.Context, id string) string {
	if s := trace.SpanFromContext(ctx); s.IsRecording() && id != "" {
		s.SetAttributes(semconv.MessagingMessageID(id))
	}
	return "message " + id
}

// optional is s, or nil when it is empty (an AWS field left out).
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
