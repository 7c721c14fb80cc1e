package receiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/oncehook/oncehook/dedup"
	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/receiver"
	"github.com/oncehook/oncehook/receiver/receivertest"
	"github.com/oncehook/oncehook/sources"
)

// batchEnv is a SendGrid source limited to limit events a delivery, over the real store, its
// planners registered for delivered, open and bounce.
type batchEnv struct {
	t       *testing.T
	file    *sources.File
	key     string
	handler *receiver.Handler
	metrics *bytes.Buffer
	items   func() int
}

func newBatchEnv(t *testing.T, limit int, unknownTypes string) *batchEnv {
	t.Helper()
	public, private := sendgridKey(t)
	f, err := sources.Parse([]byte(fmt.Sprintf(`{"sources":{"sendgrid":{"scheme":"sendgrid","public_keys":[%q],"max_batch_events":%d,"unknown_types":%q}}}`, public, limit, unknownTypes)))
	if err != nil {
		t.Fatal(err)
	}
	client := awstest.Client(t)
	table := awstest.Table(t, client)
	store, err := dedup.New(client, dedup.Config{Table: table, Sources: f.Retentions()})
	if err != nil {
		t.Fatal(err)
	}
	planners := receiver.NewPlanners()
	for _, typ := range []string{"delivered", "open", "bounce"} {
		planners.Handle("sendgrid", typ, func(context.Context, dedup.Event) (dedup.Plan, error) { return dedup.Plan{}, nil })
	}
	var metrics bytes.Buffer
	h, err := receiver.New(receiver.Config{Sources: f, Secrets: staticKeys{"sendgrid": {public}}, Store: store, Planners: planners, Metrics: &metrics})
	if err != nil {
		t.Fatal(err)
	}
	return &batchEnv{t: t, file: f, key: private, handler: h, metrics: &metrics,
		items: func() int { return len(awstest.Items(t, client, table)) }}
}

func (e *batchEnv) post(body []byte) events.APIGatewayV2HTTPResponse {
	e.t.Helper()
	req, err := receivertest.Request(e.file, "sendgrid", e.key, body)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, _ := e.handler.Handle(context.Background(), req)
	return resp
}

// typedBatch is n SendGrid events, their types cycling through types, ids prefix-0...
func typedBatch(prefix string, n int, types ...string) []byte {
	now := time.Now()
	evs := make([]string, n)
	for i := range evs {
		evs[i] = sgEvent(fmt.Sprintf("%s-%d", prefix, i), types[i%len(types)], now)
	}
	return sgBatch(evs...)
}

// TestABatchOverItsSourcesLimitIsRefusedWhole: a batch of more events than the source's
// max_batch_events is refused with 413 naming the count and the limit, before anything is
// written; one at the limit is claimed.
func TestABatchOverItsSourcesLimitIsRefusedWhole(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t, 20, "claim")
	resp := e.post(typedBatch("over", 21, "open"))
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(resp.Body, "21 events") ||
		!strings.Contains(resp.Body, "max_batch_events") || !strings.Contains(resp.Body, "20") {
		t.Fatalf("a batch over the limit: %d %s", resp.StatusCode, resp.Body)
	}
	if n := e.items(); n != 0 {
		t.Fatalf("%d items written for a refused batch", n)
	}
	if resp := e.post(typedBatch("at", 20, "open")); resp.StatusCode != 200 || !strings.Contains(resp.Body, `"events":20,`) {
		t.Fatalf("a batch at the limit: %d %s", resp.StatusCode, resp.Body)
	}
}

// TestABatchWritesItsMetricsPerTypeNotPerEvent: a batch's metrics are one document for the
// delivery and one per event type it holds (types are bounded by the planners registered:
// any other is "other"), whatever its size, and their counts add up to its events.
func TestABatchWritesItsMetricsPerTypeNotPerEvent(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t, 0, "claim")
	types := []string{"delivered", "open", "bounce", "spamreport", "dropped"} // the last two: "other"
	for _, n := range []int{5, 250} {
		e.metrics.Reset()
		prefix := fmt.Sprintf("m%d", n)
		for attempt := range 2 {
			if resp := e.post(typedBatch(prefix, n, types...)); resp.StatusCode != 200 {
				t.Fatalf("%d events, attempt %d: %d %s", n, attempt, resp.StatusCode, resp.Body)
			}
		}
		lines := strings.Split(strings.TrimSpace(e.metrics.String()), "\n")
		// Per delivery: its own document and one for each of delivered, open, bounce, other.
		if len(lines) != 2*(1+4) {
			t.Fatalf("%d events: %d metrics documents for two deliveries, want %d", n, len(lines), 2*(1+4))
		}
		sum := map[string]float64{}
		for _, line := range lines {
			var doc map[string]any
			if err := json.Unmarshal([]byte(line), &doc); err != nil {
				t.Fatal(err)
			}
			for _, m := range []string{"Received", "Accepted", "Duplicate", "UnknownType"} {
				if v, ok := doc[m].(float64); ok {
					sum[m+" "+doc["event_type"].(string)] += v
					sum[m] += v
				}
			}
		}
		per := func(typ string) float64 { // events of typ in a batch of n
			c := 0
			for i := range n {
				if types[i%len(types)] == typ {
					c++
				}
			}
			return float64(c)
		}
		want := map[string]float64{"Received": 2, "Received other": 2, "Accepted": float64(n), "Duplicate": float64(n),
			"UnknownType": 2 * (per("spamreport") + per("dropped")), "UnknownType other": 2 * (per("spamreport") + per("dropped")),
			"Accepted other": per("spamreport") + per("dropped"), "Duplicate other": per("spamreport") + per("dropped")}
		for _, typ := range types[:3] {
			want["Accepted "+typ], want["Duplicate "+typ] = per(typ), per(typ)
		}
		if fmt.Sprint(sum) != fmt.Sprint(want) {
			t.Fatalf("%d events: metrics\n  %v\nwant\n  %v", n, sum, want)
		}
	}
}

// countingWriter counts the bytes and lines (EMF documents) written to it.
type countingWriter struct{ bytes, lines int }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.bytes += len(p)
	w.lines += bytes.Count(p, []byte("\n"))
	return len(p), nil
}

// BenchmarkASendGridBatch is a 1 MB SendGrid batch (about 3,000 events of three planned types
// and two others) through the receiver without I/O, reporting the EMF it writes per delivery:
//
//	go test ./receiver -run '^$' -bench SendGridBatch -benchmem
func BenchmarkASendGridBatch(b *testing.B) {
	public, private := sendgridKey(b)
	f, err := sources.Parse([]byte(fmt.Sprintf(`{"sources":{"sendgrid":{"scheme":"sendgrid","public_keys":[%q]}}}`, public)))
	if err != nil {
		b.Fatal(err)
	}
	store, err := dedup.New(noIO{}, dedup.Config{Table: "t", Sources: f.Retentions()})
	if err != nil {
		b.Fatal(err)
	}
	planners := receiver.NewPlanners()
	for _, typ := range []string{"delivered", "open", "bounce"} {
		planners.Handle("sendgrid", typ, func(context.Context, dedup.Event) (dedup.Plan, error) { return dedup.Plan{}, nil })
	}
	var metrics countingWriter
	h, err := receiver.New(receiver.Config{Sources: f, Secrets: staticKeys{"sendgrid": {public}}, Store: store, Planners: planners,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Metrics: &metrics})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for len(typedBatch("sg", n+100, "delivered")) < 1_000_000 {
		n += 100
	}
	body := typedBatch("sg", n, "delivered", "open", "bounce", "spamreport", "dropped")
	req, err := receivertest.Request(f, "sendgrid", private, body)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if resp, _ := h.Handle(ctx, req); resp.StatusCode != 200 {
			b.Fatalf("%d %s", resp.StatusCode, resp.Body)
		}
	}
	b.ReportMetric(float64(n), "events/op")
	b.ReportMetric(float64(metrics.bytes)/float64(b.N), "emf-bytes/op")
	b.ReportMetric(float64(metrics.lines)/float64(b.N), "emf-docs/op")
}

// TestEventsABatchIgnoresAreCountedAsUnknownTypes: with unknown_types "ignore", a batch's
// events of unplanned types are left unclaimed and counted, once each, as UnknownType.
func TestEventsABatchIgnoresAreCountedAsUnknownTypes(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t, 0, "ignore")
	resp := e.post(typedBatch("ign", 10, "open", "spamreport")) // 5 planned, 5 ignored
	if resp.StatusCode != 200 || !strings.Contains(resp.Body, `"ignored":5`) {
		t.Fatalf("%d %s", resp.StatusCode, resp.Body)
	}
	unknown := 0.0
	for _, line := range strings.Split(strings.TrimSpace(e.metrics.String()), "\n") {
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatal(err)
		}
		if v, ok := doc["UnknownType"].(float64); ok {
			unknown += v
		}
	}
	if unknown != 5 {
		t.Fatalf("UnknownType %v, want 5", unknown)
	}
}
