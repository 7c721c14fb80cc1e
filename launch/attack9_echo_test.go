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
	"google.golang.org/protobuf/encoding/protowire"
)

// TestAnEchoingCollectorNeverPutsTheEndpointsTokenInAnExportError: an intake whose key is its
// endpoint's path or query is never named beyond scheme, host and the standard path (x.shown),
// because the error handler logs every failed export. But the export's error quotes the
// collector's answer whole: its reason phrase and its body. A server that quotes the request it
// refuses (a framework's "404 Cannot POST /receiver/v1/otlp/<token>/v1/traces", a gateway's
// 401 naming the path, a 503 page echoing the URL) puts the token back in the error, logged on
// every invocation while it refuses. The outbox learnt this of webhook URLs (a span describes an
// answer by its status code and standard text, never the downstream's reason phrase or body,
// which can quote the path); the exporter did not.
//
// The space: the token in the path and in the query; the answer 400, 401, 404, 500 and 503 (a
// retried one), quoting the request line in its body or in its reason phrase, and a 200 whose
// partial_success error_message names the request.
func TestAnEchoingCollectorNeverPutsTheEndpointsTokenInAnExportError(t *testing.T) {
	const token = "ZaVnC4dhaV2Zk1Bd3tok3nXk9fQ"
	for _, status := range []int{200, 400, 401, 404, 500, 503} {
		for _, where := range []string{"body", "reason"} {
			if status == 200 && where == "reason" {
				continue
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
				// A 503 is retried (at most 5 attempts, a doubling wait from 25 ms), then failed.
				failed := exp.ExportSpans(context.Background(), rec.Ended())
				if failed == nil {
					t.Fatalf("%d (%s), %s=%s: the export did not fail", status, where, c.variable, c.url)
				}
				if strings.Contains(failed.Error(), token) {
					t.Errorf("%d, quoted in its %s; %s=…%s: the export's error (logged on every failed export) holds the endpoint's token: %v",
						status, where, c.variable, strings.TrimPrefix(c.url, srv.URL), failed)
				}
			}
			srv.Close()
		}
	}
}
