package launch

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
)

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
