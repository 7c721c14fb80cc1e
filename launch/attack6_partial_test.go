package launch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestACollectorsPartialRejectionIsReported: OTLP/HTTP's answer to a request the collector took
// only in part is 200 OK with an ExportTraceServiceResponse whose partial_success names how
// many spans it rejected and why (a span over the backend's size limit, an attribute it
// refuses). The specification asks the client to report it (it must not retry), and
// OpenTelemetry's own otlptracehttp returns it as the export's error, which the SDK hands to
// the error handler: the function's log says spans were lost. The functions' exporter, which
// is held to otlptracehttp's behaviour (TestTheExporterWritesWhatOpenTelemetrysWrites), reads
// at most 256 bytes of a 2xx answer and drops them: the rejection reaches neither the export's
// error nor the error handler, and an operator whose traces are missing pieces is never told.
func TestACollectorsPartialRejectionIsReported(t *testing.T) {
	answer, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{
		RejectedSpans: 2, ErrorMessage: "span exceeds the maximum size"}})
	if err != nil {
		t.Fatal(err)
	}
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(answer)
	}))
	defer col.Close()
	spans := sampleSpans(t)

	// OpenTelemetry's own exporter reports it.
	theirs, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(col.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	if err := theirs.ExportSpans(context.Background(), spans); err == nil || !strings.Contains(err.Error(), "rejected") {
		t.Fatalf("otlptracehttp: %v, want the partial rejection reported", err)
	}

	var mu sync.Mutex
	var handled []error
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { mu.Lock(); handled = append(handled, err); mu.Unlock() }))
	t.Cleanup(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {})) })
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	ours, err := exporterFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	err = ours.ExportSpans(context.Background(), spans)
	mu.Lock()
	defer mu.Unlock()
	if err == nil && len(handled) == 0 {
		t.Errorf("the collector rejected 2 of %d spans (partial_success: %q): the functions' exporter returned no error and reported nothing; otlptracehttp reports it",
			len(spans), "span exceeds the maximum size")
	}
}
