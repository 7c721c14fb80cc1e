package launch

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestAQueueSizeTheBatcherCannotTakeIsRefusedNamed: "A function refuses to start, naming the
// variable, on a value it cannot honour", and launch.CheckTracingEnv (the synth's check) is
// "the same check" (docs/operations.md, The variables). OTEL_BSP_MAX_QUEUE_SIZE is one of the
// documented variables ("the batch span processor's queue (default 8,192 spans here)"), and
// neither checks it: the SDK reads it itself. A negative size panics in the SDK's batcher
// (make with a negative capacity) inside TracingFromEnv: the function crashes at start with a
// runtime panic, not a refusal naming the variable, and the synth let it through. One that is
// not a number is dropped by the SDK for its own default, 2,048 (not the documented 8,192),
// while launch reports its queue as 0 spans in every drop message ("raise
// OTEL_BSP_MAX_QUEUE_SIZE"); 0 is a queue that holds nothing, every span dropped.
//
// The space: a negative size, zero, a word, a fraction, a size with a space, each through
// CheckTracingEnv and TracingFromEnv.
func TestAQueueSizeTheBatcherCannotTakeIsRefusedNamed(t *testing.T) {
	resetOtel(t)
	for _, v := range []string{"-1", "0", "abc", "1.5", " 8192"} {
		env := map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_BSP_MAX_QUEUE_SIZE": v}
		if err := CheckTracingEnv(env); err == nil || !strings.Contains(err.Error(), "OTEL_BSP_MAX_QUEUE_SIZE") {
			t.Errorf("OTEL_BSP_MAX_QUEUE_SIZE=%q: CheckTracingEnv says %v, want a refusal naming the variable", v, err)
		}
		for k, val := range env {
			t.Setenv(k, val)
		}
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			tr, err := TracingFromEnv(context.Background(), slog.New(slog.DiscardHandler))
			if tr != nil {
				_ = tr.Shutdown(context.Background())
			}
			return err
		}()
		if err == nil || strings.HasPrefix(err.Error(), "panic: ") || !strings.Contains(err.Error(), "OTEL_BSP_MAX_QUEUE_SIZE") {
			t.Errorf("OTEL_BSP_MAX_QUEUE_SIZE=%q: TracingFromEnv: %v; want a refusal naming the variable", v, err)
		}
	}
}
