package targets_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamotypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/logging"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/internal/faultproxy"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/outbox/targets"
)

var updateMatrix = flag.Bool("update-matrix", false, "rewrite docs/outbox.md's AWS failure-point matrix from TestTheAWSFailureMatrix")

// protocol is how a service shapes its errors.
type protocol int

const (
	json10   protocol = iota // SQS, Step Functions: {"__type": ...}, application/x-amz-json-1.0
	json11                   // EventBridge
	query                    // SNS: <ErrorResponse> in XML
	restJSON                 // Lambda: X-Amzn-Errortype
)

// serviceError is an error answer in the service's own shape, as the service makes it.
func serviceError(p protocol, status int, code, message string) faultproxy.Reply {
	h := http.Header{"X-Amzn-Requestid": {"faultproxy-0000"}}
	fault := "Sender"
	if status >= 500 {
		fault = "Receiver"
	}
	switch p {
	case json10, json11:
		h.Set("Content-Type", map[protocol]string{json10: "application/x-amz-json-1.0", json11: "application/x-amz-json-1.1"}[p])
		h.Set("X-Amzn-Query-Error", code+";"+fault) // SQS's query-compatible header; the others ignore it
		b, _ := json.Marshal(map[string]string{"__type": code, "message": message})
		return faultproxy.Reply{Status: status, Header: h, Body: string(b)}
	case query:
		h.Set("Content-Type", "text/xml")
		return faultproxy.Reply{Status: status, Header: h, Body: `<ErrorResponse xmlns="https://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>` + fault +
			`</Type><Code>` + code + `</Code><Message>` + message + `</Message></Error><RequestId>faultproxy-0000</RequestId></ErrorResponse>`}
	default:
		h.Set("Content-Type", "application/json")
		h.Set("X-Amzn-Errortype", code)
		typ := "User"
		if status >= 500 {
			typ = "Service"
		}
		b, _ := json.Marshal(map[string]string{"Type": typ, "message": message})
		return faultproxy.Reply{Status: status, Header: h, Body: string(b)}
	}
}

// awsPoint is a point where an AWS call fails, played by the failure proxy.
type awsPoint struct {
	name  string
	fault faultproxy.Fault
	// reply is the error the proxy answers (Answer, ActThenAnswer), in the row's shape.
	reply func(r *awsRow) faultproxy.Reply
	// mayHaveReached: the client cannot know the service did not act. Only where it can know
	// (nothing of the request was written, or the service said it turned it away) is an
	// at-most-once intent retried.
	mayHaveReached bool
}

func internalError(r *awsRow) faultproxy.Reply {
	return serviceError(r.protocol, r.internal.status, r.internal.code, "We encountered an internal error. Please try again.")
}

func throttling(r *awsRow) faultproxy.Reply {
	return serviceError(r.protocol, r.throttle.status, r.throttle.code, "Rate exceeded")
}

var awsPoints = []awsPoint{
	{"before connect (refused)", faultproxy.Refuse, nil, false},
	{"after connect, before the request (handshake reset)", faultproxy.ResetHandshake, nil, false},
	{"after the request was written (reset)", faultproxy.ResetAfterRequest, nil, true},
	{"after a partial answer", faultproxy.CutAnswer, nil, true},
	{"a 5xx (500), not forwarded", faultproxy.Answer, internalError, true},
	{"a 5xx (500) after the service acted", faultproxy.ActThenAnswer, internalError, true},
	{"throttled (the service's own error)", faultproxy.Answer, throttling, false},
	{"a timeout (the answer held)", faultproxy.Hold, nil, true},
	{"none", faultproxy.Forward, nil, false},
}

// errorCode is one of a service's errors: its code and HTTP status.
type errorCode struct {
	code   string
	status int
}

// awsRow is one executor of the matrix.
type awsRow struct {
	name     string
	op       string // the call the proxy fails
	protocol protocol
	internal errorCode // the service's own 5xx
	throttle errorCode // the service's own throttling error
	// pass: connections before a connection-level fault applies (a Step Functions executor
	// reads its machine's type first, once; a running worker has it).
	pass int
	// deduplicates: the service itself refuses a second effect for the key (a standard
	// workflow's execution name), so at most once a failure that may have been sent is retried.
	deduplicates bool
	// notAtMostOnce: outbox.New refuses the executor as an at-most-once target.
	notAtMostOnce bool
	// build makes the executor, its client going through the proxy.
	build func(m *matrixEnv, p *faultproxy.Proxy, timeout time.Duration) outbox.Executor
	// seen is where the emulator shows the calls: a queue (by key), a state machine.
	seen string
}

// matrixEnv is what the matrix runs against: a claims table, the services' resources on the
// emulator, and the counts read back from them.
type matrixEnv struct {
	t        *testing.T
	cfg      aws.Config
	endpoint string
	db       *dynamodb.Client
	table    string
	store    *dedup.Store
	offset   time.Duration
	mu       sync.Mutex

	sq                             *sqs.Client
	sfc                            *sfn.Client
	lc                             *lambda.Client
	queueStd, queueFIFO            string
	topic                          string
	bus                            string
	machineStd, machineExpress     string
	function                       string
	subSNS, subEvents, subRecorder string // queues where SNS, EventBridge and the function's runs land

	counts map[string]map[string]int // where -> key -> times the service shows it
}

func (m *matrixEnv) now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return time.Now().Add(m.offset)
}

func (m *matrixEnv) advance(d time.Duration) {
	m.mu.Lock()
	m.offset += d
	m.mu.Unlock()
}

// via is a client option for any service: through the proxy.
func via(p *faultproxy.Proxy) (*string, *http.Client) { return aws.String(p.URL), p.Client() }

var awsRows = []*awsRow{
	{name: "SQS standard", op: "SendMessage", protocol: json10, internal: errorCode{"InternalError", 500}, throttle: errorCode{"RequestThrottled", 400}, seen: "sqs",
		build: func(m *matrixEnv, p *faultproxy.Proxy, timeout time.Duration) outbox.Executor {
			return &targets.SQS{Client: sqs.NewFromConfig(m.cfg, func(o *sqs.Options) { o.BaseEndpoint, o.HTTPClient = via(p) }), QueueURL: m.queueStd, Timeout: timeout}
		}},
	{name: "SQS FIFO", op: "SendMessage", protocol: json10, internal: errorCode{"InternalError", 500}, throttle: errorCode{"RequestThrottled", 400}, seen: "fifo",
		build: func(m *matrixEnv, p *faultproxy.Proxy, timeout time.Duration) outbox.Executor {
			return &targets.SQS{Client: sqs.NewFromConfig(m.cfg, func(o *sqs.Options) { o.BaseEndpoint, o.HTTPClient = via(p) }), QueueURL: m.queueFIFO, Timeout: timeout}
		}},
	{name: "SNS", op: "Publish", protocol: query, internal: errorCode{"InternalError", 500}, throttle: errorCode{"Throttled", 429}, seen: "sns",
		build: func(m *matrixEnv, p *faultproxy.Proxy, timeout time.Duration) outbox.Executor {
			return &targets.SNS{Client: sns.NewFromConfig(m.cfg, func(o *sns.Options) { o.BaseEndpoint, o.HTTPClient = via(p) }), TopicARN: m.topic, Timeout: timeout}
		}},
	{name: "EventBridge", op: "PutEvents", protocol: json11, internal: errorCode{"InternalException", 500}, throttle: errorCode{"ThrottlingException", 400}, seen: "eventbridge",
		build: func(m *matrixEnv, p *faultproxy.Proxy, timeout time.Duration) outbox.Executor {
			return &targets.EventBridge{Client: eventbridge.NewFromConfig(m.cfg, func(o *eventbridge.Options) { o.BaseEndpoint, o.HTTPClient = via(p) }), Bus: m.bus, Timeout: timeout}
		}},
	{name: "Step Functions standard", op: "StartExecution", protocol: json10, internal: errorCode{"InternalFailure", 500}, throttle: errorCode{"ThrottlingException", 400},
		pass: 1, deduplicates: true, seen: "sfn",
		build: func(m *matrixEnv, p *faultproxy.Proxy, timeout time.Duration) outbox.Executor {
			return &targets.StepFunctions{Client: sfn.NewFromConfig(m.cfg, func(o *sfn.Options) { o.BaseEndpoint, o.HTTPClient = via(p) }), StateMachineARN: m.machineStd, Timeout: timeout}
		}},
	{name: "Step Functions express", op: "StartExecution", protocol: json10, internal: errorCode{"InternalFailure", 500}, throttle: errorCode{"ThrottlingException", 400},
		pass: 1, seen: "express",
		build: func(m *matrixEnv, p *faultproxy.Proxy, timeout time.Duration) outbox.Executor {
			return &targets.StepFunctions{Client: sfn.NewFromConfig(m.cfg, func(o *sfn.Options) { o.BaseEndpoint, o.HTTPClient = via(p) }), StateMachineARN: m.machineExpress, Timeout: timeout}
		}},
	{name: "Lambda request-response", op: "Invoke", protocol: restJSON, internal: errorCode{"ServiceException", 500}, throttle: errorCode{"TooManyRequestsException", 429}, seen: "lambda",
		build: func(m *matrixEnv, p *faultproxy.Proxy, timeout time.Duration) outbox.Executor {
			return &targets.Lambda{Client: lambda.NewFromConfig(m.cfg, func(o *lambda.Options) { o.BaseEndpoint, o.HTTPClient = via(p) }), Function: m.function, Synchronous: true, Timeout: timeout}
		}},
	{name: "Lambda event", op: "Invoke", protocol: restJSON, internal: errorCode{"ServiceException", 500}, throttle: errorCode{"TooManyRequestsException", 429}, seen: "lambda",
		notAtMostOnce: true,
		build: func(m *matrixEnv, p *faultproxy.Proxy, timeout time.Duration) outbox.Executor {
			return &targets.Lambda{Client: lambda.NewFromConfig(m.cfg, func(o *lambda.Options) { o.BaseEndpoint, o.HTTPClient = via(p) }), Function: m.function, Timeout: timeout}
		}},
}

// newWorkerEnv creates a claims table and a store over it, on the emulator.
func newWorkerEnv(t *testing.T) *matrixEnv {
	t.Helper()
	m := &matrixEnv{t: t, cfg: awstest.Config(t), endpoint: os.Getenv("AWS_ENDPOINT_URL"), counts: map[string]map[string]int{}}
	m.cfg.Logger = logging.Nop{} // a cut answer makes the SDK warn about the connection it cannot reuse
	m.db = awstest.Client(t)
	m.table = awstest.Table(t, m.db)
	store, err := dedup.New(m.db, dedup.Config{Table: m.table, Now: m.now, Sources: map[string]dedup.Retention{"shop": {RetryHorizon: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	m.store = store
	return m
}

// newMatrixEnv creates the table and every service's resource on the emulator.
func newMatrixEnv(t *testing.T) *matrixEnv {
	t.Helper()
	ctx := context.Background()
	m := newWorkerEnv(t)
	var err error
	m.sq, m.sfc, m.lc = sqs.NewFromConfig(m.cfg), sfn.NewFromConfig(m.cfg), lambda.NewFromConfig(m.cfg)
	m.queueStd, _ = queue(t, m.sq, awstest.Name("oncehook-matrix-"))
	m.queueFIFO, _ = queue(t, m.sq, awstest.Name("oncehook-matrix-")+".fifo")

	sn := sns.NewFromConfig(m.cfg)
	topic, err := sn.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(awstest.Name("oncehook-matrix-"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sn.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: topic.TopicArn}) })
	m.topic = *topic.TopicArn
	var subARN string
	m.subSNS, subARN = queue(t, m.sq, awstest.Name("oncehook-matrix-sns-"))
	if _, err := sn.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(subARN),
		Attributes: map[string]string{"RawMessageDelivery": "true"}}); err != nil {
		t.Fatal(err)
	}

	eb := eventbridge.NewFromConfig(m.cfg)
	m.bus, m.subEvents = busToQueue(t, eb, m.sq, "oncehook-matrix-")

	m.machineStd = stateMachine(t, m.sfc)
	express, err := m.sfc.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{Name: aws.String(awstest.Name("oncehook-express-")), Type: sfntypes.StateMachineTypeExpress,
		Definition: aws.String(`{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}}`), RoleArn: aws.String("arn:aws:iam::000000000000:role/oncehook-test")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = m.sfc.DeleteStateMachine(context.Background(), &sfn.DeleteStateMachineInput{StateMachineArn: express.StateMachineArn})
	})
	m.machineExpress = *express.StateMachineArn

	m.subRecorder, _ = queue(t, m.sq, awstest.Name("oncehook-matrix-runs-"))
	m.function = deployFunction(t, m.lc, "./testdata/recorder", map[string]string{"ONCEHOOK_RECORD_QUEUE": m.subRecorder, "ONCEHOOK_RECORD_ENDPOINT": m.endpoint})
	return m
}

// worker is a worker over the matrix's table with x as target "t".
func (m *matrixEnv) worker(x outbox.Executor) (*outbox.Worker, error) {
	return outbox.New(m.db, outbox.Config{Table: m.table, Executors: map[string]outbox.Executor{"t": x},
		Lease: time.Minute, Margin: time.Second, Now: m.now, Backoff: func(int) time.Duration { return time.Second },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// commit commits event id with one intent, "ship", for target "t".
func (m *matrixEnv) commit(id string) error {
	_, err := m.store.Commit(context.Background(), dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)},
		dedup.Plan{Intents: []dedup.Intent{{Name: "ship", Target: "t", Payload: []byte(`{"order_id":"` + id + `"}`)}}})
	return err
}

// claim reads event id's claim.
func (m *matrixEnv) claim(id string) (*dedup.Claim, error) {
	out, err := m.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(m.table), ConsistentRead: aws.Bool(true),
		Key: map[string]dynamotypes.AttributeValue{"pk": &dynamotypes.AttributeValueMemberS{Value: dedup.ClaimKey("shop", id)}, "sk": &dynamotypes.AttributeValueMemberS{Value: dedup.ClaimSK}}})
	if err != nil {
		return nil, err
	}
	if out.Item == nil {
		return nil, fmt.Errorf("no claim for %s", id)
	}
	return dedup.UnmarshalClaim(out.Item)
}

// attempt runs one attempt of event id's intent through x and returns the intent as recorded.
func (m *matrixEnv) attempt(id string, x outbox.Executor) (dedup.ClaimIntent, error) {
	w, err := m.worker(x)
	if err != nil {
		return dedup.ClaimIntent{}, err
	}
	c, err := m.claim(id)
	if err != nil {
		return dedup.ClaimIntent{}, err
	}
	if _, err := w.Process(context.Background(), c); err != nil {
		return dedup.ClaimIntent{}, err
	}
	if c, err = m.claim(id); err != nil {
		return dedup.ClaimIntent{}, err
	}
	return c.Intents["ship"], nil
}

// collect reads what the services show into m.counts, adding to what earlier reads found:
// each queue's messages by key (received and deleted), each state machine's executions by name.
// The function's runs of asynchronous invocations land late: a sentinel invocation made after
// every other is waited for before the queue counts as drained.
func (m *matrixEnv) collect() {
	m.t.Helper()
	ctx := context.Background()
	bodyKey := func(msg sqstypes.Message) string { return aws.ToString(msg.Body) }
	eventKey := func(msg sqstypes.Message) string {
		var ev struct{ Detail targets.Envelope }
		_ = json.Unmarshal([]byte(aws.ToString(msg.Body)), &ev)
		return ev.Detail.IdempotencyKey
	}
	sentinel := awstest.Name("sentinel-")
	payload, _ := json.Marshal(targets.Envelope{IdempotencyKey: sentinel, Payload: json.RawMessage(`{}`)})
	if _, err := m.lc.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(m.function), InvocationType: lambdatypes.InvocationTypeEvent, Payload: payload}); err != nil {
		m.t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, q := range []struct {
		where, url string
		key        func(sqstypes.Message) string
		until      string
	}{
		{"sqs", m.queueStd, keyOf, ""}, {"fifo", m.queueFIFO, keyOf, ""}, {"sns", m.subSNS, keyOf, ""},
		{"eventbridge", m.subEvents, eventKey, ""}, {"lambda", m.subRecorder, bodyKey, sentinel},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := drainKeys(m.t, m.sq, q.url, q.key, q.until)
			mu.Lock()
			defer mu.Unlock()
			if m.counts[q.where] == nil {
				m.counts[q.where] = map[string]int{}
			}
			for k, n := range got {
				m.counts[q.where][k] += n
			}
		}()
	}
	wg.Wait()
	for where, arn := range map[string]string{"sfn": m.machineStd, "express": m.machineExpress} {
		byName := map[string]int{}
		p := sfn.NewListExecutionsPaginator(m.sfc, &sfn.ListExecutionsInput{StateMachineArn: aws.String(arn)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				m.t.Fatal(err)
			}
			for _, e := range page.Executions {
				byName[aws.ToString(e.Name)]++
			}
		}
		m.counts[where] = byName // executions persist: this read is the whole count
	}
}

// drainKeys receives and deletes every message of a queue and counts them by key; with until,
// it does not stop before the message with that key arrived.
func drainKeys(t *testing.T, c *sqs.Client, url string, key func(sqstypes.Message) string, until string) map[string]int {
	got := map[string]int{}
	quiet := 2 // empty long polls in a row
	if until != "" {
		quiet = 3 // runs of earlier asynchronous invocations may land after the sentinel's
	}
	drainQueue(t, c, url, quiet, func() bool { return until != "" && got[until] == 0 }, func(msg sqstypes.Message) { got[key(msg)]++ })
	return got
}

// drainQueue receives and deletes every message of a queue (a FIFO queue's next message of a
// group comes once the one before it is deleted), handing each to seen, until quiet long polls
// in a row come back empty and more reports nothing more to wait for.
func drainQueue(t *testing.T, c *sqs.Client, url string, quiet int, more func() bool, seen func(sqstypes.Message)) {
	for empty := 0; empty < quiet || more(); {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}, VisibilityTimeout: 300,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameMessageDeduplicationId}})
		if err != nil {
			t.Error(err)
			return
		}
		if len(out.Messages) == 0 {
			if empty++; empty > 120 {
				t.Errorf("%s: what was waited for never arrived", url)
				return
			}
			continue
		}
		var entries []sqstypes.DeleteMessageBatchRequestEntry
		for i, msg := range out.Messages {
			seen(msg)
			entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: msg.ReceiptHandle})
		}
		if _, err := c.DeleteMessageBatch(context.Background(), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries}); err != nil {
			t.Error(err)
			return
		}
	}
}

// seen is how many times the service shows the intent of event id.
func (m *matrixEnv) seen(r *awsRow, id string) int {
	key := dedup.IdempotencyKey("shop", id, "ship")
	if r.seen == "sfn" || r.seen == "express" {
		key = targets.ExecutionName(key)
	}
	return m.counts[r.seen][key]
}

// awsCell is one attempt of the matrix: an executor, a failure point, a semantics.
type awsCell struct {
	row     *awsRow
	point   awsPoint
	amo     bool
	id      string
	intent  dedup.ClaimIntent
	refused error // outbox.New refused the executor for this semantics
}

func (c *awsCell) outcome() string {
	switch {
	case c.refused != nil:
		return "refused at load"
	case c.intent.Status == dedup.IntentPending:
		return "retried"
	}
	return c.intent.Status
}

// TestTheAWSFailureMatrix: for every AWS executor, every point its call can fail at and both
// semantics, one attempt by the real worker, its SDK client going through the failure proxy to
// the emulator's real service: how many times the service shows the call (messages in the
// queue, or in the queue subscribed to the topic, routed by the bus's rule, or written by the
// function on each run; executions started), and what the intent records. The invariants:
// at most once, the service never shows the call twice, and the intent is retried only where
// the call cannot have reached the service (or the service refuses a second effect for the
// key); an intent is done only when the service has the call, and an at-least-once intent is
// never parked for a failure a retry can fix. After the table, each at-most-once intent that
// was retried gets a second attempt with nothing failing: the service then shows it once. The
// table is the one in docs/outbox.md (go test ./outbox/targets -run TestTheAWSFailureMatrix
// -update-matrix rewrites it).
func TestTheAWSFailureMatrix(t *testing.T) {
	t.Parallel()
	m := newMatrixEnv(t)
	var cells []*awsCell
	for _, r := range awsRows {
		for i, p := range awsPoints {
			for _, amo := range []bool{false, true} {
				slug := strings.NewReplacer(" ", "", "-", "").Replace(strings.ToLower(r.name))
				cells = append(cells, &awsCell{row: r, point: p, amo: amo, id: fmt.Sprintf("evt_%s_%d_%t_%s", slug, i, amo, awstest.Name(""))})
			}
		}
	}
	// The cells run at once, a few at a time: each has its own proxy, client and event.
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, c := range cells {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			m.run(c)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	m.collect()

	var rows []string
	for i := 0; i < len(cells); i += 2 {
		alo, amo := cells[i], cells[i+1]
		row := []string{alo.row.name, alo.point.name}
		for _, c := range []*awsCell{alo, amo} {
			if c.refused != nil {
				row = append(row, "—", c.outcome())
				continue
			}
			n := m.seen(c.row, c.id)
			row = append(row, fmt.Sprint(n), c.outcome())
			m.check(c, n)
		}
		rows = append(rows, "| "+strings.Join(row, " | ")+" |")
	}

	// An at-most-once intent retried gets its next attempt: still never seen twice.
	var again []*awsCell
	for _, c := range cells {
		if c.amo && c.refused == nil && c.intent.Status == dedup.IntentPending {
			again = append(again, c)
		}
	}
	m.advance(time.Minute) // past the backoff
	for _, c := range again {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			p, err := faultproxy.New(faultproxy.Config{Upstream: m.endpoint})
			if err != nil {
				t.Error(err)
				return
			}
			defer closeProxy(t, p)
			if c.intent, err = m.attempt(c.id, outbox.AtMostOnce(c.row.build(m, p, 30*time.Second))); err != nil {
				t.Errorf("%s, %s, the next attempt: %v", c.row.name, c.point.name, err)
			}
		}()
	}
	wg.Wait()
	m.collect()
	for _, c := range again {
		if n := m.seen(c.row, c.id); c.intent.Status != dedup.IntentDone || n != 1 {
			t.Errorf("%s, %s, at most once: the next attempt left it %s, the service showing it %d times; want done, once", c.row.name, c.point.name, c.intent.Status, n)
		}
	}

	table := "| executor | the call fails | at least once: seen | intent | at most once: seen | intent |\n|---|---|---|---|---|---|\n" + strings.Join(rows, "\n") + "\n"
	checkDocTable(t, "<!-- aws failure matrix: begin -->\n", "<!-- aws failure matrix: end -->", table)
}

// closeProxy closes a cell's proxy, failing the test if its port could not be kept refusing.
func closeProxy(t *testing.T, p *faultproxy.Proxy) {
	if err := p.Close(); err != nil {
		t.Error(err)
	}
}

// run plays one cell: a proxy failing the row's call at the cell's point, the executor behind
// it, one attempt by the worker; it waits for the service to have answered what the proxy
// forwarded.
func (m *matrixEnv) run(c *awsCell) {
	t := m.t
	if err := m.commit(c.id); err != nil {
		t.Error(err)
		return
	}
	var reply faultproxy.Reply
	if c.point.reply != nil {
		reply = c.point.reply(c.row)
	}
	p, err := faultproxy.New(faultproxy.Config{Upstream: m.endpoint, Fault: c.point.fault, Match: faultproxy.Calls(c.row.op), Pass: c.row.pass, Answer: reply})
	if err != nil {
		t.Error(err)
		return
	}
	defer closeProxy(t, p) // after the service answered what the proxy forwarded
	timeout := 30 * time.Second
	if c.point.fault == faultproxy.Hold {
		// The proxy holds the answer until the call gives up. The call's other requests (Step
		// Functions reads its machine's type first, unfaulted) need room on a loaded machine.
		timeout = 5 * time.Second
	}
	var x outbox.Executor = c.row.build(m, p, timeout)
	if c.amo {
		x = outbox.AtMostOnce(x)
		if c.row.notAtMostOnce {
			_, err := m.worker(x)
			var ce *outbox.ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("%s, at most once: %v, want refused at load", c.row.name, err)
			}
			c.refused = err
			return
		}
	}
	if c.intent, err = m.attempt(c.id, x); err != nil {
		t.Errorf("%s, %s: %v", c.row.name, c.point.name, err)
	}
}

// check holds one cell to the invariants; n is how many times the service shows the call.
func (m *matrixEnv) check(c *awsCell, n int) {
	t := m.t
	where := fmt.Sprintf("%s, %s, at most once %v (%s after %d attempts: %q)", c.row.name, c.point.name, c.amo, c.intent.Status, c.intent.Attempts, c.intent.LastError)
	switch status := c.intent.Status; {
	case c.amo && n > 1:
		t.Errorf("%s: the service shows the call %d times", where, n)
	case c.amo && status == dedup.IntentPending && c.point.mayHaveReached && !c.row.deduplicates:
		t.Errorf("%s: retried, though the call may have reached the service (it shows it %d times)", where, n)
	case c.amo && status == dedup.IntentParked && !c.point.mayHaveReached:
		t.Errorf("%s: parked, though the call cannot have reached the service", where)
	case status == dedup.IntentDone && n < 1:
		t.Errorf("%s: done, and the service does not have it", where)
	case !c.amo && status == dedup.IntentParked:
		t.Errorf("%s: at least once, parked for a failure a retry can fix", where)
	case c.point.fault == faultproxy.Forward && (status != dedup.IntentDone || n != 1):
		t.Errorf("%s: nothing failed, the service shows it %d times: want done, once", where, n)
	}
}

// checkDocTable checks the table between begin and end in docs/outbox.md (or, with
// -update-matrix, writes it there).
func checkDocTable(t *testing.T, begin, end, table string) {
	t.Helper()
	const doc = "../../docs/outbox.md"
	raw, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q markers", doc, begin, end)
	}
	if got := s[i+len(begin) : j]; got != table {
		if *updateMatrix {
			if err := os.WriteFile(doc, []byte(s[:i+len(begin)]+table+s[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("docs/outbox.md's AWS failure matrix is not what the executors do (-update-matrix rewrites it):\n%s", table)
	}
}

// TestEveryServicesThrottlingIsNotSent: each throttling error a service answers (its own
// codes, not only the SDK's list, and a 429 whatever its code), made by the failure proxy in the service's shape without
// forwarding the call: the call was turned away, so it is NotSent (an at-most-once intent is
// retried) and never permanent (an at-least-once intent is not parked).
func TestEveryServicesThrottlingIsNotSent(t *testing.T) {
	t.Parallel()
	m := &matrixEnv{t: t, cfg: awstest.Config(t), endpoint: os.Getenv("AWS_ENDPOINT_URL")}
	m.cfg.Logger = logging.Nop{}
	m.sfc = sfn.NewFromConfig(m.cfg)
	m.machineStd = stateMachine(t, m.sfc)
	m.machineExpress = m.machineStd
	m.queueStd, m.queueFIFO = m.endpoint+"/000000000000/q", m.endpoint+"/000000000000/q.fifo"
	m.topic, m.bus, m.function = "arn:aws:sns:us-east-1:000000000000:t", "b", "f"
	throttles := map[string][]errorCode{
		"SQS":            {{"RequestThrottled", 400}, {"KmsThrottled", 400}, {"ThrottlingException", 400}},
		"SNS":            {{"Throttled", 429}, {"KMSThrottling", 400}},
		"EventBridge":    {{"ThrottlingException", 400}},
		"Step Functions": {{"ThrottlingException", 400}, {"KmsThrottlingException", 400}, {"ExecutionLimitExceeded", 400}},
		"Lambda":         {{"TooManyRequestsException", 429}, {"EC2ThrottledException", 502}},
	}
	for s := range throttles {
		throttles[s] = append(throttles[s], errorCode{"AnyCodeAt429", 429}) // a 429 whatever its code
	}
	for _, r := range awsRows {
		service := r.name[:strings.LastIndexByte(r.name+" ", ' ')]
		for s := range throttles {
			if strings.HasPrefix(r.name, s) {
				service = s
			}
		}
		for _, code := range throttles[service] {
			for _, amo := range []bool{false, true} {
				if amo && r.notAtMostOnce {
					continue
				}
				p := faultproxy.Start(t, faultproxy.Config{Upstream: m.endpoint, Fault: faultproxy.Answer, Match: faultproxy.Calls(r.op),
					Answer: serviceError(r.protocol, code.status, code.code, "Rate exceeded")})
				tk := task(awstest.Name("evt_throttled_"), "ship")
				tk.AtMostOnce = amo
				err := r.build(m, p, 10*time.Second).Execute(context.Background(), tk)
				if err == nil || !outbox.IsNotSent(err) || outbox.IsPermanent(err) {
					t.Errorf("%s, %s (%d), at most once %v: %v: want NotSent", r.name, code.code, code.status, amo, err)
				}
			}
		}
	}
}
