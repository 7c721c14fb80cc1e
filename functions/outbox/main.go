// Command outbox is the Lambda on the table's DynamoDB stream: it runs the intents each new
// claim carries (package outbox) and answers with a partial batch response. Wiring only.
//
// Environment: as the receiver (TABLE_NAME, ONCEHOOK_SOURCES[_FILE], LOG_LEVEL), plus
// LEASE_SECONDS (default 60, at least every target's timeout plus 5 s), MAX_ATTEMPTS (default
// 10) and RETRY_QUEUE_URL (the queue that wakes retries at their due time).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/oncehook/oncehook/functions/internal/boot"
)

func main() {
	env, err := boot.Load(context.Background(), boot.Needs{})
	if err != nil {
		slog.Error("outbox cannot start", "error", err)
		os.Exit(1)
	}
	w, err := boot.Worker(env)
	if err != nil {
		slog.Error("outbox cannot start", "error", err)
		os.Exit(1)
	}
	lambda.Start(w.Handle) // the table's stream and the retry queue
}
