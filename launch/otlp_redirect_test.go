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

// TestAnExportIsRedirectedOnlyWithinItsOrigin: the export's headers hold a vendor's key, and
// net/http forwards every header but Authorization and Cookie to wherever a redirect points.
// A redirect within the endpoint's origin (a trailing slash, a moved path) is followed; one to
// another host or port is not, and the export fails naming the endpoint, never the key: the
// other origin receives nothing.
func TestAnExportIsRedirectedOnlyWithinItsOrigin(t *testing.T) {
	const key = "vendor-key-s3cr3t"
	var mu sync.Mutex
	var elsewhere []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Header.Get("Api-Key"))
		mu.Unlock()
	}))
	defer other.Close()
	var moved []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/same/v1/traces":
			http.Redirect(w, r, "/moved/v1/traces", http.StatusPermanentRedirect)
		case "/moved/v1/traces":
			mu.Lock()
			moved = append(moved, r.Header.Get("Api-Key"))
			mu.Unlock()
		case "/away/v1/traces":
			http.Redirect(w, r, other.URL+"/v1/traces", http.StatusTemporaryRedirect)
		}
	}))
	defer collector.Close()
	export := func(base string) error {
		env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": base, "OTEL_EXPORTER_OTLP_HEADERS": "api-key=" + key}
		s, err := otelenv.Read(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return exporter(t, s).ExportSpans(context.Background(), sampleSpans(t))
	}
	if err := export(collector.URL + "/same"); err != nil {
		t.Errorf("a redirect within the origin: %v", err)
	}
	err := export(collector.URL + "/away")
	if err == nil || strings.Contains(err.Error(), key) {
		t.Errorf("a redirect to another origin: %v, want a failure that does not quote the key", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(moved) != 1 || moved[0] != key {
		t.Errorf("the redirect within the origin reached it with %q", moved)
	}
	if len(elsewhere) != 0 {
		t.Errorf("another origin received the export, with the key %q", elsewhere)
	}
}
