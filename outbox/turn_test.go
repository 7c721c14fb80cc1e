package outbox_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/outbox"
)

// TestAnIntentsLogLineNeverHoldsTheWebhooksPathOrTheDownstreamsAnswer: the worker's "intent"
// line goes to CloudWatch Logs, read by more people than the claims table and kept longer. A
// webhook URL's path and query are its secret (Slack's and Discord's incoming webhooks,
// ?token=), and the downstream's answer may echo the request (a customer's e-mail): the line
// describes a failure as its span does, by the URL's scheme and host and the status code,
// keeping what the worker itself says (at-most-once), while the claim's last_error keeps the
// whole error for the console's redacted view.
func TestAnIntentsLogLineNeverHoldsTheWebhooksPathOrTheDownstreamsAnswer(t *testing.T) {
	t.Parallel()
	down := rawServer(t, func(_ int, req *http.Request) string {
		body := "cannot deliver to alice@PIIECHO.example: " + req.URL.String()
		return "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body
	})
	for name, amo := range map[string]bool{"retried": false, "at most once": true} {
		e := newEnv(t)
		e.commit(1)
		var logs bytes.Buffer
		w := e.worker(func(c *outbox.Config) {
			c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			var x outbox.Executor = &outbox.HTTPExecutor{URL: "http://" + down + "/services/T000SECRET/B000SECRET?token=QSECRET", Timeout: 2 * time.Second}
			if amo {
				x = outbox.AtMostOnce(x)
			}
			c.Executors["email"], c.Executors["http:fulfilment"] = x, x
		})
		if _, err := w.HandleStream(context.Background(), batch(e.records())); err != nil {
			t.Fatal(err)
		}
		line := logs.String()
		if !strings.Contains(line, `"msg":"intent"`) || !strings.Contains(line, "500") || !strings.Contains(line, "http://"+down) {
			t.Fatalf("%s: log %s: want the intent's line naming the status and the host", name, line)
		}
		if amo && !strings.Contains(line, "at-most-once") {
			t.Errorf("%s: log %s: the worker's own words are lost", name, line)
		}
		for _, secret := range []string{"SECRET", "PIIECHO"} {
			if strings.Contains(line, secret) {
				t.Errorf("%s: the intent's log line holds %s: %s", name, secret, line)
			}
		}
		for _, c := range e.claims() {
			for in, i := range c.Intents {
				if !strings.Contains(i.LastError, "PIIECHO") {
					t.Errorf("%s: %s's last_error %q: the claim keeps the whole error", name, in, i.LastError)
				}
			}
		}
	}
}
