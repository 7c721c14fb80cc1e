package launch

import (
	"context"
	"testing"
)

// TestCheckTracingEnvRefusesWhatTracingFromEnvRefuses: CheckTracingEnv reports what
// TracingFromEnv would refuse in a function's environment (infra runs it at synth). A
// malformed OTEL_RESOURCE_ATTRIBUTES (a pair without its value) makes TracingFromEnv refuse to
// start; CheckTracingEnv must refuse the same environment.
func TestCheckTracingEnvRefusesWhatTracingFromEnvRefuses(t *testing.T) {
	env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_RESOURCE_ATTRIBUTES": "team=payments,tier"}
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", env["OTEL_RESOURCE_ATTRIBUTES"])
	tr, startErr := startTracing(t, env)
	if tr != nil {
		_ = tr.Shutdown(context.Background())
	}
	checkErr := CheckTracingEnv(env)
	if (startErr == nil) != (checkErr == nil) {
		t.Errorf("TracingFromEnv: %v; CheckTracingEnv: %v (want both to refuse, or neither)", startErr, checkErr)
	}
}
