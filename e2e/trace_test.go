package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/oncehook/oncehook/internal/awstest"
	"github.com/oncehook/oncehook/internal/faults"
	"github.com/oncehook/oncehook/internal/harness"
)

// TestADeliveryIsOneTraceFromTheProviderToTheDownstream: with tracing turned on in the
// deployed functions by its one setting (OTEL_TRACES_EXPORTER=otlp, exporting to a collector
// the test runs), a signed delivery that brings a provider's traceparent is answered, its
// email intent fails once (a 500) and is retried from the retry queue's wake-up, and then:
// each call the downstream receives carries a valid traceparent whose trace id is the one the
// receiver's log line for that event names (never the provider's), and the collector holds
// the trace: the delivery, its commit, and both attempts under it, each with its lease, call
// and finish. Run with -v, it draws the trace.
func TestADeliveryIsOneTraceFromTheProviderToTheDownstream(t *testing.T) {
	s := deployed(t)
	ctx := context.Background()
	dep, err := harness.FindDeployment(ctx, lambda.NewFromConfig(awstest.Config(t)), s.table)
	if err != nil {
		t.Fatal(err)
	}
	col := startCollector(t)
	on := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": col.url}
	restore, err := dep.SetEnv(ctx, map[string]map[string]string{"receiver": on, "outbox": on, "sweeper": on})
	t.Cleanup(func() {
		if err := restore(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}

	run := runID(7)
	id, body := harness.Order(run, 0)
	key := "shop:" + id + ":email.send"
	var mu sync.Mutex
	var carried []http.Header
	s.down.OnCall(func(k string, h http.Header) {
		if k != key {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		carried = append(carried, h)
		if len(carried) == 2 {
			s.down.SetFaults(faults.Rates{}, nil) // the first attempt fails, the retry succeeds
		}
	})
	t.Cleanup(func() { s.down.OnCall(nil); s.down.SetFaults(faults.Rates{}, nil) })
	s.down.SetFaults(faults.Rates{Error: 1}, faults.NewDice(1).Float64)

	const theirs = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	started := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.sender.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", theirs)
	if err := s.sender.Scheme.Sign(req.Header, body, s.sender.Secret, id, time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := s.sender.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(answer), `"duplicate":false`) {
		t.Fatalf("the delivery: %d %s", resp.StatusCode, answer)
	}
	eventually(t, "the email's first attempt and its retry", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(carried) >= 2 && s.down.Applied(key), fmt.Sprintf("%d calls", len(carried))
	})

	// The receiver's log line for the event names its trace.
	logs := cloudwatchlogs.NewFromConfig(awstest.Config(t))
	var line map[string]any
	eventually(t, "the receiver's log line for "+id, func() (bool, string) {
		lines, err := dep.LogLines(ctx, logs, "receiver", started.Add(-time.Minute), `"`+id+`"`)
		if err != nil {
			return false, err.Error()
		}
		for _, l := range lines {
			var m map[string]any
			if i := strings.IndexByte(l, '{'); i >= 0 && json.Unmarshal([]byte(l[i:]), &m) == nil && m["msg"] == "delivery" && m["event_id"] == id {
				line = m
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d lines", len(lines))
	})
	traceID, _ := line["trace_id"].(string)
	if len(traceID) != 32 || traceID == "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("the receiver's log line %v: want the delivery's own trace_id", line)
	}
	mu.Lock()
	calls := append([]http.Header(nil), carried...)
	mu.Unlock()
	for i, h := range calls {
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(h)))
		if !sc.IsValid() || sc.TraceID().String() != traceID {
			t.Fatalf("call %d carried traceparent %q: want a valid one in trace %s", i+1, h.Get("Traceparent"), traceID)
		}
		if h.Get("Idempotency-Key") != key {
			t.Fatalf("call %d: Idempotency-Key %q", i+1, h.Get("Idempotency-Key"))
		}
	}

	// The collector holds the trace: the delivery and both attempts, each step in its place.
	var spans []*tracepb.Span
	eventually(t, "the trace at the collector", func() (bool, string) {
		spans = col.trace(traceID)
		names := map[string]int{}
		for _, sp := range spans {
			names[sp.Name]++
		}
		ok := names["POST /hooks/{source}"] == 1 && names["commit"] == 1 && names["intent email.send"] == 2 &&
			names["lease"] == 2 && names["finish"] == 2 && names["POST"] == 2
		return ok, fmt.Sprint(names)
	})
	root := spans[0]
	for _, sp := range spans {
		if len(sp.ParentSpanId) == 0 {
			root = sp
		}
	}
	if len(root.Links) != 1 || trace.TraceID(root.Links[0].TraceId).String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("the delivery span's links %v: want the provider's traceparent", root.Links)
	}
	if got := trace.SpanID(root.SpanId).String(); line["span_id"] != got {
		t.Fatalf("the log line's span_id %v, the delivery span's %s", line["span_id"], got)
	}
	t.Logf("one delivery's trace, %s, as the collector received it from the deployed functions:\n%s", traceID, drawTrace(spans))
}

// collector is an OTLP/HTTP collector on a free loopback port, which the emulator's functions
// (local processes) reach: it keeps every span it is sent.
type collector struct {
	url   string
	mu    sync.Mutex
	spans []*tracepb.Span
}

func startCollector(t *testing.T) *collector {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{url: "http://" + ln.Addr().String()}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil || r.URL.Path != "/v1/traces" {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return c
}

// trace is the spans of one trace the collector holds.
func (c *collector) trace(id string) []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.Span
	for _, sp := range c.spans {
		if trace.TraceID(sp.TraceId).String() == id {
			out = append(out, sp)
		}
	}
	return out
}

// drawTrace is a trace as a tree, each span with its start after the trace's and its duration,
// and the attributes that tell its story.
func drawTrace(spans []*tracepb.Span) string {
	children := map[string][]*tracepb.Span{}
	var roots []*tracepb.Span
	ids := map[string]bool{}
	for _, sp := range spans {
		ids[string(sp.SpanId)] = true
	}
	for _, sp := range spans {
		if len(sp.ParentSpanId) == 0 || !ids[string(sp.ParentSpanId)] {
			roots = append(roots, sp)
			continue
		}
		children[string(sp.ParentSpanId)] = append(children[string(sp.ParentSpanId)], sp)
	}
	byStart := func(s []*tracepb.Span) {
		sort.Slice(s, func(i, j int) bool { return s[i].StartTimeUnixNano < s[j].StartTimeUnixNano })
	}
	byStart(roots)
	var t0 uint64
	if len(roots) > 0 {
		t0 = roots[0].StartTimeUnixNano
	}
	var b strings.Builder
	var draw func(sp *tracepb.Span, indent string)
	draw = func(sp *tracepb.Span, indent string) {
		start := time.Duration(sp.StartTimeUnixNano - t0)
		dur := time.Duration(sp.EndTimeUnixNano - sp.StartTimeUnixNano)
		fmt.Fprintf(&b, "%-46s %9s %9s  %s\n", indent+sp.Name, "+"+start.Round(time.Millisecond).String(), dur.Round(time.Microsecond).String(), story(sp))
		kids := children[string(sp.SpanId)]
		byStart(kids)
		for _, k := range kids {
			draw(k, indent+"  ")
		}
	}
	for _, r := range roots {
		draw(r, "")
	}
	return b.String()
}

// story is the attributes worth a line in the drawing.
func story(sp *tracepb.Span) string {
	var parts []string
	for _, kv := range sp.Attributes {
		switch kv.Key {
		case "oncehook.outcome", "oncehook.dynamodb.calls", "oncehook.attempt", "oncehook.lease", "oncehook.status",
			"http.response.status_code", "oncehook.source", "oncehook.event_id", "error.type":
			v := kv.Value.GetStringValue()
			if v == "" {
				v = fmt.Sprint(kv.Value.GetIntValue())
			}
			parts = append(parts, strings.TrimPrefix(kv.Key, "oncehook.")+"="+v)
		}
	}
	for _, l := range sp.Links {
		for _, kv := range l.Attributes {
			if kv.Key == "oncehook.link" {
				parts = append(parts, "link:"+kv.Value.GetStringValue())
			}
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
