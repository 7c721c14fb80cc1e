package targets_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/internal/faults"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/outbox/targets"
)

// TestMain sets W3C Trace Context as the global propagator, as launch does with tracing on.
// A test without a span in its context carries nothing.
func TestMain(m *testing.M) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	os.Exit(m.Run())
}

// call is the worker's call span, as the executor finds it in its context, and what recorded
// the executor's own.
func call(t *testing.T) (context.Context, trace.Span, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	ctx, span := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test").Start(context.Background(), "call")
	t.Cleanup(func() { span.End() })
	return ctx, span, rec
}

// clientSpan is the one span the executor ended, checked to be the call span's child.
func clientSpan(t *testing.T, rec *tracetest.SpanRecorder, parent trace.Span, name string, kind trace.SpanKind) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != name || spans[0].SpanKind() != kind || spans[0].Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("spans %v: want one %s span (%v) under the call", spans, name, kind)
	}
	return spans[0]
}

// checkTraceparent checks a carried traceparent: W3C version 00, the client span's trace, the
// client span as its parent, sampled.
func checkTraceparent(t *testing.T, what, tp string, client sdktrace.ReadOnlySpan) {
	t.Helper()
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || sc.TraceID() != client.SpanContext().TraceID() || sc.SpanID() != client.SpanContext().SpanID() || !sc.IsSampled() {
		t.Fatalf("%s: traceparent %q, want trace %s, parent %s", what, tp, client.SpanContext().TraceID(), client.SpanContext().SpanID())
	}
}

var xrayHeader = regexp.MustCompile(`^Root=1-([0-9a-f]{8})-([0-9a-f]{24});Parent=([0-9a-f]{16});Sampled=1`)

// checkXRay checks an X-Ray trace header carries the client span's trace and id.
func checkXRay(t *testing.T, what, h string, client sdktrace.ReadOnlySpan) {
	t.Helper()
	m := xrayHeader.FindStringSubmatch(h)
	if m == nil || m[1]+m[2] != client.SpanContext().TraceID().String() || m[3] != client.SpanContext().SpanID().String() {
		t.Fatalf("%s: X-Ray header %q, want Root=1-<%s split 8/24>;Parent=%s;Sampled=1", what, h, client.SpanContext().TraceID(), client.SpanContext().SpanID())
	}
}

// TestAnSQSMessageCarriesTheTraceBothWays: a message sent with tracing on carries the trace as
// AWS's AWSTraceHeader system attribute and as W3C message attributes, read back from the
// emulator's queue, beside the executor's own attributes, unchanged, and within SQS's 10.
func TestAnSQSMessageCarriesTheTraceBothWays(t *testing.T) {
	t.Parallel()
	c := sqs.NewFromConfig(awstest.Config(t))
	url, _ := queue(t, c, awstest.Name("oncehook-trace-"))
	ctx, parent, rec := call(t)
	if err := (&targets.SQS{Client: c, QueueURL: url}).Execute(ctx, task("evt_t1", "ship")); err != nil {
		t.Fatal(err)
	}
	client := clientSpan(t, rec, parent, "SQS.SendMessage", trace.SpanKindProducer)
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 2, MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAWSTraceHeader}})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("%v %v", out, err)
	}
	m := out.Messages[0]
	checkTraceparent(t, "SQS", aws.ToString(m.MessageAttributes["traceparent"].StringValue), client)
	checkXRay(t, "SQS AWSTraceHeader", m.Attributes[string(sqstypes.MessageSystemAttributeNameAWSTraceHeader)], client)
	if keyOf(m) != "shop:evt_t1:ship" || aws.ToString(m.MessageAttributes["event_id"].StringValue) != "evt_t1" || len(m.MessageAttributes) > 10 {
		t.Fatalf("attributes %v", m.MessageAttributes)
	}
	if a := client.Attributes(); !hasAttr(a, "messaging.system", "aws_sqs") || !hasAttr(a, "messaging.message.id", aws.ToString(m.MessageId)) {
		t.Fatalf("span attributes %v", a)
	}
}

func hasAttr(attrs []attribute.KeyValue, key, value string) bool {
	for _, kv := range attrs {
		if string(kv.Key) == key && kv.Value.Emit() == value {
			return true
		}
	}
	return false
}

// TestAnSNSMessageCarriesTheTrace: published with tracing on, the message a subscribed queue
// gets (raw delivery, from the emulator) carries the W3C trace context as message attributes,
// and the Publish request carries the X-Ray trace header.
func TestAnSNSMessageCarriesTheTrace(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	sq := sqs.NewFromConfig(cfg)
	seen := &headers{}
	sn := sns.NewFromConfig(cfg, func(o *sns.Options) { o.HTTPClient = seen })
	topic, err := sn.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: aws.String(awstest.Name("oncehook-ttopic-"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sn.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: topic.TopicArn}) })
	url, arn := queue(t, sq, awstest.Name("oncehook-tsub-"))
	if _, err := sn.Subscribe(context.Background(), &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(arn),
		Attributes: map[string]string{"RawMessageDelivery": "true"}}); err != nil {
		t.Fatal(err)
	}
	ctx, parent, rec := call(t)
	if err := (&targets.SNS{Client: sn, TopicARN: *topic.TopicArn}).Execute(ctx, task("evt_t2", "notify")); err != nil {
		t.Fatal(err)
	}
	client := clientSpan(t, rec, parent, "SNS.Publish", trace.SpanKindProducer)
	msgs := drain(t, sq, url)
	if len(msgs) != 1 || keyOf(msgs[0]) != "shop:evt_t2:notify" {
		t.Fatalf("%v", msgs)
	}
	checkTraceparent(t, "SNS", aws.ToString(msgs[0].MessageAttributes["traceparent"].StringValue), client)
	checkXRay(t, "SNS Publish's X-Amzn-Trace-Id", seen.get("Publish", "X-Amzn-Trace-Id"), client)
}

// TestAnEventBridgeEventCarriesTheTrace: the event a rule routes to a queue (from the
// emulator) carries the W3C trace context in its envelope, and the entry put carries the X-Ray
// trace header as its TraceHeader.
func TestAnEventBridgeEventCarriesTheTrace(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	seen := &headers{}
	eb, sq := eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.HTTPClient = seen }), sqs.NewFromConfig(cfg)
	bus, url := busToQueue(t, eb, sq, "oncehook-tbus-")
	ctx, parent, rec := call(t)
	if err := (&targets.EventBridge{Client: eb, Bus: bus}).Execute(ctx, task("evt_t3", "order.shipped")); err != nil {
		t.Fatal(err)
	}
	client := clientSpan(t, rec, parent, "EventBridge.PutEvents", trace.SpanKindProducer)
	msgs := drain(t, sq, url)
	if len(msgs) != 1 {
		t.Fatalf("%d events routed", len(msgs))
	}
	var ev struct {
		Detail targets.Envelope `json:"detail"`
	}
	if err := json.Unmarshal([]byte(aws.ToString(msgs[0].Body)), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Detail.IdempotencyKey != "shop:evt_t3:order.shipped" {
		t.Fatalf("envelope %+v", ev.Detail)
	}
	checkTraceparent(t, "EventBridge envelope", ev.Detail.Traceparent, client)
	var put struct {
		Entries []struct{ TraceHeader string }
	}
	if err := json.Unmarshal(seen.body("PutEvents"), &put); err != nil || len(put.Entries) != 1 {
		t.Fatalf("the PutEvents request: %v", err)
	}
	checkXRay(t, "EventBridge TraceHeader", put.Entries[0].TraceHeader, client)
}

// TestAStepFunctionsExecutionCarriesTheTrace: the execution starts on the emulator with the
// X-Ray trace header as StartExecution's TraceHeader, and its input is the payload as it is.
func TestAStepFunctionsExecutionCarriesTheTrace(t *testing.T) {
	t.Parallel()
	seen := &headers{}
	c := sfn.NewFromConfig(awstest.Config(t), func(o *sfn.Options) { o.HTTPClient = seen })
	arn := stateMachine(t, c)
	ctx, parent, rec := call(t)
	if err := (&targets.StepFunctions{Client: c, StateMachineARN: arn}).Execute(ctx, task("evt_t4", "fulfil")); err != nil {
		t.Fatal(err)
	}
	client := clientSpan(t, rec, parent, "SFN.StartExecution", trace.SpanKindClient)
	var start struct{ TraceHeader, Input string }
	if err := json.Unmarshal(seen.body("StartExecution"), &start); err != nil {
		t.Fatal(err)
	}
	checkXRay(t, "Step Functions TraceHeader", start.TraceHeader, client)
	if start.Input != `{"order_id":"ord_1"}` {
		t.Fatalf("input %q: want the payload as it is", start.Input)
	}
	out, err := c.ListExecutions(context.Background(), &sfn.ListExecutionsInput{StateMachineArn: aws.String(arn)})
	if err != nil || len(out.Executions) != 1 {
		t.Fatalf("executions %v %v", out, err)
	}
}

// TestALambdaInvocationCarriesTheTrace: a real function on the emulator reads the trace in
// the envelope's traceparent (it fails with what it saw, which the executor's error quotes),
// and the Invoke request carries the X-Ray trace header, where Lambda reads it for a function
// with active tracing. (MiniStack gives the function a trace header of its own instead of
// Invoke's, so that one is checked on the request.)
func TestALambdaInvocationCarriesTheTrace(t *testing.T) {
	t.Parallel()
	seen := &headers{}
	c := lambda.NewFromConfig(awstest.Config(t), func(o *lambda.Options) { o.HTTPClient = seen })
	name := deployFunction(t, c, "./testdata/tracefn", nil)
	ctx, parent, rec := call(t)
	err := (&targets.Lambda{Client: c, Function: name, Synchronous: true, Timeout: 30 * time.Second}).Execute(ctx, task("evt_t5", "crm"))
	if err == nil {
		t.Fatal("the function did not say what it saw")
	}
	client := clientSpan(t, rec, parent, "Lambda.Invoke", trace.SpanKindClient)
	m := regexp.MustCompile(`tp=(\S*) x=`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("%v", err)
	}
	checkTraceparent(t, "Lambda envelope", m[1], client)
	checkXRay(t, "Invoke's X-Amzn-Trace-Id", seen.get("Invoke", "X-Amzn-Trace-Id"), client)
}

// TestWithoutASpanNothingIsCarried: an executor called with no span in its context (tracing
// off) sends no carrier: no trace attribute, no envelope field.
func TestWithoutASpanNothingIsCarried(t *testing.T) {
	t.Parallel()
	c := sqs.NewFromConfig(awstest.Config(t))
	url, _ := queue(t, c, awstest.Name("oncehook-notrace-"))
	if err := (&targets.SQS{Client: c, QueueURL: url}).Execute(context.Background(), task("evt_t6", "ship")); err != nil {
		t.Fatal(err)
	}
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 2, MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("%v %v", out, err)
	}
	m := out.Messages[0]
	if _, ok := m.MessageAttributes["traceparent"]; ok || m.Attributes["AWSTraceHeader"] != "" || len(m.MessageAttributes) != 5 {
		t.Fatalf("untraced message: %v %v", m.MessageAttributes, m.Attributes)
	}
	b, _ := json.Marshal(targets.Envelope{IdempotencyKey: "k", Payload: json.RawMessage(`{}`)})
	if strings.Contains(string(b), "trace") {
		t.Fatalf("an untraced envelope: %s", b)
	}
}

// headers is an HTTP client that records each AWS request's headers and body by operation,
// and sends it on.
type headers struct {
	mu   sync.Mutex
	seen map[string]*recorded
}

type recorded struct {
	h    map[string]string
	body []byte
}

func (r *headers) Do(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	op := faults.Operation(req)
	r.mu.Lock()
	if r.seen == nil {
		r.seen = map[string]*recorded{}
	}
	h := map[string]string{}
	for k := range req.Header {
		h[k] = req.Header.Get(k)
	}
	r.seen[op] = &recorded{h: h, body: body}
	r.mu.Unlock()
	return awstest.BaseTransport().RoundTrip(req)
}

// get is a header of the last request of an operation.
func (r *headers) get(op, header string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.seen[op]; rec != nil {
		return rec.h[http.CanonicalHeaderKey(header)]
	}
	return ""
}

func (r *headers) body(op string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.seen[op]; rec != nil {
		return rec.body
	}
	return nil
}

// failingFunction is a function that ran and failed, answering with its error payload as
// Lambda returns it (FunctionError "Unhandled", status 200).
type failingFunction struct{ payload string }

func (f failingFunction) Invoke(context.Context, *lambda.InvokeInput, ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	return &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: []byte(f.payload)}, nil
}

// TestAFunctionsErrorAnswerNeverReachesASpan: a span never holds a downstream's answer
// (docs/operations.md: spans leave for a tracing backend the claims table's readers and the
// console's redaction do not guard; the claim's last_error keeps the whole error). A function
// invoked request-response that fails answers with its error payload, which may quote what it
// was given (a customer's address, a token); the Invoke span's status must describe the
// failure without that answer.
func TestAFunctionsErrorAnswerNeverReachesASpan(t *testing.T) {
	t.Parallel()
	const answer = `{"errorMessage":"card 4242424242424242 declined for jane@example.com","errorType":"Error"}`
	x := &targets.Lambda{Client: failingFunction{answer}, Function: "charge", Synchronous: true}
	ctx, _, rec := call(t)
	if err := x.Execute(ctx, task("evt_fe", "charge")); err == nil {
		t.Fatal("a function error was taken as done")
	}
	for _, s := range rec.Ended() {
		for _, what := range []string{s.Status().Description} {
			if strings.Contains(what, "4242424242424242") || strings.Contains(what, "jane@example.com") {
				t.Errorf("span %q's status holds the function's answer: %q", s.Name(), what)
			}
		}
		for _, kv := range s.Attributes() {
			if v := kv.Value.Emit(); strings.Contains(v, "4242424242424242") || strings.Contains(v, "jane@example.com") {
				t.Errorf("span %q's %s holds the function's answer: %q", s.Name(), kv.Key, v)
			}
		}
	}
}

// sizedBus is an event bus that takes an entry only when its size, as EventBridge documents
// it (Calculating PutEvents event entry size: Source, DetailType and Detail, UTF-8 bytes),
// is less than 256 KB: "The total entry size must be less than 256KB".
type sizedBus struct{}

func (sizedBus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	e := in.Entries[0]
	if n := len(aws.ToString(e.Source)) + len(aws.ToString(e.DetailType)) + len(aws.ToString(e.Detail)); n >= 256<<10 {
		return nil, &smithy.GenericAPIError{Code: "ValidationException", Fault: smithy.FaultClient, Message: "Total size of the entries in the request is over the limit."}
	}
	return &eventbridge.PutEventsOutput{Entries: []ebtypes.PutEventsResultEntry{{EventId: aws.String("ev")}}}, nil
}

// TestAnEventTheBusTakesWithTracingOffItTakesWithTracingOn: an event whose entry is under
// EventBridge's limit without the trace is put; with tracing on, the envelope's trace fields
// are given up before they take the entry to the limit, so the same event is put too. The
// envelope takes the trace up to and including 256 KiB, where EventBridge wants less.
func TestAnEventTheBusTakesWithTracingOffItTakesWithTracingOn(t *testing.T) {
	t.Parallel()
	x := &targets.EventBridge{Client: sizedBus{}, Source: "shop", DetailType: "order.paid"}
	tk := task("evt_eb", "notify")
	tail := ""
	envSize := func(pad int, traced bool) int {
		e := targets.Envelope{IdempotencyKey: tk.IdempotencyKey, Source: tk.Source, EventID: tk.EventID, EventType: tk.EventType, Intent: tk.Intent,
			Payload: json.RawMessage(`{"pad":"` + strings.Repeat("é", pad) + tail + `"}`)}
		if traced {
			e.Traceparent = "00-" + strings.Repeat("0", 32) + "-" + strings.Repeat("0", 16) + "-01"
		}
		b, _ := json.Marshal(e)
		return len("shop") + len("order.paid") + len(b)
	}
	// The padding whose traced entry is 256 KiB exactly (each "é" is 2 bytes, and a final "x"
	// makes up an odd remainder): the executor sends it traced.
	pad := (256<<10 - envSize(0, true)) / 2
	tail = strings.Repeat("x", (256<<10-envSize(0, true))%2)
	if envSize(pad, true) != 256<<10 {
		t.Fatalf("the traced entry is %d bytes: the test's padding is wrong", envSize(pad, true))
	}
	if envSize(pad, false) >= 256<<10 {
		t.Fatalf("the untraced entry is %d bytes: the test's padding is wrong", envSize(pad, false))
	}
	tk.Payload = []byte(`{"pad":"` + strings.Repeat("é", pad) + tail + `"}`)
	if err := x.Execute(context.Background(), tk); err != nil {
		t.Fatalf("tracing off (an entry of %d bytes): %v", envSize(pad, false), err)
	}
	ctx, _, _ := call(t)
	if err := x.Execute(ctx, tk); err != nil {
		t.Errorf("tracing on, the same event is refused (permanent: %v; %d bytes with the trace): %v", outbox.IsPermanent(err), envSize(pad, true), err)
	}
}

// sizedQueue is an SQS queue whose MaximumMessageSize is max, counted as SQS documents it: the
// body's bytes and, for each message attribute, its name, its data type and its value. (The
// emulator counts the body alone, so it cannot show this.) It answers a longer message as SQS
// does, InvalidParameterValue, a client fault.
type sizedQueue struct {
	max  int
	sent int
}

func (q *sizedQueue) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	n := len(aws.ToString(in.MessageBody))
	for k, v := range in.MessageAttributes {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	if n > q.max {
		return nil, &smithy.GenericAPIError{Code: "InvalidParameterValue", Fault: smithy.FaultClient,
			Message: fmt.Sprintf("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", q.max)}
	}
	q.sent++
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprint("m", q.sent))}, nil
}

// TestAMessageAQueueTakesWithTracingOffItTakesWithTracingOn: a queue's MaximumMessageSize is
// its own (1,024 bytes to 1 MiB, set on the queue; the body and each attribute's name, type
// and value count against it). A message that fits the queue with the executor's own
// attributes is sent with tracing off; with tracing on the same intent must still be sent,
// never refused as too long (and parked, as a permanent failure) because the trace's
// attributes were added to it. The executor gives the trace up only against SQS's 256 KiB,
// whatever the queue's own limit is.
func TestAMessageAQueueTakesWithTracingOffItTakesWithTracingOn(t *testing.T) {
	t.Parallel()
	for _, queueMax := range []int{1024, 4096, 65536, 200000} {
		q := &sizedQueue{max: queueMax}
		x := &targets.SQS{Client: q, QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/orders"}
		size := func(tk outbox.Task) int { // the executor's five attributes, as SQS counts them
			n := 0
			for k, v := range map[string]string{"idempotency_key": tk.IdempotencyKey, "source": tk.Source, "event_id": tk.EventID,
				"event_type": tk.EventType, "intent": tk.Intent} {
				n += len(k) + len("String") + len(v)
			}
			return n
		}
		plain := task("evt_q1", "notify")
		body := `{"pad":"` + strings.Repeat("é", (queueMax-size(plain)-len(`{"pad":""}`))/2) + `"}` // 2 bytes a character
		plain.Payload = []byte(body)
		if err := x.Execute(context.Background(), plain); err != nil {
			t.Fatalf("queue of %d bytes, tracing off: %v (the payload fits with the executor's attributes)", queueMax, err)
		}
		traced := task("evt_q2", "notify") // the same lengths: the same message but for its id
		traced.Payload = []byte(body)
		ctx, _, _ := call(t)
		if err := x.Execute(ctx, traced); err != nil {
			t.Errorf("queue of %d bytes, tracing on: the same message is refused (permanent: %v): %v", queueMax, outbox.IsPermanent(err), err)
		}
	}
}

// snsMaxPublish is SNS's limit on a Publish: the message and its attributes (names, data
// types and values), 256 KiB.
const snsMaxPublish = 262144

// TestAMessageSNSTakesWithTracingOffItTakesWithTracingOn: the trace's message attributes count
// against SNS's 256 KiB as the executor's own do. A payload that fits with the executor's
// attributes is published with tracing off; with tracing on the same intent must still be
// published, never refused as too long (and parked, as a permanent failure) because the
// traceparent was added to it.
func TestAMessageSNSTakesWithTracingOffItTakesWithTracingOn(t *testing.T) {
	t.Parallel()
	sn := sns.NewFromConfig(awstest.Config(t))
	topic, err := sn.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: aws.String(awstest.Name("oncehook-tsize-"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sn.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: topic.TopicArn}) })
	x := &targets.SNS{Client: sn, TopicARN: *topic.TopicArn}

	tk := task("evt_sz1", "notify")
	own := 0 // the executor's five attributes, as SNS counts them
	for k, v := range map[string]string{"idempotency_key": tk.IdempotencyKey, "source": tk.Source, "event_id": tk.EventID,
		"event_type": tk.EventType, "intent": tk.Intent} {
		own += len(k) + len("String") + len(v)
	}
	body := `{"pad":"` + strings.Repeat("x", snsMaxPublish-own-len(`{"pad":""}`)) + `"}`
	tk.Payload = []byte(body)
	if err := x.Execute(context.Background(), tk); err != nil {
		t.Fatalf("tracing off: %v (the payload fits SNS's limit with the executor's attributes)", err)
	}

	traced := task("evt_sz2", "notify") // the same lengths: the same message but for its id
	traced.Payload = []byte(body)
	ctx, _, _ := call(t)
	if err := x.Execute(ctx, traced); err != nil {
		t.Fatalf("tracing on, the same message is refused: %v", err)
	}
}
