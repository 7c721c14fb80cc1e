package outbox_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox"
)

// queue creates an SQS queue on the test endpoint, deleted when the test ends.
func queue(t *testing.T) (*sqs.Client, string) {
	t.Helper()
	client := sqs.NewFromConfig(awstest.Config(t))
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(awstest.Name("oncehook-test-"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	return client, aws.ToString(out.QueueUrl)
}

// receive reads the queue's messages as Lambda's SQS mapping delivers them.
func receive(t *testing.T, client *sqs.Client, url string) events.SQSEvent {
	t.Helper()
	out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	for _, m := range out.Messages {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), EventSource: "aws:sqs", Attributes: m.Attributes})
	}
	return ev
}

// recordingScheduler records what the worker asked to be woken for, as well as sending it.
type recordingScheduler struct {
	outbox.Scheduler
	n   atomic.Int32
	due atomic.Int64
}

func (r *recordingScheduler) Schedule(ctx context.Context, pk string, due time.Time) error {
	r.n.Add(1)
	r.due.Store(due.UnixMilli())
	return r.Scheduler.Schedule(ctx, pk, due)
}

func TestARetryIsWokenByItsDelayedMessageAtItsDueTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	client, url := queue(t)
	e.commitOne("evt_wake")
	failFirst := atomic.Bool{}
	failFirst.Store(true)
	e.down.fail = func(int, string) (int, time.Duration) {
		if failFirst.Swap(false) {
			return http.StatusInternalServerError, 0
		}
		return 0, 0
	}
	sched := &recordingScheduler{Scheduler: &outbox.SQSScheduler{API: client, QueueURL: url}}
	w := e.worker(func(c *outbox.Config) {
		c.Scheduler = sched
		c.Backoff = func(int) time.Duration { return 2 * time.Second }
	})
	if resp, _ := w.HandleStream(context.Background(), batch(e.records())); len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp.BatchItemFailures)
	}
	in := e.claim("evt_wake").Intents["email.send"]
	if in.Status != dedup.IntentPending || sched.n.Load() != 1 || sched.due.Load() != in.NextAttemptAt {
		t.Fatalf("%+v, %d wake-ups for %d: want one, for the intent's next_attempt_at", in, sched.n.Load(), sched.due.Load())
	}
	// The message is delayed: nothing to receive until it is due.
	if ev := receive(t, client, url); len(ev.Records) != 0 {
		t.Fatalf("a wake-up was visible before its delay: %+v", ev.Records)
	}
	var ev events.SQSEvent
	for len(ev.Records) == 0 { // it becomes visible when due (SQS long-polls in receive)
		ev = receive(t, client, url)
	}
	var body struct {
		PK  string `json:"pk"`
		Due int64  `json:"due"`
	}
	if err := json.Unmarshal([]byte(ev.Records[0].Body), &body); err != nil || body.PK != dedup.ClaimKey("shop", "evt_wake") || body.Due != in.NextAttemptAt {
		t.Fatalf("wake-up %s (%v)", ev.Records[0].Body, err)
	}
	resp, err := w.HandleRetries(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%v, %v", resp, err)
	}
	if in := e.claim("evt_wake").Intents["email.send"]; in.Status != dedup.IntentDone || in.Attempts != 2 {
		t.Fatalf("%+v: want done on the woken attempt", in)
	}
	e.appliedOnce([]string{"shop:evt_wake:email.send"})
}

func TestAnEarlyWakeUpSchedulesTheRestAndRunsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_early")
	e.down.fail = func(int, string) (int, time.Duration) { return http.StatusInternalServerError, 0 }
	var woken []time.Time
	sched := schedulerFunc(func(_ context.Context, pk string, due time.Time) error {
		woken = append(woken, due)
		return nil
	})
	// A backoff longer than SQS's 15-minute delay: the first wake-up comes early.
	w := e.worker(func(c *outbox.Config) {
		c.Scheduler = sched
		c.Backoff = func(int) time.Duration { return time.Hour }
	})
	w.HandleStream(context.Background(), batch(e.records()))
	due := time.UnixMilli(e.claim("evt_early").Intents["email.send"].NextAttemptAt)
	e.advance(outbox.MaxScheduleDelay)
	_, _, before := e.down.snapshot()
	body, _ := json.Marshal(map[string]any{"pk": dedup.ClaimKey("shop", "evt_early"), "due": due.UnixMilli()})
	resp, err := w.HandleRetries(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", Body: string(body)}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp, err)
	}
	if _, _, after := e.down.snapshot(); after != before {
		t.Fatal("an early wake-up ran the intent before its due time")
	}
	if len(woken) != 2 || !woken[1].Equal(due) {
		t.Fatalf("wake-ups %v: want the rest scheduled for %v", woken, due)
	}
}

type schedulerFunc func(ctx context.Context, pk string, due time.Time) error

func (f schedulerFunc) Schedule(ctx context.Context, pk string, due time.Time) error {
	return f(ctx, pk, due)
}

func TestAWakeUpForAGoneClaimOrAnUnreadableMessageIsDropped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.worker(nil)
	resp, err := w.HandleRetries(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "gone", Body: `{"pk":"EVT#shop#evt_expired_and_deleted","due":1}`},
		{MessageId: "garbage", Body: `not json`},
	}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v, %v: nothing can make these better; neither is retried", resp, err)
	}
	if b, _ := json.Marshal(resp); string(b) != `{"batchItemFailures":[]}` {
		t.Fatalf("response %s: want an empty list, not null", b)
	}
}

func TestTheOutboxHandlerTellsStreamBatchesFromWakeUps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_both")
	w := e.worker(nil)
	stream, _ := json.Marshal(batch(e.records()))
	out, err := w.Handle(context.Background(), stream)
	if _, ok := out.(events.DynamoDBEventResponse); err != nil || !ok {
		t.Fatalf("stream batch: %T, %v", out, err)
	}
	out, err = w.Handle(context.Background(), json.RawMessage(`{"Records":[{"eventSource":"aws:sqs","messageId":"m","body":"{\"pk\":\"EVT#shop#evt_both\",\"due\":1}"}]}`))
	if _, ok := out.(events.SQSEventResponse); err != nil || !ok {
		t.Fatalf("wake-up batch: %T, %v", out, err)
	}
	if _, err := w.Handle(context.Background(), json.RawMessage(`{"Records":[{"eventSource":"aws:s3"}]}`)); err == nil {
		t.Fatal("an S3 event must be refused")
	}
	if in := e.claim("evt_both").Intents["email.send"]; in.Status != dedup.IntentDone {
		t.Fatalf("%+v", in)
	}
}

// A stream record whose claim could not be processed (DynamoDB refused every write) is handed
// back to the mapping and also woken by the retry queue a few seconds out: a second path that
// needs neither the mapping's retries (which end in a failure queue carrying no claim) nor an
// engine that honours partial batch responses.
func TestARecordNotProcessedIsAlsoWokenByTheRetryQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_unrecorded")
	var woken []string
	var mu sync.Mutex
	sched := schedulerFunc(func(_ context.Context, pk string, due time.Time) error {
		mu.Lock()
		woken = append(woken, pk)
		mu.Unlock()
		if d := due.Sub(e.now()); d <= 0 || d > 10*time.Second {
			t.Errorf("woken %s from now, want a few seconds", d)
		}
		return nil
	})
	failing := awstest.WithTransport(&awstest.InjectErrors{Next: awstest.BaseTransport(), Operation: "UpdateItem", N: -1, Status: 500,
		Body: `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected"}`})
	w := e.worker(func(c *outbox.Config) { c.Scheduler = sched }, failing)
	resp, err := w.HandleStream(context.Background(), batch(e.records()))
	if err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("%+v %v, want the record handed back", resp, err)
	}
	if len(woken) != 1 || woken[0] != dedup.ClaimKey("shop", "evt_unrecorded") {
		t.Fatalf("wake-ups %v, want one for the claim", woken)
	}
}

// A wake-up that finds the intent still running (its worker called the downstream and could
// not record it: its lease has not ended) is not dropped: the claim is woken again when the
// lease has ended, and runs the intent then (at least once: the downstream's key absorbs the
// second call).
func TestAWakeUpThatFindsTheIntentRunningWakesAgainWhenItsLeaseEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_unfinished")
	dead := e.worker(nil, diesAfterTheCall())
	if _, err := dead.Process(context.Background(), e.claim("evt_unfinished")); err == nil {
		t.Fatal("setup: the finish was recorded")
	}
	in := e.claim("evt_unfinished").Intents["email.send"]
	if in.Status != dedup.IntentRunning {
		t.Fatalf("setup: %+v, want running", in)
	}
	var woken []time.Time
	w := e.worker(func(c *outbox.Config) {
		c.Scheduler = schedulerFunc(func(_ context.Context, _ string, due time.Time) error { woken = append(woken, due); return nil })
	})
	wake := func() {
		body, _ := json.Marshal(map[string]any{"pk": dedup.ClaimKey("shop", "evt_unfinished"), "due": e.now().UnixMilli()})
		if resp, err := w.HandleRetries(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: string(body)}}}); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatal(resp, err)
		}
	}
	wake()
	if want := in.LeaseUntil + 500; len(woken) != 1 || woken[0].UnixMilli() != want {
		t.Fatalf("woken %v, want once, at the lease's end and a margin (%d)", woken, want)
	}
	e.advance(time.Duration(woken[0].Sub(e.now())) + time.Millisecond)
	wake()
	if in := e.claim("evt_unfinished").Intents["email.send"]; in.Status != dedup.IntentDone || in.Attempts != 2 {
		t.Fatalf("%+v, want done on the second attempt", in)
	}
	e.appliedOnce([]string{"shop:evt_unfinished:email.send"})
}

// The handler runs the records its decoder reads: a batch whose Records key is written in
// another letter case (a hand-made or direct invocation) is processed, not acknowledged as empty.
func TestTheHandlerRunsTheRecordsItsDecoderReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.commitOne("evt_case")
	w := e.worker(nil)
	stream, _ := json.Marshal(batch(e.records()))
	raw := strings.Replace(string(stream), `"Records"`, `"records"`, 1)
	if _, err := w.Handle(context.Background(), json.RawMessage(raw)); err != nil {
		t.Fatal(err)
	}
	if in := e.claim("evt_case").Intents["email.send"]; in.Status != dedup.IntentDone {
		t.Fatalf("the intent is %s: a batch acknowledged without being run", in.Status)
	}
}

// EventSource reads the first record's eventSource wherever Records lies among the event's
// keys, whatever the later records hold; an event without records is "", and what is not a
// Lambda event of records (or a first record that names no source) is an error.
func TestEventSourceReadsTheFirstRecordsSource(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{`{"Records":[{"eventSource":"aws:dynamodb","eventName":"INSERT"},{"eventSource":"aws:sqs"}]}`, "aws:dynamodb"},
		{`{"other":{"Records":[{"eventSource":"aws:s3"}]},"Records":[{"body":"aws:dynamodb","eventSource":"aws:sqs"}]}`, "aws:sqs"},
		{`{"Records":[{"eventSource":"aws:sqs"}, not json`, "aws:sqs"}, // read no further than the first record
		{`{"Records":[]}`, ""},
		{`{"Records":null}`, ""},
		{`{}`, ""},
		{`null`, ""},
		{` {"Records":[{"eventSource":"aws:s3"}]}`, "aws:s3"},
		// The key as encoding/json matches it (the handler's decoder): in any letter case, and an
		// empty list of records followed by another.
		{`{"records":[{"eventSource":"aws:sqs"}]}`, "aws:sqs"},
		{`{"Records":[],"RECORDS":[{"eventSource":"aws:dynamodb"}]}`, "aws:dynamodb"},
	} {
		if got, err := outbox.EventSource([]byte(c.raw)); err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.raw, got, err, c.want)
		}
	}
	for _, raw := range []string{``, `[]`, `"aws:sqs"`, `{"Records":{"eventSource":"aws:sqs"}}`, `{"Records":[{}]}`,
		`{"Records":[{"eventSource":5}]}`, `{"Records":[`, `{"a":}`, `{"a":1`} {
		if got, err := outbox.EventSource([]byte(raw)); err == nil {
			t.Errorf("%s: %q, want an error", raw, got)
		}
	}
}

// BenchmarkTheTriggerOfABatch: telling a stream batch of 1,000 records of 4 KB from a wake-up
// reads its first record only, against a decode of the whole batch (which the batch then
// gets once, for HandleStream).
func BenchmarkTheTriggerOfABatch(b *testing.B) {
	rec := `{"eventID":"1","eventName":"INSERT","eventSource":"aws:dynamodb","awsRegion":"us-east-1","dynamodb":{"NewImage":{` +
		`"pk":{"S":"EVT#shop#evt_1"},"sk":{"S":"CLAIM"},"payload":{"S":"` + strings.Repeat("x", 4000) + `"}},"SequenceNumber":"1","StreamViewType":"NEW_IMAGE"}}`
	raw := []byte(`{"Records":[` + strings.TrimSuffix(strings.Repeat(rec+",", 1000), ",") + `]}`)
	b.Run("first record", func(b *testing.B) {
		for b.Loop() {
			if src, err := outbox.EventSource(raw); src != "aws:dynamodb" || err != nil {
				b.Fatal(src, err)
			}
		}
	})
	b.Run("whole batch", func(b *testing.B) {
		for b.Loop() {
			var ev events.DynamoDBEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
