package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestOneSpansBytesNeverLoseTheBatch: the functions' exporter sends OTLP, whose text fields
// (span names, attribute values, status descriptions, event names) are protobuf strings, which
// must be UTF-8: a collector decoding with the OTLP definitions refuses a request holding one
// that is not, whole. A span's text is not always ours: an application's executor describes its
// failure by its error (an SMTP server's reply in Latin-1, "550 Boîte inconnue"), a planner's
// error, an id a provider sent in a form body ("%E9" decodes to one byte). One such span must
// not take every other span of the invocation (each intent of a stream batch of many events)
// with it: each kind of text below, in one span among others, loses the whole request.
func TestOneSpansBytesNeverLoseTheBatch(t *testing.T) {
	latin1 := "550 Bo\xeete inconnue" // as an SMTP server wrote it
	for name, mark := range map[string]func(tr sdktrace.ReadWriteSpan){
		"status description": func(s sdktrace.ReadWriteSpan) {
			s.SetStatus(codes.Error, errors.New("smtp: "+latin1).Error())
		},
		"attribute":       func(s sdktrace.ReadWriteSpan) { s.SetAttributes(attribute.String("oncehook.event_id", "caf\xe9")) },
		"event":           func(s sdktrace.ReadWriteSpan) { s.AddEvent("reply " + latin1) },
		"event attribute": func(s sdktrace.ReadWriteSpan) { s.RecordError(errors.New(latin1)) },
	} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		tracer := tp.Tracer("github.com/oncehook/oncehook/outbox")
		ctx, batch := tracer.Start(context.Background(), "outbox")
		for _, intent := range []string{"intent slack.post", "intent email.send", "intent crm.sync"} {
			_, s := tracer.Start(ctx, intent)
			if intent == "intent email.send" {
				mark(s.(sdktrace.ReadWriteSpan))
			}
			s.End()
		}
		batch.End()
		sink := newSink(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.URL)
		x, err := exporterFromEnv()
		if err != nil {
			t.Fatal(err)
		}
		err = x.ExportSpans(context.Background(), rec.Ended())
		if got := len(sink.spans()); got != 4 || err != nil {
			t.Errorf("%s with a byte that is not UTF-8: the collector took %d of the invocation's 4 spans (export: %v)", name, got, err)
		}
	}
}

// TestACollectorsPartialRejectionIsReported: OTLP/HTTP's answer to a request the collector took
// only in part is 200 OK with an ExportTraceServiceResponse whose partial_success names how
// many spans it rejected and why (a span over the backend's size limit, an attribute it
// refuses). The specification asks the client to report it (it must not retry), and
// OpenTelemetry's own otlptracehttp returns it as the export's error, which the SDK hands to
// the error handler: the function's log says spans were lost. The functions' exporter, which
// is held to otlptracehttp's behaviour (TestTheExporterWritesWhatOpenTelemetrysWrites), reads
// at most 256 bytes of a 2xx answer and drops them: the rejection reaches neither the export's
// error nor the error handler, and an operator whose traces are missing pieces is never told.
func TestACollectorsPartialRejectionIsReported(t *testing.T) {
	answer, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{
		RejectedSpans: 2, ErrorMessage: "span exceeds the maximum size"}})
	if err != nil {
		t.Fatal(err)
	}
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(answer)
	}))
	defer col.Close()
	spans := sampleSpans(t)

	// OpenTelemetry's own exporter reports it.
	theirs, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(col.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	if err := theirs.ExportSpans(context.Background(), spans); err == nil || !strings.Contains(err.Error(), "rejected") {
		t.Fatalf("otlptracehttp: %v, want the partial rejection reported", err)
	}

	var mu sync.Mutex
	var handled []error
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { mu.Lock(); handled = append(handled, err); mu.Unlock() }))
	t.Cleanup(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {})) })
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	ours, err := exporterFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	err = ours.ExportSpans(context.Background(), spans)
	mu.Lock()
	defer mu.Unlock()
	if err == nil && len(handled) == 0 {
		t.Errorf("the collector rejected 2 of %d spans (partial_success: %q): the functions' exporter returned no error and reported nothing; otlptracehttp reports it",
			len(spans), "span exceeds the maximum size")
	}
}

// TestAnExportTheCollectorAsksToRetryIsRetried: OTLP/HTTP names 429, 502, 503 and 504 as
// retryable (a collector whose memory limiter is refusing for a moment, a load balancer in
// front of it between two backends), the client to retry honouring Retry-After; OpenTelemetry's
// otlptracehttp does. The functions' exporter sends each invocation's spans once: a collector
// layer that answers 503 for the moment the invocation flushes (ADOT's memory limiter does)
// loses every span of that invocation, though the collector asked for the same request again
// at once (Retry-After: 0) and the flush had the time for it.
func TestAnExportTheCollectorAsksToRetryIsRetried(t *testing.T) {
	spans := sampleSpans(t)
	for _, code := range []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		// The collector refuses the first request of each exporter with code, and takes the next.
		for _, who := range []string{"otlptracehttp", "ours"} {
			sink := newSink(t)
			var mu sync.Mutex
			refused := 0
			inner := sink.Config.Handler
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				first := refused == 0
				if first {
					refused++
				}
				mu.Unlock()
				if first {
					w.Header().Set("Retry-After", "0")
					http.Error(w, "try again", code)
					return
				}
				inner.ServeHTTP(w, r)
			}))
			t.Cleanup(front.Close)
			var err error
			if who == "otlptracehttp" {
				x, xerr := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(front.URL+"/v1/traces"),
					// A retry as quick as the test wants (its default waits 5 s).
					otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond, MaxElapsedTime: time.Minute}))
				if xerr != nil {
					t.Fatal(xerr)
				}
				err = x.ExportSpans(context.Background(), spans)
			} else {
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", front.URL)
				ours, xerr := exporterFromEnv()
				if xerr != nil {
					t.Fatal(xerr)
				}
				err = ours.ExportSpans(context.Background(), spans)
			}
			if got := len(sink.spans()); got != len(spans) {
				msg := fmt.Sprintf("%s: the collector answered %d (Retry-After: 0) once: %d of %d spans reached it (export: %v)", who, code, got, len(spans), err)
				if who == "otlptracehttp" {
					t.Fatal(msg)
				}
				t.Error(msg)
			}
		}
	}
}

// TestAnEndpointsCredentialsAreNeverLogged: an endpoint with a password in it (a vendor's
// intake) is logged, and named in an export's failure, without it.
func TestAnEndpointsCredentialsAreNeverLogged(t *testing.T) {
	resetOtel(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://team:s3cr3t-key@127.0.0.1:1")
	var logs bytes.Buffer
	tr, err := TracingFromEnv(context.Background(), slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.Provider.Tracer("t").Start(context.Background(), "s")
	span.End()
	exp, _ := exporterFromEnv()
	failed := exp.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{span.(sdktrace.ReadOnlySpan)})
	if failed == nil || strings.Contains(failed.Error(), "s3cr3t") || strings.Contains(logs.String(), "s3cr3t") || !strings.Contains(logs.String(), "127.0.0.1:1") {
		t.Fatalf("logged %s; the export's error: %v", logs.String(), failed)
	}
}

// TestAnEndpointsTokenIsNeverLogged: export errors are logged without secrets. An
// intake that takes its key in the URL rather than a header (Sumo Logic's OTLP/HTTP source:
// https://endpoint…/receiver/v1/otlp/<token>/v1/traces; an intake with ?api-key=) has its
// secret in the path or the query, exactly as a webhook URL has (which the outbox never
// shows beyond scheme and host). As the endpoint's password is
// (TestAnEndpointsCredentialsAreNeverLogged), its path and query are kept out of the "tracing
// on" line at start and out of every failed export's error, which the error handler logs on
// every invocation while the collector is down or refusing.
//
// The space: the token in the path and in the query, the traces' endpoint and the general one,
// with the collector unreachable and answering 401 and 503.
func TestAnEndpointsTokenIsNeverLogged(t *testing.T) {
	const token = "ZaVnC4dhaV2Zk1Bd3tok3nXk9fQ"
	refusing := func(status int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	for _, base := range []string{"http://127.0.0.1:1", refusing(401), refusing(503)} {
		for _, c := range []struct{ variable, url string }{
			{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", base + "/receiver/v1/otlp/" + token + "/v1/traces"},
			{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", base + "/v1/traces?api-key=" + token},
			{"OTEL_EXPORTER_OTLP_ENDPOINT", base + "/receiver/v1/otlp/" + token},
			{"OTEL_EXPORTER_OTLP_ENDPOINT", base + "?api-key=" + token},
		} {
			t.Run("", func(t *testing.T) {
				resetOtel(t)
				t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
				t.Setenv(c.variable, c.url)
				var logs bytes.Buffer
				tr, err := TracingFromEnv(context.Background(), slog.New(slog.NewJSONHandler(&logs, nil)))
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tr.Shutdown(context.Background()) }()
				_, span := tr.Provider.Tracer("t").Start(context.Background(), "s")
				span.End()
				exp, err := exporterFromEnv()
				if err != nil {
					t.Fatal(err)
				}
				failed := exp.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{span.(sdktrace.ReadOnlySpan)})
				if failed == nil {
					t.Fatalf("%s=%s: the export did not fail", c.variable, c.url)
				}
				if strings.Contains(failed.Error(), token) {
					t.Errorf("%s=%s: the export's error (logged by the error handler) holds the endpoint's token: %v", c.variable, c.url, failed)
				}
				if strings.Contains(logs.String(), token) {
					t.Errorf("%s=%s: the start's log holds the endpoint's token: %s", c.variable, c.url, strings.TrimSpace(logs.String()))
				}
			})
		}
	}
}

// TestACollectorsAnswerNeverPutsTheEndpointsTokenInAnExportError: an intake whose key is its
// endpoint's path or query is never named beyond scheme, host and the standard path (x.shown),
// because the error handler logs every failed export. The collector's answer can quote the
// request it refuses, and the export's error must not carry that quote:
//
//   - An answer read whole: a server that quotes the request in its reason phrase or its body (a
//     framework's "404 Cannot POST /receiver/v1/otlp/<token>/v1/traces", a gateway's 401 naming
//     the path, a 503 page echoing the URL), or a 200 whose partial_success error_message names
//     the request. As the outbox describes a webhook's answer by its status code and standard
//     text, never the downstream's reason phrase or body.
//   - An answer net/http cannot read, whose refusal quotes the answer's bytes ("malformed MIME
//     header line: Cannot POST /…/<token>/v1/traces"): a header line without a colon, a status
//     line that is not HTTP, a bad Content-Length, each quoting the request. As the outbox
//     describes a call without an answer net/http could read by the kind of failure, never
//     net/http's quote of it.
//
// Each with the token in the path and in the query.
func TestACollectorsAnswerNeverPutsTheEndpointsTokenInAnExportError(t *testing.T) {
	const token = "ZaVnC4dhaV2Zk1Bd3tok3nXk9fQ"
	type answer struct {
		name    string
		handler http.HandlerFunc
	}
	var answers []answer
	// The answer 400, 401, 404, 500 and 503 (a retried one), quoting the request line in its body
	// or in its reason phrase, and a 200 whose partial_success error_message names the request.
	for _, status := range []int{200, 400, 401, 404, 500, 503} {
		for _, where := range []string{"body", "reason"} {
			if status == 200 && where == "reason" {
				continue
			}
			answers = append(answers, answer{fmt.Sprintf("%d, quoted in its %s", status, where), func(w http.ResponseWriter, r *http.Request) {
				echo := "Cannot POST " + r.URL.RequestURI()
				if status == 200 {
					// A partial success whose error_message names the request it rejected spans of.
					ps := protowire.AppendTag(nil, 1, protowire.VarintType)
					ps = protowire.AppendVarint(ps, 1)
					ps = protowire.AppendTag(ps, 2, protowire.BytesType)
					ps = protowire.AppendString(ps, "rejected 1 span of "+r.URL.RequestURI())
					b := protowire.AppendTag(nil, 1, protowire.BytesType)
					_, _ = w.Write(protowire.AppendBytes(b, ps))
					return
				}
				if where == "body" {
					w.WriteHeader(status)
					_, _ = fmt.Fprint(w, echo)
					return
				}
				conn, buf, err := w.(http.Hijacker).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				_, _ = fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status, echo)
				_ = buf.Flush()
			}})
		}
	}
	// Answers net/http cannot read, each quoting the request.
	for i, malformed := range []func(uri string) string{
		func(uri string) string {
			return "HTTP/1.1 404 Not Found\r\nCannot POST " + uri + "\r\nContent-Length: 0\r\n\r\n"
		},
		func(uri string) string { return "Cannot POST " + uri + "\r\n\r\n" },
		func(uri string) string { return "HTTP/1.1 200 OK\r\nContent-Length: " + uri + "\r\n\r\n" },
	} {
		answers = append(answers, answer{fmt.Sprintf("malformed answer %d", i), func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			_, _ = fmt.Fprint(buf, malformed(r.URL.RequestURI()))
			_ = buf.Flush()
		}})
	}
	for _, a := range answers {
		srv := httptest.NewServer(a.handler)
		for _, c := range []struct{ variable, url string }{
			{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv.URL + "/receiver/v1/otlp/" + token + "/v1/traces"},
			{"OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL + "/receiver/v1/otlp/" + token},
			{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv.URL + "/v1/traces?api-key=" + token},
		} {
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
			t.Setenv(c.variable, c.url)
			exp, err := exporterFromEnv()
			if err != nil {
				t.Fatal(err)
			}
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			_, span := tp.Tracer("t").Start(context.Background(), "s")
			span.End()
			// A 503 is retried (at most 5 attempts, a doubling wait from 25 ms), then failed.
			failed := exp.ExportSpans(context.Background(), rec.Ended())
			if failed == nil {
				t.Fatalf("%s, %s=%s: the export did not fail", a.name, c.variable, c.url)
			}
			if strings.Contains(failed.Error(), token) {
				t.Errorf("%s; %s=…%s: the export's error (logged on every failed export) holds the endpoint's token: %v",
					a.name, c.variable, strings.TrimPrefix(c.url, srv.URL), failed)
			}
		}
		srv.Close()
	}
}
