package launch

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/oncehook/oncehook/internal/otelenv"
)

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
