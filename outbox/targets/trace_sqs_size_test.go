package targets_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/oncehook/oncehook/outbox/targets"
)

// keptQueue is a sizedQueue that keeps what it took.
type keptQueue struct {
	sizedQueue
	last *sqs.SendMessageInput
}

func (q *keptQueue) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	out, err := q.sizedQueue.SendMessage(ctx, in, o...)
	if err == nil {
		q.last = in
	}
	return out, err
}

// TestAMessageOverSNSsLimitCarriesItsTraceToAQueueThatTakesIt: SQS takes messages of up to
// 1 MiB (a queue's MaximumMessageSize, the default for new queues). A message of 300 KiB or
// 1,000 KiB to such a queue carries its trace attributes, as a small one does: the trace is
// given up for a queue's limit only when that queue refuses the message for its length
// (TestAMessageAQueueTakesWithTracingOffItTakesWithTracingOn).
func TestAMessageOverSNSsLimitCarriesItsTraceToAQueueThatTakesIt(t *testing.T) {
	t.Parallel()
	for _, kib := range []int{300, 1000} {
		q := &keptQueue{sizedQueue: sizedQueue{max: 1 << 20}}
		x := &targets.SQS{Client: q, QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/big"}
		tk := task("evt_big", "notify")
		tk.Payload = []byte(`{"pad":"` + strings.Repeat("x", kib<<10) + `"}`)
		ctx, _, _ := call(t)
		if err := x.Execute(ctx, tk); err != nil {
			t.Fatalf("%d KiB to a queue of 1 MiB: %v", kib, err)
		}
		if v, ok := q.last.MessageAttributes["traceparent"]; !ok || !strings.HasPrefix(aws.ToString(v.StringValue), "00-") {
			t.Errorf("%d KiB to a queue of 1 MiB: sent without its traceparent", kib)
		}
		if q.last.MessageSystemAttributes["AWSTraceHeader"].StringValue == nil {
			t.Errorf("%d KiB to a queue of 1 MiB: sent without its AWSTraceHeader", kib)
		}
	}
}
