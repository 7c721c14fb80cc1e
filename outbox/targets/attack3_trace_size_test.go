package targets_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/outbox/targets"
)

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
