package receiver_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestATooOldEventLogsNoUnvalidatedID: an event whose signed occurred_at is past the retention
// is validated before it is refused as too old, so its log line never holds an id over
// dedup's bounds (a sender holding its own source's secret could otherwise write 1 MiB log
// lines at will).
func TestATooOldEventLogsNoUnvalidatedID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	huge := "evt_" + strings.Repeat("A", 200_000)
	old := strconv.FormatInt(e.clock().Add(-365*24*time.Hour).Unix(), 10)
	body := `{"meta":{"id":"` + huge + `","type":"order.paid","at":` + old + `}}`
	resp := e.post(e.request("partner", body, http.Header{}, ""))
	if resp.StatusCode != 400 && resp.StatusCode != 413 {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Body)
	}
	if line := e.logsText(); strings.Contains(line, huge) || len(line) > 8192 {
		t.Fatalf("answered %d; the log line of a refused delivery is %d bytes and holds its %d-byte unvalidated event id (%s...)",
			resp.StatusCode, len(line), len(huge), line[:min(len(line), 200)])
	}
}
