package launch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/oncehook/oncehook/internal/otelenv"
)

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
