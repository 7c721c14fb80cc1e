package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/outbox"
)

// A downstream with no idempotency key of its own (an SMTP relay behind a plain HTTP API):
// its intents are sent at most once. An attempt that may have been sent, and was not recorded,
// parks for a person instead of being sent again; a refused connection or a 429 is retried.
func ExampleAtMostOnce() {
	relay := outbox.AtMostOnce(&outbox.HTTPExecutor{URL: "https://smtp-relay.internal.example/send", Timeout: 5 * time.Second})
	executors := map[string]outbox.Executor{"email": relay}
	fmt.Println(outbox.IsAtMostOnce(executors["email"]), relay.(outbox.Bounded).MaxDuration())
	// Output: true 5s
}

// An operator's tool holds back, from a redrive of many, the parked at-most-once intents whose
// call may have reached the downstream: a person re-drives each after checking it.
func ExampleMayHaveBeenSent() {
	for _, in := range []dedup.ClaimIntent{
		{Status: dedup.IntentParked, LastError: "permanent: at-most-once: POST https://smtp-relay.internal.example/send: EOF (it may have reached the downstream: not sent again)"},
		{Status: dedup.IntentParked, LastError: "permanent: POST https://smtp-relay.internal.example/send: 422 Unprocessable Entity"},
		{Status: dedup.IntentPending, LastError: "permanent: at-most-once: attempt 1 was under way when its worker stopped"}, // re-driven since
	} {
		fmt.Println(outbox.MayHaveBeenSent(in))
	}
	// Output:
	// true
	// false
	// false
}

// A target's limits hold across every worker: at most 10 calls under way and 20 started a
// second, whatever the number of concurrent invocations. Held-back calls wait, or are woken
// near their turn, without spending an attempt.
func ExampleLimit() {
	cfg := outbox.Config{
		Table:     "orders-oncehook",
		Executors: map[string]outbox.Executor{"email": &outbox.HTTPExecutor{URL: "https://mail.example.com/send"}},
		Limits:    map[string]outbox.Limit{"email": {MaxInFlight: 10, Rate: 20}},
	}
	fmt.Println(cfg.Limits["email"].Validate())
	// Output: <nil>
}

// RateQuota is how many calls one rate window admits: a quarter of a second's worth, at least
// one. Over a span T of whole windows at most rate x T plus one quota start, and never more
// than rate x T plus two.
func ExampleRateQuota() {
	fmt.Println(outbox.RateQuota(20), outbox.RateQuota(1), outbox.RateQuota(outbox.MaxRate))
	// Output: 5 1 125
}

// A function of one's own that serves both of the outbox's triggers tells them apart as
// Worker.Handle does, by the first record's source, without decoding a 6 MB stream batch twice.
func ExampleEventSource() {
	src, err := outbox.EventSource([]byte(`{"Records":[{"eventSource":"aws:sqs","body":"{}"}]}`))
	fmt.Println(src, err)
	// Output: aws:sqs <nil>
}

// An operator pauses a target for its downstream's maintenance window, and resumes it after.
// Meanwhile its intents wait, pending, spending no attempt (at most once included: none is
// leased); the sweeper's first run after Resume calls each once, at the target's limits.
func ExampleTargets() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	targets := &outbox.Targets{API: dynamodb.NewFromConfig(cfg), Table: "orders-oncehook"}
	if err := targets.Pause(context.Background(), "email", "ada (runbook)", "mail provider maintenance, 02:00-03:00 UTC"); err != nil {
		log.Fatal(err)
	}
	paused, err := targets.Paused(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for target, p := range paused {
		log.Printf("%s paused by %s at %s: %s", target, p.By, p.At.Format(time.RFC3339), p.Why)
	}
	// After the maintenance:
	if err := targets.Resume(context.Background(), "email"); err != nil {
		log.Fatal(err)
	}
}

// A tool that asks an operator to confirm a pause pauses the target as they were shown it:
// here not paused, so a pause another operator made meanwhile is kept, not replaced.
func ExampleTargets_PauseIfUnchanged() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	targets := &outbox.Targets{API: dynamodb.NewFromConfig(cfg), Table: "orders-oncehook"}
	paused, err := targets.Paused(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	var shown *outbox.Pause // what the operator confirms: nil, not paused
	if p, ok := paused["email"]; ok {
		shown = &p
	}
	// ... the operator confirms ...
	err = targets.PauseIfUnchanged(context.Background(), "email", "ada (runbook)", "relay upgrade", shown)
	if errors.Is(err, outbox.ErrPauseChanged) {
		log.Print("email's pause changed since it was shown: show it again")
	} else if err != nil {
		log.Fatal(err)
	}
}
