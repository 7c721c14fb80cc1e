package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// syncBuffer is a log sink safe for the exporter's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAFailedExportAtTheInvocationsFlushIsLogged: docs/operations.md says "spans a collector
// rejects (a partial success) are logged, as every failed export is, by the endpoint's scheme
// and host", and Flush's comment says its errors reach the error handler. In a Lambda
// invocation nearly every export is the flush's (a batch timer of 5 s never fires within an
// invocation of a few spans): the SDK's ForceFlush returns that export's error to its caller
// and hands it to no error handler, and Flush discards it (`_ = ForceFlush`). So a collector
// that refuses every export (a 400 for a bad request, a 401 for a wrong key, a partial
// success, a 503 past the retries, an endpoint nothing listens on) loses every span of every
// invocation, and the function's log never says so: the operator's only symptom is traces
// that are missing.
//
// The space: each way an export can fail, through each of launch's wrappers (the outbox's and
// sweeper's invocation, the receiver's flushed), with tracing built by TracingFromEnv as Load
// builds it.
func TestAFailedExportAtTheInvocationsFlushIsLogged(t *testing.T) {
	partial, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{
		RejectedSpans: 1, ErrorMessage: "span too large"}})
	if err != nil {
		t.Fatal(err)
	}
	answers := []struct {
		name   string
		answer func(w http.ResponseWriter)
	}{
		{"400 bad request", func(w http.ResponseWriter) { http.Error(w, "bad", http.StatusBadRequest) }},
		{"401 unauthorized (a wrong key)", func(w http.ResponseWriter) { http.Error(w, "no", http.StatusUnauthorized) }},
		{"500", func(w http.ResponseWriter) { http.Error(w, "oops", http.StatusInternalServerError) }},
		{"a partial success", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write(partial)
		}},
		{"nothing listening", nil},
	}
	for _, a := range answers {
		for _, wrapper := range []string{"outbox", "sweeper", "receiver"} {
			t.Run(a.name+"/"+wrapper, func(t *testing.T) {
				resetOtel(t)
				var endpoint string
				if a.answer == nil {
					dead := httptest.NewServer(http.NotFoundHandler())
					endpoint = dead.URL
					dead.Close() // a collector layer that did not start
				} else {
					col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { a.answer(w) }))
					defer col.Close()
					endpoint = col.URL
				}
				t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
				var logs syncBuffer
				tr, err := TracingFromEnv(context.Background(), slog.New(slog.NewJSONHandler(&logs, nil)))
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tr.Shutdown(context.Background()) }()
				started := logs.String()
				body := func(ctx context.Context, _ json.RawMessage) (string, error) {
					_, s := tr.Provider.Tracer("app").Start(ctx, "work")
					s.End()
					return "ok", nil
				}
				var h func(context.Context, json.RawMessage) (string, error)
				switch wrapper {
				case "outbox":
					h = invocation(tr, "outbox", outboxTrigger, trace.SpanKindConsumer, body)
				case "sweeper":
					h = invocation(tr, "sweeper", outboxTrigger, trace.SpanKindServer, body)
				default:
					h = flushed(tr, body)
				}
				if _, err := h(context.Background(), json.RawMessage(`{"Records":[{"eventSource":"aws:dynamodb"}]}`)); err != nil {
					t.Fatal(err)
				}
				// The invocation has answered: Lambda freezes the environment now, and the
				// export the flush made is over (it failed). Its failure is in the log or nowhere.
				after := strings.TrimPrefix(logs.String(), started)
				if !strings.Contains(after, "OTLP export") {
					t.Errorf("the invocation's spans were refused by the collector (%s) and lost; the function logged nothing about it: %q",
						a.name, after)
				}
			})
		}
	}
}
