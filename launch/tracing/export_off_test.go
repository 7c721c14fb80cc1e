//go:build oncehook_notrace_export

package tracing

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

// TestABinaryBuiltWithoutExportRefusesOTLPAtStart: built with -tags oncehook_notrace_export,
// the functions link no exporter; tracing off starts as ever, and OTEL_TRACES_EXPORTER=otlp
// refuses the start, naming the variable and the tag, rather than tracing into nothing.
// (make unit runs it: go test -tags oncehook_notrace_export -run ThisTest ./launch/tracing.)
func TestABinaryBuiltWithoutExportRefusesOTLPAtStart(t *testing.T) {
	resetOtel(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	tr, err := FromEnv(context.Background(), slog.New(slog.DiscardHandler), nil)
	if err != nil || tr.Provider != nil {
		t.Fatalf("tracing off: %v, %v", tr, err)
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	_, err = FromEnv(context.Background(), slog.New(slog.DiscardHandler), nil)
	if err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") || !strings.Contains(err.Error(), "oncehook_notrace_export") {
		t.Fatalf("got %v, want a refusal naming OTEL_TRACES_EXPORTER and the build tag", err)
	}
	if err := CheckEnv(map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}); err == nil {
		t.Fatal("CheckEnv takes otlp in a binary without export")
	}
}
