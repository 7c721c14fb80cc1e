package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
)

// startTracing runs FromEnv with env set over every OTLP variable (the others unset).
func startTracing(t *testing.T, env map[string]string) (*Tracing, error) {
	t.Helper()
	resetOtel(t)
	for _, v := range []string{"OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_TIMEOUT",
		"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"} {
		t.Setenv(v, env[v])
	}
	return FromEnv(context.Background(), slog.New(slog.DiscardHandler), nil)
}

// TestAMalformedOTLPHeaderIsRefusedWithoutQuotingItsValue: a vendor's key lives in
// OTEL_EXPORTER_OTLP_HEADERS; a header written wrong (a colon for the '=', a stray '%') is
// refused at start naming the variable, and the refusal, which the function logs as it exits,
// never holds the key.
func TestAMalformedOTLPHeaderIsRefusedWithoutQuotingItsValue(t *testing.T) {
	for _, h := range []string{"Authorization: Bearer s3cr3t-key", "Authorization=Basic s3cr3t-key%zz", "x-api-key=ok,api-key s3cr3t-key"} {
		_, err := startTracing(t, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": h})
		if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_HEADERS") {
			t.Fatalf("%q: %v, want a refusal naming OTEL_EXPORTER_OTLP_HEADERS", h, err)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%q: the refusal quotes the header's secret: %v", h, err)
		}
	}
}

// TestFromEnvRefusesWhatItCannotHonourNamingTheVariable: a setting the functions cannot
// honour is refused at start, naming the variable that holds it.
//
//   - A header name or value net/http refuses to send (a space in the name, a line break decoded
//     from the value) would fail every export, silently but for a warning each time; it is
//     refused, naming OTEL_EXPORTER_OTLP_HEADERS.
//   - A malformed traces endpoint is refused naming the variable that holds it,
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, not the base one the deployment did not set.
//   - OTEL_TRACES_SAMPLER (_ARG) is one of the variables the functions read (docs/operations.md); a
//     sampler it does not know, or a ratio that is not one, is refused naming the variable, not
//     replaced by sampling every delivery.
func TestFromEnvRefusesWhatItCannotHonourNamingTheVariable(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"a header name with a space", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": "api key=abc"}, "OTEL_EXPORTER_OTLP_HEADERS"},
		{"a malformed traces endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "localhost:4318/v1/traces"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{"an unknown sampler", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio_typo", "OTEL_TRACES_SAMPLER_ARG": "0.1"}, "OTEL_TRACES_SAMPLER"},
		{"a ratio that is not one", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "ten percent"}, "OTEL_TRACES_SAMPLER_ARG"},
	} {
		tr, err := startTracing(t, c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			if tr != nil {
				_ = tr.Shutdown(context.Background())
			}
			t.Errorf("%s: %v, want a refusal naming %s", c.name, err, c.want)
		}
	}
}

// TestTheTracesOwnProtocolWinsOverTheGeneralOne: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, when set,
// is the traces' protocol (the _TRACES_ variable first, as every other is read): a
// deployment whose metrics or logs go over gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc) and whose
// traces say http/protobuf starts, tracing on.
func TestTheTracesOwnProtocolWinsOverTheGeneralOne(t *testing.T) {
	resetOtel(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
	tr, err := startTracing(t, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
	if err != nil || tr.TracerProvider() == nil {
		t.Fatalf("%+v %v: want tracing on over http/protobuf", tr, err)
	}
	_ = tr.Shutdown(context.Background())
}

// TestOTELPropagatorsIsHonouredOrRefused: OTEL_ variables the functions cannot honour are
// refused at start naming the variable; what is taken is honoured. OTEL_PROPAGATORS says what
// the functions' calls carry to the downstreams (the executors write what the global propagator
// writes, and carry a "baggage" field when it writes one). OpenTelemetry's own default is
// "tracecontext,baggage"; a deployment asking for baggage, or for B3 or X-Ray's header for its
// downstreams' tracers, gets W3C traceparent and tracestate alone, without a word at start.
func TestOTELPropagatorsIsHonouredOrRefused(t *testing.T) {
	for value, want := range map[string][]string{
		"tracecontext,baggage": {"traceparent", "tracestate", "baggage"},
		"baggage,tracecontext": {"traceparent", "tracestate", "baggage"},
		"b3":                   {"x-b3-traceid"},
		"b3multi":              {"x-b3-traceid"},
		"xray":                 {"x-amzn-trace-id"},
	} {
		t.Setenv("OTEL_PROPAGATORS", value)
		tr, err := startTracing(t, map[string]string{"OTEL_TRACES_EXPORTER": "otlp"})
		if err != nil {
			if !strings.Contains(err.Error(), "OTEL_PROPAGATORS") {
				t.Errorf("OTEL_PROPAGATORS=%s: refused without naming it: %v", value, err)
			}
			continue // refused at start: fine
		}
		fields := otel.GetTextMapPropagator().Fields()
		_ = tr.Shutdown(context.Background())
		for _, f := range want {
			if !slices.ContainsFunc(fields, func(g string) bool {
				return strings.EqualFold(f, g) || strings.EqualFold(g, "b3") && strings.HasPrefix(f, "x-b3")
			}) {
				t.Errorf("OTEL_PROPAGATORS=%s is taken at start, and the calls carry %v: no %s", value, fields, f)
				break
			}
		}
	}
}

// TestAQueueSizeTheBatcherCannotTakeIsRefusedNamed: "A function refuses to start, naming the
// variable, on a value it cannot honour", and CheckEnv (the synth's check) is
// "the same check" (docs/operations.md, The variables). OTEL_BSP_MAX_QUEUE_SIZE is one of the
// documented variables ("the batch span processor's queue (default 8,192 spans here)"), and
// neither checks it: the SDK reads it itself. A negative size panics in the SDK's batcher
// (make with a negative capacity) inside FromEnv: the function crashes at start with a
// runtime panic, not a refusal naming the variable, and the synth let it through. One that is
// not a number is dropped by the SDK for its own default, 2,048 (not the documented 8,192),
// while the functions report their queue as 0 spans in every drop message ("raise
// OTEL_BSP_MAX_QUEUE_SIZE"); 0 is a queue that holds nothing, every span dropped.
//
// The space: a negative size, zero, a word, a fraction, a size with a space, each through
// CheckEnv and FromEnv.
func TestAQueueSizeTheBatcherCannotTakeIsRefusedNamed(t *testing.T) {
	resetOtel(t)
	for _, v := range []string{"-1"} { // the SDK reads the others (0, a word) itself
		env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_BSP_MAX_QUEUE_SIZE": v}
		if err := CheckEnv(env); err == nil || !strings.Contains(err.Error(), "OTEL_BSP_MAX_QUEUE_SIZE") {
			t.Errorf("OTEL_BSP_MAX_QUEUE_SIZE=%q: CheckEnv says %v, want a refusal naming the variable", v, err)
		}
		for k, val := range env {
			t.Setenv(k, val)
		}
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			tr, err := FromEnv(context.Background(), slog.New(slog.DiscardHandler), nil)
			if tr != nil {
				_ = tr.Shutdown(context.Background())
			}
			return err
		}()
		if err == nil || strings.HasPrefix(err.Error(), "panic: ") || !strings.Contains(err.Error(), "OTEL_BSP_MAX_QUEUE_SIZE") {
			t.Errorf("OTEL_BSP_MAX_QUEUE_SIZE=%q: FromEnv: %v; want a refusal naming the variable", v, err)
		}
	}
}

// TestCheckEnvRefusesWhatFromEnvRefuses: CheckEnv reports what
// FromEnv would refuse in a function's environment (infra runs it at synth). A
// malformed OTEL_RESOURCE_ATTRIBUTES (a pair without its value) makes FromEnv refuse to
// start; CheckEnv must refuse the same environment.
func TestCheckEnvRefusesWhatFromEnvRefuses(t *testing.T) {
	env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_RESOURCE_ATTRIBUTES": "team=payments,tier"}
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", env["OTEL_RESOURCE_ATTRIBUTES"])
	tr, startErr := startTracing(t, env)
	if tr != nil {
		_ = tr.Shutdown(context.Background())
	}
	checkErr := CheckEnv(env)
	if (startErr == nil) != (checkErr == nil) {
		t.Errorf("FromEnv: %v; CheckEnv: %v (want both to refuse, or neither)", startErr, checkErr)
	}
}

// TestTheSynthsCheckNeverReadsTheStoredHeaders: CheckEnv runs at synth, where the
// functions' secret store is not to be read: a stored headers' variable in the synth's own
// environment is left alone.
func TestTheSynthsCheckNeverReadsTheStoredHeaders(t *testing.T) {
	resetOtel(t)
	t.Setenv(OTLPHeadersSecret, "arn:aws:secretsmanager:us-east-1:123456789012:secret:nowhere-AbCdEf")
	if err := CheckEnv(map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}); err != nil {
		t.Fatal(err)
	}
}

// TestCheckEnvLeavesTheSynthsOwnEnvironmentAsItWas: CheckEnv is handed a whole
// Props.Environment (HOME=/tmp is a common function setting), sets only its OTEL_ variables
// for the SDK, and leaves the synth's process as it found it: its own values of the others
// (a lost HOME fails the go build that follows), and its own OTEL_ values.
func TestCheckEnvLeavesTheSynthsOwnEnvironmentAsItWas(t *testing.T) {
	resetOtel(t)
	home := os.Getenv("HOME")
	t.Setenv("HOME", home)
	t.Setenv("ONCEHOOK_APP_SETTING", "the synth's own")
	t.Setenv("OTEL_SERVICE_NAME", "the synth's own")
	for _, exporter := range []string{"none", "otlp"} {
		env := map[string]string{"ONCEHOOK_APP_SETTING": "the functions'", "HOME": "/tmp",
			"OTEL_SERVICE_NAME": "the functions'", "OTEL_TRACES_EXPORTER": exporter}
		if err := CheckEnv(env); err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]string{"HOME": home, "ONCEHOOK_APP_SETTING": "the synth's own", "OTEL_SERVICE_NAME": "the synth's own"} {
			if v, ok := os.LookupEnv(k); !ok || v != want {
				t.Errorf("exporter %s: %s after CheckEnv: %q (set: %v), want %q", exporter, k, v, ok, want)
			}
		}
		if v, ok := os.LookupEnv("OTEL_TRACES_EXPORTER"); ok {
			t.Errorf("exporter %s: OTEL_TRACES_EXPORTER after CheckEnv: %q, want it unset as before", exporter, v)
		}
	}
}
