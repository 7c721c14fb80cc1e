// Command sweeper is the scheduled Lambda that re-drives intents the stream path left behind
// (package outbox, Sweeper) and reports the parked ones. Wiring only.
//
// Environment: as the outbox function, plus SWEEP_MIN_AGE_SECONDS (default 120).
package main

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/oncehook/oncehook/functions/internal/boot"
	"github.com/oncehook/oncehook/outbox"
)

func main() {
	env, err := boot.Load(context.Background(), boot.Needs{})
	if err != nil {
		slog.Error("sweeper cannot start", "error", err)
		os.Exit(1)
	}
	w, err := boot.Worker(env)
	if err != nil {
		slog.Error("sweeper cannot start", "error", err)
		os.Exit(1)
	}
	minAge, err := strconv.Atoi(os.Getenv("SWEEP_MIN_AGE_SECONDS"))
	if os.Getenv("SWEEP_MIN_AGE_SECONDS") != "" && (err != nil || minAge <= 0) {
		slog.Error("sweeper cannot start", "error", "SWEEP_MIN_AGE_SECONDS: want a positive whole number")
		os.Exit(1)
	}
	s := &outbox.Sweeper{Worker: w, MinAge: time.Duration(minAge) * time.Second}
	lambda.Start(s.Run)
}
