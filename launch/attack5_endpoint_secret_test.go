package launch

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestAnEndpointsTokenIsNeverLogged: export errors are logged without secrets. An
// intake that takes its key in the URL rather than a header (Sumo Logic's OTLP/HTTP source:
// https://endpoint…/receiver/v1/otlp/<token>/v1/traces; an intake with ?api-key=) has its
// secret in the path or the query, exactly as a webhook URL has (which the outbox never
// shows beyond scheme and host). The endpoint's password is redacted (the project's own test
// of it holds), but its path and query are written whole in the "tracing on" line at start
// and in every failed export's error, which the error handler logs on every invocation while
// the collector is down or refusing.
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
