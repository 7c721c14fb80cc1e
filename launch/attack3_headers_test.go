package launch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/oncehook/oncehook/internal/otelenv"
)

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
