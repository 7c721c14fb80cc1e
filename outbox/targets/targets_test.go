package targets_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/outbox/targets"
)

func task(event, intent string) outbox.Task {
	return outbox.Task{Source: "shop", EventID: event, EventType: "order.paid", Intent: intent, Target: "t",
		Payload: []byte(`{"order_id":"ord_1"}`), IdempotencyKey: "shop:" + event + ":" + intent, Attempt: 1}
}

// queue creates an SQS queue (FIFO when the name ends in .fifo) and returns its URL and ARN.
func queue(t *testing.T, c *sqs.Client, name string) (url, arn string) {
	t.Helper()
	attrs := map[string]string{}
	if strings.HasSuffix(name, ".fifo") {
		attrs["FifoQueue"] = "true"
	}
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	a, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	return *out.QueueUrl, a.Attributes["QueueArn"]
}

// drain reads every message of a queue (waiting up to a few seconds for a late one).
func drain(t *testing.T, c *sqs.Client, url string) []sqstypes.Message {
	t.Helper()
	var all []sqstypes.Message
	for empty := 0; empty < 2; {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		all = append(all, out.Messages...)
	}
	return all
}

func keyOf(m sqstypes.Message) string {
	if v, ok := m.MessageAttributes["idempotency_key"]; ok {
		return aws.ToString(v.StringValue)
	}
	return ""
}

// TestAFIFOQueueGetsEachIntentOnce: the same intent sent three times (duplicated stream
// records, a replay, a retry after a lost answer) is one message; another intent is another.
func TestAFIFOQueueGetsEachIntentOnce(t *testing.T) {
	t.Parallel()
	c := sqs.NewFromConfig(awstest.Config(t))
	url, _ := queue(t, c, awstest.Name("oncehook-fifo-")+".fifo")
	x := &targets.SQS{Client: c, QueueURL: url}
	for range 3 {
		if err := x.Execute(context.Background(), task("evt_1", "ship")); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Execute(context.Background(), task("evt_1", "email")); err != nil {
		t.Fatal(err)
	}
	msgs := drain(t, c, url)
	if len(msgs) != 2 || keyOf(msgs[0]) != "shop:evt_1:ship" || keyOf(msgs[1]) != "shop:evt_1:email" || aws.ToString(msgs[0].Body) != `{"order_id":"ord_1"}` {
		t.Fatalf("%d messages %v: want one per intent, in order, with its key", len(msgs), msgs)
	}
}

// TestAStandardQueueCarriesTheKeyForItsConsumer: a standard queue does not deduplicate; each
// copy carries the same idempotency_key attribute, which the consumer deduplicates on.
func TestAStandardQueueCarriesTheKeyForItsConsumer(t *testing.T) {
	t.Parallel()
	c := sqs.NewFromConfig(awstest.Config(t))
	url, _ := queue(t, c, awstest.Name("oncehook-std-"))
	x := &targets.SQS{Client: c, QueueURL: url}
	for range 2 {
		if err := x.Execute(context.Background(), task("evt_2", "ship")); err != nil {
			t.Fatal(err)
		}
	}
	msgs := drain(t, c, url)
	if len(msgs) != 2 || keyOf(msgs[0]) != "shop:evt_2:ship" || keyOf(msgs[1]) != keyOf(msgs[0]) {
		t.Fatalf("%v: want both copies with the key", msgs)
	}
}

// TestSQSErrorsAreClassified: throttling injected below the SDK outlasts its retries and is
// retried by the outbox (not permanent); a queue that does not exist and access denied park.
func TestSQSErrorsAreClassified(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	url, _ := queue(t, sqs.NewFromConfig(cfg), awstest.Name("oncehook-err-"))
	with := func(status int, body string) *targets.SQS {
		inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "SendMessage", N: -1, Status: status, Body: body}
		return &targets.SQS{Client: sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.HTTPClient = &http.Client{Transport: inject} }), QueueURL: url}
	}
	for _, c := range []struct {
		name      string
		x         *targets.SQS
		permanent bool
	}{
		{"throttled", with(400, `{"__type":"com.amazonaws.sqs#ThrottlingException","message":"Rate exceeded"}`), false},
		{"a server fault", with(500, `{"__type":"com.amazonaws.sqs#InternalError","message":"boom"}`), false},
		{"access denied", with(400, `{"__type":"com.amazon.coral.service#AccessDeniedException","message":"no"}`), true},
		{"no such queue", &targets.SQS{Client: sqs.NewFromConfig(cfg), QueueURL: strings.TrimSuffix(url, "/"+url[strings.LastIndexByte(url, '/')+1:]) + "/oncehook-no-such-queue"}, true},
	} {
		err := c.x.Execute(context.Background(), task("evt_3", "ship"))
		if err == nil || outbox.IsPermanent(err) != c.permanent {
			t.Errorf("%s: %v (permanent %v), want permanent %v", c.name, err, outbox.IsPermanent(err), c.permanent)
		}
	}
}

// TestSNSPublishesWithTheKey: a standard topic subscribed by a queue delivers the payload with
// the idempotency_key attribute; a topic that does not exist parks.
func TestSNSPublishesWithTheKey(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	sq, sn := sqs.NewFromConfig(cfg), sns.NewFromConfig(cfg)
	topic, err := sn.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: aws.String(awstest.Name("oncehook-topic-"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sn.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: topic.TopicArn}) })
	url, arn := queue(t, sq, awstest.Name("oncehook-sub-"))
	if _, err := sn.Subscribe(context.Background(), &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(arn),
		Attributes: map[string]string{"RawMessageDelivery": "true"}}); err != nil {
		t.Fatal(err)
	}
	x := &targets.SNS{Client: sn, TopicARN: *topic.TopicArn}
	if err := x.Execute(context.Background(), task("evt_4", "notify")); err != nil {
		t.Fatal(err)
	}
	msgs := drain(t, sq, url)
	if len(msgs) != 1 || aws.ToString(msgs[0].Body) != `{"order_id":"ord_1"}` || keyOf(msgs[0]) != "shop:evt_4:notify" {
		t.Fatalf("%v: want the payload with its key", msgs)
	}
	missing := &targets.SNS{Client: sn, TopicARN: strings.TrimSuffix(*topic.TopicArn, (*topic.TopicArn)[strings.LastIndexByte(*topic.TopicArn, ':'):]) + ":oncehook-no-such-topic"}
	if err := missing.Execute(context.Background(), task("evt_4", "notify")); !outbox.IsPermanent(err) {
		t.Fatalf("a missing topic: %v, want permanent", err)
	}
}

// TestEventBridgePutsTheEnvelope: the event a rule routes to a queue carries the envelope: the
// key, the event it came from, the payload.
func TestEventBridgePutsTheEnvelope(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	eb, sq := eventbridge.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	bus, url := busToQueue(t, eb, sq, "oncehook-bus-")
	x := &targets.EventBridge{Client: eb, Bus: bus}
	if err := x.Execute(context.Background(), task("evt_5", "order.shipped")); err != nil {
		t.Fatal(err)
	}
	msgs := drain(t, sq, url)
	if len(msgs) != 1 {
		t.Fatalf("%d events routed, want 1", len(msgs))
	}
	var ev struct {
		Source     string           `json:"source"`
		DetailType string           `json:"detail-type"`
		Detail     targets.Envelope `json:"detail"`
	}
	if err := json.Unmarshal([]byte(aws.ToString(msgs[0].Body)), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Source != "oncehook" || ev.DetailType != "order.shipped" || ev.Detail.IdempotencyKey != "shop:evt_5:order.shipped" ||
		ev.Detail.EventID != "evt_5" || compact(ev.Detail.Payload) != `{"order_id":"ord_1"}` {
		t.Fatalf("event %+v", ev)
	}
}

// busToQueue creates an event bus under prefix and a queue its rule routes oncehook's events
// to, and returns the bus's name and the queue's URL.
func busToQueue(t *testing.T, eb *eventbridge.Client, sq *sqs.Client, prefix string) (bus, url string) {
	t.Helper()
	ctx := context.Background()
	bus = awstest.Name(prefix)
	awstest.Create[*ebtypes.ResourceAlreadyExistsException](t,
		func(ctx context.Context) (any, error) {
			return eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(bus)})
		},
		func(ctx context.Context) (any, error) {
			return eb.DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String(bus)})
		})
	t.Cleanup(func() {
		_, _ = eb.DeleteEventBus(context.Background(), &eventbridge.DeleteEventBusInput{Name: aws.String(bus)})
	})
	url, arn := queue(t, sq, awstest.Name(prefix+"rule-"))
	// PutRule and PutTargets replace what is there: a retried one needs no Create.
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("all"), EventBusName: aws.String(bus),
		EventPattern: aws.String(`{"source":["oncehook"]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("all"), EventBusName: aws.String(bus),
		Targets: []ebtypes.Target{{Id: aws.String("q"), Arn: aws.String(arn)}}}); err != nil {
		t.Fatal(err)
	}
	return bus, url
}

// partialEB answers PutEvents with the entry failed, as EventBridge does for a throttled or
// internally failed entry inside a 200.
type partialEB struct{ code string }

func (p partialEB) PutEvents(context.Context, *eventbridge.PutEventsInput, ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	return &eventbridge.PutEventsOutput{FailedEntryCount: 1, Entries: []ebtypes.PutEventsResultEntry{{ErrorCode: aws.String(p.code), ErrorMessage: aws.String("try again")}}}, nil
}

// TestAFailedEventBridgeEntryIsRetriedNotDone: FailedEntryCount in a 200 is not success.
func TestAFailedEventBridgeEntryIsRetriedNotDone(t *testing.T) {
	t.Parallel()
	err := (&targets.EventBridge{Client: partialEB{"ThrottlingException"}}).Execute(context.Background(), task("evt_6", "x"))
	if err == nil || outbox.IsPermanent(err) || !strings.Contains(err.Error(), "ThrottlingException") {
		t.Fatalf("%v: want a retried error naming the entry's code", err)
	}
}

// stateMachine creates a Pass state machine.
func stateMachine(t *testing.T, c *sfn.Client) string {
	t.Helper()
	out, err := c.CreateStateMachine(context.Background(), &sfn.CreateStateMachineInput{Name: aws.String(awstest.Name("oncehook-sm-")),
		Definition: aws.String(`{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}}`),
		RoleArn:    aws.String("arn:aws:iam::000000000000:role/oncehook-test")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.DeleteStateMachine(context.Background(), &sfn.DeleteStateMachineInput{StateMachineArn: out.StateMachineArn})
	})
	return *out.StateMachineArn
}

// TestStepFunctionsStartsOneExecutionPerIntent: the second and third attempts meet the first
// execution (its name is the key's) and count as done; the same key with another input parks.
func TestStepFunctionsStartsOneExecutionPerIntent(t *testing.T) {
	t.Parallel()
	c := sfn.NewFromConfig(awstest.Config(t))
	arn := stateMachine(t, c)
	x := &targets.StepFunctions{Client: c, StateMachineARN: arn}
	for i := range 3 {
		if err := x.Execute(context.Background(), task("evt_7", "fulfil")); err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
		time.Sleep(100 * time.Millisecond) // let the Pass execution close: the next start meets ExecutionAlreadyExists
	}
	out, err := c.ListExecutions(context.Background(), &sfn.ListExecutionsInput{StateMachineArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Executions) != 1 || aws.ToString(out.Executions[0].Name) != targets.ExecutionName("shop:evt_7:fulfil") {
		t.Fatalf("executions %v: want one, named after the key", out.Executions)
	}
	other := task("evt_7", "fulfil")
	other.Payload = []byte(`{"order_id":"ord_2"}`)
	if err := x.Execute(context.Background(), other); !outbox.IsPermanent(err) {
		t.Fatalf("the same key with another input: %v, want permanent", err)
	}
}

// TestAMissingFunctionParks: Lambda's ResourceNotFound is permanent.
func TestAMissingFunctionParks(t *testing.T) {
	t.Parallel()
	x := &targets.Lambda{Client: lambda.NewFromConfig(awstest.Config(t)), Function: "oncehook-no-such-function"}
	if err := x.Execute(context.Background(), task("evt_8", "x")); !outbox.IsPermanent(err) {
		t.Fatalf("%v: want permanent", err)
	}
}

// failingFn answers Invoke as Lambda does when the function ran and threw.
type failingFn struct{}

func (failingFn) Invoke(context.Context, *lambda.InvokeInput, ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	return &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: []byte(`{"errorMessage":"boom"}`)}, nil
}

// TestAFunctionErrorIsRetried: a synchronous invocation whose function failed is not done.
func TestAFunctionErrorIsRetried(t *testing.T) {
	t.Parallel()
	err := (&targets.Lambda{Client: failingFn{}, Function: "f", Synchronous: true}).Execute(context.Background(), task("evt_9", "x"))
	if err == nil || outbox.IsPermanent(err) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("%v: want a retried error with the function's message", err)
	}
}

// TestAPayloadThatIsNotJSONParksWhereJSONIsRequired.
func TestAPayloadThatIsNotJSONParksWhereJSONIsRequired(t *testing.T) {
	t.Parallel()
	bad := task("evt_10", "x")
	bad.Payload = []byte("not json")
	for _, x := range []outbox.Executor{&targets.EventBridge{Client: partialEB{}}, &targets.Lambda{Client: failingFn{}}, &targets.StepFunctions{}} {
		if err := x.Execute(context.Background(), bad); !outbox.IsPermanent(err) {
			t.Errorf("%T: %v, want permanent", x, err)
		}
	}
}

// compact is JSON without insignificant space (the bus may re-serialize the detail).
func compact(b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return string(b)
	}
	return buf.String()
}

// function builds testdata/fn for the emulator's Lambda and creates it.
func function(t *testing.T, c *lambda.Client) string {
	t.Helper()
	return deployFunction(t, c, "./testdata/fn", nil)
}

// deployFunction builds the function in pkg for the emulator's Lambda and creates it with env
// as its environment.
func deployFunction(t *testing.T, c *lambda.Client, pkg string, env map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-tags", "lambda.norpc", "-o", filepath.Join(dir, "bootstrap"), pkg)
	build.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+runtime.GOARCH, "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	bin, err := os.ReadFile(filepath.Join(dir, "bootstrap"))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := zw.CreateHeader(&zip.FileHeader{Name: "bootstrap", Method: zip.Deflate, ExternalAttrs: 0o755 << 16})
	_, _ = f.Write(bin)
	_ = zw.Close()
	arch := lambdatypes.ArchitectureArm64
	if runtime.GOARCH == "amd64" {
		arch = lambdatypes.ArchitectureX8664
	}
	name := awstest.Name("oncehook-fn-")
	var environment *lambdatypes.Environment
	if env != nil {
		environment = &lambdatypes.Environment{Variables: env}
	}
	awstest.Create[*lambdatypes.ResourceConflictException](t,
		func(ctx context.Context) (any, error) {
			return c.CreateFunction(ctx, &lambda.CreateFunctionInput{FunctionName: aws.String(name), Runtime: lambdatypes.RuntimeProvidedal2023,
				Handler: aws.String("bootstrap"), Role: aws.String("arn:aws:iam::000000000000:role/oncehook-test"), Architectures: []lambdatypes.Architecture{arch},
				Code: &lambdatypes.FunctionCode{ZipFile: zipped.Bytes()}, Timeout: aws.Int32(10), Environment: environment})
		},
		func(ctx context.Context) (any, error) {
			return c.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)})
		})
	t.Cleanup(func() {
		_, _ = c.DeleteFunction(context.Background(), &lambda.DeleteFunctionInput{FunctionName: aws.String(name)})
	})
	waiter := lambda.NewFunctionActiveV2Waiter(c)
	if err := waiter.Wait(context.Background(), &lambda.GetFunctionInput{FunctionName: aws.String(name)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestALambdaTargetRunsTheFunction: a real function on the emulator, invoked both ways; its
// error in request-response is retried, not done.
func TestALambdaTargetRunsTheFunction(t *testing.T) {
	t.Parallel()
	c := lambda.NewFromConfig(awstest.Config(t))
	name := function(t, c)
	sync := &targets.Lambda{Client: c, Function: name, Synchronous: true, Timeout: 30 * time.Second}
	sent, err := sync.ExecuteReport(context.Background(), task("evt_11", "crm"))
	if err != nil || !strings.Contains(sent, "RequestResponse") {
		t.Fatalf("request-response: %q, %v", sent, err)
	}
	failing := task("evt_11", "crm")
	failing.Payload = []byte(`{"fail":true}`)
	if err := sync.Execute(context.Background(), failing); err == nil || outbox.IsPermanent(err) || !strings.Contains(err.Error(), "asked to fail") {
		t.Fatalf("a function error: %v, want retried with its message", err)
	}
	async := &targets.Lambda{Client: c, Function: name}
	if sent, err := async.ExecuteReport(context.Background(), task("evt_12", "crm")); err != nil || !strings.Contains(sent, "status 202") {
		t.Fatalf("event: %q, %v", sent, err)
	}
}

// TestAFIFOTopicDeliversEachIntentOnce: a FIFO topic and its FIFO queue subscriber deliver an
// intent published three times once: its deduplication id, the key's hash, travels with it.
func TestAFIFOTopicDeliversEachIntentOnce(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	sq, sn := sqs.NewFromConfig(cfg), sns.NewFromConfig(cfg)
	topic, err := sn.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: aws.String(awstest.Name("oncehook-topic-") + ".fifo"),
		Attributes: map[string]string{"FifoTopic": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sn.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: topic.TopicArn}) })
	url, arn := queue(t, sq, awstest.Name("oncehook-fsub-")+".fifo")
	if _, err := sn.Subscribe(context.Background(), &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(arn),
		Attributes: map[string]string{"RawMessageDelivery": "true"}}); err != nil {
		t.Fatal(err)
	}
	x := &targets.SNS{Client: sn, TopicARN: *topic.TopicArn}
	for range 3 {
		if err := x.Execute(context.Background(), task("evt_13", "notify")); err != nil {
			t.Fatal(err)
		}
	}
	if msgs := drain(t, sq, url); len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
}

// TestAnAtMostOnceCallIsSentOnce: a 500 the SDK would retry within one call (the request may
// have been acted on) comes back as it is for an at-most-once target, after one send.
func TestAnAtMostOnceCallIsSentOnce(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	url, _ := queue(t, sqs.NewFromConfig(cfg), awstest.Name("oncehook-amo-"))
	for _, amo := range []bool{false, true} {
		inject := &awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "SendMessage", N: 1, Status: 500,
			Body: `{"__type":"com.amazonaws.sqs#InternalError","message":"boom"}`}
		x := &targets.SQS{Client: sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.HTTPClient = &http.Client{Transport: inject} }), QueueURL: url}
		tk := task("evt_14", "ship")
		tk.AtMostOnce = amo
		err := x.Execute(context.Background(), tk)
		if amo && (err == nil || outbox.IsNotSent(err)) {
			t.Fatalf("at-most-once: %v, want the 500 itself, not marked NotSent", err)
		}
		if !amo && err != nil {
			t.Fatalf("at-least-once: %v, want the SDK's retry to succeed", err)
		}
		if inject.Injected() != 1 {
			t.Fatalf("%d injected", inject.Injected())
		}
	}
}
