package targets_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go"

	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/outbox/targets"
)

// sizedBus is an event bus that takes an entry only when its size, as EventBridge documents
// it (Calculating PutEvents event entry size: Source, DetailType and Detail, UTF-8 bytes),
// is less than 256 KB: "The total entry size must be less than 256KB".
type sizedBus struct{}

func (sizedBus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	e := in.Entries[0]
	if n := len(aws.ToString(e.Source)) + len(aws.ToString(e.DetailType)) + len(aws.ToString(e.Detail)); n >= 256<<10 {
		return nil, &smithy.GenericAPIError{Code: "ValidationException", Fault: smithy.FaultClient, Message: "Total size of the entries in the request is over the limit."}
	}
	return &eventbridge.PutEventsOutput{Entries: []ebtypes.PutEventsResultEntry{{EventId: aws.String("ev")}}}, nil
}

// TestAnEventTheBusTakesWithTracingOffItTakesWithTracingOn: an event whose entry is under
// EventBridge's limit without the trace is put; with tracing on, the envelope's trace fields
// are given up before they take the entry to the limit, so the same event is put too. The
// envelope takes the trace up to and including 256 KiB, where EventBridge wants less.
func TestAnEventTheBusTakesWithTracingOffItTakesWithTracingOn(t *testing.T) {
	t.Parallel()
	x := &targets.EventBridge{Client: sizedBus{}, Source: "shop", DetailType: "order.paid"}
	tk := task("evt_eb", "notify")
	tail := ""
	envSize := func(pad int, traced bool) int {
		e := targets.Envelope{IdempotencyKey: tk.IdempotencyKey, Source: tk.Source, EventID: tk.EventID, EventType: tk.EventType, Intent: tk.Intent,
			Payload: json.RawMessage(`{"pad":"` + strings.Repeat("é", pad) + tail + `"}`)}
		if traced {
			e.Traceparent = "00-" + strings.Repeat("0", 32) + "-" + strings.Repeat("0", 16) + "-01"
		}
		b, _ := json.Marshal(e)
		return len("shop") + len("order.paid") + len(b)
	}
	// The padding whose traced entry is 256 KiB exactly (each "é" is 2 bytes, and a final "x"
	// makes up an odd remainder): the executor sends it traced.
	pad := (256<<10 - envSize(0, true)) / 2
	tail = strings.Repeat("x", (256<<10-envSize(0, true))%2)
	if envSize(pad, true) != 256<<10 {
		t.Fatalf("the traced entry is %d bytes: the test's padding is wrong", envSize(pad, true))
	}
	if envSize(pad, false) >= 256<<10 {
		t.Fatalf("the untraced entry is %d bytes: the test's padding is wrong", envSize(pad, false))
	}
	tk.Payload = []byte(`{"pad":"` + strings.Repeat("é", pad) + tail + `"}`)
	if err := x.Execute(context.Background(), tk); err != nil {
		t.Fatalf("tracing off (an entry of %d bytes): %v", envSize(pad, false), err)
	}
	ctx, _, _ := call(t)
	if err := x.Execute(ctx, tk); err != nil {
		t.Errorf("tracing on, the same event is refused (permanent: %v; %d bytes with the trace): %v", outbox.IsPermanent(err), envSize(pad, true), err)
	}
}
