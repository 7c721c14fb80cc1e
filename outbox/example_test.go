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
