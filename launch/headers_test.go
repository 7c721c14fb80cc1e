package launch

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/launch/tracing"
)

// storeHeaders puts value in the emulator's Secrets Manager and SSM (a SecureString) under a
// name of the test's own, and returns the names.
func storeHeaders(t *testing.T, value string) (secret, param string) {
	t.Helper()
	cfg := awstest.Config(t)
	sm, ps := secretsmanager.NewFromConfig(cfg), ssm.NewFromConfig(cfg)
	prefix := "oncehook-test/" + strings.ReplaceAll(t.Name(), "/", "-") + "-"
	return awstest.Secret(t, sm, prefix, value), awstest.Parameter(t, ps, "/"+prefix, value)
}

// collector is an OTLP/HTTP endpoint that records the headers of each export.
func collector(t *testing.T) (string, func() []http.Header) {
	var mu sync.Mutex
	var got []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []http.Header { mu.Lock(); defer mu.Unlock(); return append([]http.Header(nil), got...) }
}

// TestTheExportersHeadersAreReadFromASecretStoreAtStart: an intake's key, held in Secrets
// Manager or an SSM SecureString parameter (in OTEL_EXPORTER_OTLP_HEADERS' form or as a JSON
// object), is read once at start and sent with every export, and never logged.
func TestTheExportersHeadersAreReadFromASecretStoreAtStart(t *testing.T) {
	const key = "k3y-0f-the-intake"
	for _, value := range []string{"api-key=" + key + ",x-team=pay%20ments", `{"api-key":"` + key + `","x-team":"pay ments"}`} {
		secret, param := storeHeaders(t, value)
		for variable, name := range map[string]string{tracing.OTLPHeadersSecret: secret, tracing.OTLPHeadersParameter: param} {
			t.Run(variable, func(t *testing.T) {
				resetOtel(t)
				url, exports := collector(t)
				t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
				t.Setenv(variable, name)
				var logs bytes.Buffer
				tr, err := tracing.FromEnv(context.Background(), slog.New(slog.NewJSONHandler(&logs, nil)), StoredOTLPHeaders)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tr.Shutdown(context.Background()) }()
				_, span := tr.Provider.Tracer("t").Start(context.Background(), "s")
				span.End()
				tr.Flush(context.Background())
				got := exports()
				if len(got) != 1 || got[0].Get("api-key") != key || got[0].Get("x-team") != "pay ments" {
					t.Fatalf("exports' headers %v, want api-key and x-team from %s", got, variable)
				}
				if strings.Contains(logs.String(), key) {
					t.Fatalf("the key is logged: %s", logs.String())
				}
			})
		}
	}
}

// TestStoredHeadersThatCannotWorkRefuseTheStart: a missing secret, a value that is not
// headers, both stores, or the stored headers beside OTEL_EXPORTER_OTLP_HEADERS refuse the
// start, naming the variable and never quoting the value.
func TestStoredHeadersThatCannotWorkRefuseTheStart(t *testing.T) {
	const key = "k3y-0f-the-intake"
	bad, _ := storeHeaders(t, "api-key:"+key)
	good, param := storeHeaders(t, "api-key="+key)
	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"a missing secret", map[string]string{tracing.OTLPHeadersSecret: good + "-gone"}, tracing.OTLPHeadersSecret},
		{"not headers", map[string]string{tracing.OTLPHeadersSecret: bad}, tracing.OTLPHeadersSecret},
		{"both stores", map[string]string{tracing.OTLPHeadersSecret: good, tracing.OTLPHeadersParameter: param}, "set one of them"},
		{"beside the variable", map[string]string{tracing.OTLPHeadersSecret: good, "OTEL_EXPORTER_OTLP_HEADERS": "api-key=" + key}, "OTEL_EXPORTER_OTLP_HEADERS"},
		{"beside the traces' variable", map[string]string{tracing.OTLPHeadersParameter: param, "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api-key=" + key}, "OTEL_EXPORTER_OTLP_TRACES_HEADERS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resetOtel(t)
			t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			_, err := tracing.FromEnv(context.Background(), slog.New(slog.DiscardHandler), StoredOTLPHeaders)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), key) {
				t.Fatalf("got %v, want a refusal naming %s without the key", err, c.want)
			}
		})
	}
}
