package launch_test

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/launch"
	"github.com/oncehook/oncehook/outbox"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/sources"
)

// An application's receiver function: its main.go is this call, with its planners.
func ExampleReceiver() {
	launch.Receiver(func(p *receiver.Planners) {
		p.Handle("stripe", "checkout.session.completed", func(ctx context.Context, ev dedup.Event) (dedup.Plan, error) {
			return dedup.Plan{Intents: []dedup.Intent{{Name: "fulfil", Target: "fulfilment", Payload: ev.Payload}}}, nil
		})
	})
}

// An application's outbox function, with an executor of its own for the "crm" target (the
// sources file's HTTP targets are built in). The stack lists "crm" in ONCEHOOK_TARGETS, so a
// function started without an executor for it refuses to start.
func ExampleOutbox() {
	launch.Outbox(map[string]outbox.Executor{
		"crm": outbox.ExecutorFunc(func(ctx context.Context, t outbox.Task) error {
			// Call the CRM with t.IdempotencyKey as its idempotency key; an error is retried,
			// outbox.Permanent(err) parks the intent.
			return nil
		}),
	})
}

// The receiver outside Lambda: the same handler, served by net/http in a container
// (ONCEHOOK_TRUSTED_HOSTS names the public host a Twilio or Square source is called at).
func ExampleNewHTTPReceiver() {
	env, err := launch.Load(context.Background(), launch.Needs{Secrets: true})
	if err != nil {
		os.Exit(1)
	}
	h, err := launch.NewHTTPReceiver(env, nil)
	if err != nil {
		os.Exit(1)
	}
	http.Handle("/hooks/", h)
	_ = http.ListenAndServe(":8080", nil)
}

// The intent targets a receiver accepts: the sources file's and the application's own
// executors'. receivertest.NewHandler takes its targets from the same function.
func ExampleKnownTargets() {
	f, err := sources.Parse([]byte(`{"sources": {"stripe": {"scheme": "stripe", "secrets": [{"env": "S"}], "retry_horizon": "3d", "redrive_window": "30d"}},
	  "targets": {"fulfilment": {"url": "https://fulfilment.example.com/ship"}}}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(launch.KnownTargets(f, []string{"email"}))
	// Output: [email fulfilment]
}
