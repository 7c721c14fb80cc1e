package targets_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox/targets"
)

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
	topic, err := sn.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: aws.String(unique("oncehook-tsize-"))})
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
