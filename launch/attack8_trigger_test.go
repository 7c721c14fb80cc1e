package launch

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// TestTheOutboxsTriggerIsTheRecordsEventSource: the outbox's invocation span says what ran it
// (faas.trigger: datasource for the table's stream, pubsub for the retry queue), and the worker
// itself tells the two apart by the first record's eventSource (outbox.Worker.Handle).
// outboxTrigger looks for the bytes "aws:sqs" anywhere in the event instead: a stream batch
// whose claims hold that string as a whole value (an event type or id the provider chose,
// an intent's name, its target) is traced as a wake-up from the retry queue.
//
// The space: the string as a claim's event_type, event_id, an intent's name (a map key) and a
// target's name, each in a stream record's new image; the SQS event as the reference.
func TestTheOutboxsTriggerIsTheRecordsEventSource(t *testing.T) {
	s := func(v string) events.DynamoDBAttributeValue { return events.NewStringAttribute(v) }
	image := func(typ, id, intent, target string) map[string]events.DynamoDBAttributeValue {
		return map[string]events.DynamoDBAttributeValue{
			"pk": s("EVT#shop#" + id), "sk": s("CLAIM"), "event_type": s(typ), "event_id": s(id),
			"intents": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
				intent: events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"target": s(target), "status": s("pending")}),
			}),
		}
	}
	images := map[string]map[string]events.DynamoDBAttributeValue{
		"event_type": image("aws:sqs", "evt_1", "email.send", "email"),
		"event_id":   image("order.paid", "aws:sqs", "email.send", "email"),
		"intent":     image("order.paid", "evt_1", "aws:sqs", "email"),
		"target":     image("order.paid", "evt_1", "email.send", "aws:sqs"),
	}
	for where, img := range images {
		raw, err := json.Marshal(events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{
			EventName: "INSERT", EventSource: "aws:dynamodb", AWSRegion: "eu-west-1",
			Change: events.DynamoDBStreamRecord{NewImage: img, SequenceNumber: "1", StreamViewType: "NEW_IMAGE"},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := outboxTrigger(raw); got != semconv.FaaSTriggerDatasource {
			t.Errorf("a stream batch whose claim has %q as its %s: faas.trigger %s, want %s (the stream)", "aws:sqs", where, got.Value.Emit(), semconv.FaaSTriggerDatasource.Value.Emit())
		}
	}
	raw, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{EventSource: "aws:sqs", Body: `{"pk":"EVT#shop#evt_1"}`}}})
	if got := outboxTrigger(raw); got != semconv.FaaSTriggerPubSub {
		t.Fatalf("the retry queue's wake-up: %s, want pubsub", got.Value.Emit())
	}
}
