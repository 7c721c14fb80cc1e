package launch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
)

var updateCalls = flag.Bool("update-calls", false, "rewrite testdata/calls.json from the calls recorded")

// recorder is an http.RoundTripper that writes down the IAM action of every AWS request that
// goes through it, read from the request itself (X-Amz-Target), a transaction as the actions
// of its items (TransactWriteItems has no IAM action of its own).
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen map[string]bool
}

// The JSON protocols' target prefixes, and the IAM service each names.
var services = map[string]string{"DynamoDB_20120810": "dynamodb", "AmazonSQS": "sqs", "secretsmanager": "secretsmanager", "AmazonSSM": "ssm"}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	prefix, op, ok := strings.Cut(req.Header.Get("X-Amz-Target"), ".")
	service := services[prefix]
	var actions []string
	switch {
	case !ok || service == "":
		actions = []string{"unknown:" + req.Header.Get("X-Amz-Target")}
	case service == "dynamodb" && op == "TransactWriteItems":
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		var in struct{ TransactItems []map[string]json.RawMessage }
		_ = json.Unmarshal(body, &in)
		for _, item := range in.TransactItems {
			for kind := range item {
				actions = append(actions, "dynamodb:"+map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}[kind])
			}
		}
	default:
		actions = []string{service + ":" + op}
	}
	r.mu.Lock()
	for _, a := range actions {
		r.seen[a] = true
	}
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

func (r *recorder) actions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.seen))
	for a := range r.seen {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// recording returns an AWS config whose clients' requests go through a new recorder.
func recording(t *testing.T) (aws.Config, *recorder) {
	cfg := awstest.Config(t)
	r := &recorder{next: http.DefaultTransport, seen: map[string]bool{}}
	cfg.HTTPClient = &http.Client{Transport: r}
	return cfg, r
}

// TestTheAWSCallsEachFunctionMakes runs each function's code over every path it has against
// the emulator (the receiver: a new event with put, update and intents, a duplicate, an event
// with nothing to write, a body-guarded event and its replay, its secrets from Secrets Manager
// and SSM; the worker: stream records, a failed call rescheduled on the retry queue, its
// wake-up; the sweeper: due claims, parked counts, the leak audit) and records, from the HTTP
// requests, which AWS actions each issued. They must be testdata/calls.json, which the stack's
// IAM test holds each role's grants to (infra/oncehook_test.go): a function that starts making
// a new call fails here until the file, and then the stack's grants, say so.
func TestTheAWSCallsEachFunctionMakes(t *testing.T) {
	ctx := context.Background()
	admin := awstest.Client(t)
	table := awstest.Table(t, admin)
	plainCfg := awstest.Config(t)
	sq := sqs.NewFromConfig(plainCfg)
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(awstest.Name("oncehook-calls-"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sq.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	sm, ps := secretsmanager.NewFromConfig(plainCfg), ssm.NewFromConfig(plainCfg)
	name := awstest.Secret(t, sm, "oncehook-calls/", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	param := awstest.Parameter(t, ps, "/oncehook-calls/", "github-secret")
	file, err := sources.Parse([]byte(`{"sources":{
		"shop":   {"scheme":"standard-webhooks","secrets":[{"secretsmanager":"` + name + `"}],"retry_horizon":"3d"},
		"github": {"scheme":"github","secrets":[{"ssm":"` + param + `"}],"retry_horizon":"1h"},
		"bulk":   {"scheme":"standard-webhooks","secrets":[{"secretsmanager":"` + name + `"}],"retry_horizon":"1h","batch":true,"event_id":{"json":"id"},"event_type":{"json":"type"}}},
		"targets":{"email":{"url":"http://127.0.0.1:1/unused"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	got := map[string][]string{}

	// The receiver.
	{
		cfg, rec := recording(t)
		lost := &awstest.LoseResponses{Next: rec.next, Operation: "PutItem"}
		rec.next = lost
		db := dynamodb.NewFromConfig(cfg)
		secrets, err := sources.NewSecrets(ctx, file, &sources.Resolver{SecretsManager: secretsmanager.NewFromConfig(cfg), SSM: ssm.NewFromConfig(cfg)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		store, err := dedup.New(db, dedup.Config{Table: table, Sources: file.Retentions()})
		if err != nil {
			t.Fatal(err)
		}
		planners := receiver.NewPlanners()
		planners.Handle("shop", "order.paid", func(_ context.Context, ev dedup.Event) (dedup.Plan, error) {
			s := func(v string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: v} }
			return dedup.Plan{
				Effects: []dedup.Effect{
					dedup.PutEffect(map[string]types.AttributeValue{"pk": s("ORDER#" + ev.ID), "sk": s("ORDER")}).IfAbsent(),
					dedup.UpdateEffect(map[string]types.AttributeValue{"pk": s("ACCT#1"), "sk": s("BALANCE")}, expression.Add(expression.Name("n"), expression.Value(1))),
				},
				Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{}`)}},
			}, nil
		})
		planners.Handle("shop", "ping", func(context.Context, dedup.Event) (dedup.Plan, error) { return dedup.Plan{}, nil })
		planners.Handle("shop", "order.refused", func(context.Context, dedup.Event) (dedup.Plan, error) { return dedup.Plan{}, errors.New("refused") })
		planners.Handle("github", "push", func(context.Context, dedup.Event) (dedup.Plan, error) { return dedup.Plan{}, nil })
		planners.Handle("bulk", "ping", func(context.Context, dedup.Event) (dedup.Plan, error) { return dedup.Plan{}, nil })
		h, err := receiver.New(receiver.Config{Sources: file, Secrets: secrets, Store: store, Planners: planners, Logger: quiet, Metrics: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		post := func(source, secret, body string, want string, opts ...receivertest.Option) {
			t.Helper()
			req, err := receivertest.Request(file, source, secret, []byte(body), opts...)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := h.Handle(ctx, req)
			if err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, want) {
				t.Fatalf("%s %s: %d %s %v", source, body, resp.StatusCode, resp.Body, err)
			}
		}
		shop := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		post("shop", shop, `{"type":"order.paid"}`, `"duplicate":false`, receivertest.WithEventID("msg_calls_1"))
		post("shop", shop, `{"type":"order.paid"}`, `"duplicate":true`, receivertest.WithEventID("msg_calls_1"))
		post("shop", shop, `{"type":"ping"}`, `"duplicate":false`, receivertest.WithEventID("msg_calls_2"))
		// A planner that now refuses an id claimed before: one read tells it is a duplicate.
		post("shop", shop, `{"type":"order.refused"}`, `"duplicate":true`, receivertest.WithEventID("msg_calls_1"))
		// A commit whose answer is lost: an engine that returns no old item on the condition
		// failure of the SDK's retry is asked for the claim (real DynamoDB returns it).
		lost.N = 1
		post("shop", shop, `{"type":"ping"}`, `"duplicate":false`, receivertest.WithEventID("msg_calls_4"))
		if lost.Lost() != 1 {
			t.Fatal("no response was lost")
		}
		post("github", "github-secret", `{"ref":"refs/heads/main"}`, `"duplicate":false`, receivertest.WithEventID("guid-1"), receivertest.WithEventType("push"), receivertest.WithScope("1"))
		post("github", "github-secret", `{"ref":"refs/heads/main"}`, `"duplicate":true`, receivertest.WithEventID("guid-forged"), receivertest.WithEventType("push"), receivertest.WithScope("1"))
		// A batch redelivered: once a chunk finds its claims taken, the rest are read (BatchGetItem).
		var batch strings.Builder
		batch.WriteString("[")
		for i := range 120 {
			if i > 0 {
				batch.WriteString(",")
			}
			fmt.Fprintf(&batch, `{"id":"b%d","type":"ping"}`, i)
		}
		batch.WriteString("]")
		post("bulk", shop, batch.String(), `"duplicates":0,`, receivertest.WithEventID("msg_calls_batch"))
		post("bulk", shop, batch.String(), `"duplicates":120,`, receivertest.WithEventID("msg_calls_batch"))
		got["receiver"] = rec.actions()
	}

	// The worker: the claim's INSERT, a failed call rescheduled, its wake-up.
	var calls atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := calls.Add(1); n == 1 || n == 3 { // the worker's first call, the sweeper's first
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer down.Close()
	worker := func(cfg aws.Config) *outbox.Worker {
		w, err := outbox.New(dynamodb.NewFromConfig(cfg), outbox.Config{
			Table:     table,
			Executors: map[string]outbox.Executor{"email": &outbox.HTTPExecutor{URL: down.URL, Timeout: 2 * time.Second}},
			Scheduler: &outbox.SQSScheduler{API: sqs.NewFromConfig(cfg), QueueURL: aws.ToString(q.QueueUrl)},
			Backoff:   func(int) time.Duration { return 0 },
			Logger:    quiet,
		})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	{
		cfg, rec := recording(t)
		w := worker(cfg)
		if _, err := w.HandleStream(ctx, events.DynamoDBEvent{Records: awstest.StreamRecords(t, admin, table)}); err != nil {
			t.Fatal(err)
		}
		msgs, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 2})
		if err != nil || len(msgs.Messages) == 0 {
			t.Fatalf("no wake-up was scheduled: %v", err)
		}
		var ev events.SQSEvent
		for _, m := range msgs.Messages {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), ReceiptHandle: aws.ToString(m.ReceiptHandle)})
		}
		if _, err := w.HandleRetries(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if calls.Load() < 2 {
			t.Fatalf("%d downstream calls: the wake-up did not run the retry", calls.Load())
		}
		got["outbox"] = rec.actions()
	}

	// The sweeper: a claim left behind (a second event, never streamed), the parked count, the
	// leak audit.
	{
		cfg, rec := recording(t)
		store, _ := dedup.New(admin, dedup.Config{Table: table, Sources: file.Retentions()})
		if _, err := store.Commit(ctx, dedup.Event{Source: "shop", ID: "msg_calls_3", Type: "order.paid"},
			dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{}`)}}}); err != nil {
			t.Fatal(err)
		}
		s := &outbox.Sweeper{Worker: worker(cfg), MinAge: time.Nanosecond,
			Audit: &dedup.Auditor{Client: dynamodb.NewFromConfig(cfg), Table: table, Prefixes: []string{"ORDER#"}}}
		time.Sleep(10 * time.Millisecond) // the claim must be older than MinAge by the sweeper's clock
		rep, err := s.Run(ctx)
		if err != nil || rep.Audit == nil || rep.Summary[outbox.OutcomeRetry] != 1 {
			t.Fatalf("sweep %+v, %v: it must have run the claim (its call failing: a retry) and the audit", rep, err)
		}
		got["sweeper"] = rec.actions()
	}

	if *updateCalls {
		b, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile("testdata/calls.json", append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile("testdata/calls.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string][]string
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"receiver", "outbox", "sweeper"} {
		if strings.Join(got[role], " ") != strings.Join(want[role], " ") {
			t.Errorf("the %s called\n  %v\ntestdata/calls.json says\n  %v\n(go test ./launch -run AWSCalls -update-calls rewrites it; then the stack's grants must follow)", role, got[role], want[role])
		}
	}
}
