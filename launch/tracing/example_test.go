package tracing_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/oncehook/oncehook/launch"
	"github.com/oncehook/oncehook/launch/tracing"
)

// A program that serves the receiver itself turns tracing on as the functions do, with
// OTEL_TRACES_EXPORTER=otlp (and OTEL_EXPORTER_OTLP_ENDPOINT), the exporter's headers read
// from the secret store launch reads them from, and exports what is left before it exits.
// launch.Load does this; Env.Tracing is the result.
func ExampleFromEnv() {
	tr, err := tracing.FromEnv(context.Background(), slog.Default(), launch.StoredOTLPHeaders)
	if err != nil {
		slog.Error("tracing", "error", err) // the message names the variable at fault
		os.Exit(1)
	}
	defer func() { _ = tr.Shutdown(context.Background()) }()
	fmt.Println(tr.TracerProvider() != nil) // on or off, as the environment says
}

// A deployment tool that sets the functions' OpenTelemetry variables itself checks them
// before it deploys: what the functions would refuse at start, refused here, naming the
// variable.
func ExampleCheckEnv() {
	err := tracing.CheckEnv(map[string]string{
		"OTEL_TRACES_EXPORTER":    "otlp",
		"OTEL_TRACES_SAMPLER":     "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG": "ten percent",
	})
	fmt.Println(err)
	// Output:
	// OpenTelemetry's SDK cannot read its variables: OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG: parsing sampler argument: strconv.ParseFloat: parsing "ten percent": invalid syntax
}
