package outbox_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/logging"

	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/internal/faultproxy"
	"github.com/oncehook/oncehook/internal/seeds"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/outbox/targets"
)

// TestRandomizedSchedulesWithAnAWSExecutorKeepBothPromises runs the randomized schedules of
// TestRandomizedSchedulesKeepBothPromises with an AWS executor as both targets: SQS, to a
// standard queue on the emulator, its SDK client going through the failure proxy, which fails
// each connection at a point drawn from the seed (a reset during the handshake, a reset after
// the queue had the message, a cut answer, a 500 with or without the queue acting, the queue's
// throttling, an answer held past the executor's timeout) or lets it through. A standard queue
// keeps every message it is sent, so the messages it holds per key are the sends that reached
// it: an at-most-once intent's never more than one, a done at-least-once intent's at least one
// (its consumer deduplicates on the idempotency_key attribute).
func TestRandomizedSchedulesWithAnAWSExecutorKeepBothPromises(t *testing.T) {
	t.Parallel()
	for _, seed := range seeds.Schedule(t, 4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { randomSchedule(t, seed, sqsTarget) })
	}
}

// sqsTarget is a standard queue behind the failure proxy.
func sqsTarget(t *testing.T, _ *env, draw func(int) int) scheduleTarget {
	cfg := awstest.Config(t)
	cfg.Logger = logging.Nop{} // a cut answer makes the SDK warn about the connection
	sq := sqs.NewFromConfig(cfg)
	q, err := sq.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(awstest.Name("oncehook-schedule-"))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sq.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	json10 := func(status int, code string) faultproxy.Reply {
		fault := "Sender"
		if status >= 500 {
			fault = "Receiver"
		}
		return faultproxy.Reply{Status: status, Body: `{"__type":"com.amazonaws.sqs#` + code + `","message":"injected"}`,
			Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amzn-Query-Error": {code + ";" + fault}}}
	}
	draws := []struct {
		fault faultproxy.Fault
		reply faultproxy.Reply
	}{
		{faultproxy.ResetHandshake, faultproxy.Reply{}},
		{faultproxy.ResetAfterRequest, faultproxy.Reply{}},
		{faultproxy.CutAnswer, faultproxy.Reply{}},
		{faultproxy.Answer, json10(500, "InternalError")},
		{faultproxy.ActThenAnswer, json10(500, "InternalError")},
		{faultproxy.Answer, json10(400, "RequestThrottled")},
		{faultproxy.Hold, faultproxy.Reply{}},
	}
	var healthy atomic.Bool
	p := faultproxy.Start(t, faultproxy.Config{Upstream: os.Getenv("AWS_ENDPOINT_URL"), Match: faultproxy.Calls("SendMessage"),
		Choose: func() (faultproxy.Fault, faultproxy.Reply) {
			if healthy.Load() {
				return faultproxy.Forward, faultproxy.Reply{}
			}
			if i := draw(2 * len(draws)); i < len(draws) { // half the connections fail
				return draws[i].fault, draws[i].reply
			}
			return faultproxy.Forward, faultproxy.Reply{}
		}})
	client := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint, o.HTTPClient = aws.String(p.URL), p.Client() })
	x := &targets.SQS{Client: client, QueueURL: *q.QueueUrl, Timeout: 400 * time.Millisecond}
	var once sync.Once
	var calls, applied map[string]int
	var total int
	return scheduleTarget{alo: x, amo: outbox.AtMostOnce(x), heal: func() { healthy.Store(true) },
		seen: func() (map[string]int, map[string]int, int) {
			once.Do(func() {
				p.Wait() // every send the proxy forwarded is in the queue
				calls, applied = map[string]int{}, map[string]int{}
				for empty := 0; empty < 2; {
					out, err := sq.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10,
						WaitTimeSeconds: 1, MessageAttributeNames: []string{"idempotency_key"}, VisibilityTimeout: 300})
					if err != nil {
						t.Fatal(err)
					}
					if len(out.Messages) == 0 {
						empty++
						continue
					}
					var entries []sqstypes.DeleteMessageBatchRequestEntry
					for i, m := range out.Messages {
						key := aws.ToString(m.MessageAttributes["idempotency_key"].StringValue)
						calls[key]++
						applied[key] = 1 // the consumer deduplicates on the key
						total++
						entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
					}
					if _, err := sq.DeleteMessageBatch(context.Background(), &sqs.DeleteMessageBatchInput{QueueUrl: q.QueueUrl, Entries: entries}); err != nil {
						t.Fatal(err)
					}
				}
			})
			return calls, applied, total
		}}
}
