package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/launch/tracing"
	"github.com/oncehook/oncehook/outbox"
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
// sweeper's invocation, the receiver's flushed), with tracing built by tracing.FromEnv as Load
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
				tr, err := tracing.FromEnv(context.Background(), slog.New(slog.NewJSONHandler(&logs, nil)), nil)
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
				h := wrapped(tr, wrapper, body)
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

// wrapped is body wrapped as launch wraps the handler of the function named: the outbox's and
// the sweeper's in an invocation span, the receiver's flushed.
func wrapped(tr *tracing.Tracing, wrapper string, body func(context.Context, json.RawMessage) (string, error)) func(context.Context, json.RawMessage) (string, error) {
	switch wrapper {
	case "outbox":
		return invocation(tr, "outbox", outboxTrigger, trace.SpanKindConsumer, body)
	case "sweeper":
		return invocation(tr, "sweeper", outboxTrigger, trace.SpanKindServer, body)
	default:
		return flushed(tr, body)
	}
}

// TestAPanickingHandlersSpansStillLeave: each invocation's spans are exported before it
// answers. A handler that panics (an application's planner or executor) is answered by
// Lambda's runtime, which recovers the panic and then stops the process: what the wrappers
// launch puts around the functions' handlers must end the invocation span (in error) and
// flush on the way out, or the spans of the one invocation that failed are lost with the
// process.
//
// The space: the outbox's and the sweeper's wrapper (invocation) and the receiver's (flushed),
// each with a handler that ended a span of its own before panicking.
func TestAPanickingHandlersSpansStillLeave(t *testing.T) {
	resetOtel(t)
	exp := tracetest.NewInMemoryExporter()
	tr := &tracing.Tracing{Provider: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Hour)))} // only a flush exports
	defer func() { _ = tr.Shutdown(context.Background()) }()

	body := func(ctx context.Context, _ json.RawMessage) (string, error) {
		_, s := tr.Provider.Tracer("app").Start(ctx, "work before the panic")
		s.End()
		panic("an application's bug")
	}
	for _, c := range []struct {
		name    string
		handler func(context.Context, json.RawMessage) (string, error)
		want    []string
	}{
		{"outbox", invocation(tr, "outbox", outboxTrigger, trace.SpanKindConsumer, body), []string{"outbox", "work before the panic"}},
		{"receiver", flushed(tr, body), []string{"work before the panic"}},
	} {
		exp.Reset()
		func() {
			defer func() { _ = recover() }() // as Lambda's runtime does, before it stops the process
			_, _ = c.handler(context.Background(), json.RawMessage(`{"Records":[{"eventSource":"aws:dynamodb"}]}`))
		}()
		got := map[string]bool{}
		for _, s := range exp.GetSpans() { // exported by now, or lost with the process
			got[s.Name] = true
		}
		for _, name := range c.want {
			if !got[name] {
				t.Errorf("%s: a panicking handler's invocation left span %q unexported (exported: %v)", c.name, name, got)
			}
		}
	}
}

// TestTheFlushNeverHoldsAnAnswerPastItsInvocationsDeadline: Flush gives the export 500 ms
// from context.WithoutCancel(ctx): the invocation's own deadline is dropped. A handler that
// answers with less than 500 ms left (a receiver whose commit took its SDK retries, an outbox
// batch that ran to its margin) and a collector that does not answer (a collector layer
// restarting, a remote endpoint that is slow) has its answer held past the deadline: Lambda
// ends the invocation as timed out and the answer it had is lost (the receiver's 200 becomes
// the provider's 5xx and a redelivery; the outbox's partial batch response is lost and the
// whole batch is delivered again). Tracing, which must change nothing of what a function does,
// turns an answered invocation into a timed-out one. The invariant checked: an invocation
// whose handler returned before its deadline answers before it, whatever the collector does.
//
// The space: each of launch's wrappers; the handler returns at once, 300 ms before the
// deadline; the collector never answers.
func TestTheFlushNeverHoldsAnAnswerPastItsInvocationsDeadline(t *testing.T) {
	hang := make(chan struct{})
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer col.Close()
	defer close(hang)
	for _, wrapper := range []string{"outbox", "sweeper", "receiver"} {
		t.Run(wrapper, func(t *testing.T) {
			resetOtel(t)
			t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
			tr, err := tracing.FromEnv(context.Background(), slog.New(slog.DiscardHandler), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				defer cancel()
				_ = tr.Shutdown(ctx)
			}()
			body := func(ctx context.Context, _ json.RawMessage) (string, error) {
				_, s := tr.Provider.Tracer("app").Start(ctx, "work")
				s.End()
				return "ok", nil
			}
			h := wrapped(tr, wrapper, body)
			deadline := time.Now().Add(300 * time.Millisecond)
			ctx, cancel := context.WithDeadline(lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-deadline"}), deadline)
			defer cancel()
			if _, err := h(ctx, json.RawMessage(`{"Records":[{"eventSource":"aws:dynamodb"}]}`)); err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Errorf("the handler returned at once, 300 ms before the invocation's deadline; the flush held the answer %s past it (Lambda: Task timed out, the answer lost)",
					time.Since(deadline).Round(time.Millisecond))
			}
		})
	}
}

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
	tr, err := tracing.FromEnv(context.Background(), slog.New(slog.NewJSONHandler(&logs, nil)), nil)
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

// TestEverySpanOfABigStreamBatchLeavesOrItsLossIsLogged: docs/operations.md says "each
// invocation's spans are exported before it answers". The outbox runs a stream batch's
// records concurrently (256 at a time), and each intent ends five spans (intent, lease, call,
// the HTTP client's POST, finish): a batch of 1,000 records ends 5,000 spans plus the
// invocation's. The SDK's batch span processor, as tracing.FromEnv builds it, holds 2,048 ended
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
	tr, err := tracing.FromEnv(context.Background(), logger, nil)
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
