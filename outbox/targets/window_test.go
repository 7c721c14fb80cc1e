package targets_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/internal/emuclock"
	"github.com/oncehook/oncehook/internal/faultproxy"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/outbox/targets"
)

// TestAFIFOTargetDeduplicatesForFiveMinutesOnly: a FIFO queue and a FIFO topic (on a private
// emulator whose clock the test moves) get an intent whose first attempt reached the service
// and lost its answer (the failure proxy resets the connection after forwarding it). Within
// the 5-minute window, the next attempt (another worker) and an operator's redrive of an
// at-most-once intent parked after it are dropped as duplicates: one message. With the
// emulator's clock moved past the window, the same sends are a second message. Every message
// of an intent, whoever sent it, carries the same MessageDeduplicationId (the key's SHA-256)
// and idempotency_key attribute, on which the consumer deduplicates beyond the window.
func TestAFIFOTargetDeduplicatesForFiveMinutesOnly(t *testing.T) {
	t.Parallel()
	m := newWorkerEnv(t) // the claims on the shared emulator (skipped in -short mode)
	emu := emuclock.Start(t, "sqs,sns")
	ecfg := m.cfg.Copy()
	ecfg.BaseEndpoint = aws.String(emu.URL)
	sq, sn := sqs.NewFromConfig(ecfg), sns.NewFromConfig(ecfg)
	url, _ := queue(t, sq, awstest.Name("oncehook-window-")+".fifo")
	topic, err := sn.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: aws.String(awstest.Name("oncehook-window-") + ".fifo"),
		Attributes: map[string]string{"FifoTopic": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	sub, subARN := queue(t, sq, awstest.Name("oncehook-window-sub-")+".fifo")
	if _, err := sn.Subscribe(context.Background(), &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(subARN),
		Attributes: map[string]string{"RawMessageDelivery": "true"}}); err != nil {
		t.Fatal(err)
	}
	toQueue := func(p *faultproxy.Proxy) outbox.Executor {
		return &targets.SQS{Client: sqs.NewFromConfig(ecfg, func(o *sqs.Options) { o.BaseEndpoint, o.HTTPClient = via(p) }), QueueURL: url}
	}
	toTopic := func(p *faultproxy.Proxy) outbox.Executor {
		return &targets.SNS{Client: sns.NewFromConfig(ecfg, func(o *sns.Options) { o.BaseEndpoint, o.HTTPClient = via(p) }), TopicARN: *topic.TopicArn}
	}

	type intent struct {
		id       string
		amo      bool // parked after the first attempt, then redriven by an operator
		late     bool // the next send comes after the window
		to       func(*faultproxy.Proxy) outbox.Executor
		messages int // what the FIFO queue (or the topic's FIFO subscriber) ends with
	}
	intents := []*intent{
		{id: "evt_soon_retry", to: toQueue, messages: 1},
		{id: "evt_soon_redrive", amo: true, to: toQueue, messages: 1},
		{id: "evt_soon_topic", to: toTopic, messages: 1},
		{id: "evt_late_retry", late: true, to: toQueue, messages: 2},
		{id: "evt_late_redrive", amo: true, late: true, to: toQueue, messages: 2},
		{id: "evt_late_topic", late: true, to: toTopic, messages: 2},
	}
	through := func(in *intent, fault faultproxy.Fault) dedup.ClaimIntent {
		t.Helper()
		p := faultproxy.Start(t, faultproxy.Config{Upstream: emu.URL, Fault: fault})
		x := in.to(p)
		if in.amo {
			x = outbox.AtMostOnce(x)
		}
		got, err := m.attempt(in.id, x)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, in := range intents {
		if err := m.commit(in.id); err != nil {
			t.Fatal(err)
		}
		want := dedup.IntentPending
		if in.amo {
			want = dedup.IntentParked
		}
		if got := through(in, faultproxy.ResetAfterRequest); got.Status != want {
			t.Fatalf("%s: the first attempt, reset after the service had it: %s, want %s", in.id, got.Status, want)
		}
	}
	next := func(late bool) {
		t.Helper()
		m.advance(10 * time.Minute) // the worker's clock: past the backoff
		for _, in := range intents {
			if in.late != late {
				continue
			}
			if in.amo {
				c, err := m.claim(in.id)
				if err != nil {
					t.Fatal(err)
				}
				if err := redriveByAt(context.Background(), m.db, m.table, c, "ship", m.now(), "operator@example.com"); err != nil {
					t.Fatal(err)
				}
			}
			if got := through(in, faultproxy.Forward); got.Status != dedup.IntentDone {
				t.Fatalf("%s: the next send: %+v, want done", in.id, got)
			}
		}
	}
	next(false)
	emu.Advance(5*time.Minute + time.Second)
	next(true)

	byKey := map[string][]sqstypes.Message{}
	for _, q := range []string{url, sub} {
		drainQueue(t, sq, q, 2, func() bool { return false }, func(msg sqstypes.Message) { byKey[keyOf(msg)] = append(byKey[keyOf(msg)], msg) })
	}
	for _, in := range intents {
		key := dedup.IdempotencyKey("shop", in.id, "ship")
		msgs := byKey[key]
		if len(msgs) != in.messages {
			t.Errorf("%s: %d messages, want %d", in.id, len(msgs), in.messages)
		}
		sum := sha256.Sum256([]byte(key))
		for _, msg := range msgs {
			if id := msg.Attributes[string(sqstypes.MessageSystemAttributeNameMessageDeduplicationId)]; id != hex.EncodeToString(sum[:]) {
				t.Errorf("%s: a message with MessageDeduplicationId %q, want the key's SHA-256", in.id, id)
			}
		}
	}
}

// redriveByAt is an operator's redrive at now that records who re-drove it (dedup.Claims.RedriveBy).
func redriveByAt(ctx context.Context, api dedup.UpdateAPI, table string, c *dedup.Claim, intent string, now time.Time, by string) error {
	return (&dedup.Claims{API: api, Table: table, Now: func() time.Time { return now }}).RedriveBy(ctx, c, intent, by)
}
