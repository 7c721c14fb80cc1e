package targets

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/outbox"
)

// DefaultTimeout bounds one service call when an executor's Timeout is not set: the HTTP
// executor's, which outbox.PlanTimings assumes for a target with no bound given.
const DefaultTimeout = outbox.DefaultHTTPTimeout

func timeout(d time.Duration) time.Duration { return cmp.Or(max(d, 0), DefaultTimeout) }

// The clients' calls the executors make (*sqs.Client and the others satisfy them).
type (
	SQSAPI interface {
		SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	}
	SNSAPI interface {
		Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
	}
	EventBridgeAPI interface {
		PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
	}
	StepFunctionsAPI interface {
		StartExecution(ctx context.Context, in *sfn.StartExecutionInput, optFns ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error)
		DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, optFns ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
		DescribeStateMachine(ctx context.Context, in *sfn.DescribeStateMachineInput, optFns ...func(*sfn.Options)) (*sfn.DescribeStateMachineOutput, error)
	}
	LambdaAPI interface {
		Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
	}
)

// oneSend is the options of an at-most-once task's call: noRetries (no SDK retry, so one send,
// and a failure reported is the only attempt); none otherwise.
func oneSend[O any](t outbox.Task, noRetries func(*O)) []func(*O) {
	if t.AtMostOnce {
		return []func(*O){noRetries}
	}
	return nil
}

// send makes one service call with what classifies its failure (classify): op names it, and
// the call's WriteTrace says whether any of it was written.
func send[In, Out, O any](ctx context.Context, op string, call func(context.Context, In, ...func(*O)) (Out, error), in In, opts ...func(*O)) (Out, error) {
	traced, writes := outbox.TraceWrites(ctx)
	out, err := call(traced, in, opts...)
	return out, classify(op, err, writes)
}

// attributes are the message attributes SQS and SNS messages carry besides the body.
func attributes(t outbox.Task) map[string]string {
	return map[string]string{"idempotency_key": t.IdempotencyKey, "source": t.Source, "event_id": t.EventID,
		"event_type": t.EventType, "intent": t.Intent}
}

// fifoIDs are a message's deduplication id (the key's hash) and group (the configured one, else
// the event's own: its messages keep their order, events do not wait for each other) when its
// queue or topic is FIFO (its name ends in ".fifo"); nil otherwise.
func fifoIDs(destination, group string, t outbox.Task) (dedupID, groupID *string) {
	if !strings.HasSuffix(destination, ".fifo") {
		return nil, nil
	}
	return aws.String(hashedKey(t.IdempotencyKey)), aws.String(cmp.Or(group, hashedKey(t.Source+":"+t.EventID)))
}

// SQS sends each intent's payload as one message to a queue. A FIFO queue (its URL ends in
// ".fifo") deduplicates on the key's hash for five minutes and orders by GroupID; a standard
// queue delivers at least once, so its consumer deduplicates on the idempotency_key attribute.
type SQS struct {
	Client   SQSAPI
	QueueURL string
	// GroupID is a FIFO queue's MessageGroupId; default one group per event.
	GroupID string
	Timeout time.Duration // per call; default DefaultTimeout
}

// MaxDuration is the longest one call takes (outbox.Bounded).
func (x *SQS) MaxDuration() time.Duration { return timeout(x.Timeout) }

// Execute sends the message.
func (x *SQS) Execute(ctx context.Context, t outbox.Task) error {
	_, err := x.ExecuteReport(ctx, t)
	return err
}

// ExecuteReport sends the message and reports its id (outbox.Reporter).
func (x *SQS) ExecuteReport(ctx context.Context, t outbox.Task) (sent string, err error) {
	ctx, cancel := context.WithTimeout(ctx, x.MaxDuration())
	defer cancel()
	ctx, span := startCall(ctx, "SQS", "SendMessage", trace.SpanKindProducer, func() []attribute.KeyValue { return sqsAttrs(x.QueueURL) })
	defer func() { endCall(span, sent, err) }()
	attrs := map[string]sqstypes.MessageAttributeValue{}
	own := attributes(t) // the executor's own; messageFields adds the trace's to it
	ownN := len(own)
	for k, v := range messageFields(ctx, own, len(t.Payload), maxSQSMessageBytes) {
		attrs[k] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(x.QueueURL), MessageBody: aws.String(string(t.Payload)), MessageAttributes: attrs,
		MessageSystemAttributes: sqsSystemAttributes(ctx)}
	in.MessageDeduplicationId, in.MessageGroupId = fifoIDs(x.QueueURL, x.GroupID, t)
	opts := oneSend(t, func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	out, err := send(ctx, "SQS SendMessage "+x.QueueURL, x.Client.SendMessage, in, opts...)
	if err != nil && len(attrs) > ownN && tooLong(err) {
		// A queue's own MaximumMessageSize (1 KiB to 1 MiB) counts the trace's attributes, and
		// cannot be known without a call of its own: a message it refused for its length was
		// not taken, and is sent again without them.
		for _, k := range traceFields {
			delete(attrs, k)
		}
		out, err = send(ctx, "SQS SendMessage "+x.QueueURL, x.Client.SendMessage, in, opts...)
	}
	if err != nil {
		return "", err
	}
	return sentMessage(ctx, aws.ToString(out.MessageId)), nil
}

// tooLong says whether SQS refused a message for its length ("Message must be shorter than N
// bytes", an InvalidParameterValue): a refusal, so nothing was enqueued.
func tooLong(err error) bool {
	ae, ok := errors.AsType[smithy.APIError](err)
	return ok && strings.HasSuffix(ae.ErrorCode(), "InvalidParameterValue") && strings.Contains(ae.ErrorMessage(), "shorter than")
}

// SNS publishes each intent's payload to a topic. A FIFO topic (its ARN ends in ".fifo")
// deduplicates on the key's hash and orders by GroupID; a standard topic's subscribers
// deduplicate on the idempotency_key attribute.
type SNS struct {
	Client   SNSAPI
	TopicARN string
	GroupID  string        // a FIFO topic's MessageGroupId; default one group per event
	Timeout  time.Duration // per call; default DefaultTimeout
}

// MaxDuration is the longest one call takes (outbox.Bounded).
func (x *SNS) MaxDuration() time.Duration { return timeout(x.Timeout) }

// Execute publishes the message.
func (x *SNS) Execute(ctx context.Context, t outbox.Task) error {
	_, err := x.ExecuteReport(ctx, t)
	return err
}

// ExecuteReport publishes the message and reports its id (outbox.Reporter).
func (x *SNS) ExecuteReport(ctx context.Context, t outbox.Task) (sent string, err error) {
	ctx, cancel := context.WithTimeout(ctx, x.MaxDuration())
	defer cancel()
	ctx, span := startCall(ctx, "SNS", "Publish", trace.SpanKindProducer, func() []attribute.KeyValue { return snsAttrs(x.TopicARN) })
	defer func() { endCall(span, sent, err) }()
	attrs := snsAttributes(messageFields(ctx, attributes(t), len(t.Payload), maxMessageBytes))
	in := &sns.PublishInput{TopicArn: aws.String(x.TopicARN), Message: aws.String(string(t.Payload)), MessageAttributes: attrs}
	in.MessageDeduplicationId, in.MessageGroupId = fifoIDs(x.TopicARN, x.GroupID, t)
	opts := oneSend(t, func(o *sns.Options) { o.RetryMaxAttempts = 1 })
	opts = withXRayHeader(ctx, opts, sns.WithAPIOptions)
	out, err := send(ctx, "SNS Publish "+x.TopicARN, x.Client.Publish, in, opts...)
	if err != nil {
		return "", err
	}
	return sentMessage(ctx, aws.ToString(out.MessageId)), nil
}

// EventBridge puts each intent as one event on a bus, its detail the Envelope. An entry the
// bus refused (PutEvents' FailedEntryCount) is retried: it was not put.
type EventBridge struct {
	Client EventBridgeAPI
	Bus    string // name or ARN; "default" when empty
	// Source and DetailType name the event; default "oncehook" and the intent's name.
	Source, DetailType string
	Timeout            time.Duration // per call; default DefaultTimeout
}

// MaxDuration is the longest one call takes (outbox.Bounded).
func (x *EventBridge) MaxDuration() time.Duration { return timeout(x.Timeout) }

// Execute puts the event.
func (x *EventBridge) Execute(ctx context.Context, t outbox.Task) error {
	_, err := x.ExecuteReport(ctx, t)
	return err
}

// ExecuteReport puts the event and reports its id (outbox.Reporter).
func (x *EventBridge) ExecuteReport(ctx context.Context, t outbox.Task) (sent string, err error) {
	ctx, cancel := context.WithTimeout(ctx, x.MaxDuration())
	defer cancel()
	bus, source, detailType := cmp.Or(x.Bus, "default"), cmp.Or(x.Source, "oncehook"), cmp.Or(x.DetailType, t.Intent)
	ctx, span := startCall(ctx, "EventBridge", "PutEvents", trace.SpanKindProducer, func() []attribute.KeyValue { return sendAttrs(bus) })
	defer func() { endCall(span, sent, err) }()
	// EventBridge takes an entry of less than 256 KiB: its Source, DetailType and Detail (no
	// Time or Resources are sent).
	detail, err := envelope(ctx, t, maxMessageBytes-1-len(source)-len(detailType))
	if err != nil {
		return "", err
	}
	opts := oneSend(t, func(o *eventbridge.Options) { o.RetryMaxAttempts = 1 })
	out, err := send(ctx, "EventBridge PutEvents "+bus, x.Client.PutEvents, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		EventBusName: aws.String(bus), Source: aws.String(source), DetailType: aws.String(detailType), Detail: aws.String(string(detail)),
		TraceHeader: optional(xray(ctx)),
	}}}, opts...)
	if err != nil {
		return "", err
	}
	var entry ebtypes.PutEventsResultEntry // the one entry sent
	if len(out.Entries) > 0 {
		entry = out.Entries[0]
	}
	if out.FailedEntryCount > 0 {
		return "", fmt.Errorf("EventBridge PutEvents %s: the entry failed: %s %s", bus, aws.ToString(entry.ErrorCode), aws.ToString(entry.ErrorMessage))
	}
	return "event " + aws.ToString(entry.EventId), nil
}

// StepFunctions starts one execution per intent, named after the key's hash, with the payload
// as its input. It reads its state machine's type once (DescribeStateMachine) and acts on it:
//
//   - STANDARD: a second execution of one name is refused for 90 days, so a retry meets
//     ExecutionAlreadyExists (or, while the first runs, is answered as it was) and counts as done
//     when the existing execution has the same input, permanent when it has another. A failure
//     after the start may have been sent is still safe to retry, also at most once
//     (outbox.Deduplicated).
//   - EXPRESS: Step Functions does not manage idempotency for express workflows: every start
//     runs, whatever its name. At least once, the workflow deduplicates on its execution name
//     ($$.Execution.Name, the key's hash); at most once, a failure that may have been sent parks.
type StepFunctions struct {
	Client          StepFunctionsAPI
	StateMachineARN string
	// Timeout bounds one Execute, whatever it calls (the type's read the first time, the start,
	// and on a repeated name the existing execution's read); default DefaultTimeout.
	Timeout time.Duration

	mu      sync.Mutex
	express *bool // the machine's type, once read
}

// MaxDuration is the longest one Execute takes (outbox.Bounded): its Timeout.
func (x *StepFunctions) MaxDuration() time.Duration { return timeout(x.Timeout) }

// ExecutionName is the execution an intent starts: 32 hex digits of its key's SHA-256.
func ExecutionName(idempotencyKey string) string { return hashedKey(idempotencyKey)[:32] }

// Execute starts the execution.
func (x *StepFunctions) Execute(ctx context.Context, t outbox.Task) error {
	_, err := x.ExecuteReport(ctx, t)
	return err
}

// isExpress reads the state machine's type, once (a failed read is tried again next time).
func (x *StepFunctions) isExpress(ctx context.Context) (bool, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.express != nil {
		return *x.express, nil
	}
	d, err := x.Client.DescribeStateMachine(ctx, &sfn.DescribeStateMachineInput{StateMachineArn: aws.String(x.StateMachineARN)})
	if err != nil {
		return false, err
	}
	express := d.Type == sfntypes.StateMachineTypeExpress
	x.express = &express
	return express, nil
}

// ExecuteReport starts the execution and reports its ARN (outbox.Reporter).
func (x *StepFunctions) ExecuteReport(ctx context.Context, t outbox.Task) (sent string, err error) {
	ctx, span := startCall(ctx, "SFN", "StartExecution", trace.SpanKindClient, func() []attribute.KeyValue {
		return []attribute.KeyValue{semconv.AWSStepFunctionsStateMachineARN(x.StateMachineARN)}
	})
	defer func() { endCall(span, sent, err) }()
	if !json.Valid(t.Payload) {
		return "", outbox.Permanent(errors.New("the intent's payload is not JSON: a state machine's input must be"))
	}
	ctx, cancel := context.WithTimeout(ctx, x.MaxDuration())
	defer cancel()
	express, err := x.isExpress(ctx)
	if err != nil {
		// Nothing was started: whatever the read's failure, the execution was not sent.
		if err = classify("Step Functions DescribeStateMachine "+x.StateMachineARN, err, nil); !outbox.IsPermanent(err) {
			err = outbox.NotSent(err)
		}
		return "", err
	}
	kind := "execution "
	if express {
		kind = "express execution "
	}
	name := ExecutionName(t.IdempotencyKey)
	opts := oneSend(t, func(o *sfn.Options) { o.RetryMaxAttempts = 1 })
	out, err := send(ctx, "Step Functions StartExecution "+x.StateMachineARN, x.Client.StartExecution, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(x.StateMachineARN), Name: aws.String(name), Input: aws.String(string(t.Payload)), TraceHeader: optional(xray(ctx))}, opts...)
	if err == nil {
		return kind + aws.ToString(out.ExecutionArn), nil
	}
	if _, exists := errors.AsType[*sfntypes.ExecutionAlreadyExists](err); !exists {
		if !express && !outbox.IsPermanent(err) && !outbox.IsNotSent(err) {
			err = outbox.Deduplicated(err) // the name holds a standard workflow to one execution
		}
		return "", err
	}
	// A state machine's execution ARN is its ARN with ":stateMachine:" made ":execution:" and
	// the name appended.
	arn := strings.Replace(x.StateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + name
	d, derr := x.Client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
	if derr != nil {
		// Only a read: an at-most-once retry still meets the same name.
		return "", outbox.Deduplicated(classify("Step Functions DescribeExecution "+arn, derr, nil))
	}
	if sameJSON(aws.ToString(d.Input), string(t.Payload)) {
		return kind + arn, nil // our earlier attempt started it
	}
	return "", outbox.Permanent(fmt.Errorf("Step Functions: execution %s exists with another input", arn))
}

// Lambda invokes a function with the intent's Envelope: asynchronously ("Event": Lambda queues
// it, and retries a failed run itself) or synchronously ("RequestResponse": a function error
// is retried by the outbox).
type Lambda struct {
	Client   LambdaAPI
	Function string // name or ARN
	// Synchronous invokes RequestResponse and waits for the function; the default is Event.
	Synchronous bool
	Timeout     time.Duration // per call; default DefaultTimeout (a synchronous call waits for the function)
}

// MaxDuration is the longest one call takes (outbox.Bounded).
func (x *Lambda) MaxDuration() time.Duration { return timeout(x.Timeout) }

// Check refuses an asynchronous invocation as an at-most-once target (outbox.Checker): Lambda
// queues the event and retries a function error twice itself, and may deliver an event more
// than once, so a call it accepted is not one run.
func (x *Lambda) Check(atMostOnce bool) error {
	if atMostOnce && !x.Synchronous {
		return fmt.Errorf("lambda %s: an asynchronous invocation (event) cannot be at-most-once: Lambda retries and may deliver it twice; invoke it request-response", x.Function)
	}
	return nil
}

// Execute invokes the function.
func (x *Lambda) Execute(ctx context.Context, t outbox.Task) error {
	_, err := x.ExecuteReport(ctx, t)
	return err
}

// functionError is a function's failed answer to a request-response invocation. Its payload (the
// function's error message, which may quote what it was given) is in the claim's last_error,
// and never in a span.
type functionError struct {
	function, kind string
	payload        []byte
}

func (e *functionError) Error() string {
	return fmt.Sprintf("Lambda Invoke %s: function error %s: %.200s", e.function, e.kind, e.payload)
}

func (e *functionError) SpanDescription() string {
	return fmt.Sprintf("Lambda Invoke %s: function error %s", e.function, e.kind)
}

// ExecuteReport invokes the function and reports how Lambda answered (outbox.Reporter).
func (x *Lambda) ExecuteReport(ctx context.Context, t outbox.Task) (sent string, err error) {
	ctx, cancel := context.WithTimeout(ctx, x.MaxDuration())
	defer cancel()
	ctx, span := startCall(ctx, "Lambda", "Invoke", trace.SpanKindClient, func() []attribute.KeyValue { return lambdaAttrs(x.Function) })
	defer func() { endCall(span, sent, err) }()
	kind, room := lambdatypes.InvocationTypeEvent, maxMessageBytes
	if x.Synchronous {
		kind, room = lambdatypes.InvocationTypeRequestResponse, maxSyncInvokeBytes
	}
	payload, err := envelope(ctx, t, room)
	if err != nil {
		return "", err
	}
	if err := x.Check(t.AtMostOnce); err != nil {
		return "", outbox.Permanent(err) // never sent: outbox.New refuses this pair up front
	}
	opts := oneSend(t, func(o *lambda.Options) { o.RetryMaxAttempts = 1 })
	opts = withXRayHeader(ctx, opts, lambda.WithAPIOptions)
	out, err := send(ctx, "Lambda Invoke "+x.Function, x.Client.Invoke, &lambda.InvokeInput{FunctionName: aws.String(x.Function), InvocationType: kind, Payload: payload}, opts...)
	if err != nil {
		return "", err
	}
	if out.FunctionError != nil {
		// The function ran and failed: retried, and parked after the worker's attempts.
		return "", &functionError{function: x.Function, kind: aws.ToString(out.FunctionError), payload: out.Payload}
	}
	return fmt.Sprintf("invoked (%s, status %d)", kind, out.StatusCode), nil
}
