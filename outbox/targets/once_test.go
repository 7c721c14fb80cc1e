package targets_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/outbox/targets"
)

// actedThen500 forwards requests to the engine (the service really acts on them) and, for the
// first N whose body contains Match, throws the engine's answer away and answers 500 instead:
// the worst case for an at-most-once call, a failure after the effect. It counts the requests
// that matched, which is what the service received.
type actedThen500 struct {
	next  http.RoundTripper
	match string
	n     int

	mu   sync.Mutex
	seen int
}

func (a *actedThen500) RoundTrip(r *http.Request) (*http.Response, error) {
	if !awstest.BodyContains(r, a.match) {
		return a.next.RoundTrip(r)
	}
	a.mu.Lock()
	a.seen++
	fail := a.seen <= a.n
	a.mu.Unlock()
	resp, err := a.next.RoundTrip(r)
	if err != nil || !fail {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return &http.Response{StatusCode: 500, Status: "500 Internal Server Error", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}}, Body: io.NopCloser(strings.NewReader(`{}`)), Request: r}, nil
}

func (a *actedThen500) received() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen
}

// quickRetries keeps the SDK's own retries (three attempts) with backoffs short enough for tests.
func quickRetries() aws.Retryer {
	return retry.AddWithMaxBackoffDelay(retry.NewStandard(), 20*time.Millisecond)
}

// TestEveryAWSExecutorSendsAnAtMostOnceCallOnce: for each AWS target, the service acts on the
// call and the answer is lost as a 500. At least once, the SDK's retry sends it again (the
// service's or the consumer's dedup absorbs it); at most once, the service received it once,
// and the error is one that may have been sent (the worker parks on it), except where the
// service itself refuses a second effect for the key (a standard workflow).
func TestEveryAWSExecutorSendsAnAtMostOnceCallOnce(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	sq, sn, sf, lc := sqs.NewFromConfig(cfg), sns.NewFromConfig(cfg), sfn.NewFromConfig(cfg), lambda.NewFromConfig(cfg)
	url, _ := queue(t, sq, awstest.Name("oncehook-once-"))
	topic, err := sn.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: aws.String(awstest.Name("oncehook-once-"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sn.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: topic.TopicArn}) })
	machine := stateMachine(t, sf)
	fn := function(t, lc)

	type executor func(http.RoundTripper) outbox.Executor
	client := func(rt http.RoundTripper) *http.Client { return &http.Client{Transport: rt} }
	for _, c := range []struct {
		name  string
		build executor
		// deduplicated: the service itself refuses a second effect for the key
		deduplicated bool
	}{
		{"sqs", func(rt http.RoundTripper) outbox.Executor {
			return &targets.SQS{Client: sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.HTTPClient, o.Retryer = client(rt), quickRetries() }), QueueURL: url}
		}, false},
		{"sns", func(rt http.RoundTripper) outbox.Executor {
			return &targets.SNS{Client: sns.NewFromConfig(cfg, func(o *sns.Options) { o.HTTPClient, o.Retryer = client(rt), quickRetries() }), TopicARN: *topic.TopicArn}
		}, false},
		{"eventbridge", func(rt http.RoundTripper) outbox.Executor {
			return &targets.EventBridge{Client: eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.HTTPClient, o.Retryer = client(rt), quickRetries() })}
		}, false},
		{"lambda", func(rt http.RoundTripper) outbox.Executor {
			return &targets.Lambda{Client: lambda.NewFromConfig(cfg, func(o *lambda.Options) { o.HTTPClient, o.Retryer = client(rt), quickRetries() }),
				Function: fn, Synchronous: true, Timeout: 30 * time.Second}
		}, false},
		{"stepfunctions", func(rt http.RoundTripper) outbox.Executor {
			return &targets.StepFunctions{Client: sfn.NewFromConfig(cfg, func(o *sfn.Options) { o.HTTPClient, o.Retryer = client(rt), quickRetries() }),
				StateMachineARN: machine}
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, amo := range []bool{false, true} {
				tk := task(awstest.Name("evt_once_"), "ship")
				tk.AtMostOnce = amo
				tk.Payload = []byte(`{"order_id":"` + tk.EventID + `"}`)
				match := tk.EventID // in every service's request body (the payload or the envelope)
				rt := &actedThen500{next: awstest.BaseTransport(), match: match, n: 1}
				err := c.build(rt).Execute(context.Background(), tk)
				switch {
				case !amo && (err != nil || rt.received() != 2):
					t.Fatalf("at least once: %v after %d sends, want the SDK's retry to succeed", err, rt.received())
				case amo && rt.received() != 1:
					t.Fatalf("at most once: the service received the call %d times (%v)", rt.received(), err)
				case amo && (err == nil || outbox.IsNotSent(err) || outbox.IsPermanent(err)):
					t.Fatalf("at most once: %v, want a failure that may have been sent", err)
				case amo && outbox.IsDeduplicated(err) != c.deduplicated:
					t.Fatalf("at most once: %v: deduplicated %v, want %v", err, outbox.IsDeduplicated(err), c.deduplicated)
				}
			}
		})
	}
}

// TestAnAsynchronousLambdaCannotBeAtMostOnce: Lambda's event queue retries a failed run twice
// and may deliver an event more than once, so an invocation of type Event is refused as an
// at-most-once target where the worker is built, and a call of it never made.
func TestAnAsynchronousLambdaCannotBeAtMostOnce(t *testing.T) {
	t.Parallel()
	async := &targets.Lambda{Client: failingFn{}, Function: "f"}
	_, err := outbox.New(awstest.Client(t), outbox.Config{Table: "t", Executors: map[string]outbox.Executor{"crm": outbox.AtMostOnce(async)}})
	var ce *outbox.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `"crm"`) || !strings.Contains(err.Error(), "request-response") {
		t.Fatalf("%v: want a *ConfigError naming the target and the way out", err)
	}
	if _, err := outbox.New(awstest.Client(t), outbox.Config{Table: "t", Executors: map[string]outbox.Executor{
		"crm": async, "crm-sync": outbox.AtMostOnce(&targets.Lambda{Client: failingFn{}, Function: "f", Synchronous: true})}}); err != nil {
		t.Fatalf("at least once, or at most once request-response: %v", err)
	}
	var invoked bool
	tk := task("evt_async", "crm")
	tk.AtMostOnce = true
	err = (&targets.Lambda{Client: invokeSpy{&invoked}, Function: "f"}).Execute(context.Background(), tk)
	if !outbox.IsPermanent(err) || invoked {
		t.Fatalf("%v (invoked %v): want it parked without a call", err, invoked)
	}
}

type invokeSpy struct{ invoked *bool }

func (s invokeSpy) Invoke(context.Context, *lambda.InvokeInput, ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	*s.invoked = true
	return &lambda.InvokeOutput{StatusCode: 202}, nil
}

// TestAFIFORetryWithAnotherAttemptKeepsItsDeduplicationID: a worker crashed after sending, and
// the next attempt (another attempt number, another worker) sends again: one message.
func TestAFIFORetryWithAnotherAttemptKeepsItsDeduplicationID(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	c := sqs.NewFromConfig(cfg)
	url, _ := queue(t, c, awstest.Name("oncehook-fifo-attempts-")+".fifo")
	for attempt := 1; attempt <= 3; attempt++ {
		tk := task("evt_attempts", "ship")
		tk.Attempt = attempt
		x := &targets.SQS{Client: sqs.NewFromConfig(cfg), QueueURL: url} // each attempt its own worker
		if err := x.Execute(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
	}
	if msgs := drain(t, c, url); len(msgs) != 1 || keyOf(msgs[0]) != "shop:evt_attempts:ship" {
		t.Fatalf("%d messages, want 1 with its key", len(msgs))
	}
}

// expressSFN is a local Step Functions endpoint with an EXPRESS state machine's documented
// semantics, which the emulator does not have (MiniStack refuses a repeated execution name on
// any machine): Express workflows do not manage idempotency, so every StartExecution starts a
// new execution, whatever its name. It counts the starts by name and can answer the first
// ones with a 500 after starting them.
type expressSFN struct {
	*httptest.Server
	mu     sync.Mutex
	starts map[string]int
	fail   int // the first fail starts are answered 500 after starting
	n      int
}

func newExpressSFN(t *testing.T) *expressSFN {
	s := &expressSFN{starts: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ StateMachineArn, Name, Input string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		switch op := r.Header.Get("X-Amz-Target"); op {
		case "AWSStepFunctions.DescribeStateMachine":
			fmt.Fprintf(w, `{"stateMachineArn":%q,"name":"express","type":"EXPRESS","status":"ACTIVE","definition":"{}","roleArn":"arn:aws:iam::000000000000:role/r","creationDate":1}`, in.StateMachineArn)
		case "AWSStepFunctions.StartExecution":
			s.mu.Lock()
			s.starts[in.Name]++
			s.n++
			n, fail := s.n, s.fail
			s.mu.Unlock()
			if n <= fail {
				w.WriteHeader(500)
				io.WriteString(w, `{"__type":"com.amazonaws.swf.service.v2.model#InternalFailure"}`)
				return
			}
			arn := strings.Replace(in.StateMachineArn, ":stateMachine:", ":express:", 1) + ":" + in.Name + fmt.Sprintf(":%d", n)
			fmt.Fprintf(w, `{"executionArn":%q,"startDate":1}`, arn)
		default:
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"__type":"UnknownOperationException","message":%q}`, op)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *expressSFN) startsOf(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts[name]
}

// TestAnExpressStateMachineIsKnownAndTreatedAsOneWithoutIdempotency: the executor reads the
// machine's type. On an express machine a repeated start runs again, so at least once the
// retry after a lost answer starts a second execution (the workflow deduplicates on its
// execution name, the key's hash), and at most once the call is sent once and its failure
// parks (no name can make a retry safe).
func TestAnExpressStateMachineIsKnownAndTreatedAsOneWithoutIdempotency(t *testing.T) {
	t.Parallel()
	s := newExpressSFN(t)
	cfg := awstest.Config(t)
	arn := "arn:aws:states:us-east-1:000000000000:stateMachine:express"
	x := &targets.StepFunctions{StateMachineARN: arn, Client: sfn.NewFromConfig(cfg, func(o *sfn.Options) {
		o.BaseEndpoint, o.Retryer = aws.String(s.URL), quickRetries()
	})}
	s.fail = 1
	tk := task("evt_express", "fulfil")
	sent, err := x.ExecuteReport(context.Background(), tk)
	if name := targets.ExecutionName(tk.IdempotencyKey); err != nil || s.startsOf(name) != 2 || !strings.HasPrefix(sent, "express execution ") {
		t.Fatalf("at least once: %q, %v after %d starts: want done, reported as express, the retry a second start", sent, err, s.startsOf(name))
	}
	s.mu.Lock()
	s.n, s.fail = 0, 1
	s.mu.Unlock()
	tk = task("evt_express_once", "fulfil")
	tk.AtMostOnce = true
	_, err = x.ExecuteReport(context.Background(), tk)
	if name := targets.ExecutionName(tk.IdempotencyKey); s.startsOf(name) != 1 || err == nil || outbox.IsNotSent(err) || outbox.IsDeduplicated(err) {
		t.Fatalf("at most once: %v after %d starts: want one start and a failure that parks", err, s.startsOf(name))
	}
}

// TestAStandardStateMachinesRetryAfterALostAnswerIsTheSameExecution: at most once on a standard
// machine, the first start's answer is lost; the next attempt meets the execution by its name
// and is done: one execution.
func TestAStandardStateMachinesRetryAfterALostAnswerIsTheSameExecution(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	c := sfn.NewFromConfig(cfg)
	machine := stateMachine(t, c)
	tk := task("evt_standard_once", "fulfil")
	tk.AtMostOnce = true
	rt := &actedThen500{next: awstest.BaseTransport(), match: targets.ExecutionName(tk.IdempotencyKey), n: 1}
	x := &targets.StepFunctions{StateMachineARN: machine, Client: sfn.NewFromConfig(cfg, func(o *sfn.Options) {
		o.HTTPClient, o.Retryer = &http.Client{Transport: rt}, quickRetries()
	})}
	if err := x.Execute(context.Background(), tk); !outbox.IsDeduplicated(err) {
		t.Fatalf("%v: want a failure the execution name makes safe to retry", err)
	}
	tk.Attempt = 2
	sent, err := x.ExecuteReport(context.Background(), tk)
	if err != nil || !strings.Contains(sent, targets.ExecutionName(tk.IdempotencyKey)) {
		t.Fatalf("the retry: %q, %v", sent, err)
	}
	out, err := c.ListExecutions(context.Background(), &sfn.ListExecutionsInput{StateMachineArn: aws.String(machine)})
	if err != nil || len(out.Executions) != 1 {
		t.Fatalf("%v, %v: want one execution", out, err)
	}
}

// resetAfterReading is an AWS endpoint on a raw TCP listener that reads the first call (after
// answering a Step Functions type read), then stops listening and resets the connection: the
// service had the request, and every retry meets a refused connection.
func resetAfterReading(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if req.Header.Get("X-Amz-Target") == "AWSStepFunctions.DescribeStateMachine" {
						body := `{"stateMachineArn":"arn:aws:states:us-east-1:000000000000:stateMachine:m","name":"m","type":"STANDARD","status":"ACTIVE","definition":"{}","roleArn":"arn:aws:iam::000000000000:role/r","creationDate":1}`
						fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
						continue
					}
					ln.Close()
					_ = c.(*net.TCPConn).SetLinger(0)
					return
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestAResetAfterTheRequestWasWrittenIsNeverNotSent: for every AWS executor, the service read
// the request and the connection was reset; the SDK's retries (at least once) meet a refused
// connection. Whatever error comes back, it is not NotSent: the call may have been acted on.
func TestAResetAfterTheRequestWasWrittenIsNeverNotSent(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	for _, name := range []string{"sqs", "sns", "eventbridge", "lambda", "stepfunctions"} {
		for _, amo := range []bool{false, true} {
			url := resetAfterReading(t)
			var x outbox.Executor
			switch name {
			case "sqs":
				x = &targets.SQS{Client: sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint, o.Retryer = &url, quickRetries() }),
					QueueURL: url + "/000000000000/q"}
			case "sns":
				x = &targets.SNS{Client: sns.NewFromConfig(cfg, func(o *sns.Options) { o.BaseEndpoint, o.Retryer = &url, quickRetries() }),
					TopicARN: "arn:aws:sns:us-east-1:000000000000:t"}
			case "eventbridge":
				x = &targets.EventBridge{Client: eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint, o.Retryer = &url, quickRetries() })}
			case "lambda":
				x = &targets.Lambda{Client: lambda.NewFromConfig(cfg, func(o *lambda.Options) { o.BaseEndpoint, o.Retryer = &url, quickRetries() }),
					Function: "f", Synchronous: true}
			case "stepfunctions":
				x = &targets.StepFunctions{Client: sfn.NewFromConfig(cfg, func(o *sfn.Options) { o.BaseEndpoint, o.Retryer = &url, quickRetries() }),
					StateMachineARN: "arn:aws:states:us-east-1:000000000000:stateMachine:m"}
			}
			tk := task("evt_reset", "x")
			tk.AtMostOnce = amo
			if err := x.Execute(context.Background(), tk); err == nil || outbox.IsNotSent(err) || outbox.IsPermanent(err) {
				t.Errorf("%s, at most once %v: %v: want a failure that may have been sent", name, amo, err)
			}
		}
	}
}
