// Command receiver is the Lambda behind POST /hooks/{source}. It only wires: configuration
// from the environment, the sources file, the secrets, the dedup store and the application's
// planners; the work is in package receiver.
//
// Environment:
//
//	TABLE_NAME              the DynamoDB table (required)
//	ONCEHOOK_SOURCES        the sources file's JSON, inline; or
//	ONCEHOOK_SOURCES_FILE   its path (default: sources.json beside the binary)
//	LOG_LEVEL               debug, info (default), warn, error
//	AWS_ENDPOINT_URL        an emulator's endpoint, for local runs
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/oncehook/oncehook/examples/orders"
	"github.com/oncehook/oncehook/functions/internal/boot"
	"github.com/oncehook/oncehook/receiver"
)

func main() {
	ctx := context.Background()
	env, err := boot.Load(ctx, boot.Needs{Secrets: true})
	if err != nil {
		slog.Error("receiver cannot start", "error", err)
		os.Exit(1)
	}
	planners := receiver.NewPlanners()
	for _, name := range env.Sources.Names() {
		orders.Register(planners, name) // the reference application; replace with your own
	}
	h, err := receiver.New(receiver.Config{
		Sources:  env.Sources,
		Secrets:  env.Secrets,
		Store:    env.Store,
		Planners: planners,
		Logger:   env.Logger,
		Metrics:  os.Stdout,
	})
	if err != nil {
		slog.Error("receiver cannot start", "error", err)
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}
