package outbox

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/tracecontext"
)

type quotingError struct{}

func (quotingError) Error() string           { return "refused: the answer quoted jane@example.com" }
func (quotingError) SpanDescription() string { return "refused" }

// TestAnExecutorsSpanDescriptionIsWhatEverySpanRecords: an error with a SpanDescription,
// however an executor or the worker wraps it, is described by it in the call's and the
// intent's spans (redact, then Describe), and whole in last_error.
func TestAnExecutorsSpanDescriptionIsWhatEverySpanRecords(t *testing.T) {
	for name, err := range map[string]error{
		"bare":      quotingError{},
		"permanent": Permanent(quotingError{}),
		"not sent":  NotSent(quotingError{}),
		"wrapped":   fmt.Errorf("call: %w", quotingError{}),
	} {
		if got := tracecontext.Describe(redact(err)); strings.Contains(got, "jane@") || got != "refused" {
			t.Errorf("%s: the span says %q", name, got)
		}
		if !strings.Contains(err.Error(), "jane@") {
			t.Errorf("%s: last_error lost the answer: %q", name, err)
		}
		if !errors.Is(redact(err), err) && !errors.As(redact(err), new(quotingError)) {
			t.Errorf("%s: the span's error no longer wraps the executor's", name)
		}
	}
}
