// Command outbox is the Lambda on the table's DynamoDB stream: it runs the intents each new
// claim carries (package outbox) and answers with a partial batch response. Wiring only.
//
// Environment: as the receiver (TABLE_NAME, ONCEHOOK_SOURCES[_FILE], LOG_LEVEL), plus
// LEASE_SECONDS (default 60, above every target's timeout) and MAX_ATTEMPTS (default 10).
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
	lambda.Start(w.HandleStream)
}
