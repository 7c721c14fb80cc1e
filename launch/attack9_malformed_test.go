package launch

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestAMalformedCollectorAnswerNeverPutsTheEndpointsTokenInAnExportError: a failed export's
// error names the endpoint by scheme and host only (an intake's key can be its path or query),
// and then wraps net/http's error whole. net/http's refusal of an answer it cannot read quotes
// the answer's bytes ("malformed MIME header line: Cannot POST /…/<token>/v1/traces"), so a
// collector or a proxy before it that answers with a bad header line naming the request puts
// the token in the error the error handler logs on every export. The outbox learnt this of
// webhook calls (a call without an answer net/http could read is described by the kind of
// failure, never net/http's quote of it); the exporter did not.
//
// The space: the token in the path and in the query; a header line without a colon, a status
// line that is not HTTP, a bad Content-Length, each quoting the request.
func TestAMalformedCollectorAnswerNeverPutsTheEndpointsTokenInAnExportError(t *testing.T) {
	const token = "ZaVnC4dhaV2Zk1Bd3tok3nXk9fQ"
	answers := []func(uri string) string{
		func(uri string) string {
			return "HTTP/1.1 404 Not Found\r\nCannot POST " + uri + "\r\nContent-Length: 0\r\n\r\n"
		},
		func(uri string) string { return "Cannot POST " + uri + "\r\n\r\n" },
		func(uri string) string { return "HTTP/1.1 200 OK\r\nContent-Length: " + uri + "\r\n\r\n" },
	}
	for i, answer := range answers {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			_, _ = fmt.Fprint(buf, answer(r.URL.RequestURI()))
			_ = buf.Flush()
		}))
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
			failed := exp.ExportSpans(context.Background(), rec.Ended())
			if failed == nil {
				t.Fatalf("answer %d, %s=%s: the export did not fail", i, c.variable, c.url)
			}
			if strings.Contains(failed.Error(), token) {
				t.Errorf("answer %d; %s=…%s: the export's error (logged on every failed export) holds the endpoint's token: %v",
					i, c.variable, strings.TrimPrefix(c.url, srv.URL), failed)
			}
		}
		srv.Close()
	}
}
