package launch

import (
	"context"
	"strconv"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestASamplerArgThatIsNoRatioIsRefused: OTEL_TRACES_SAMPLER_ARG for a traceidratio sampler must
// be "a ratio from 0 to 1"; one that is not is refused at start (and at synth), since the SDK
// would otherwise sample otherwise than asked. NaN parses as a float and is neither below 0
// nor above 1, so it passes the range check; the SDK then takes it as a ratio, and converts
// NaN × 2^63 to the bound it compares trace ids against: a conversion Go leaves to the
// platform (on amd64 every trace is sampled, whatever the deployment asked for).
func TestASamplerArgThatIsNoRatioIsRefused(t *testing.T) {
	for _, sampler := range []string{"traceidratio", "parentbased_traceidratio"} {
		for _, arg := range []string{"NaN", "nan", "NAN"} {
			env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": sampler, "OTEL_TRACES_SAMPLER_ARG": arg}
			if err := CheckTracingEnv(env); err == nil {
				t.Errorf("%s with OTEL_TRACES_SAMPLER_ARG=%q is taken at start: %s", sampler, arg, sampledShare(t, sampler, arg))
			}
		}
	}
}

// sampledShare says what the SDK, reading the same variables, makes of them.
func sampledShare(t *testing.T, sampler, arg string) string {
	t.Setenv("OTEL_TRACES_SAMPLER", sampler)
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", arg)
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	sampled := 0
	for range 256 {
		_, s := tp.Tracer("t").Start(context.Background(), "x")
		if s.SpanContext().TraceFlags()&trace.FlagsSampled != 0 {
			sampled++
		}
		s.End()
	}
	return "the SDK samples " + strconv.Itoa(sampled) + " of 256 new traces"
}
