package tracing

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestAnEndpointsCredentialsAreNeverLogged: an endpoint with a password in it (a vendor's
// intake) is logged, and named in an export's failure, without it.
func TestAnEndpointsCredentialsAreNeverLogged(t *testing.T) {
	resetOtel(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://team:s3cr3t-key@127.0.0.1:1")
	var logs bytes.Buffer
	tr, err := FromEnv(context.Background(), slog.New(slog.NewJSONHandler(&logs, nil)), nil)
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
				tr, err := FromEnv(context.Background(), slog.New(slog.NewJSONHandler(&logs, nil)), nil)
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
				// The invocation's flush exports the span as the functions do, its failure logged
				// by the error handler; and it leaves the shutdown nothing to retry (a 503 is
				// retried until the batcher's 30 s export timeout).
				tr.Flush(context.Background())
				if strings.Contains(logs.String(), token) {
					t.Errorf("%s=%s: the start's or the flush's log holds the endpoint's token: %s", c.variable, c.url, strings.TrimSpace(logs.String()))
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
					w.Header().Set("Content-Type", "application/x-protobuf")
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
