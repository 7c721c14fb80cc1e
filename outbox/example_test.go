package outbox_test

import (
	"fmt"
	"time"

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
