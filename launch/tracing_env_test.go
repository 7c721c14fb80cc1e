package launch

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/internal/otelenv"
)

// startTracing runs TracingFromEnv with env set over every OTLP variable (the others unset).
func startTracing(t *testing.T, env map[string]string) (*Tracing, error) {
	t.Helper()
	resetOtel(t)
	for _, v := range []string{"OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_TIMEOUT",
		"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"} {
		t.Setenv(v, env[v])
	}
	return TracingFromEnv(context.Background(), slog.New(slog.DiscardHandler))
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

// TestTracingFromEnvRefusesWhatItCannotHonourNamingTheVariable: a setting the functions cannot
// honour is refused at start, naming the variable that holds it.
//
//   - A header name or value net/http refuses to send (a space in the name, a line break decoded
//     from the value) would fail every export, silently but for a warning each time; it is
//     refused, naming OTEL_EXPORTER_OTLP_HEADERS.
//   - A malformed traces endpoint is refused naming the variable that holds it,
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, not the base one the deployment did not set.
//   - OTEL_TRACES_SAMPLER (_ARG) is one of the variables launch reads (docs/operations.md); a
//     sampler it does not know, or a ratio that is not one, is refused naming the variable, not
//     replaced by sampling every delivery.
func TestTracingFromEnvRefusesWhatItCannotHonourNamingTheVariable(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"a header name with a space", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": "api key=abc"}, "OTEL_EXPORTER_OTLP_HEADERS"},
		{"a header value with a line break", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=abc%0D%0AX-Injected: 1"}, "OTEL_EXPORTER_OTLP_HEADERS"},
		{"a header value with a NUL", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=abc%00"}, "OTEL_EXPORTER_OTLP_HEADERS"},
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
// is the traces' protocol (the _TRACES_ variable first, as launch reads every other): a
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

// TestAnOTLPHeaderTheExporterCannotSendIsRefusedAtStartUnquoted: a header the exporter cannot
// send as given is refused at start, naming the variable, "rather than failing every export";
// and a header's value (a vendor's key) never appears in an error, which the error handler
// logs on every failed export. Against an https endpoint (HTTP/2, as net/http negotiates with a
// vendor's intake), a Connection, Upgrade or Transfer-Encoding header fails every export with
// an error that quotes its value; Host, Trailer and Transfer-Encoding (HTTP/1.1) and Keep-Alive
// (HTTP/2) are dropped unsent. Each is taken at start.
func TestAnOTLPHeaderTheExporterCannotSendIsRefusedAtStartUnquoted(t *testing.T) {
	const key = "s3cr3t-vendor-key"
	for _, h2 := range []bool{false, true} {
		for _, name := range []string{"Host", "Transfer-Encoding", "Trailer", "Connection", "Upgrade", "Keep-Alive"} {
			var mu sync.Mutex
			var got []string
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				got = r.Header.Values(name)
				if name == "Host" {
					got = []string{r.Host}
				}
			}))
			if h2 {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_HEADERS": name + "=" + key}
			s, err := otelenv.Read(func(k string) string { return env[k] })
			if err != nil {
				if !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_HEADERS") || strings.Contains(err.Error(), key) {
					t.Errorf("%s (%s): refused as %v, want a refusal naming the variable, never quoting the value", name, srv.URL[:5], err)
				}
				srv.Close()
				continue // refused at start: what the promise asks
			}
			x := exporter(t, s)
			x.client.Transport = srv.Client().Transport // trusts the test server's certificate
			_, span := sdktrace.NewTracerProvider().Tracer("t").Start(context.Background(), "s")
			span.End()
			failed := x.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{span.(sdktrace.ReadOnlySpan)})
			mu.Lock()
			sent := len(got) == 1 && got[0] == key
			mu.Unlock()
			proto := "HTTP/1.1"
			if h2 {
				proto = "HTTP/2"
			}
			switch {
			case failed != nil && strings.Contains(failed.Error(), key):
				t.Errorf("%s (%s): taken at start; every export fails with an error quoting the header's value: %v", name, proto, failed)
			case failed != nil:
				t.Errorf("%s (%s): taken at start; every export fails: %v", name, proto, failed)
			case !sent:
				t.Errorf("%s (%s): taken at start, and never sent (the collector saw %q)", name, proto, got)
			}
			srv.Close()
		}
	}
}

// TestTheTracesOwnHeadersReplaceTheGeneralOnes: the _TRACES_ variable wins over the general one.
// A deployment exporting its traces to one backend and its other signals (metrics, logs, the
// collector layer's own) to another sets each pair: OTEL_EXPORTER_OTLP_ENDPOINT and _HEADERS
// for the general one, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and _TRACES_HEADERS for traces.
// OpenTelemetry's own exporter (otlptracehttp, reading the same variables) sends the traces'
// endpoint the traces' headers alone; the functions' exporter adds the general ones, so the
// general backend's key is sent to the traces' backend, another vendor, on every export.
func TestTheTracesOwnHeadersReplaceTheGeneralOnes(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	traces := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
	}))
	defer traces.Close()
	env := map[string]string{
		"OTEL_TRACES_EXPORTER":               "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT":        "https://metrics.vendor-a.example",
		"OTEL_EXPORTER_OTLP_HEADERS":         "dd-api-key=vendor-a-secret",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": traces.URL + "/v1/traces",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS":  "x-honeycomb-team=vendor-b-key",
	}
	_, span := sdktrace.NewTracerProvider().Tracer("t").Start(context.Background(), "s")
	span.End()
	spans := []sdktrace.ReadOnlySpan{span.(sdktrace.ReadOnlySpan)}

	// OpenTelemetry's own exporter, from the same environment.
	for k, v := range env {
		t.Setenv(k, v)
	}
	theirs, err := otlptracehttp.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := theirs.ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	// The functions'.
	s, err := otelenv.Read(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if err := exporter(t, s).ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d exports reached the traces' endpoint, want 2", len(got))
	}
	for i, who := range []string{"otlptracehttp", "the functions' exporter"} {
		if v := got[i].Get("Dd-Api-Key"); v != "" {
			t.Errorf("%s sent the general backend's key to the traces' endpoint: Dd-Api-Key: %s", who, v)
		}
		if v := got[i].Get("X-Honeycomb-Team"); v != "vendor-b-key" {
			t.Errorf("%s sent X-Honeycomb-Team %q, want the traces' own", who, v)
		}
	}
}

// TestTheTracesOwnHeaderWinsWhateverItsCase: OTEL_EXPORTER_OTLP_TRACES_HEADERS wins over
// OTEL_EXPORTER_OTLP_HEADERS (the traces' own variable over the general one). HTTP header names
// are case-insensitive: the traces' "Api-Key" replaces the general "api-key", on every export,
// rather than one of the two being sent at random (the map's order).
func TestTheTracesOwnHeaderWinsWhateverItsCase(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		for _, v := range r.Header.Values("Api-Key") {
			seen[v]++
		}
	}))
	defer srv.Close()
	env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL,
		"OTEL_EXPORTER_OTLP_HEADERS": "api-key=general-key", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "Api-Key=traces-key"}
	s, err := otelenv.Read(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	x := exporter(t, s)
	_, span := sdktrace.NewTracerProvider().Tracer("t").Start(context.Background(), "s")
	span.End()
	for range 50 {
		if err := x.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{span.(sdktrace.ReadOnlySpan)}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["general-key"] != 0 || seen["traces-key"] != 50 {
		t.Errorf("of 50 exports, %d sent the traces' own key and %d the general one", seen["traces-key"], seen["general-key"])
	}
}

// TestAnEndpointWithAQueryIsHonouredOrRefused: OTEL_EXPORTER_OTLP_ENDPOINT is a base URL, to
// whose path /v1/traces is added. What the start takes it honours, and what it cannot honour it
// refuses naming the variable. An endpoint with a query (a tenant, a region, a key some intakes
// take there) or a fragment is taken at start, then /v1/traces is appended to the whole text:
// into the query, so every export is posted to the base path (not /v1/traces), with the
// query's last value changed.
func TestAnEndpointWithAQueryIsHonouredOrRefused(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path+" ? "+r.URL.RawQuery)
		mu.Unlock()
	}))
	defer srv.Close()
	for _, c := range []struct{ endpoint, want string }{
		{srv.URL + "/otlp?tenant=acme", "/otlp/v1/traces ? tenant=acme"},
		{srv.URL + "?tenant=acme", "/v1/traces ? tenant=acme"},
		{srv.URL + "/otlp/?tenant=acme&region=eu", "/otlp/v1/traces ? tenant=acme&region=eu"},
		{srv.URL + "/otlp#traces", "/otlp/v1/traces ? "},
	} {
		env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": c.endpoint}
		s, err := otelenv.Read(func(k string) string { return env[k] })
		if err != nil {
			if !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_ENDPOINT") {
				t.Errorf("%s: refused without naming the variable: %v", c.endpoint, err)
			}
			continue // refused at start, naming it: fine
		}
		mu.Lock()
		got = nil
		mu.Unlock()
		if err := exporter(t, s).ExportSpans(context.Background(), sampleSpans(t)); err != nil {
			t.Errorf("%s: %v", c.endpoint, err)
			continue
		}
		mu.Lock()
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT=%s is taken at start, and the export is posted to %q, want %q (or a refusal at start)", c.endpoint, got, c.want)
		}
		mu.Unlock()
	}
}

// TestAnOTLPCertificateIsHonouredOrRefused: OTEL_ variables the functions cannot honour are
// refused at start, naming the variable; what is taken is honoured. A collector of the team's
// own behind a private CA is configured by OpenTelemetry's OTEL_EXPORTER_OTLP_CERTIFICATE (or
// _TRACES_CERTIFICATE), the CA's PEM file, as otlptracehttp honours it. The functions take it
// at start without a word and never read it: every export then fails certificate
// verification, and every span is lost.
func TestAnOTLPCertificateIsHonouredOrRefused(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes the client refuses
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	_, span := sdktrace.NewTracerProvider().Tracer("t").Start(context.Background(), "s")
	span.End()
	for _, v := range []string{"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"} {
		env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, v: ca}
		s, err := otelenv.Read(func(k string) string { return env[k] })
		if err != nil {
			if !strings.Contains(err.Error(), v) {
				t.Errorf("%s: refused without naming it: %v", v, err)
			}
			continue // refused at start: fine
		}
		if err := exporter(t, s).ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{span.(sdktrace.ReadOnlySpan)}); err != nil {
			t.Errorf("%s (the collector's CA) is taken at start and never used: every export fails: %v", v, err)
		}
	}
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

// TestAQueueSizeTheBatcherCannotTakeIsRefusedNamed: "A function refuses to start, naming the
// variable, on a value it cannot honour", and launch.CheckTracingEnv (the synth's check) is
// "the same check" (docs/operations.md, The variables). OTEL_BSP_MAX_QUEUE_SIZE is one of the
// documented variables ("the batch span processor's queue (default 8,192 spans here)"), and
// neither checks it: the SDK reads it itself. A negative size panics in the SDK's batcher
// (make with a negative capacity) inside TracingFromEnv: the function crashes at start with a
// runtime panic, not a refusal naming the variable, and the synth let it through. One that is
// not a number is dropped by the SDK for its own default, 2,048 (not the documented 8,192),
// while launch reports its queue as 0 spans in every drop message ("raise
// OTEL_BSP_MAX_QUEUE_SIZE"); 0 is a queue that holds nothing, every span dropped.
//
// The space: a negative size, zero, a word, a fraction, a size with a space, each through
// CheckTracingEnv and TracingFromEnv.
func TestAQueueSizeTheBatcherCannotTakeIsRefusedNamed(t *testing.T) {
	resetOtel(t)
	for _, v := range []string{"-1", "0", "abc", "1.5", " 8192"} {
		env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_BSP_MAX_QUEUE_SIZE": v}
		if err := CheckTracingEnv(env); err == nil || !strings.Contains(err.Error(), "OTEL_BSP_MAX_QUEUE_SIZE") {
			t.Errorf("OTEL_BSP_MAX_QUEUE_SIZE=%q: CheckTracingEnv says %v, want a refusal naming the variable", v, err)
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
			tr, err := TracingFromEnv(context.Background(), slog.New(slog.DiscardHandler))
			if tr != nil {
				_ = tr.Shutdown(context.Background())
			}
			return err
		}()
		if err == nil || strings.HasPrefix(err.Error(), "panic: ") || !strings.Contains(err.Error(), "OTEL_BSP_MAX_QUEUE_SIZE") {
			t.Errorf("OTEL_BSP_MAX_QUEUE_SIZE=%q: TracingFromEnv: %v; want a refusal naming the variable", v, err)
		}
	}
}

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
