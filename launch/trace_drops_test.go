package launch

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestSpansTheBatcherDropsAreLogged: the SDK's batcher drops the spans ended while its queue
// is full (a collector slower than the invocation), and says so only in OpenTelemetry's debug
// log. The invocation's flush logs how many were dropped, once, naming the setting to raise.
func TestSpansTheBatcherDropsAreLogged(t *testing.T) {
	resetOtel(t)
	release := make(chan struct{})
	var once sync.Once
	released := false
	first := true
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first {
			first = false
			<-release // the first export waits until the handler has ended its spans
		}
	}))
	defer col.Close()
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "8")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4")
	var logs syncBuffer
	tr, err := TracingFromEnv(context.Background(), slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tr.Shutdown(context.Background()) }()
	h := invocation(tr, "outbox", outboxTrigger, trace.SpanKindConsumer, func(ctx context.Context, _ json.RawMessage) (string, error) {
		n := 100
		if released { // a later invocation: a couple of spans, which the queue holds
			n = 2
		}
		for range n {
			_, s := tr.Provider.Tracer("app").Start(ctx, "work")
			s.End()
		}
		once.Do(func() { close(release) })
		released = true
		return "ok", nil
	})
	if _, err := h(context.Background(), json.RawMessage(`{"Records":[]}`)); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(\d+) spans dropped: the batch span processor's queue \(8 spans\) was full`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("101 spans through a queue of 8 behind a stalled export, and no drop logged: %s", logs.String())
	}
	if n, _ := strconv.Atoi(m[1]); n < 101-8-4-4 || n > 101 {
		t.Errorf("%d spans reported dropped of 101 (a queue of 8, batches of 4)", n)
	}
	if _, err := h(context.Background(), json.RawMessage(`{"Records":[]}`)); err != nil {
		t.Fatal(err)
	}
	if c := len(regexp.MustCompile(`spans dropped`).FindAllString(logs.String(), -1)); c != 1 {
		t.Errorf("the drop is reported %d times, want once: a later invocation that drops nothing reports nothing", c)
	}
}
