package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestTraceLogsKeepsTheTraceAtTheTopOfAGroupedLogger: TraceLogs' promise is that "every line
// written under a span carries the span's trace_id and span_id", so that Logs Insights finds a
// trace's lines with `filter trace_id = "…"` (docs/operations.md, "Logs name their trace");
// TestTraceLogsNamesTheSpanOfALine says "attributes and groups added to the logger keep it",
// and tries attributes only. A logger with a group (an application's planner or executor
// logging under slog's WithGroup, a library handed env.Logger.WithGroup("app")) gets the two
// fields inside its group, {"app":{"trace_id":…}}, since TraceLogs adds them to the record,
// which slog nests under the handler's open groups: the line has no top-level trace_id, and
// the documented query never finds it.
//
// The space: one group and two nested ones, with and without attributes before the group,
// and with attributes in the group.
func TestTraceLogsKeepsTheTraceAtTheTopOfAGroupedLogger(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xab, 1}, SpanID: trace.SpanID{0xcd, 2}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	loggers := map[string]func(*slog.Logger) *slog.Logger{
		"WithGroup(app)":                 func(l *slog.Logger) *slog.Logger { return l.WithGroup("app") },
		"With(function).WithGroup(app)":  func(l *slog.Logger) *slog.Logger { return l.With("function", "outbox").WithGroup("app") },
		"WithGroup(app).With(k)":         func(l *slog.Logger) *slog.Logger { return l.WithGroup("app").With("k", "v") },
		"WithGroup(app).WithGroup(exec)": func(l *slog.Logger) *slog.Logger { return l.WithGroup("app").WithGroup("exec") },
	}
	for name, derive := range loggers {
		var buf bytes.Buffer
		log := derive(slog.New(TraceLogs(slog.NewJSONHandler(&buf, nil))))
		log.InfoContext(ctx, "under a span", "n", 1)
		var line map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(buf.String())), &line); err != nil {
			t.Fatalf("%s: %v: %s", name, err, buf.String())
		}
		if line["trace_id"] != sc.TraceID().String() || line["span_id"] != sc.SpanID().String() {
			t.Errorf("%s: the line's top-level trace_id %v, span_id %v; want %s %s: the line is %s",
				name, line["trace_id"], line["span_id"], sc.TraceID(), sc.SpanID(), strings.TrimSpace(buf.String()))
		}
	}
}
