package launch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/outbox"
)

// TestEverySpanOfABigStreamBatchLeavesOrItsLossIsLogged: docs/operations.md says "each
// invocation's spans are exported before it answers". The outbox runs a stream batch's
// records concurrently (256 at a time), and each intent ends five spans (intent, lease, call,
// the HTTP client's POST, finish): a batch of 1,000 records ends 5,000 spans plus the
// invocation's. The SDK's batch span processor, as TracingFromEnv builds it, holds 2,048 ended
// spans in its queue and exports 512 at a time; while one export is on its way to a collector
// that is slow to answer (a remote endpoint, a collector layer under load), every span past
// those is dropped without a word: the processor counts drops only in a debug line of
// OpenTelemetry's internal logger, which no function enables, and Flush cannot bring them
// back. The invariant checked: after the invocation answers, either every span it ended
// reached the collector, or the function's log says spans were lost.
//
// The collector here answers its first export only once the handler has returned (a slow
// collector, made deterministic); every later export at once.
func TestEverySpanOfABigStreamBatchLeavesOrItsLossIsLogged(t *testing.T) {
	const records = 1000
	awstest.Config(t)
	resetOtel(t)
	client := awstest.Client(t)
	table := awstest.Table(t, client)
	store, err := dedup.New(client, dedup.Config{Table: table,
		Sources: map[string]dedup.Retention{"shop": {RetryHorizon: 72 * time.Hour, RedriveWindow: 30 * 24 * time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	// Each claim committed under a delivery's commit span (its own trace, sampled), as the
	// receiver commits it.
	var wg sync.WaitGroup
	errs := make(chan error, records)
	sem := make(chan struct{}, 16)
	for i := range records {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var tid trace.TraceID
			var sid trace.SpanID
			tid[0], tid[1], tid[15] = byte(i>>8)+1, byte(i), 7
			sid[0], sid[7] = byte(i>>8)+1, byte(i)
			ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
			id := fmt.Sprintf("evt_%04d", i)
			_, err := store.Commit(ctx, dedup.Event{Source: "shop", ID: id, Type: "order.paid", Payload: []byte(`{}`)},
				dedup.Plan{Intents: []dedup.Intent{{Name: "email.send", Target: "email", Payload: []byte(`{}`)}}})
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var recs []events.DynamoDBEventRecord
	for _, r := range awstest.StreamRecords(t, client, table) {
		if r.EventName == "INSERT" {
			recs = append(recs, r)
		}
	}
	if len(recs) != records {
		t.Fatalf("%d stream records, want %d", len(recs), records)
	}
	raw, err := json.Marshal(events.DynamoDBEvent{Records: recs})
	if err != nil {
		t.Fatal(err)
	}

	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer down.Close()

	// The collector: counts every span it is sent; its first answer waits for release.
	release := make(chan struct{})
	var mu sync.Mutex
	exported := 0
	first := true
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		n := 0
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				n += len(ss.Spans)
			}
		}
		mu.Lock()
		exported += n
		wait := first
		first = false
		mu.Unlock()
		if wait {
			<-release
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer col.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	var logs syncBuffer
	logger := slog.New(TraceLogs(slog.NewJSONHandler(&logs, nil)))
	tr, err := TracingFromEnv(context.Background(), logger)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tr.Shutdown(context.Background()) }()
	started := len(logs.String())
	w, err := outbox.New(client, outbox.Config{
		Table:          table,
		Executors:      map[string]outbox.Executor{"email": &outbox.HTTPExecutor{URL: down.URL, Timeout: 10 * time.Second}},
		Lease:          60 * time.Second,
		Logger:         logger,
		TracerProvider: tr.TracerProvider(),
	})
	if err != nil {
		t.Fatal(err)
	}
	h := invocation(tr, "outbox", outboxTrigger, trace.SpanKindConsumer, func(ctx context.Context, raw json.RawMessage) (any, error) {
		out, err := w.Handle(ctx, raw)
		close(release) // the slow collector answers its first export now
		return out, err
	})
	out, err := h(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	if resp := out.(events.DynamoDBEventResponse); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%d records failed", len(resp.BatchItemFailures))
	}

	want := records*5 + 1 // intent, lease, call, POST, finish per record; the invocation's
	mu.Lock()
	got := exported
	mu.Unlock()
	if got == want {
		return
	}
	after := logs.String()[started:]
	if regexp.MustCompile(`(?i)drop|lost|discard`).MatchString(after) {
		return // the loss is reported
	}
	t.Errorf("the invocation ended %d spans; %d reached the collector by its answer, and the function's log says nothing of the %d lost",
		want, got, want-got)
}
